"""The extender's network, as the agent touches it: per link a WireGuard
device and the VXLAN device over it, plugged into the link bridge br-xl;
br-xl's flows, pinned neighbours, and the link states the controller reads
(bridge external_ids `vw-link-<peer>`)."""
import os
import subprocess
from typing import Dict

from virtualwire.core.links import LINK_KEY
from virtualwire.extender.wireguard import LINK_MTU, VXLAN_PORT, WG_MTU


def link_mac(link_ip: str) -> str:
    """The link bridge's MAC, from its address (as vw-host-setup sets it)."""
    return '02:76:' + ':'.join('%02x' % int(b) for b in link_ip.split('.'))


def bridge_flows(links: Dict[int, str]) -> str:
    """br-xl's table for {link port: the peer's link MAC}. Split horizon:
    a frame from a link goes only to this extender (LOCAL), never to
    another link, so links can never form a loop; frames from LOCAL go to
    the link of their destination MAC (broadcasts to all links)."""
    lines = ['priority=0,actions=drop']
    for port, mac in sorted(links.items()):
        lines.append('priority=10,in_port=%d,actions=LOCAL' % port)
        lines.append('priority=10,in_port=LOCAL,dl_dst=%s,actions=output:%d'
                     % (mac, port))
    if links:
        lines.append('priority=5,in_port=LOCAL,dl_dst=01:00:00:00:00:00/'
                     '01:00:00:00:00:00,actions=%s' % ','.join(
                         'output:%d' % p for p in sorted(links)))
    return '\n'.join(lines) + '\n'


