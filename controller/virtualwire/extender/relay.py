"""A relay extender's forwarding: for each link it relays, two UDP ports,
one per side. A datagram arriving on one side's port goes out of the other
side's port to the address that side last sent from. The datagrams are the
two sites' WireGuard ciphertext; the relay holds neither side's key, so it
can delay, drop or count them, never read or alter them unseen (Tailscale's
DERP).

A side is whatever address last sent to its port, so its NAT may remap
(symmetric NATs pick a new port for the relay): but only from the public
address the controller saw that side at (`allow_a`, `allow_b`). A datagram
from any other address is dropped and counted, so an outsider cannot steer
a side's ciphertext to itself; one who can spoof that side's address can
(it still reads nothing: WireGuard drops what it alters).
"""
import logging
import select
import socket
import threading
from typing import Dict, Optional, Tuple

LOG = logging.getLogger('virtualwire.extender')
MAX_DATAGRAM = 65535


class PairRelay:
    """The two ports of one relayed link, forwarding on a thread."""

    def __init__(self, spec: dict):
        self.spec = dict(spec)
        self.ports = (spec['port_a'], spec['port_b'])
        self.socks = []
        try:
            for port in self.ports:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self.socks.append(s)
                s.bind(('0.0.0.0', port))
        except OSError:
            self.close()
            raise
        self.learned: Dict[int, Optional[Tuple[str, int]]] = {0: None,
                                                              1: None}
        self.counts = {'a_to_b': 0, 'b_to_a': 0, 'refused': 0,
                       'unpaired': 0}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name='relay-%d' % self.ports[0])
        self.thread.start()

    def allowed(self, side: int) -> str:
        return self.spec['allow_a' if side == 0 else 'allow_b']

    def update(self, spec: dict):
        """New allowed addresses (a side's NAT moved): same ports."""
        self.spec = dict(spec)
        for side in (0, 1):
            got = self.learned[side]
            if got is not None and got[0] != self.allowed(side):
                self.learned[side] = None

    def _run(self):
        while not self.stopping.is_set():
            try:
                ready, _, _ = select.select(self.socks, [], [], 0.5)
            except (OSError, ValueError):
                return                  # closed under us: stopping
            for s in ready:
                side = self.socks.index(s)
                try:
                    data, src = s.recvfrom(MAX_DATAGRAM)
                except OSError:
                    continue
                if src[0] != self.allowed(side):
                    self.counts['refused'] += 1
                    continue
                self.learned[side] = src
                far = self.learned[1 - side]
                if far is None:
                    self.counts['unpaired'] += 1    # the other not heard yet
                    continue
                try:
                    self.socks[1 - side].sendto(data, far)
                except OSError:
                    continue
                self.counts['a_to_b' if side == 0 else 'b_to_a'] += 1

    def close(self):
        if hasattr(self, 'stopping'):
            self.stopping.set()
            self.thread.join(2)
        for s in self.socks:
            s.close()


class Relays:
    """Every link this extender relays, as the controller last said."""

    def __init__(self):
        self.pairs: Dict[Tuple[int, int], PairRelay] = {}

    def configure(self, specs):
        want = {(d['port_a'], d['port_b']): d for d in specs}
        for ports in [p for p in self.pairs if p not in want]:
            self.pairs.pop(ports).close()
            LOG.info('relay %d/%d: stopped', *ports)
        for ports, spec in want.items():
            have = self.pairs.get(ports)
            if have is None:
                try:
                    self.pairs[ports] = PairRelay(spec)
                except OSError as e:
                    LOG.warning('relay %d/%d for %s-%s: %s (retrying)',
                                ports[0], ports[1], spec['a'], spec['b'], e)
                    continue
                LOG.info('relay %d/%d: %s (%s) <-> %s (%s)', ports[0],
                         ports[1], spec['a'], spec['allow_a'], spec['b'],
                         spec['allow_b'])
            elif have.spec != spec:
                have.update(spec)

    def busy_ports(self):
        return {p for ports in self.pairs for p in ports}

    def stats(self):
        return {'%s-%s' % (r.spec['a'], r.spec['b']): dict(r.counts)
                for r in self.pairs.values()}

    def close(self):
        self.configure([])
