"""Provider switches (issue 41; the paper's 4.2 and 3.5): a switch the
provider implements in Open vSwitch flows on a host, beside the VMs that
are switches. Its ports are wire ends, so users plug cables (wires) into
it as into anything else: `sw:NAME/PORT` is port PORT of switch NAME.

A switch belongs to a tenant; its ports join only that tenant's vNICs
(`core.tenancy`). Each has a number (1-65535) that its flows carry in a
register and a cookie, so one host holds many switches apart.
"""
import re
from dataclasses import dataclass
from typing import Optional, Tuple

from virtualwire.core.ids import (SWITCH_END_PREFIX as PREFIX, InvalidId,
                                  SWITCH_NAME_PATTERN, SWITCH_PORT_PATTERN,
                                  parse_switch_end as parse_end)

__all__ = ['PREFIX', 'ProviderSwitch', 'check_name', 'parse_end']

NUMBER_MAX = 0xFFFF
MAC_LIMIT = 4096          # learned MACs per port (NSX's figure)
IDLE_TIMEOUT = 300        # s a learned MAC lives unseen (Linux bridge's)
PORTS_MAX = 254
PARTS_MAX = 64            # hosts a split switch has parts on

_HOST_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')
_NAME_RE = re.compile(SWITCH_NAME_PATTERN)
_PORT_RE = re.compile(SWITCH_PORT_PATTERN)


@dataclass(frozen=True)
class ProviderSwitch:
    """One switch's intent: who owns it, where its flows live (None: not
    placed yet), its ports in order (a port's index is its position + 1),
    and its learning bounds. A split switch (the paper's 3.5) has a part
    on other hosts too: `parts` names the ports that live elsewhere
    ((port, host), sorted); the others live on `host`."""
    name: str
    tenant: str
    number: int
    host: Optional[str]
    ports: Tuple[str, ...]
    mac_limit: int = MAC_LIMIT
    idle_timeout: int = IDLE_TIMEOUT
    parts: Tuple[Tuple[str, str], ...] = ()

    def __post_init__(self):
        check_name(self.name)
        if not 1 <= self.number <= NUMBER_MAX:
            raise InvalidId('a switch number is 1-%d, got %r'
                            % (NUMBER_MAX, self.number))
        if len(self.ports) > PORTS_MAX:
            raise InvalidId('switch %s has %d ports; at most %d'
                            % (self.name, len(self.ports), PORTS_MAX))
        if len(set(self.ports)) != len(self.ports):
            raise InvalidId('switch %s names a port twice' % self.name)
        for p in self.ports:
            if not isinstance(p, str) or not _PORT_RE.fullmatch(p):
                raise InvalidId('a port name is 1-15 letters, digits and '
                                '_.- starting with a letter or digit, got '
                                '%r' % (p,))
        if not 1 <= self.mac_limit <= 65535:
            raise InvalidId('mac_limit is 1-65535 per port, got %r'
                            % (self.mac_limit,))
        if not 1 <= self.idle_timeout <= 65535:
            raise InvalidId('idle_timeout is 1-65535 s, got %r'
                            % (self.idle_timeout,))
        if self.parts and not self.host:
            raise InvalidId('switch %s: a split switch has a host (its '
                            'first part)' % self.name)
        for port, host in self.parts:
            if port not in self.ports:
                raise InvalidId('switch %s has no port %s to place on %s'
                                % (self.name, port, host))
            check_host(host)
        if len(self.part_hosts()) > PARTS_MAX:
            raise InvalidId('switch %s would have parts on %d hosts; at '
                            'most %d' % (self.name, len(self.part_hosts()),
                                         PARTS_MAX))

    def part_of(self, port: str) -> Optional[str]:
        """The host of the part a port lives on."""
        return dict(self.parts).get(port, self.host)

    def part_hosts(self) -> Tuple[str, ...]:
        """Every host the switch has a part on, sorted (one: not split)."""
        return tuple(sorted({h for h in [self.host] + [h for _p, h in
                                                        self.parts] if h}))

    @property
    def split(self) -> bool:
        return len(self.part_hosts()) > 1

    def end(self, port: str) -> str:
        return '%s%s/%s' % (PREFIX, self.name, port)

    def index(self, port: str) -> Optional[int]:
        """The port's index (1-based, as its flows carry it), None if the
        switch has no such port."""
        try:
            return self.ports.index(port) + 1
        except ValueError:
            return None


def check_name(name) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidId('a switch name is 1-32 lower-case letters, digits '
                        'and _.- starting with a letter or digit, got %r'
                        % (name,))
    return name


def check_host(host) -> str:
    """A host name a switch may be placed on (as hosts name themselves)."""
    if not isinstance(host, str) or not _HOST_RE.fullmatch(host):
        raise InvalidId('host must be a host name (letters, digits and '
                        '._-, up to 64), got %r' % (host,))
    return host
