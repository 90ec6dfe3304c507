"""A real QEMU guest (built from Debian packages, TCG) on wires: its vNICs
are taps plugged as libvirt plugs them, and a sequenced 1 kHz UDP stream
echoed by the guest crosses a tunnelled and a collapsed wire both ways."""
from vwtest import seq, wait_until


def _echo(vm, dst, seconds=2):
    return vm.tool('udp-echo', '--dst', dst, '--rate', 1000, '--seconds',
                   seconds, timeout=seconds + 30)


def test_qemu_guest_on_tunnelled_and_collapsed_wires(lab, api):
    n = next(seq)
    g = lab.host('h1').add_guest('g%d' % n, [('g%d-eth0' % n, '10.61.0.1/24'),
                                             ('g%d-eth1' % n, '10.62.0.1/24')])
    far = lab.host('h2').add_vm('gf%d' % n, [('gf%d-nic' % n,
                                              '10.61.0.2/24')])
    near = lab.host('h1').add_vm('gn%d' % n, [('gn%d-nic' % n,
                                               '10.62.0.2/24')])
    wires = [api.connect('g%d-eth0' % n, 'gf%d-nic' % n),
             api.connect('g%d-eth1' % n, 'gn%d-nic' % n)]
    try:
        api.wait_state(wires[0]['id'], 'tunnelled')
        api.wait_state(wires[1]['id'], 'collapsed')
        for vm, dst in ((far, '10.61.0.1'), (near, '10.62.0.1')):
            # ARP first: the stream measures the wire, not resolution.
            wait_until(lambda: vm.ping(dst, count=1)[1] == 1, 20,
                       what='guest answers ping at %s' % dst)
            r = _echo(vm, dst)
            assert r['sent'] == 2000
            assert r['lost'] == 0 and r['duplicates'] == 0, r
        # The guest's frames really went through its wires' flows.
        st = api.ok('GET', '/v1/wires/%d/stats' % wires[0]['id'])
        assert st['a_to_b']['delivered_packets'] >= 2000 or \
            st['b_to_a']['delivered_packets'] >= 2000, st
    finally:
        for w in wires:
            api.req('DELETE', '/v1/wires/%d' % w['id'])
        g.stop()


def test_the_guest_boots_its_kernel_without_the_decompressor():
    """The image boots the cloud kernel's own ELF via PVH (about 1 s less
    per TCG boot); a kernel package that lost the note or changed its
    compression would fall back to the bzImage, and this says so."""
    from vwlab import guest_image
    m = guest_image.build()
    assert m['kernel'].endswith('/vmlinux'), m['kernel']
    with open(m['kernel'], 'rb') as f:
        assert guest_image._has_pvh_note(f.read())
