"""Migration profiles: what QEMU is asked to do to move a guest, as data,
and the two ways of asking (libvirt-python for `vwctl migrate`, `virsh
migrate` flags for the hook path, where the operator runs virsh).

  default  QEMU's plain pre-copy: every dirty page sent again whole, as
           often as the guest dirties it; on a slow link a guest that
           dirties memory faster than the link carries never finishes.
  wan      for a slow link between clouds (measured in
           bench/bench_wan_migration.py, docs/benchmarks.rst):
           - multifd with zstd: pages go compressed (zstd level 1), so
             the first copy of every page, the bulk of a move, shrinks
             too. One stream: one zstd thread outruns any WAN link, and a
             second one only takes a core from the switches and tunnels
             that carry the wires (2 streams: the wires' one-way delay p99
             215-239 ms against 154-229 with one, bench run5);
           - auto-converge: a guest dirtying faster than the link carries
             is slowed (its vCPU throttled, in steps) until the migration
             can finish, instead of iterating for ever;
           - a 100 ms downtime limit (QEMU's default is 300): QEMU stops
             the guest only once what is left crosses in that time, so
             the pause does not grow with a slow link's last copy
             (CloudNet's "stopping at the right moment").
  deltas   the profile before multifd: xbzrle page deltas (a page sent
           again goes as its delta against a cache on the source) and
           auto-converge. For a libvirt older than 9.4 whose domains must
           not be touched behind its back (see below); and with
           --postcopy, which QEMU cannot run over multifd streams.

libvirt 9.4 asks QEMU for multifd's zstd itself (`--comp-methods zstd`).
Older ones (Debian 12 has 9.0) know multifd but not its compression, and
leave alone the QEMU parameters they do not know, so it is asked of QEMU
directly: on the source with a QMP migrate-set-parameters (libvirt marks
the domain tainted, "custom-monitor"), on the destination, whose QEMU
libvirt starts, by the migration's destination XML carrying `-global
migration.multifd-compression=zstd` (the domain keeps it; it does nothing
until multifd is on). Both ends must agree, or the streams do not parse.

Not QEMU's `compress` (zlib on threads, libvirt's "mt"): with it 3 of 6
lab guests broke their virtio rings within 21 moves, none of 6 in 24 moves
without (bench/probe_migration_crashes.py); QEMU deprecated it in 8.2 and
removed it in 9.1 in favour of multifd's.

--postcopy (default or deltas): start post-copy after the first pass (the
guest runs on the destination at once and pulls the pages it still lacks;
a link failure then loses the guest, which is why it is only on request).
QEMU cannot use xbzrle in post-copy's second phase; it applies to the
pre-copy pass before the switch.
"""
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

MIB = 1 << 20
# The first libvirt that asks QEMU for multifd compression itself.
NATIVE_ZSTD = 9004000
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
ZSTD_GLOBAL = 'migration.multifd-compression=zstd'


class ProfileError(ValueError):
    """A combination QEMU cannot do, said before anything is asked."""


@dataclass(frozen=True)
class Profile:
    name: str
    xbzrle: bool = False
    auto_converge: bool = False
    zstd_streams: int = 0       # multifd streams of zstd pages; 0: none
    max_downtime_ms: Optional[int] = None   # None: QEMU's (300 ms)
    summary: str = ''


PROFILES: Dict[str, Profile] = {
    'default': Profile('default', summary="QEMU's plain pre-copy"),
    'wan': Profile('wan', zstd_streams=1, auto_converge=True,
                   max_downtime_ms=100,
                   summary='pages compressed with zstd (multifd), '
                           'auto-converge, 100 ms downtime limit'),
    'deltas': Profile('deltas', xbzrle=True, auto_converge=True,
                      summary='page deltas (xbzrle), auto-converge'),
}


