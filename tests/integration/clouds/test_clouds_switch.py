"""A split provider switch across two clouds (issue 41; WAVNet's
WAV-Switch): VMs in cloud-a (h1, h3) and cloud-b (h2) wired to one
switch, split so each port lives on its VM's host. A broadcast reaches
every other VM once; it crosses between the clouds once, through the
extenders (captured on both extenders: one copy out of the sender's,
one into the other's), and within a cloud once to each other part; no
frame loops; unicast reaches only its MAC's part."""
from scapy.all import IP, UDP, Ether, Raw

from vwtest import Api, seq, wait_until
from vwtest.wire_traffic import sniff_while, tunnelled_while

MESH = 0xF0000000           # core.ids.MESH_CONNECTOR_BASE


def test_a_split_switch_crosses_each_cloud_once(clouds, tmp_path):
    api = Api(clouds)
    n = next(seq)
    name, tenant = 'xs%d' % n, 'xs%d' % n
    where = ('h1', 'h3', 'h2')              # cloud-a, cloud-a, cloud-b
    ip = ['10.79.%d.%d' % (n % 250, i) for i in (1, 2, 3)]
    vms = [clouds.host(h).add_vm('%sv%d' % (name, i), [
        ('%sv%d-nic' % (name, i), '%s/24' % ip[i - 1])])
        for i, h in enumerate(where, 1)]
    nics = [next(iter(vm.nics)) for vm in vms]
    for v in nics:
        api.ok('PUT', '/v1/vnics/%s/tenant' % v, json={'tenant': tenant})
    api.ok('POST', '/v1/switches', json={'name': name, 'ports': 3,
                                         'tenant': tenant, 'host': 'h1'})
    wires = [api.connect(v, 'sw:%s/p%d' % (name, i))['id']
             for i, v in enumerate(nics, 1)]
    try:
        view = api.ok('PUT', '/v1/switches/%s/parts' % name,
                      json={'auto': True})
        assert view['parts'] == ['h1', 'h2', 'h3'], view
        for w in wires:
            api.wait_state(w, 'collapsed', timeout=20)
        for i, vm in enumerate(vms):
            for other in ip[:i] + ip[i + 1:]:
                wait_until(lambda: vm.ping(other, count=1)[1] == 1, 20,
                           what='%s reaches %s' % (vm.name, other))
        marker = b'cross-split-%d' % n

        def crossings(sender, dst_mac, dst_ip):
            """{host: copies of the frame that left it on a tunnel of the
            mesh}, and what each VM got."""
            frame = bytes(Ether(dst=dst_mac, src=sender.nics[next(iter(
                sender.nics))]['mac']) / IP(src='10.79.0.9', dst=dst_ip) /
                UDP(sport=7, dport=7) / Raw(marker))
            seen, grams = tunnelled_while(
                [clouds.host(h) for h in ('h1', 'h2', 'h3', 'xa', 'xb')],
                tmp_path, lambda: sniff_while(vms, lambda: sender.tool(
                    'frames-send', 'eth0', frame.hex())), len(marker))
            left = {}
            for d in grams:
                if d.outgoing and d.payload == marker and \
                        d.key is not None and d.key >= MESH:
                    # Into the encrypted link: its WireGuard device (the
                    # extender sent it there from xl-PEER).
                    where = 'link:' + d.host if d.iface.startswith('wg') \
                        else d.host
                    left[where] = left.get(where, 0) + 1
            return left, [seen[vm.name].count(frame) for vm in vms]

        for vm in vms:                   # every MAC learned everywhere
            crossings(vm, 'ff:ff:ff:ff:ff:ff', '10.79.0.255')
            marker += b'.'
        left, got = crossings(vms[0], 'ff:ff:ff:ff:ff:ff', '10.79.0.255')
        print('broadcast from h1: copies leaving each host %s' % left)
        assert got == [0, 1, 1], got
        # h1 sends one copy to h3 (its cloud) and one towards cloud-b;
        # xa puts that one on the link once, xb hands it to h2.
        assert (left.get('h1'), left.get('h2', 0), left.get('h3', 0)) == \
            (2, 0, 0), left
        assert (left.get('link:xa'), left.get('link:xb', 0),
                left.get('xb')) == (1, 0, 1), left
        marker += b'.'
        left, got = crossings(vms[2], 'ff:ff:ff:ff:ff:ff', '10.79.0.255')
        print('broadcast from h2: copies leaving each host %s' % left)
        assert got == [1, 1, 0], got
        # One copy from cloud-b (to h1, cloud-a's first part), which
        # fans it out to h3: never a second crossing.
        assert (left.get('h2'), left.get('h1'), left.get('h3', 0)) == \
            (1, 1, 0), left
        assert (left.get('link:xb'), left.get('link:xa', 0)) == (1, 0), left
        marker += b'.'
        # Unicast h3 -> h2: h3 learned vm3's MAC from cloud-a's first part
        # (h1), which fanned vm3's broadcast out: through h1, then across
        # once; it reaches vm3 alone.
        left, got = crossings(vms[1], vms[2].nics[nics[2]]['mac'], ip[2])
        print('unicast h3 -> h2: copies leaving each host %s' % left)
        assert got == [0, 0, 1], got
        assert (left.get('h3'), left.get('h1'), left.get('h2', 0),
                left.get('link:xa'), left.get('link:xb', 0)) == \
            (1, 1, 0, 1, 0), left
    finally:
        for w in wires:
            api.req('DELETE', '/v1/wires/%d' % w)
        api.req('DELETE', '/v1/switches/%s' % name)
        for vm in vms:
            vm.host.remove_vm(vm)
