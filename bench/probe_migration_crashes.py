"""Which QEMU migration capabilities break the lab's guests? Each set of
`virsh migrate` options, or migration profile ('p-' sets: prepared as
`vwlab.migration_options` does, zstd asked of QEMU directly on libvirt
9.0), migrates fresh guests back and forth between two hosts under a 1 kHz
UDP echo stream, four moves a guest, and counts the guests whose console
shows a crash after a move (`vwlab.guest_crash`: the virtio ring broken,
an oops or panic, or a new boot; a broken guest is not moved again).

Why: with QEMU's `compress` (zlib on threads, libvirt's "mt") the lab's
guests broke in CI; this tells the capability at fault from the lab's TCG
guest in general (README "Live migration", docs/benchmarks.rst).

    python bench/probe_migration_crashes.py [--sets wan,mt,xbzrle,default]
                                            [--guests 3]
    python bench/probe_migration_crashes.py --guests 8 \
        --sets p-default,p-autoconverge,p-zstd,p-wan --name ...
    python bench/probe_migration_crashes.py --sets p-wan --pads 0,8 ...

--pads: KiB the lab's emulator wrapper adds to guest RAM, each pad a run
of every set, interleaved guest by guest (results 'SET@padN'): 0 is
QEMU's own size, a multiple of 256 KiB, whose dirty-bitmap sync takes
QEMU 7.2's fast path that loses TCG writes (upstream 03bfc2188f); the
lab's default 8 avoids that path.
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, '..', 'lab'),
                os.path.join(HERE, '..', 'controller'),
                os.path.join(HERE, '..', 'tests')]

from common import write_result                              # noqa: E402
from vwtest import Api, wait_until                         # noqa: E402
from virtualwire.cli import migration_profile as mp           # noqa: E402
from vwlab import Lab, guest_crash                           # noqa: E402

CACHE = str(64 << 20)
SETS = {
    'default': [],
    'mt': ['--compressed', '--comp-methods', 'mt', '--comp-mt-threads', '2',
           '--comp-mt-level', '1'],
    'xbzrle': ['--compressed', '--comp-methods', 'xbzrle',
               '--comp-xbzrle-cache', CACHE, '--auto-converge'],
    'wan': ['--compressed', '--comp-methods', 'mt,xbzrle',
            '--comp-xbzrle-cache', CACHE, '--comp-mt-threads', '2',
            '--comp-mt-level', '1', '--auto-converge'],
    # A long copy (10 MiB/s: ~13 s for the 128 MiB guest), as across the
    # lab's clouds, where the cross-cloud test's guests broke most.
    'slow': ['--bandwidth', '10'],
}
# Profiles and each capability of `wan` alone.
_WAN = mp.PROFILES['wan']
PROFILE_SETS = {
    'p-default': mp.PROFILES['default'],
    'p-wan': _WAN,
    'p-deltas': mp.PROFILES['deltas'],
    'p-zstd': dataclasses.replace(_WAN, name='zstd', auto_converge=False),
    'p-autoconverge': dataclasses.replace(_WAN, name='autoconverge',
                                          zstd_streams=0),
}
MOVES = 4


def one_guest(lab, api, name, k, suffix=''):
    h1, h2 = lab.hosts
    nic = str(uuid.uuid4())
    tag = '%s%d%s' % (name, k, suffix)
    g = h1.define_guest('cx' + tag, [(nic, '10.81.0.1/24')])
    vm = h2.add_vm('cv' + tag, [('cv%s-nic' % tag, '10.81.0.2/24')])
    wid = api.connect(nic, 'cv%s-nic' % tag)['id']
    api.wait_state(wid, 'tunnelled')
    wait_until(lambda: vm.ping('10.81.0.1', count=1)[1] == 1, 20,
               what='guest answers')
    booted = guest_crash.marks(g.console_text())
    ver = json.loads(h1.libvirt.virsh(
        'qemu-monitor-command', g.name,
        '{"execute": "query-version"}').stdout)['return']['package']
    stream = vm.tool_bg('udp-echo', '--dst', '10.81.0.1', '--rate', 1000,
                        '--seconds', 120)
    moves, failed = 0, []

    def crashed():
        return guest_crash.marks(g.console_text()) > booted
    try:
        for i in range(MOVES):
            time.sleep(1)
            src, dst = (h1, h2) if i % 2 == 0 else (h2, h1)
            try:
                if name in PROFILE_SETS:
                    lab.migrate(g, src, dst, profile=PROFILE_SETS[name])
                else:
                    lab.migrate(g, src, dst, options=SETS[name])
            except Exception as e:      # a failed migration is said, not hidden
                failed.append(str(e)[-200:])
            moves += 1
            time.sleep(1)
            if crashed():
                break
        else:       # a crash can take seconds to reach the console
            time.sleep(3)
        broke_at = moves if crashed() else None
        crash = guest_crash.crash_lines(g.console_text())[:3]
    finally:
        stream.send_signal(2)
        try:
            stream.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            stream.kill()
        api.req('DELETE', '/v1/wires/%d' % wid)
        lab.destroy_guest(g)
    return {'moves': moves, 'broke_after_move': broke_at,
            'crash': crash, 'failed_migrations': failed, 'qemu': ver}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sets', default='wan,mt,xbzrle,default')
    ap.add_argument('--guests', type=int, default=3)
    ap.add_argument('--pads', default=None,
                    help='comma-separated RAM pads in KiB (default: the '
                         "wrapper's own)")
    ap.add_argument('--name', default='migration_crashes-run1',
                    help='result file under bench/results/')
    args = ap.parse_args()
    out = {'sets': {}, 'moves_per_guest': MOVES, 'options': SETS,
           'profiles': {k: dataclasses.asdict(p)
                        for k, p in PROFILE_SETS.items()}}
    with Lab(2, libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        wait_until(api.synced, 60, what='controller and hosts')
        pads = [None] if args.pads is None else [
            int(p) for p in args.pads.split(',')]
        runs = {}
        # Guest by guest, each pad in turn: load or time of day falls on
        # every pad alike.
        for k in range(args.guests):
            for name in args.sets.split(','):
                for pad in pads:
                    for h in lab.hosts:
                        h.libvirt.set_ram_pad(pad)
                    key = name if pad is None else '%s@pad%d' % (name, pad)
                    g = one_guest(lab, api, name, k,
                                  '' if pad is None else 'q%d' % pad)
                    g['ram_pad_kib'] = pad
                    runs.setdefault(key, []).append(g)
                    print(key, k, g['broke_after_move'], flush=True)
        for key, guests in runs.items():
            out['sets'][key] = {
                'guests': guests,
                'moves': sum(g['moves'] for g in guests),
                'broken_guests': sum(1 for g in guests
                                     if g['broke_after_move'])}
            print(key, json.dumps(out['sets'][key]), flush=True)
    write_result(args.name, out)


if __name__ == '__main__':
    main()
