"""Migration profiles: the plan each asks of QEMU, and the same plan as
libvirt-python's migrate3 arguments and as `virsh migrate` options (the
hook path's documented flags)."""
import types

import pytest

from virtualwire.cli import migration_profile as mp

MIB = 1 << 20

# libvirt's constants, as the module reads them (values as in libvirt 9.0).
LV = types.SimpleNamespace(
    VIR_MIGRATE_LIVE=1, VIR_MIGRATE_COMPRESSED=2048,
    VIR_MIGRATE_AUTO_CONVERGE=8192, VIR_MIGRATE_POSTCOPY=32768,
    VIR_MIGRATE_PARAM_BANDWIDTH='bandwidth',
    VIR_MIGRATE_PARAM_COMPRESSION='compression',
    VIR_MIGRATE_PARAM_COMPRESSION_XBZRLE_CACHE='compression.xbzrle.cache')


@pytest.mark.parametrize('memory,cache', [
    (128 * MIB, 64 * MIB), (256 * MIB, 128 * MIB), (300 * MIB, 128 * MIB),
    (1 << 30, 512 * MIB), (64 << 30, 1 << 30), (32 * MIB, 64 * MIB)])
def test_xbzrle_cache_is_half_the_memory_a_power_of_two_within_bounds(
        memory, cache):
    assert mp.xbzrle_cache_bytes(memory) == cache


def test_default_asks_for_nothing_but_a_live_migration():
    p = mp.plan(mp.PROFILES['default'], 256 * MIB)
    assert mp.libvirt_call(LV, p) == ({}, LV.VIR_MIGRATE_LIVE)
    assert mp.virsh_args(p) == []
    assert mp.describe(p) == 'default'


def test_wan_asks_for_deltas_and_auto_converge_never_zlib_threads():
    p = mp.plan(mp.PROFILES['wan'], 256 * MIB, bandwidth_mib=10)
    params, flags = mp.libvirt_call(LV, p)
    assert flags == (LV.VIR_MIGRATE_LIVE | LV.VIR_MIGRATE_COMPRESSED |
                     LV.VIR_MIGRATE_AUTO_CONVERGE)
    # QEMU's `compress` ("mt") broke guests' virtio rings: never asked for.
    assert params == {'bandwidth': 10, 'compression': ['xbzrle'],
                      'compression.xbzrle.cache': 128 * MIB}
    assert mp.virsh_args(p) == [
        '--bandwidth', '10', '--compressed', '--comp-methods', 'xbzrle',
        '--comp-xbzrle-cache', str(128 * MIB), '--auto-converge']
    assert mp.describe(p) == 'wan, xbzrle, auto-converge, 10 MiB/s cap'


def test_postcopy_keeps_deltas_for_the_first_pass():
    p = mp.plan(mp.PROFILES['wan'], 128 * MIB, postcopy=True)
    params, flags = mp.libvirt_call(LV, p)
    assert params['compression'] == ['xbzrle']
    assert flags & LV.VIR_MIGRATE_POSTCOPY
    assert mp.virsh_args(p)[-2:] == ['--postcopy', '--postcopy-after-precopy']
    assert mp.describe(p).endswith('post-copy after the first pass')