class Switch:
    def __init__(self, db=None, bridge='br-vw', link_bridge='br-xl',
                 vswitchd_ctl='ovs-vswitchd'):
        self.db, self.bridge, self.link_bridge = db, bridge, link_bridge
        self.ctl = vswitchd_ctl

    def _run(self, cmd, inp=None, check=True):
        try:
            return subprocess.run(cmd, input=inp, capture_output=True,
                                  text=True, check=check, timeout=10).stdout
        except subprocess.TimeoutExpired as e:
            # A daemon that stopped answering its control socket: say so
            # (OSError: the agent's cycle goes on) rather than hang.
            raise OSError('%s: no answer in 10 s' % ' '.join(cmd[:3])) from e

    def vsctl(self, *args, check=True):
        return self._run(['ovs-vsctl', '--timeout=10'] +
                         (['--db=' + self.db] if self.db else []) +
                         list(args), check=check)

    def wg(self, dev, *args):
        return self._run(['wg', 'set', dev] + list(args))

    def wg_dump(self, dev) -> str:
        return self._run(['wg', 'show', dev, 'dump'])

    def has_dev(self, dev) -> bool:
        return os.path.exists('/sys/class/net/' + dev)

    def wg_address(self, dev, inner, peer_inner):
        """The tunnel's two addresses (a route to the peer's, via it)."""
        self._run(['ip', 'addr', 'replace', inner, 'peer', peer_inner,
                   'dev', dev])
        # A long queue: the daemon drains the tun in bursts, and at the
        # default 500 the tun dropped a cross-cloud wire's frames (TCP
        # retransmits, hand-run 2026-11-24).
        self._run(['ip', 'link', 'set', dev, 'mtu', str(WG_MTU),
                   'txqueuelen', '10000', 'up'])

    def ensure_vxlan(self, dev, peer, vni, inner, peer_inner):
        """The link's Ethernet: VXLAN between the tunnel addresses, on
        br-xl. Made again if it exists with other addresses."""
        want = 'vxlan id %d remote %s local %s' % (vni, peer_inner, inner)
        if self.has_dev(dev) and want not in self._run(
                ['ip', '-d', 'link', 'show', dev]):
            self.remove_port(dev)
        if not self.has_dev(dev):
            self._run(['ip', 'link', 'add', dev, 'type', 'vxlan', 'id',
                       str(vni), 'local', inner, 'remote', peer_inner,
                       'dstport', str(VXLAN_PORT)])
        self._run(['ip', 'link', 'set', dev, 'mtu', str(LINK_MTU), 'up'])
        self.vsctl('--may-exist', 'add-port', self.link_bridge, dev, '--',
                   'set', 'interface', dev,
                   'external_ids:vw-link-peer=%s' % peer)

    def shape(self, dev, rate):
        """Wires first on a link: HTB at `rate` (below what the link daemon
        can carry, so packets queue here, in order of importance, rather
        than overflow the daemon's queues, which drop without telling
        anyone), GRE (the wires' frames) before everything else (e.g. a
        live migration's stream routed over the link)."""
        tc = ['tc']
        # From scratch each time (a link restarts on a device that keeps
        # its qdisc; tc cannot "replace" a u32 filter in place).
        self._run(tc + ['qdisc', 'del', 'dev', dev, 'root'], check=False)
        self._run(tc + ['qdisc', 'add', 'dev', dev, 'root', 'handle', '1:',
                        'htb', 'default', '20', 'r2q', '100'])
        # One parent at the link's rate: its children borrow from it, the
        # wires' class first.
        self._run(tc + ['class', 'add', 'dev', dev, 'parent', '1:',
                        'classid', '1:1', 'htb', 'rate', rate])
        for cls, prio, floor in (('1:10', '0', rate), ('1:20', '1', '1mbit')):
            self._run(tc + ['class', 'add', 'dev', dev, 'parent', '1:1',
                            'classid', cls, 'htb', 'rate', floor, 'ceil',
                            rate, 'prio', prio])
        self._run(tc + ['filter', 'add', 'dev', dev, 'parent', '1:',
                        'protocol', 'ip', 'prio', '1', 'u32', 'match', 'ip',
                        'protocol', '47', '0xff', 'flowid', '1:10'])

    def remove_port(self, dev):
        self.vsctl('--if-exists', 'del-port', self.link_bridge, dev)
        self._run(['ip', 'link', 'del', dev], check=False)

    def ofport(self, dev) -> int:
        out = self.vsctl('get', 'interface', dev, 'ofport').strip()
        return int(out) if out.lstrip('-').isdigit() else -1

    def set_flows(self, links: Dict[int, str]):
        self._run(['ovs-ofctl', '-O', 'OpenFlow14', 'replace-flows',
                   self.link_bridge, '-'], inp=bridge_flows(links))

    def pin_neighbour(self, ip, mac):
        """OVS's userspace tunnel cache and the kernel's: no ARP across a
        link, and the first frame is not lost waiting for one."""
        self._run(['ovs-appctl', '-t', self.ctl, 'tnl/neigh/set',
                   self.link_bridge, ip, mac])
        self._run(['ip', 'neigh', 'replace', ip, 'lladdr', mac, 'dev',
                   self.link_bridge, 'nud', 'permanent'])

    def publish(self, public_key: str, up: Dict[str, bool]):
        """The identity and link states the controller reads."""
        have = self._ext()
        args = ['set', 'bridge', self.bridge,
                'external_ids:vw-public-key="%s"' % public_key]
        for peer, ok in sorted(up.items()):
            args.append('external_ids:%s%s=%s' % (LINK_KEY, peer,
                                                  'up' if ok else 'down'))
        stale = [k for k in have if k.startswith(LINK_KEY) and
                 k[len(LINK_KEY):] not in up]
        for k in stale:
            args += ['--', 'remove', 'bridge', self.bridge, 'external_ids', k]
        self.vsctl(*args)

    def _ext(self):
        out = self.vsctl('get', 'bridge', self.bridge, 'external_ids')
        # ovs-vsctl get prints {k=v, ...}
        body = out.strip().strip('{}')
        keys = {}
        for item in filter(None, (x.strip() for x in body.split(','))):
            k, _, v = item.partition('=')
            keys[k.strip('"')] = v.strip('"')
        return keys
