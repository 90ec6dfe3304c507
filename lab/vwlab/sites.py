"""Clouds in the lab: sites that share nothing but a public network.

Each site has its own underlay (a Linux bridge in a namespace of its own);
its extender host has a second leg, `wan0`, towards the public segment:
through the site's NAT (a namespace doing iptables MASQUERADE, as a
cloud's NAT gateway does), or directly (a relay extender with a public
address). The lab's controller still reaches every host over the
management network (out of band, as today's hosts).

    site underlay 198.19.k.0/24 -- extender --wan0-- NAT 172.16.k.1
        NAT's WAN 203.0.113.(10+k) -- public segment 203.0.113.0/24
    extenders' link network 100.64.0.0/24 (their br-xl), crossing the public
    segment inside encrypted links only

NAT kinds (lab notes, section 13):
  'nat':       endpoint-independent mapping (port-preserving MASQUERADE) and
               unsolicited inbound dropped on the WAN (a real NAT keeps no
               state for them): simultaneous open punches through;
  'symmetric': MASQUERADE --random-fully: a new public port per
               destination, punching fails; a relay is needed;
  'public':    no NAT, the extender's wan0 is on the public segment.
"""
import json
import time
from dataclasses import dataclass

from vwlab.shell import LabError, sh

PUBLIC_NET = '203.0.113'        # TEST-NET-3 (RFC 5737), inside the lab only
# The controller's public face: its rendezvous (the management namespace,
# where the controller's southbound lives, gets a leg on the public segment).
CONTROLLER_PUBLIC_IP = PUBLIC_NET + '.1'
RENDEZVOUS_PORT = 3478
LINK_NET = '100.64.0'
NAT_KINDS = ('nat', 'symmetric', 'public')


@dataclass(frozen=True)
class ExtenderSpec:
    name: str
    site: str
    nat: str = 'nat'

    def __post_init__(self):
        if self.nat not in NAT_KINDS:
            raise LabError('extender %s: nat must be one of %s'
                           % (self.name, ', '.join(NAT_KINDS)))


