"""Held frames on real OVS, libvirt and QEMU, kept by the controller
(hosts set up with vw-host-setup --no-hold-frames): with its
--hold on (released at the guest's first frame), what a moving guest's
destination receives while the guest is paused is kept (control.holding)
and, once the guest runs there, delivered once and in order, ahead of
anything newer; the source tap's read count says which frames its guest
read already. A flood beyond the bound is cut there and counted, and
nothing else is lost.

Excused, each by its own evidence: up to three datagrams the source QEMU
read just before STOP (it stops with them: QEMU's, not the network's;
more would be a late cut's run), and datagrams sent during the pause that
the record counts `skipped`: the source's copy has them, the destination's
controller never held them (OVS 3.1's userspace tunnel race where the
destination's datapath flow log shows one; once in CI with no race in the
log, not explained yet). Each is printed.
"""
import pytest

from vwtest import seq, wait_until
from vwtest.fixtures import frames_held_by_the_controller
from vwtest.held_move import brief, move, raced
from vwtest.migration import GUEST_BEFORE_STOP
from vwtest.switchover import SWITCHOVER_MS

HOLD_BYTES = 64 << 10      # 64 KiB: ~600 probe frames, ~60 of 1000 bytes
PROBE_FRAME = 106          # bytes of a 64-byte datagram's frame
EVENT_MS = 0.001           # virsh prints QEMU's event times to the ms
# Datagrams the source QEMU read from its tap (the count says so) and lost
# with its stop, sent up to 20 ms before STOP here (bench/results/
# held_frames-run3.json: 1-2 a move, isolated, not a run a late cut makes).
QEMU_AT_STOP = 3
READ_LAG_S = 0.1   # how far a TCG guest's reads may lag its tap at STOP
FLOOD_TRIES = 3    # flood moves until one's pause outlasts the bound


@pytest.fixture(scope='module')
def holding(lab, api):
    """The session's controller, restarted to hold frames itself (no host
    keeps them: the path before that was the default), and back; the
    moving guest's hosts log datapath flow changes (OVS's tunnel race)."""
    with frames_held_by_the_controller(lab, api):
        yield from _holding(lab, api)


def _holding(lab, api):
    lab.stop_controller()
    lab.start_controller(extra=['--hold', 'on', '--hold-frames', '4096',
                                '--hold-bytes', str(HOLD_BYTES),
                                # The release at the guest's first frame
                                # (at STOP, a flood move delivered one
                                # datagram twice: issue 42's note).
                                '--activate-at-stop', 'off'])
    wait_until(api.synced, 60, what='controller holding frames')
    for h in lab.hosts[:2]:
        h.log_datapath_flow_changes()
    yield
    for h in lab.hosts[:2]:
        h.log_datapath_flow_changes(False)
    lab.stop_controller()
    lab.start_controller()
    wait_until(api.synced, 60, what='controller back to its defaults')


def read_last(r, lost, resume):
    """The lost datagrams that sit right before the first one the guest
    got after RESUME (the first held delivery): those the source tap's
    count says QEMU read last before STOP. A lagging TCG guest reads them
    long after they were sent (CI of 2f3dd02: one sent 73 ms before STOP,
    the guest ~76 behind: 303 delivered over a 227 ms pause)."""
    late = [q for q, t in r['late_echoes'] if t >= resume]
    if not late:
        return set()
    seqs, q = set(), min(late) - 1
    gone = {x for x, _t in lost}
    while q in gone:
        seqs.add(q)
        q -= 1
    return seqs


