"""Migration profiles: what QEMU is asked to do to move a guest, as data,
and the two ways of asking (libvirt-python for `vwctl migrate`, `virsh
migrate` flags for the hook path, where the operator runs virsh).

  default  QEMU's plain pre-copy: every dirty page sent again whole, as
           often as the guest dirties it; on a slow link a guest that
           dirties memory faster than the link carries never finishes.
  wan      for a slow link between clouds (measured in
           bench/bench_wan_migration.py, docs/benchmarks.rst):
           - xbzrle: a page sent again goes as its delta against the copy
             sent before (a cache on the source, sized from the guest's
             memory): a page whose few bytes changed costs bytes, not 4 KiB;
           - auto-converge: a guest dirtying faster than the link carries
             is slowed (its vCPU throttled, in steps) until the migration
             can finish, instead of iterating for ever.
           Not QEMU's `compress` (zlib on threads, libvirt's "mt"): with it
           3 of 6 lab guests broke their virtio rings within 21 moves,
           none of 6 in 24 moves without (bench/probe_migration_crashes.py);
           QEMU deprecated it in 8.2 and removed it in 9.1. Its successor,
           multifd with zstd, needs libvirt 9.4 (Debian 12 has 9.0).

--postcopy (either profile): start post-copy after the first pass (the
guest runs on the destination at once and pulls the pages it still lacks;
a link failure then loses the guest, which is why it is only on request).
QEMU cannot use xbzrle in post-copy's second phase; it applies to the
pre-copy pass before the switch.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

MIB = 1 << 20


@dataclass(frozen=True)
class Profile:
    name: str
    xbzrle: bool = False
    auto_converge: bool = False
    summary: str = ''


PROFILES: Dict[str, Profile] = {
    'default': Profile('default', summary="QEMU's plain pre-copy"),
    'wan': Profile('wan', xbzrle=True, auto_converge=True,
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
         postcopy: bool = False) -> dict:
    """What to ask for, independent of how it is asked."""
    methods = ['xbzrle'] if profile.xbzrle else []
    out: dict = {'profile': profile.name, 'methods': methods,
                 'auto_converge': profile.auto_converge,
                 'postcopy': postcopy, 'bandwidth_mib': bandwidth_mib}
    if 'xbzrle' in methods:
        out['xbzrle_cache'] = xbzrle_cache_bytes(memory_bytes)
    return out


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
    if p['auto_converge']:
        flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
    if p['postcopy']:
        flags |= libvirt.VIR_MIGRATE_POSTCOPY
    return params, flags


def virsh_args(p: dict) -> List[str]:
    """The same plan as `virsh migrate --live` options."""
    out: List[str] = []
    if p['bandwidth_mib']:
        out += ['--bandwidth', str(int(p['bandwidth_mib']))]
    if p['methods']:
        out += ['--compressed', '--comp-methods', ','.join(p['methods'])]
    if 'xbzrle_cache' in p:
        out += ['--comp-xbzrle-cache', str(p['xbzrle_cache'])]
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
    if p['auto_converge']:
        parts.append('auto-converge')
    if p['postcopy']:
        parts.append('post-copy after the first pass')
    if p['bandwidth_mib']:
        parts.append('%d MiB/s cap' % p['bandwidth_mib'])
    return ', '.join(parts)