def parse_extenders(text):
    """'xa:cloud-a:nat,xb:cloud-b:symmetric,xr:relay:public' ->
    [ExtenderSpec] (the `vwlab --extenders` form)."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(','))):
        parts = item.split(':')
        if len(parts) not in (2, 3) or not all(parts):
            raise LabError('bad extender %r: want NAME:SITE[:NAT]' % item)
        out.append(ExtenderSpec(*parts))
    return out


class Sites:
    """The per-site underlays, NATs and the public segment of a lab."""

    def __init__(self, lab, labels):
        self.lab = lab
        self.order = []                 # site labels, first seen first
        for s in labels:
            if s not in self.order:
                self.order.append(s)
        self.pub_ns = lab.prefix + '-pub'

    def index(self, site):
        return self.order.index(site) + 1

    def ul_ns(self, site):
        return '%s-ul%d' % (self.lab.prefix, self.index(site))

    def ul_net(self, site):
        return '198.19.%d' % self.index(site)

    def nat_ns(self, site):
        return '%s-nat%d' % (self.lab.prefix, self.index(site))

    def public_ip(self, site):
        """The address the outside sees for the site (its NAT's WAN, or the
        relay extender's own)."""
        return '%s.%d' % (PUBLIC_NET, 10 + self.index(site))

    def up(self, mtu):
        self._bridge_ns(self.pub_ns, 'pub0', 1500)
        for site in self.order:
            self._bridge_ns(self.ul_ns(site), 'ul0', mtu)
        self._veth(self.lab.mgmt_ns, 'pub0', self.pub_ns, 'pub0', 'ctl')
        sh(['ip', 'addr', 'add', '%s/24' % CONTROLLER_PUBLIC_IP, 'dev',
            'pub0'], ns=self.lab.mgmt_ns)

    @staticmethod
    def _bridge_ns(ns, br, mtu):
        sh(['ip', 'netns', 'add', ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        sh(['ip', 'link', 'add', br, 'type', 'bridge'], ns=ns)
        sh(['ip', 'link', 'set', br, 'mtu', str(mtu), 'up'], ns=ns)

    def connect_wan(self, host, spec):
        """The extender's public leg: wan0 behind the site's NAT, or on the
        public segment; a default route that way."""
        k = self.index(spec.site)
        if spec.nat == 'public':
            self._veth(host.ns, 'wan0', self.pub_ns, 'pub0',
                       '%s-%s' % ('x', host.name))
            sh(['ip', 'addr', 'add', '%s/24' % self.public_ip(spec.site),
                'dev', 'wan0'], ns=host.ns)
            return
        nat = self.nat_ns(spec.site)
        sh(['ip', 'netns', 'add', nat])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=nat)
        # LAN: a veth pair extender <-> NAT; WAN: the NAT on pub0.
        sh(['ip', 'link', 'add', 'wan0', 'netns', host.ns, 'type', 'veth',
            'peer', 'name', 'lan0', 'netns', nat])
        sh(['ip', 'addr', 'add', '172.16.%d.2/24' % k, 'dev', 'wan0'],
           ns=host.ns)
        sh(['ip', 'addr', 'add', '172.16.%d.1/24' % k, 'dev', 'lan0'], ns=nat)
        self._veth(nat, 'wan', self.pub_ns, 'pub0', 'nat%d' % k)
        sh(['ip', 'addr', 'add', '%s/24' % self.public_ip(spec.site), 'dev',
            'wan'], ns=nat)
        for dev, ns in (('lan0', nat), ('wan0', host.ns)):
            sh(['ip', 'link', 'set', dev, 'up'], ns=ns)
        sh(['sysctl', '-qw', 'net.ipv4.ip_forward=1'], ns=nat)
        sh(['ip', 'route', 'add', 'default', 'via', '172.16.%d.1' % k],
           ns=host.ns)
        self._nat_rules(nat, spec.nat)

    @staticmethod
    def _veth(ns, dev, br_ns, br, peer):
        sh(['ip', 'link', 'add', dev, 'netns', ns, 'type', 'veth', 'peer',
            'name', peer, 'netns', br_ns])
        sh(['ip', 'link', 'set', peer, 'master', br, 'up'], ns=br_ns)
        sh(['ip', 'link', 'set', dev, 'up'], ns=ns)
        sh(['ethtool', '-K', dev, 'tx', 'off'], ns=ns, check=False)

    @staticmethod
    def _nat_rules(ns, kind):
        masq = ['-j', 'MASQUERADE'] + (['--random-fully']
                                      if kind == 'symmetric' else [])
        for rule in (['-t', 'nat', '-A', 'POSTROUTING', '-o', 'wan'] + masq,
                     # Only replies come in: what a NAT without a mapping
                     # does with an unsolicited packet (and what keeps a
                     # peer's early probe from leaving a conntrack entry
                     # that clashes with our own mapping: lab notes 13).
                     ['-A', 'INPUT', '-i', 'wan', '-m', 'conntrack',
                      '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
                     ['-A', 'INPUT', '-i', 'wan', '-j', 'DROP'],
                     ['-A', 'FORWARD', '-i', 'wan', '-m', 'conntrack',
                      '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
                     ['-A', 'FORWARD', '-i', 'wan', '-j', 'DROP']):
            sh(['iptables'] + rule, ns=ns)

    def add_public_host(self, name, ip):
        """A namespace on the public segment (an onlooker, an attacker);
        returns its name."""
        ns = '%s-%s' % (self.lab.prefix, name)
        sh(['ip', 'netns', 'add', ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        self._veth(ns, 'eth0', self.pub_ns, 'pub0', name[:15])
        sh(['ip', 'addr', 'add', '%s/24' % ip, 'dev', 'eth0'], ns=ns)
        wait_link_ready(ns, 'eth0')
        wait_bridge_port(self.pub_ns, name[:15])
        return ns

    def set_nat(self, site, kind):
        """Make the site's NAT another kind ('nat' or 'symmetric') and
        forget its mappings, as if the cloud had changed its NAT gateway."""
        ns = self.nat_ns(site)
        sh(['iptables', '-t', 'nat', '-F'], ns=ns)
        sh(['iptables', '-F'], ns=ns)
        self._nat_rules(ns, kind)
        self.flush_nat(site)

    def shape_wan(self, site, rate):
        """The site's way out carries at most `rate` (tc units): a token
        bucket on its NAT's public side, as a WAN link of that rate."""
        sh(['tc', 'qdisc', 'replace', 'dev', 'wan', 'root', 'tbf', 'rate',
            rate, 'burst', '128kb', 'latency', '100ms'],
           ns=self.nat_ns(site))

    def wan_bytes(self, site):
        """Bytes the site has sent out on its public side."""
        out = sh(['tc', '-s', '-j', 'qdisc', 'show', 'dev', 'wan'],
                 ns=self.nat_ns(site))
        return sum(q.get('bytes', 0) for q in json.loads(out)
                   if q.get('root'))

    def wan_drops(self, site):
        """Packets the site's way out dropped (its WAN's token bucket)."""
        out = sh(['tc', '-s', '-j', 'qdisc', 'show', 'dev', 'wan'],
                 ns=self.nat_ns(site))
        return sum(q.get('drops', 0) for q in json.loads(out)
                   if q.get('root'))

    def flush_nat(self, site):
        """Forget every NAT mapping of the site (a NAT reboot, or a
        binding timed out)."""
        sh(['conntrack', '-F'], ns=self.nat_ns(site), check=False)


def wait_link_ready(ns, dev, timeout=10.0):
    """Until `dev` can send: a new link transmits through the kernel's
    noop qdisc (every frame dropped) until linkwatch activates it, up to
    a second later and longer on a loaded machine; a test that sends at
    once (the replay attack in test_clouds) lost its first datagrams."""
    end = time.time() + timeout
    while time.time() < end:
        out = sh(['ip', '-o', 'link', 'show', 'dev', dev], ns=ns)
        if 'state UP' in out and 'qdisc noop' not in out:
            return
        time.sleep(0.05)
    raise LabError('%s in %s not up after %.0fs' % (dev, ns, timeout))


def wait_bridge_port(ns, dev, timeout=10.0):
    """Until the bridge port `dev` forwards: the bridge drops what comes
    in on a port whose carrier linkwatch has not yet raised, which can
    be later than the other end of the veth (wait_link_ready)."""
    end = time.time() + timeout
    while time.time() < end:
        out = sh(['bridge', 'link', 'show', 'dev', dev], ns=ns)
        if 'state forwarding' in out and 'state UP' in sh(
                ['ip', '-o', 'link', 'show', 'dev', dev], ns=ns):
            return
        time.sleep(0.05)
    raise LabError('bridge port %s in %s not forwarding after %.0fs'
                   % (dev, ns, timeout))


def route_sites(lab):
    """Site-to-site IP routes through the extenders (for migration
    streams): each host sends other sites' prefixes to its site's
    extender, which forwards them over its link to that site's extender.
    Call once the links are up. Extenders named by site: the first of each.
    """
    xs = {}
    for x in lab.extenders:
        xs.setdefault(x.site, x)
    for h in lab.hosts:
        here = xs.get(h.site)
        if here is None:
            continue
        for site, peer in xs.items():
            if site == h.site:
                continue
            prefix = lab.clouds.ul_net(site) + '.0/24'
            if h is here:
                sh(['sysctl', '-qw', 'net.ipv4.ip_forward=1'], ns=h.ns)
                sh(['ip', 'route', 'replace', prefix, 'via', peer.link_ip,
                    'dev', 'br-xl'], ns=h.ns)
            else:
                sh(['ip', 'route', 'replace', prefix, 'via', here.tunnel_ip,
                    'dev', 'br-phy'], ns=h.ns)