def unexplained(r, held, stop, resume, dst, switches):
    """Lost datagrams neither the source QEMU's at STOP (a few, sent
    within GUEST_BEFORE_STOP of it or read last: read_last) nor, during the pause, ones the record
    counts `skipped`: copied on the source, never held by the destination's
    controller (OVS's race on the destination where its log shows one;
    CI on c87b6bd lost 5 this way 31-35 ms before RESUME with no race in
    the log: not explained yet, docs/benchmarks.rst)."""
    lost = [(q, t) for q, t in r['lost_sent_at']]    # JSON gives lists
    at_stop = [(q, t) for q, t in lost
               if stop - GUEST_BEFORE_STOP < t < stop + EVENT_MS or
               (t < stop and q in read_last(r, lost, resume))]
    if len(at_stop) <= QEMU_AT_STOP:
        lost = [x for x in lost if x not in at_stop]
    hit, races = raced(lost, dst)
    paused = [x for x in lost if stop < x[1] < resume and x not in hit]
    excused = (hit + paused)[:held['skipped']]
    if excused:
        print('lost, counted skipped (never held by the destination): %s; '
              'OVS races %s; the switches counted %s' % (
                  [round((t - stop) * 1e3, 1) for _q, t in excused],
                  races[-5:], switches))
    return [x for x in lost if x not in excused], races


def held_or_let_go(r, held, stop, resume, why):
    """True if the move held its frames. False if the controller ran too
    far behind its switches to hold them (control.lag_guard: two
    packet-ins a frame on one loop, beside TCG guests on two cores; this
    machine ran 0.45-1.9 s behind): the record says so and why, and the
    move went on as --hold off's does: nothing twice or out of order,
    nothing lost but what was sent during the pause, around the guest's
    first frame after it, or before STOP and never read by the guest
    (its QEMU purges them: a TCG guest read its tap up to 62 ms behind)."""
    if 'abandoned' not in held:
        return True
    print('held frames let go: %s' % held['abandoned'])
    assert 'behind' in held['abandoned'], str(why)
    assert r['duplicates'] == 0 and r['reordered'] == 0, str(why)
    # Let go after RESUME, what was held until then is lost too (the
    # record says when).
    end = max(resume, held['abandoned_at']) + SWITCHOVER_MS / 1e3
    lost = [t for _q, t in r['lost_sent_at']]
    assert all(stop - READ_LAG_S < t < end for t in lost), str(why)
    return False


def test_held_frames_reach_the_guest_once_in_order_and_the_bound_holds(
        lab, api, holding, wired_guest, guest_retry):
    guest_retry.run(lambda _d: _held_there_and_back(
        lab, api, wired_guest, next(seq) % 250))


def _held_there_and_back(lab, api, wired_guest, k):
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest('10.87.%d' % k)
    r, m, stop, resume = move(lab, api, g, far, '10.87.%d.1' % k, h1,
                              h2, 64)
    [nic] = g.nics
    held = m['held'][nic]
    why = dict(brief(r, held, stop, resume, g), switches=m['switches'])
    if held_or_let_go(r, held, stop, resume, why):
        _first_move_held(r, m, held, why, stop, resume, h2)
    assert api.wire(wid)['state'] == 'tunnelled'
    assert {api.wire(wid)['host_a'], api.wire(wid)['host_b']} == \
        {'h2', 'h3'}

    # Back, under a flood: 1000-byte datagrams, ~65 fit the bound. A
    # pause shorter than ~65 ms never reaches it (CI of c0821fc paused
    # 68 ms and held 62): such a move is judged for what it is, and the
    # guest moves again, up to FLOOD_TRIES moves in all.
    src, dst = h2, h1
    for _try in range(FLOOD_TRIES):
        r, m, stop, resume = move(lab, api, g, far, '10.87.%d.1' % k, src,
                                  dst, 1000)
        held = m['held'][nic]
        why = dict(brief(r, held, stop, resume, g), switches=m['switches'])
        print('flood move: %s' % why)
        if not held_or_let_go(r, held, stop, resume, why):
            return
        if _flood_move_held(r, held, why, stop, resume, dst):
            return
        src, dst = dst, src
    raise AssertionError('no flood move in %d reached the bound' %
                         FLOOD_TRIES)


