"""Migration profiles: the plan each asks of QEMU, and the same plan as
libvirt-python's migrate3 arguments and as `virsh migrate` options (the
hook path's documented flags)."""
import dataclasses
import json
import types
import xml.etree.ElementTree as ET

import pytest

from virtualwire.cli import migration_profile as mp

MIB = 1 << 20

# libvirt's constants, as the module reads them (values as in libvirt 9.0).
LV = types.SimpleNamespace(
    VIR_MIGRATE_LIVE=1, VIR_MIGRATE_COMPRESSED=2048,
    VIR_MIGRATE_AUTO_CONVERGE=8192, VIR_MIGRATE_POSTCOPY=32768,
    VIR_MIGRATE_PARALLEL=131072,
    VIR_MIGRATE_PARAM_BANDWIDTH='bandwidth',
    VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS='parallel.connections',
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


def test_wan_asks_libvirt_94_for_zstd_on_one_multifd_stream():
    p = mp.plan(mp.PROFILES['wan'], 256 * MIB, libvirt_version=9004000)
    assert not mp.asks_qemu(p)
    params, flags = mp.libvirt_call(LV, p)
    assert flags == (LV.VIR_MIGRATE_LIVE | LV.VIR_MIGRATE_PARALLEL |
                     LV.VIR_MIGRATE_COMPRESSED |
                     LV.VIR_MIGRATE_AUTO_CONVERGE)
    assert params == {'parallel.connections': 1, 'compression': ['zstd']}
    assert mp.virsh_args(p) == [
        '--parallel', '--parallel-connections', '1', '--compressed',
        '--comp-methods', 'zstd', '--auto-converge']
    assert mp.describe(p) == ('wan, zstd, auto-converge, 100 ms downtime '
                              'limit')
    two = mp.plan(dataclasses.replace(mp.PROFILES['wan'], zstd_streams=2),
                  256 * MIB)
    assert mp.describe(two).startswith('wan, zstd on 2 streams, ')
    assert p['max_downtime_ms'] == 100


def test_wan_on_libvirt_90_asks_qemu_on_both_ends_not_libvirt():
    p = mp.plan(mp.PROFILES['wan'], 256 * MIB, libvirt_version=9000000)
    assert mp.asks_qemu(p)
    params, flags = mp.libvirt_call(LV, p)
    # libvirt 9.0 would refuse zstd as a method: it is not asked for.
    assert 'compression' not in params
    assert flags == (LV.VIR_MIGRATE_LIVE | LV.VIR_MIGRATE_PARALLEL |
                     LV.VIR_MIGRATE_AUTO_CONVERGE)
    assert json.loads(mp.source_qmp(p)) == {
        'execute': 'migrate-set-parameters',
        'arguments': {'multifd-compression': 'zstd'}}
    with pytest.raises(mp.ProfileError, match='destination XML'):
        mp.virsh_args(p)
    assert mp.virsh_args(p, '/tmp/d.xml') == [
        '--parallel', '--parallel-connections', '1', '--xml', '/tmp/d.xml',
        '--auto-converge']


def test_the_destination_xml_sets_zstd_once_and_keeps_the_rest():
    xml = ("<domain type='kvm' xmlns:qemu='%s'><name>g</name>"
           "<qemu:commandline><qemu:arg value='-no-user-config'/>"
           "</qemu:commandline></domain>" % mp.QEMU_NS)
    once = mp.destination_xml(xml)
    assert mp.destination_xml(once) == once
    root = ET.fromstring(once)
    assert root.findtext('name') == 'g'
    args = [a.get('value') for a in root.iter('{%s}arg' % mp.QEMU_NS)]
    assert args == ['-no-user-config', '-global',
                    'migration.multifd-compression=zstd']
    bare = ET.fromstring(mp.destination_xml("<domain><name>g</name>"
                                            "</domain>"))
    assert [a.get('value') for a in bare.iter('{%s}arg' % mp.QEMU_NS)] == \
        ['-global', 'migration.multifd-compression=zstd']


def test_wan_refuses_postcopy_which_qemu_cannot_do_over_multifd():
    with pytest.raises(mp.ProfileError, match='--profile default or deltas'):
        mp.plan(mp.PROFILES['wan'], 256 * MIB, postcopy=True)


def test_deltas_asks_for_deltas_and_auto_converge_never_zlib_threads():
    p = mp.plan(mp.PROFILES['deltas'], 256 * MIB, bandwidth_mib=10)
    params, flags = mp.libvirt_call(LV, p)
    assert flags == (LV.VIR_MIGRATE_LIVE | LV.VIR_MIGRATE_COMPRESSED |
                     LV.VIR_MIGRATE_AUTO_CONVERGE)
    # QEMU's `compress` ("mt") broke guests' virtio rings: never asked for.
    assert params == {'bandwidth': 10, 'compression': ['xbzrle'],
                      'compression.xbzrle.cache': 128 * MIB}
    assert mp.virsh_args(p) == [
        '--bandwidth', '10', '--compressed', '--comp-methods', 'xbzrle',
        '--comp-xbzrle-cache', str(128 * MIB), '--auto-converge']
    assert mp.describe(p) == 'deltas, xbzrle, auto-converge, 10 MiB/s cap'


def test_postcopy_keeps_deltas_for_the_first_pass():
    p = mp.plan(mp.PROFILES['deltas'], 128 * MIB, postcopy=True)
    params, flags = mp.libvirt_call(LV, p)
    assert params['compression'] == ['xbzrle']
    assert flags & LV.VIR_MIGRATE_POSTCOPY
    assert mp.virsh_args(p)[-2:] == ['--postcopy', '--postcopy-after-precopy']
    assert mp.describe(p).endswith('post-copy after the first pass')
