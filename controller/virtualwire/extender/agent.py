"""virtualwire-extender: keeps an extender's encrypted links as it is told.

Each second it reports to the controller (its WireGuard public key, the
public endpoint of each of its link ports as the controller's rendezvous
saw it, its NAT's kind, each link's state and counters) and gets back the
links it should keep. It starts, reconfigures, restarts or stops one
userspace WireGuard daemon (boringtun) per link (a killed daemon comes back by itself; a
link down for long is re-probed at the rendezvous, in case the NAT's
public address changed), keeps each link's VXLAN device on br-xl with
br-xl's flows and pinned neighbours, and writes each link up or down to the host's OVSDB
(`vw-link-<peer>`), where the controller's flow computation reads it.
The last links it was given are kept on disk: an agent restarted while
the controller is down keeps its links.
"""
import json
import logging
import os
import subprocess
import time
import urllib.error
from typing import Dict, Optional, Tuple

from virtualwire.extender import keys, wireguard
from virtualwire.extender.relay import Relays
from virtualwire.extender.wireguard import LinkSpec, LinkState
from virtualwire.extender.switch import link_mac
from virtualwire.extender.network_io import (local_addresses,
                                             nudge, probe, rtt_ms)

LOG = logging.getLogger('virtualwire.extender')
RTT_EVERY = 5.0


REPROBE_AFTER = 15.0        # s a link stays down before its port is re-probed
# While a link goes through a relay, this often our NAT is asked again
# (from a spare port) whether it still defeats hole punching.
RELAY_RECHECK = 30.0
HURRY_FACTOR = 10            # cycles this much faster during a key rotation


def specs(doc) -> Dict[str, LinkSpec]:
    return {d['peer']: LinkSpec(**d) for d in doc.get('links', ())}


def _device_changed(have: LinkSpec, want: LinkSpec) -> bool:
    """What a running link cannot change in place: its port, tunnel
    addresses, VXLAN id, the peer's link address."""
    return (have.local_port, have.inner, have.peer_inner, have.vni,
            have.peer_link_ip) != (want.local_port, want.inner,
                                   want.peer_inner, want.vni,
                                   want.peer_link_ip)