def _first_move_held(r, m, held, why, stop, resume, h2):
    pause = resume - stop
    # The guest was paused for a while and frames kept coming: some
    # reached only its destination, and it got every one of them.
    assert m['hold'] is None, str(why)       # the controller's default
    assert pause > 0.02 and held['delivered'] >= 10, str(why)
    # The source's count at activation, or, when its QEMU had quit and
    # taken the tap along (OVS then reports the counters unavailable),
    # its last poll, 50 ms apart and the pause longer: after STOP. (A
    # controller whose polls come back later than READ_WAIT lets the
    # move go instead: held_or_let_go.)
    assert held['aligned'] and held['source_reads'] in (
        'answered', 'last-poll (tap gone)'), str(why)
    if held['evicted']:
        # A pause longer than the bound holds (~618 of these frames, 0.6 s
        # of the stream; CI of cb079e4 paused 793 ms): only with the ring
        # full, and then cut there and counted, as the flood move's.
        assert held['held'] * PROBE_FRAME > HOLD_BYTES - PROBE_FRAME, \
            str(why)
        _cut_at_the_bound(r, held, why, stop, resume, h2)
        return
    # STOP lay between two polls of the source tap (50 ms apart, but a
    # poll has come 223 ms after the last on this 2-core machine under
    # a TCG migration: CI of b6d5bc8; 400 copies still catches a poll
    # that never came). What the window costs is issue 42's.
    assert held['stop_window'] is not None and \
        0 <= held['stop_window'] <= 400, str(why)
    # Once and in order: none twice, none that reached the destination
    # while the guest was paused overtaken; at most one at the
    # switch-over, after it resumed, as the controller relayed the last
    # 'late' frame (control.holding).
    assert r['duplicates'] == 0, str(why)
    assert r['reordered'] <= min(1, held.get('late', 0)), str(why)
    assert all(t > resume for _q, t in r['reordered_sent_at']), str(why)
    # Nothing sent during the pause lost but what the evidence above
    # excuses.
    bad, races = unexplained(r, held, stop, resume, h2, m['switches'])
    assert not bad, str(dict(why, ovs_races=races[-5:]))


def _flood_move_held(r, held, why, stop, resume, dst):
    """True if the flood reached the bound (then cut there and counted).
    A move that held less than the bound evicted nothing and lost nothing
    but QEMU's at STOP: judged so, and False."""
    assert held['delivered'] * 1000 <= HOLD_BYTES, str(why)
    if not held['evicted']:
        print('flood move: the pause held %d frames, under the bound' %
              held['held'])
        assert held['held'] * 1000 <= HOLD_BYTES, str(why)
    _cut_at_the_bound(r, held, why, stop, resume, dst)
    return held['evicted'] > 0


def _cut_at_the_bound(r, held, why, stop, resume, dst):
    # What the bound cut is missing (the oldest unread: from where the
    # source QEMU stopped reading into the pause), and nothing else but
    # the source QEMU's own at STOP and, as in the first move, what the
    # record counts `skipped` (sent in the pause or in OVS's race: the
    # source's copy has them, the destination's controller never got
    # them; a local loop saw 4 so under this flood, no race logged).
    lost = [(q, t) for q, t in r['lost_sent_at']]
    hit, races = raced(lost, dst)
    paused = [x for x in lost if stop < x[1] < resume or x in hit]
    skipped = min(held['skipped'], max(0, len(paused) - held['evicted']))
    if skipped:
        print('cut at the bound: %d lost counted skipped' % skipped)
    excess = len(lost) - held['evicted'] - skipped
    assert 0 <= excess <= QEMU_AT_STOP, str(dict(why, ovs_races=races[-5:]))
    # Lost after RESUME only while the release waited (its source's count:
    # a tap gone, its last poll) and the bound dropped the oldest of what
    # kept coming: counted evicted (CI of 40219ea: 398 evicted, some of
    # them sent after RESUME).
    assert sum(1 for _q, t in lost if t >= resume) <= held['evicted'], \
        str(why)
    assert r['duplicates'] == 0, str(why)
    assert r['reordered'] <= min(1, held.get('late', 0)), str(why)
    assert all(t > resume for _q, t in r['reordered_sent_at']), str(why)
