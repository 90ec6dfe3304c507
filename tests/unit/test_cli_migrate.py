"""`vwctl migrate` output: what it reads from the domain XML, libvirt's job
statistics and the controller's wire views (pure formatting)."""
from virtualwire.cli.migrate import guest_vnics, progress_line, wire_phase

XML = """<domain type='qemu'><name>g</name><devices>
<interface type='bridge'><source bridge='br-int'/>
  <virtualport type='openvswitch'><parameters interfaceid='nic-a'/></virtualport>
</interface>
<interface type='network'><source network='default'/></interface>
<interface type='bridge'><source bridge='br-int'/>
  <virtualport type='openvswitch'><parameters interfaceid='nic-b'/></virtualport>
</interface></devices></domain>"""


def test_vnics_are_the_openvswitch_interfaceids_in_order():
    assert guest_vnics(XML) == ['nic-a', 'nic-b']


def test_progress_line_says_sent_left_dirty_rate_and_pause():
    line = progress_line({'data_total': 128 << 20, 'data_processed': 32 << 20,
                          'data_remaining': 96 << 20, 'memory_iteration': 3,
                          'memory_dirty_rate': 1536,
                          'memory_page_size': 4096, 'downtime': 300}, 1.25)
    assert '25.0%' in line and '32.0 MiB sent' in line and 'pass 3' in line
    assert '96.0 MiB left' in line and 'dirty   6.0 MiB/s' in line
    assert 'expected pause 300 ms' in line
    assert 'deltas' not in line and 'throttled' not in line
    # Before libvirt knows the totals: no division by zero, no pause.
    assert 'expected pause - ms' in progress_line({}, 0)


def test_progress_line_shows_deltas_and_the_throttle_when_used():
    line = progress_line({'compression_bytes': 3 << 20,
                          'compression_cache_misses': 12,
                          'auto_converge_throttle': 40}, 2.0)
    assert 'deltas 3.0 MiB (12 misses)' in line
    assert 'guest throttled 40%' in line


def _wire(**over):
    w = {'connector_id': '0x00000007', 'state': 'tunnelled', 'host_a': 'h1',
         'host_b': 'h3', 'moving': {}}
    w.update(over)
    return w


def test_wire_phase_follows_a_move():
    assert wire_phase(_wire()) == 'wire 0x00000007 tunnelled h1-h3'
    prepared = wire_phase(_wire(moving={'nic-a': {
        'source': 'h1', 'destination': 'h2', 'activated': False}}))
    assert prepared == ("wire 0x00000007 tunnelled h1-h3, nic-a moving "
                        "h1 -> h2: both hosts receive, h1 delivers until "
                        "the guest's first frame on h2")
    active = wire_phase(_wire(host_a='h2', moving={'nic-a': {
        'source': 'h1', 'destination': 'h2', 'activated': True}}))
    assert active.startswith('wire 0x00000007 tunnelled h2-h3, nic-a moving '
                             'h1 -> h2: activated by the guest')
    assert wire_phase(_wire(state='pending', host_a=None, host_b=None)) == \
        'wire 0x00000007 pending -'
    assert wire_phase(_wire(state='collapsed', host_b='h1')) == \
        'wire 0x00000007 collapsed h1'