class Agent:
    def __init__(self, name, state_dir, controller, rendezvous, switch,
                 wireguard_bin='boringtun-cli', link_rate='',
                 reprobe_after=REPROBE_AFTER, relay_recheck=RELAY_RECHECK):
        self.link_rate = link_rate
        self.reprobe_after, self.relay_recheck = reprobe_after, relay_recheck
        self.name, self.dir = name, state_dir
        self.controller, self.rendezvous = controller, rendezvous
        self.sw = switch
        self.cache = os.path.join(state_dir, 'links.json')
        self.want: Dict[str, LinkSpec] = self._cached()
        self.ports: list = []
        self.public: Dict[int, Tuple[Optional[str], str]] = {}
        self.down_since: Dict[str, float] = {}
        self.wireguard_bin = wireguard_bin
        self.key_file, self.public_key = keys.ensure_identity(
            os.path.join(state_dir, 'identity'))
        self.procs: Dict[str, Tuple[LinkSpec, subprocess.Popen]] = {}
        self.restarts: Dict[str, int] = {}
        self.states: Dict[str, LinkState] = {}
        self.published: Optional[Dict[str, bool]] = None
        self.rtts: Dict[str, Optional[float]] = {}
        self.key_gen = 0                  # bumped by each key rotation
        self.reply_gen = 0                # key_gen the last reply knew
        self.gen: Dict[str, int] = {}     # peer -> key_gen its device uses
        self.last_rtt = 0.0
        self.flow_ports: Optional[Dict[int, str]] = None
        self.hurry = False                # a key rotation is in flight
        self.relays = Relays()            # links whose ciphertext we relay
        self.relay_specs: list = []
        self.relay_checked = time.time()

    def start(self, spec: LinkSpec):
        wg = spec.wg_dev(self.name)
        sock = '/var/run/wireguard/%s.sock' % wg
        if self.sw.has_dev(wg):
            # Left by an agent that died: its daemon goes with the device.
            self.sw._run(['ip', 'link', 'del', wg], check=False)
        if os.path.exists(sock):
            os.unlink(sock)             # a killed daemon's, or we'd wait on it
        log = open(os.path.join(self.dir, 'xl-%s.log' % spec.peer), 'ab')
        p = subprocess.Popen(
            wireguard.daemon_argv(self.wireguard_bin, wg), stdout=log,
            stderr=subprocess.STDOUT, env=wireguard.daemon_env(os.environ))
        log.close()
        self.procs[spec.peer] = (spec, p)
        try:
            deadline = time.time() + 5
            while not os.path.exists(sock):
                if p.poll() is not None or time.time() > deadline:
                    raise OSError('%s %s did not start (%s)' % (
                        self.wireguard_bin, wg, p.poll()))
                time.sleep(0.01)
            self.sw.wg(wg, *wireguard.device_args(spec, self.key_file))
            self.sw.wg_address(wg, spec.inner, spec.peer_inner)
            self.sw.ensure_vxlan(spec.dev, spec.peer, spec.vni, spec.inner,
                                 spec.peer_inner)
        except (OSError, subprocess.CalledProcessError):
            self.stop(spec.peer, remove=False)      # the next cycle retries
            raise
        if self.link_rate:
            try:
                self.sw.shape(spec.dev, self.link_rate)
            except subprocess.CalledProcessError as e:
                # Unshaped is better than down: say so and carry on.
                LOG.error('link to %s: cannot shape %s: %s', spec.peer,
                          spec.dev, (e.stderr or '').strip())
        self.sw.pin_neighbour(spec.peer_link_ip, link_mac(spec.peer_link_ip))
        nudge(spec.peer_inner)
        LOG.info('link to %s: %s %s pid %d (%s:%d)', spec.peer,
                 os.path.basename(self.wireguard_bin), wg, p.pid,
                 spec.remote, spec.remote_port)

    def stop(self, peer, remove=True):
        spec, p = self.procs.pop(peer)
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if remove:
            self.sw.remove_port(spec.dev)
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
        doc = {'public_key': self.public_key,
               'nat': 'symmetric' if 'symmetric' in nat else
               'endpoint-independent' if 'endpoint-independent' in nat else
               'public' if 'public' in nat else 'unknown',
               'endpoints': {str(p): ep for p, (ep, _k) in self.public.items()
                             if ep},
               'links': {p: {'state': s.state, 'since': s.since,
                             'endpoint': s.endpoint, 'rx_bytes': s.rx_bytes,
                             'tx_bytes': s.tx_bytes,
                             'restarts': self.restarts.get(p, 0),
                             'rtt_ms': self.rtts.get(p),
                             'peer_key': s.peer_key,
                             'handshake': s.handshake}
                         for p, s in self.states.items()}}
        sent_gen = self.key_gen
        try:
            reply = self.controller.report(self.name, doc)
        except (OSError, ValueError, urllib.error.URLError) as e:
            LOG.warning('controller unreachable (%s); keeping %d link(s)',
                        e, len(self.want))
            self.hurry = False      # no faster reports to a controller away
            return
        self.ports = list(reply.get('ports', ()))
        self.relay_specs = list(reply.get('relays', ()))
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
        """A new key pair. Each link switches to it once its peer uses it
        (`reconcile`): until then the link goes on with the old one."""
        old = self.public_key
        keys.make_key(self.key_file)
        self.public_key = keys.public_key(self.key_file)
        self.key_gen += 1
        LOG.info('new key: %s replaces %s', self.public_key, old)
        self.sw.publish(self.public_key, self.published or {})

    def probe_ports(self):
        """Learn the public endpoint of every link port not in use: at
        start, and for a link down for long (its daemon is stopped first:
        the NAT may have a new public address)."""
        now = time.time()
        for peer, since in list(self.down_since.items()):
            if now - since > self.reprobe_after and peer in self.procs:
                spec = self.procs[peer][0]
                LOG.info('link to %s down for %.0f s: re-probing port %d',
                         peer, now - since, spec.local_port)
                self.stop(peer, remove=False)
                self.public.pop(spec.local_port, None)
                self.down_since[peer] = now
        self.recheck_relayed(now)
        busy = {s.local_port for s, _p in self.procs.values()} | \
            self.relays.busy_ports()
        for port in self.ports:
            if port not in self.public and port not in busy:
                self.public[port] = probe(port, self.rendezvous,
                                          local_addresses())
                LOG.info('port %d: public %s (%s)', port,
                         *self.public[port])
                if self.public[port][0] is None:
                    del self.public[port]      # ask again next time

    def recheck_relayed(self, now):
        """A link relayed because our NAT was symmetric goes direct again
        once it is not: its port is probed afresh (its daemon stopped for
        that), and the report tells the controller."""
        relayed = [p for p, (spec, _) in self.procs.items() if spec.via]
        if not relayed or now - self.relay_checked < self.relay_recheck:
            return
        self.relay_checked = now
        _ep, kind = probe(0, self.rendezvous, local_addresses())
        if kind in ('symmetric', 'unknown'):
            return
        for peer in relayed:
            spec = self.procs[peer][0]
            LOG.info('link to %s: our NAT is %s now; re-probing port %d to '
                     'go direct', peer, kind, spec.local_port)
            self.stop(peer, remove=False)
            self.public.pop(spec.local_port, None)

    def reconcile(self):
        # A relay's port is bound once its public endpoint is known (the
        # probe needs the port free).
        self.relays.configure([r for r in self.relay_specs
                               if {r['port_a'], r['port_b']} <=
                               set(self.public) | self.relays.busy_ports()])
        want = self.want
        for peer in [p for p in self.procs if p not in want]:
            self.stop(peer)
        for peer, spec in want.items():
            have = self.procs.get(peer)
            if have and have[1].poll() is not None:
                self.restarts[peer] = self.restarts.get(peer, 0) + 1
                LOG.warning('link to %s: %s exited (%s); restarting', peer,
                            os.path.basename(self.wireguard_bin),
                            have[1].returncode)
                self.procs.pop(peer)
                have = None
            if have and _device_changed(have[0], spec):
                self.stop(peer, remove=False)
                have = None
            if have is None:
                if spec.local_port in self.public:
                    self.start(spec)
                    self.gen[peer] = self.key_gen
                continue
            wg = spec.wg_dev(self.name)
            try:
                if (have[0].peer_key, have[0].remote,
                        have[0].remote_port) != (spec.peer_key, spec.remote,
                                                 spec.remote_port):
                    # The peer's new key (its rotation) or endpoint: its
                    # entry made again (see wireguard.peer_args).
                    self.sw.wg(wg, *wireguard.remove_args(have[0].peer_key))
                    self.sw.wg(wg, *wireguard.peer_args(spec))
                    nudge(spec.peer_inner)
                    LOG.info('link to %s: peer key %s, endpoint %s:%d',
                             peer, spec.peer_key, spec.remote,
                             spec.remote_port)
                self.procs[peer] = (spec, have[1])
                # Our own new key, once the peer uses it for this link.
                if self.gen.get(peer) != self.key_gen and spec.pinned and \
                        self.reply_gen == self.key_gen:
                    self.sw.wg(wg, 'private-key', self.key_file)
                    # The peer entry made again: no session keyed with
                    # our old key lingers, and the nudge starts the new
                    # handshake now (the peer already expects our new key:
                    # `pinned`), not after a retry timer.
                    self.sw.wg(wg, *wireguard.remove_args(spec.peer_key))
                    self.sw.wg(wg, *wireguard.peer_args(spec))
                    nudge(spec.peer_inner)
                    self.gen[peer] = self.key_gen
                    LOG.info('link to %s: now on key %s', peer,
                             self.public_key)
            except (OSError, subprocess.CalledProcessError) as e:
                # A daemon that refuses or does not answer: start it
                # afresh, fully configured, next cycle.
                LOG.warning('link to %s: %s; restarting its daemon', peer,
                            getattr(e, 'stderr', None) or e)
                self.restarts[peer] = self.restarts.get(peer, 0) + 1
                self.stop(peer, remove=False)
        ports = {self.sw.ofport(s.dev): link_mac(s.peer_link_ip)
                 for s, _ in self.procs.values()}
        if ports != self.flow_ports and all(p > 0 for p in ports):
            self.sw.set_flows(ports)
            self.flow_ports = ports

    def observe(self):
        now = time.time()
        for peer, (spec, _p) in self.procs.items():
            try:
                dump = wireguard.parse_dump(
                    self.sw.wg_dump(spec.wg_dev(self.name)))
            except (OSError, subprocess.CalledProcessError):
                dump = {}
            self.states[peer] = wireguard.judge(
                self.states.get(peer, LinkState()), dump.get(spec.peer_key),
                spec.peer_key, now, wireguard.is_boringtun(self.wireguard_bin))
            if self.states[peer].up:
                self.down_since.pop(peer, None)
            else:
                self.down_since.setdefault(peer, now)
        up = {p: s.up for p, s in self.states.items() if p in self.procs}
        if up != self.published:
            self.sw.publish(self.public_key, up)
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
        self.sw.publish(self.public_key, {})
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
        self.relays.close()
        for peer in list(self.procs):
            self.stop(peer, remove=False)
