"""virtualwire-extender: keeps an extender's encrypted links as it is told.

Each second it reports to the controller (its certificate fingerprint,
the public endpoint of each of its link ports as the controller's
rendezvous saw it, its NAT's kind, each link's state and counters) and
gets back the links it should keep. It starts, restarts or stops one
OpenVPN process per link (a killed daemon comes back by itself; a link
down for long is re-probed at the rendezvous, in case the NAT's public
address changed), keeps each link's tap on br-xl with br-xl's flows and
pinned neighbours, and writes each link up or down to the host's OVSDB
(`vw-link-<peer>`), where the controller's flow computation reads it.
The last links it was given are kept on disk: an agent restarted while
the controller is down keeps its links.
"""
import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Dict, Optional, Tuple

from virtualwire.extender import keys, openvpn
from virtualwire.extender.openvpn import LinkSpec, LinkState
from virtualwire.extender.switch import Switch, link_mac
from virtualwire.southbound.rendezvous import ask as rendezvous_ask

LOG = logging.getLogger('virtualwire.extender')
RTT_EVERY = 5.0


REPROBE_AFTER = 15.0        # s a link stays down before its port is re-probed
HURRY_FACTOR = 10            # cycles this much faster during a key rotation


def specs(doc) -> Dict[str, LinkSpec]:
    return {d['peer']: LinkSpec(**d) for d in doc.get('links', ())}


