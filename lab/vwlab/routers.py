"""Routers in a lab: BIRD in stand-in VMs (namespaces) that peer over wires
with the router guest (BIRD inside the QEMU guest: lab/vwlab/guest/init,
vw.router/vw.ospf/vw.bgp), and what their logs say about their neighbours.

The timers are the ones a live migration must not trip: OSPF hellos every
second with a 4 s dead interval, BGP keepalives every second with a 3 s
hold time (the least BGP allows). Each router exports the other
protocol's routes, so a datagram from behind the OSPF side to behind the
BGP side needs both.
"""
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from vwlab.shell import LabError

# A neighbour or session changing state, as BIRD logs it with
# `debug protocols { states, events }`: OSPF "Neighbor N on IF changed
# state from Full to Down", BGP "State changed to down".
STATE_CHANGE = re.compile(r'changed state from|State changed to')


def guest_cmdline(router_id, ospf=(), bgp=None) -> List[str]:
    """The router guest's kernel arguments (its /init writes bird.conf)."""
    out = ['vw.router=%s' % router_id]
    if ospf:
        out.append('vw.ospf=' + ','.join(ospf))
    if bgp:
        out.append('vw.bgp=%s:%d:%d' % bgp)
    return out


def bird_conf(router_id, log, ospf=(), stubs=(), bgp=None) -> str:
    """A namespace router's bird.conf: OSPF on `ospf` interfaces (hello 1,
    dead 4, point-to-point) announcing `stubs` as stub networks; eBGP to
    bgp = (peer_ip, local_as, peer_as), hold 3, announcing the stubs
    and the OSPF routes; BGP routes exported into OSPF."""
    lines = ['router id %s;' % router_id, 'log "%s" all;' % log,
             'debug protocols { states, events };',
             'protocol device { scan time 10; }',
             'protocol kernel { ipv4 { import none; export all; }; }']
    if stubs:
        lines.append('protocol direct { ipv4; interface %s; }'
                     % ', '.join('"%s"' % s for s in stubs))
    if ospf:
        lines += ['protocol ospf v2 ospf1 {',
                  '  ipv4 { import all; export where source = RTS_BGP; };',
                  '  area 0 {']
        lines += ['    interface "%s" { hello 1; dead 4; type ptp; };' % i
                  for i in ospf]
        lines += ['    interface "%s" { stub yes; };' % s for s in stubs]
        lines += ['  };', '}']
    if bgp:
        peer, las, pas = bgp
        lines += ['protocol bgp bgp1 {',
                  '  local as %d; neighbor %s as %d;' % (las, peer, pas),
                  '  hold time 3; keepalive time 1;',
                  '  ipv4 { import all; export where source ~ '
                  '[RTS_OSPF, RTS_DEVICE]; };', '}']
    return '\n'.join(lines) + '\n'


def state_changes(text) -> List[str]:
    return [l for l in text.splitlines() if STATE_CHANGE.search(l)]


@dataclass
class BirdRouter:
    """BIRD in a stand-in VM; `stubs`: (name, cidr) interfaces it
    announces (the networks behind it)."""
    vm: object
    router_id: str
    ospf: Tuple[str, ...] = ()
    stubs: Tuple[Tuple[str, str], ...] = ()
    bgp: Optional[Tuple[str, int, int]] = None
    dir: str = field(default='')

    def start(self):
        self.dir = os.path.join(self.vm.host.lab.dir, 'routers',
                                self.vm.name)
        os.makedirs(self.dir, exist_ok=True)
        for name, cidr in self.stubs:
            # A veth pair inside the VM (no dummy module here): one end
            # holds the network, up with a carrier, as BIRD wants.
            self.vm.sh(['ip', 'link', 'add', name, 'type', 'veth', 'peer',
                        'name', name + 'p'])
            self.vm.sh(['ip', 'addr', 'add', cidr, 'dev', name])
            for dev in (name, name + 'p'):
                self.vm.sh(['ip', 'link', 'set', dev, 'up'])
        with open(self.path('bird.conf'), 'w') as f:
            f.write(bird_conf(self.router_id, self.path('bird.log'),
                              self.ospf, [n for n, _ in self.stubs],
                              self.bgp))
        self.vm.sh(['bird', '-c', self.path('bird.conf'), '-s',
                    self.path('bird.ctl'), '-P', self.path('bird.pid')])
        return self

    def path(self, name):
        return os.path.join(self.dir, name)

    def cli(self, *args, check=True) -> str:
        p = subprocess.run(['birdcl', '-s', self.path('bird.ctl')] +
                           list(args), capture_output=True, text=True,
                           timeout=10)
        if check and p.returncode != 0:
            raise LabError('birdcl %s: %s' % (' '.join(args), p.stderr))
        return p.stdout

    def log(self) -> str:
        try:
            with open(self.path('bird.log')) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def changes(self) -> List[str]:
        return state_changes(self.log())

    def ospf_full(self) -> bool:
        return 'Full' in self.cli('show', 'ospf', 'neighbors')

    def bgp_established(self) -> bool:
        return 'Established' in self.cli('show', 'protocols', 'bgp1')

    def has_route(self, prefix) -> bool:
        # birdcl exits non-zero when it has no route for the address.
        return prefix in self.cli('show', 'route', 'for',
                                  prefix.split('/')[0], check=False)

    def stop(self):
        try:
            with open(self.path('bird.pid')) as f:
                os.kill(int(f.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def guest_changes(guest) -> List[str]:
    """The router guest's BIRD state changes, from its console."""
    return [l for l in state_changes(guest.console_text())
            if 'bird: ' in l]
