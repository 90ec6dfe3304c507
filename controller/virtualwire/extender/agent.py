"""virtualwire-extender: keeps an extender's encrypted links as it is told.

Each second it reads the links it should have (a JSON file:
{"links": [LinkSpec fields, ...]}), starts, restarts or stops one OpenVPN
process per link (a killed daemon comes back by itself), keeps each link's
tap on br-xl with br-xl's flows and pinned neighbours, and writes what it
sees to the host's OVSDB: its certificate fingerprint (`vw-fingerprint`),
each link up or down (`vw-link-<peer>`), and per link on its tap the state,
the peer's endpoint as seen from here, bytes and RTT.
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
from typing import Dict, Optional, Tuple

from virtualwire.extender import keys, openvpn
from virtualwire.extender.openvpn import LinkSpec, LinkState
from virtualwire.extender.switch import Switch, link_mac

LOG = logging.getLogger('virtualwire.extender')
RTT_EVERY = 5.0


def read_links(path) -> Dict[str, LinkSpec]:
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    return {d['peer']: LinkSpec(**d) for d in doc.get('links', ())}


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
    def __init__(self, name, state_dir, config, switch, openvpn_bin='openvpn'):
        self.name, self.dir, self.config = name, state_dir, config
        self.sw = switch
        self.openvpn_bin = openvpn_bin
        self.cert, self.key, self.fingerprint = keys.ensure_identity(
            os.path.join(state_dir, 'identity'), name)
        self.procs: Dict[str, Tuple[LinkSpec, subprocess.Popen]] = {}
        self.restarts: Dict[str, int] = {}
        self.states: Dict[str, LinkState] = {}
        self.published: Optional[Dict[str, bool]] = None
        self.last_rtt = 0.0
        self.flow_ports: Optional[Dict[int, str]] = None

    def mgmt(self, peer):
        return os.path.join(self.dir, 'xl-%s.mgmt' % peer)

    def start(self, spec: LinkSpec):
        self.sw.ensure_tap(spec.dev, spec.peer, openvpn.TAP_MTU)
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

    def reconcile(self):
        want = read_links(self.config)
        for peer in [p for p in self.procs if p not in want]:
            self.stop(peer)
        for peer, spec in want.items():
            have = self.procs.get(peer)
            if have and have[0] != spec:
                self.stop(peer, remove=False)
                have = None
            elif have and have[1].poll() is not None:
                self.restarts[peer] = self.restarts.get(peer, 0) + 1
                LOG.warning('link to %s: openvpn exited (%s); restarting',
                            peer, have[1].returncode)
                self.procs.pop(peer)
                have = None
            if have is None:
                self.start(spec)
        ports = {self.sw.ofport(s.dev): link_mac(s.peer_link_ip)
                 for s, _ in self.procs.values()}
        if ports != self.flow_ports and all(p > 0 for p in ports):
            self.sw.set_flows(ports)
            self.flow_ports = ports

    def observe(self):
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
        up = {p: s.up for p, s in self.states.items() if p in self.procs}
        if up != self.published:
            self.sw.publish(self.fingerprint, up)
            self.published = up
            LOG.info('links: %s', ', '.join('%s %s' % (p, 'up' if u else
                                                       'down')
                                            for p, u in sorted(up.items()))
                     or 'none')
        if time.time() - self.last_rtt >= RTT_EVERY:
            self.last_rtt = time.time()
            for peer, (spec, _p) in self.procs.items():
                s = self.states[peer]
                rtt = rtt_ms(spec.peer_link_ip) if s.up else None
                self.sw.link_details(spec.dev, {
                    'state': s.state, 'since': '%d' % s.since,
                    'endpoint': s.endpoint, 'rx-bytes': str(s.rx_bytes),
                    'tx-bytes': str(s.tx_bytes),
                    'restarts': str(self.restarts.get(peer, 0)),
                    'rtt-ms': '' if rtt is None else '%.2f' % rtt})

    def run(self, interval=1.0):
        self.sw.publish(self.fingerprint, {})
        self.published = {}
        while True:
            try:
                self.reconcile()
                self.observe()
            except (subprocess.CalledProcessError, OSError, ValueError) as e:
                LOG.warning('cycle failed, retrying: %s', getattr(
                    e, 'stderr', None) or e)
            time.sleep(interval)

    def shutdown(self):
        for peer in list(self.procs):
            self.stop(peer, remove=False)


def main(argv=None):
    p = argparse.ArgumentParser(prog='virtualwire-extender',
                                description=__doc__.split('\n\n')[0])
    p.add_argument('--name', required=True, help="this extender's host name")
    p.add_argument('--state-dir', required=True,
                   help='identity (key, certificate), logs, sockets')
    p.add_argument('--links', required=True,
                   help='JSON file with the links to keep')
    p.add_argument('--db', help='OVSDB of this host (ovs-vsctl --db)')
    p.add_argument('--vswitchd-ctl', default='ovs-vswitchd',
                   help='ovs-appctl target of this host\'s ovs-vswitchd')
    p.add_argument('--openvpn', default='openvpn')
    p.add_argument('--interval', type=float, default=1.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format='%(asctime)s %(levelname)s %(message)s')
    agent = Agent(args.name, args.state_dir, args.links,
                  Switch(args.db, vswitchd_ctl=args.vswitchd_ctl),
                  args.openvpn)

    def bye(*_):
        agent.shutdown()
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    LOG.info('extender %s, fingerprint %s', args.name, agent.fingerprint)
    agent.run(args.interval)


if __name__ == '__main__':
    main()