class ControllerClient:
    """The controller's southbound REST, as the agent uses it."""

    def __init__(self, url, token):
        self.url, self.token = url.rstrip('/'), token

    def report(self, name, doc):
        req = urllib.request.Request(
            '%s/v1/extenders/%s/report' % (self.url, name), method='POST',
            data=json.dumps(doc).encode(),
            headers={'Authorization': 'Bearer ' + self.token,
                     'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())


def probe(port, rendezvous, local_ips):
    """(public endpoint, NAT kind) of local UDP `port`, asked from it at
    both rendezvous ports; (None, 'unknown') if it cannot be asked (the
    port is in use, or no answer)."""
    host, rport = rendezvous
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(('0.0.0.0', port))
    except OSError:
        s.close()
        return None, 'unknown'
    try:
        seen = [rendezvous_ask(s, (host, rport)),
                rendezvous_ask(s, (host, rport + 1))]
    finally:
        s.close()
    if not seen[0]:
        return None, 'unknown'
    if seen[0].rpartition(':')[0] in local_ips:
        return seen[0], 'public'
    return seen[0], ('endpoint-independent' if seen[0] == seen[1]
                     else 'symmetric')


def local_addresses():
    out = subprocess.run(['ip', '-o', '-4', 'addr'], capture_output=True,
                         text=True).stdout
    return {f.split('/')[0] for line in out.splitlines()
            for f in line.split()[3:4]}


def ask(mgmt: str, command: str, timeout=1.0) -> str:
    """One command on an OpenVPN management socket; its reply."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(mgmt)
        s.sendall(command.encode() + b'\n')
        buf = b''
        while not buf.rstrip().endswith(b'END'):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return buf.decode(errors='replace')
    finally:
        s.close()


def rtt_ms(ip) -> Optional[float]:
    p = subprocess.run(['ping', '-n', '-c', '1', '-W', '1', ip],
                       capture_output=True, text=True)
    for part in p.stdout.split():
        if part.startswith('time='):
            return float(part[5:])
    return None


class Agent:
    def __init__(self, name, state_dir, controller, rendezvous, switch,
                 openvpn_bin='openvpn', link_rate='80mbit'):
        self.link_rate = link_rate
        self.name, self.dir = name, state_dir
        self.controller, self.rendezvous = controller, rendezvous
        self.sw = switch
        self.cache = os.path.join(state_dir, 'links.json')
        self.want: Dict[str, LinkSpec] = self._cached()
        self.ports: list = []
        self.public: Dict[int, Tuple[Optional[str], str]] = {}
        self.down_since: Dict[str, float] = {}
        self.openvpn_bin = openvpn_bin
        self.cert, self.key, self.fingerprint = keys.ensure_identity(
            os.path.join(state_dir, 'identity'), name)
        self.procs: Dict[str, Tuple[LinkSpec, subprocess.Popen]] = {}
        self.restarts: Dict[str, int] = {}
        self.states: Dict[str, LinkState] = {}
        self.published: Optional[Dict[str, bool]] = None
        self.rtts: Dict[str, Optional[float]] = {}
        self.cert_gen = 0                 # bumped by each key rotation
        self.reply_gen = 0                # cert_gen the last reply knew
        self.gen: Dict[str, int] = {}     # peer -> cert_gen its process uses
        self.last_rtt = 0.0
        self.flow_ports: Optional[Dict[int, str]] = None
        self.hurry = False                # a key rotation is in flight

    def mgmt(self, peer):
        return os.path.join(self.dir, 'xl-%s.mgmt' % peer)

    def start(self, spec: LinkSpec):
        self.sw.ensure_tap(spec.dev, spec.peer, openvpn.TAP_MTU)
        if self.link_rate:
            try:
                self.sw.shape(spec.dev, self.link_rate)
            except subprocess.CalledProcessError as e:
                # Unshaped is better than down: say so and carry on.
                LOG.error('link to %s: cannot shape %s: %s', spec.peer,
                          spec.dev, (e.stderr or '').strip())
        self.sw.pin_neighbour(spec.peer_link_ip, link_mac(spec.peer_link_ip))
        log = os.path.join(self.dir, 'xl-%s.log' % spec.peer)
        p = subprocess.Popen(openvpn.argv(spec, self.cert, self.key,
                                          self.mgmt(spec.peer), log,
                                          self.openvpn_bin),
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.procs[spec.peer] = (spec, p)
        LOG.info('link to %s: openvpn pid %d (%s:%d, tls-%s)', spec.peer,
                 p.pid, spec.remote, spec.remote_port, spec.tls)

    def stop(self, peer, remove=True):
        spec, p = self.procs.pop(peer)
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if remove:
            self.sw.remove_tap(spec.dev)
            self.states.pop(peer, None)

    def _cached(self) -> Dict[str, LinkSpec]:
        try:
            with open(self.cache) as f:
                return specs(json.load(f))
        except (OSError, ValueError, TypeError):
            return {}

    def talk(self):
        """Report; take the links and ports the controller answers with.
        Unreachable controller: keep what we have."""
        nat = {k for _ep, k in self.public.values()}
        doc = {'fingerprint': self.fingerprint,
               'nat': 'symmetric' if 'symmetric' in nat else
               'endpoint-independent' if 'endpoint-independent' in nat else
               'public' if 'public' in nat else 'unknown',
               'endpoints': {str(p): ep for p, (ep, _k) in self.public.items()
                             if ep},
               'links': {p: {'state': s.state, 'since': s.since,
                             'endpoint': s.endpoint, 'rx_bytes': s.rx_bytes,
                             'tx_bytes': s.tx_bytes,
                             'restarts': self.restarts.get(p, 0),
                             'rtt_ms': self.rtts.get(p)}
                         for p, s in self.states.items()}}
        sent_gen = self.cert_gen
        try:
            reply = self.controller.report(self.name, doc)
        except (OSError, ValueError, urllib.error.URLError) as e:
            LOG.warning('controller unreachable (%s); keeping %d link(s)',
                        e, len(self.want))
            self.hurry = False      # no faster reports to a controller away
            return
        self.ports = list(reply.get('ports', ()))
        # Whether a peer pins our key is only known from a reply to a
        # report that carried it.
        self.reply_gen = sent_gen
        self.hurry = bool(reply.get('hurry'))
        if reply.get('rotate_key'):
            self.rotate()
        want = specs(reply)
        if want != self.want:
            with open(self.cache + '.tmp', 'w') as f:
                json.dump(reply, f)
            os.replace(self.cache + '.tmp', self.cache)
            self.want = want

    def rotate(self):
        """A new key pair and certificate. Links where we are the TLS
        server restart with it at once (the peer restarts when the
        controller gives it the new fingerprint, and then finds us ready);
        links where we are the client keep their session until the peer
        pins the new key, then restart."""
        old = self.fingerprint
        keys.make_identity(self.cert, self.key, self.name)
        self.fingerprint = keys.fingerprint(self.cert)
        self.cert_gen += 1
        LOG.info('new key: fingerprint %s replaces %s', self.fingerprint, old)
        self.sw.publish(self.fingerprint, self.published or {})

    def probe_ports(self):
        """Learn the public endpoint of every link port not in use: at
        start, and for a link down for long (its process is stopped first:
        the NAT may have a new public address)."""
        now = time.time()
        for peer, since in list(self.down_since.items()):
            if now - since > REPROBE_AFTER and peer in self.procs:
                spec = self.procs[peer][0]
                LOG.info('link to %s down for %.0f s: re-probing port %d',
                         peer, now - since, spec.local_port)
                self.stop(peer, remove=False)
                self.public.pop(spec.local_port, None)
                self.down_since[peer] = now
        busy = {s.local_port for s, _p in self.procs.values()}
        for port in self.ports:
            if port not in self.public and port not in busy:
                self.public[port] = probe(port, self.rendezvous,
                                          local_addresses())
                LOG.info('port %d: public %s (%s)', port,
                         *self.public[port])
                if self.public[port][0] is None:
                    del self.public[port]      # ask again next time

    def reconcile(self):
        want = self.want
        for peer in [p for p in self.procs if p not in want]:
            self.stop(peer)
        for peer, spec in want.items():
            have = self.procs.get(peer)
            # A TLS client waits for the peer to pin its current key (see
            # core.links.link_specs); until then an old session goes on.
            ready = spec.tls == 'server' or (
                spec.pinned and self.reply_gen == self.cert_gen)
            if have and (replace(have[0], pinned=spec.pinned) != spec or
                         self.gen.get(peer) != self.cert_gen and ready):
                self.stop(peer, remove=False)
                have = None
            elif have and have[1].poll() is not None:
                self.restarts[peer] = self.restarts.get(peer, 0) + 1
                LOG.warning('link to %s: openvpn exited (%s); restarting',
                            peer, have[1].returncode)
                self.procs.pop(peer)
                have = None
            if have is None and spec.local_port in self.public and ready:
                self.start(spec)
                self.gen[peer] = self.cert_gen
        ports = {self.sw.ofport(s.dev): link_mac(s.peer_link_ip)
                 for s, _ in self.procs.values()}
        if ports != self.flow_ports and all(p > 0 for p in ports):
            self.sw.set_flows(ports)
            self.flow_ports = ports

    def observe(self):
        now = time.time()
        for peer, (spec, _p) in self.procs.items():
            try:
                st = openvpn.parse_state(ask(self.mgmt(peer), 'state')) or {}
                counts = openvpn.parse_status(ask(self.mgmt(peer), 'status'))
            except OSError:
                st, counts = {}, {}
            self.states[peer] = LinkState(
                state=str(st.get('state', 'DOWN')),
                since=float(st.get('since', 0.0)),     # type: ignore
                endpoint=str(st.get('endpoint', '')),
                rx_bytes=counts.get('rx_bytes', 0),
                tx_bytes=counts.get('tx_bytes', 0))
            if self.states[peer].up:
                self.down_since.pop(peer, None)
            else:
                self.down_since.setdefault(peer, now)
        up = {p: s.up for p, s in self.states.items() if p in self.procs}
        if up != self.published:
            self.sw.publish(self.fingerprint, up)
            self.published = up
            LOG.info('links: %s', ', '.join('%s %s' % (p, 'up' if u else
                                                       'down')
                                            for p, u in sorted(up.items()))
                     or 'none')
        if now - self.last_rtt >= RTT_EVERY:
            self.last_rtt = now
            for peer, (spec, _p) in self.procs.items():
                self.rtts[peer] = rtt_ms(spec.peer_link_ip) \
                    if self.states[peer].up else None

    def run(self, interval=1.0):
        self.sw.publish(self.fingerprint, {})
        self.published = {}
        while True:
            try:
                self.talk()
                self.probe_ports()
                self.reconcile()
                self.observe()
            except (subprocess.CalledProcessError, OSError, ValueError) as e:
                LOG.warning('cycle failed, retrying: %s', getattr(
                    e, 'stderr', None) or e)
            # While a key rotation is in flight every step of it waits for
            # a report: report ten times as often.
            time.sleep(interval / HURRY_FACTOR if self.hurry else interval)

    def shutdown(self):
        for peer in list(self.procs):
            self.stop(peer, remove=False)


def main(argv=None):
    p = argparse.ArgumentParser(prog='virtualwire-extender',
                                description=__doc__.split('\n\n')[0])
    p.add_argument('--name', required=True, help="this extender's host name")
    p.add_argument('--state-dir', required=True,
                   help='identity (key, certificate), logs, sockets')
    p.add_argument('--controller', required=True,
                   help="URL of the controller's southbound REST")
    p.add_argument('--token-file', required=True,
                   help='bearer token for the controller')
    p.add_argument('--rendezvous', required=True,
                   help="IP:PORT of the controller's rendezvous (it also "
                        'answers on PORT+1)')
    p.add_argument('--db', help='OVSDB of this host (ovs-vsctl --db)')
    p.add_argument('--vswitchd-ctl', default='ovs-vswitchd',
                   help='ovs-appctl target of this host\'s ovs-vswitchd')
    p.add_argument('--openvpn', default='openvpn')
    p.add_argument('--interval', type=float, default=1.0)
    p.add_argument('--link-rate', default='80mbit',
                   help='shape each link to this rate (tc units; below what '
                        'the daemon carries), wires first; "" for none')
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format='%(asctime)s %(levelname)s %(message)s')
    with open(args.token_file) as f:
        token = f.read().strip()
    host, _, port = args.rendezvous.rpartition(':')
    agent = Agent(args.name, args.state_dir,
                  ControllerClient(args.controller, token), (host, int(port)),
                  Switch(args.db, vswitchd_ctl=args.vswitchd_ctl),
                  args.openvpn, args.link_rate)

    def bye(*_):
        agent.shutdown()
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    LOG.info('extender %s, fingerprint %s', args.name, agent.fingerprint)
    agent.run(args.interval)


if __name__ == '__main__':
    main()