def xbzrle_cache_bytes(memory_bytes: int) -> int:
    """Half the guest's memory, a power of two (QEMU wants one), at least
    64 MiB (QEMU's default) and at most 1 GiB: the pages a guest keeps
    rewriting fit, and the source does not hold a second copy of a big
    guest's memory."""
    want = max(64 * MIB, min(1 << 30, memory_bytes // 2))
    size = 64 * MIB
    while size * 2 <= want:
        size *= 2
    return size


def plan(profile: Profile, memory_bytes: int,
         bandwidth_mib: Optional[int] = None,
         postcopy: bool = False, libvirt_version: int = NATIVE_ZSTD) -> dict:
    """What to ask for, independent of how it is asked. libvirt_version:
    the older of the two ends' (virConnectGetLibVersion), which decides
    who asks QEMU for zstd: libvirt itself, or we ('qemu', see above)."""
    if postcopy and profile.zstd_streams:
        raise ProfileError('QEMU cannot post-copy over multifd streams: '
                           '--postcopy needs --profile default or deltas')
    methods = ['xbzrle'] if profile.xbzrle else []
    out: dict = {'profile': profile.name, 'methods': methods,
                 'auto_converge': profile.auto_converge,
                 'postcopy': postcopy, 'bandwidth_mib': bandwidth_mib,
                 'max_downtime_ms': profile.max_downtime_ms}
    if 'xbzrle' in methods:
        out['xbzrle_cache'] = xbzrle_cache_bytes(memory_bytes)
    if profile.zstd_streams:
        out['multifd'] = {'streams': profile.zstd_streams,
                          'compression': 'zstd', 'asked_by':
                          'libvirt' if libvirt_version >= NATIVE_ZSTD
                          else 'qemu'}
    return out


def asks_qemu(p: dict) -> bool:
    """Whether zstd must be asked of QEMU directly (libvirt < 9.4)."""
    return p.get('multifd', {}).get('asked_by') == 'qemu'


def source_qmp(p: dict) -> str:
    """The QMP command that sets the source QEMU's multifd compression."""
    return json.dumps({'execute': 'migrate-set-parameters', 'arguments': {
        'multifd-compression': p['multifd']['compression']}})


def destination_xml(xml: str) -> str:
    """The domain's migratable XML with the destination QEMU's multifd
    compression set on its command line (once, however often it moves)."""
    ET.register_namespace('qemu', QEMU_NS)
    root = ET.fromstring(xml)
    line = root.find('{%s}commandline' % QEMU_NS)
    if line is None:
        line = ET.SubElement(root, '{%s}commandline' % QEMU_NS)
    if ZSTD_GLOBAL not in [a.get('value') for a in line]:
        for v in ('-global', ZSTD_GLOBAL):
            ET.SubElement(line, '{%s}arg' % QEMU_NS, value=v)
    return ET.tostring(root, encoding='unicode')


def libvirt_call(libvirt, p: dict) -> Tuple[dict, int]:
    """(migrate3 params, flags) for a plan()."""
    params: dict = {}
    flags = libvirt.VIR_MIGRATE_LIVE
    if p['bandwidth_mib']:
        params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] = int(p['bandwidth_mib'])
    if p['methods']:
        flags |= libvirt.VIR_MIGRATE_COMPRESSED
        # A typed-parameter list: one entry per method.
        params[libvirt.VIR_MIGRATE_PARAM_COMPRESSION] = list(p['methods'])
    if 'xbzrle_cache' in p:
        params[libvirt.VIR_MIGRATE_PARAM_COMPRESSION_XBZRLE_CACHE] = \
            p['xbzrle_cache']
    if 'multifd' in p:
        flags |= libvirt.VIR_MIGRATE_PARALLEL
        params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] = \
            p['multifd']['streams']
        if not asks_qemu(p):
            flags |= libvirt.VIR_MIGRATE_COMPRESSED
            params[libvirt.VIR_MIGRATE_PARAM_COMPRESSION] = [
                p['multifd']['compression']]
    if p['auto_converge']:
        flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
    if p['postcopy']:
        flags |= libvirt.VIR_MIGRATE_POSTCOPY
    return params, flags


def virsh_args(p: dict, dest_xml: Optional[str] = None) -> List[str]:
    """The same plan as `virsh migrate --live` options. dest_xml: the file
    holding destination_xml() of the guest, when asks_qemu(p) (and the
    source QEMU told source_qmp(p) with `virsh qemu-monitor-command`).
    A downtime limit is not a migrate option: `virsh
    migrate-setmaxdowntime GUEST MS` first (libvirt keeps it)."""
    out: List[str] = []
    if p['bandwidth_mib']:
        out += ['--bandwidth', str(int(p['bandwidth_mib']))]
    if p['methods']:
        out += ['--compressed', '--comp-methods', ','.join(p['methods'])]
    if 'xbzrle_cache' in p:
        out += ['--comp-xbzrle-cache', str(p['xbzrle_cache'])]
    if 'multifd' in p:
        out += ['--parallel', '--parallel-connections',
                str(p['multifd']['streams'])]
        if not asks_qemu(p):
            out += ['--compressed', '--comp-methods',
                    p['multifd']['compression']]
        elif dest_xml is None:
            raise ProfileError('libvirt < 9.4: the destination XML with '
                               'multifd compression is needed (--xml)')
        else:
            out += ['--xml', dest_xml]
    if p['auto_converge']:
        out.append('--auto-converge')
    if p['postcopy']:
        out += ['--postcopy', '--postcopy-after-precopy']
    return out


def describe(p: dict) -> str:
    """One line for people: what the migration was asked to do."""
    parts = [p['profile']]
    if p['methods']:
        parts.append('+'.join(p['methods']))
    if 'multifd' in p:
        n = p['multifd']['streams']
        parts.append(p['multifd']['compression'] + (
            ' on %d streams' % n if n > 1 else ''))
    if p['auto_converge']:
        parts.append('auto-converge')
    if p['postcopy']:
        parts.append('post-copy after the first pass')
    if p.get('max_downtime_ms'):
        parts.append('%d ms downtime limit' % p['max_downtime_ms'])
    if p['bandwidth_mib']:
        parts.append('%d MiB/s cap' % p['bandwidth_mib'])
    return ', '.join(parts)
