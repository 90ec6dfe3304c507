"""Live migration that goes wrong, with a real libvirt/QEMU guest: refused,
aborted, never activated, the controller down or killed midway. No wire is
lost and the flows end as before or as after, never in between."""
import time

import pytest

from vwtest import flows_of, switchover, wait_until
from virtualwire.core import ids
from virtualwire.host.hold_ring import BEAT_LOST
from vwlab import LabError
from vwlab.capture import HostCaptures, guest_taps
from vwlab.qemu_events import EventWatch, stop_resume_windows
from vwtest.fixtures import frames_held_by_the_controller
from vwtest.migration import (domstate, dual_send, migrate_bg,
                               probe_report, stop_probe, wire_flows,
                               wire_hosts)


def test_refused_migration_fails_and_the_guest_stays(lab, api, wired_guest):
    """The destination's switch is not connected to the controller: the
    hook's announcement is refused, libvirt fails the migration with the
    controller's reason, and the guest keeps running on its source with
    its wire undisturbed."""
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest('10.83.0')
    targets = h2.controller_targets()
    try:
        h2.vsctl('del-controller', 'br-int')
        wait_until(lambda: not api.ok('GET', '/v1/hosts/h2')['connected'],
                   15, what='controller sees h2 gone')
        stream = far.tool_bg('udp-echo', '--dst', '10.83.0.1', '--rate',
                             1000, '--seconds', 4)
        time.sleep(0.5)
        with pytest.raises(LabError, match='not connected to the controller'):
            lab.migrate(g, h1, h2)
        assert domstate(h1, g.name) == 'running'
        assert domstate(h2, g.name) is None
        r = probe_report(stream)
        assert r['lost'] == 0 and r['duplicates'] == 0, r
        assert api.wire(wid)['host_a'] == 'h1'
        assert not [m for m in api.ok('GET', '/v1/migrations')['migrations']
                    if m['vm_uuid'] == g.uuid]
    finally:
        h2.set_controllers(targets)
        wait_until(api.synced, 20, what='h2 back')


def test_aborted_migration_leaves_every_wire_as_it_was(lab, api,
                                                      wired_guest):
    """`virsh domjobabort` while the guest is being copied: the guest stays
    on its source, its wire never left it, nothing is lost, and the
    migration is recorded as aborted (the destination's release hook)."""
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest('10.84.0')
    before = wire_flows(lab, wid)
    stream = far.tool_bg('udp-echo', '--dst', '10.84.0.1', '--rate',
                         1000, '--seconds', 6)
    time.sleep(0.5)
    # Throttle the copy so there is time to abort it.
    h1.libvirt.virsh('migrate-setspeed', g.name, '1')
    mig = migrate_bg(g, h1, h2)
    wait_until(lambda: domstate(h2, g.name) is not None, 20,
               what='destination guest created')
    time.sleep(0.5)
    h1.libvirt.virsh('domjobabort', g.name)
    _out, err = mig.communicate(timeout=60)
    assert mig.returncode != 0 and 'cancel' in err.lower(), err
    assert domstate(h1, g.name) == 'running'
    wait_until(lambda: domstate(h2, g.name) is None, 20,
               what='destination guest gone')
    r = probe_report(stream)
    assert r['lost'] == 0 and r['duplicates'] == 0, r
    assert api.wire(wid)['host_a'] == 'h1'
    assert wire_flows(lab, wid) == before
    wait_until(lambda: [m['state'] for m in api.ok(
        'GET', '/v1/migrations')['migrations']
        if m['vm_uuid'] == g.uuid] == ['aborted'], 10,
        what='migration recorded as aborted')


def test_a_migration_never_activated_times_out_to_the_flows_before(
        lab, api, wired_guest):
    """A copy that never finishes (throttled to 1 MiB/s): once the
    controller's --move-timeout passes without the guest's RARP, the wire
    is back on exactly its pre-migration flows although the destination's
    tap is still plugged, nothing is lost, and the record says timed-out.
    Aborting the stuck migration afterwards changes nothing."""
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest('10.86.0')
    cookie = '0x%x' % ids.wire_cookie(wid)
    before = wire_flows(lab, wid)
    lab.stop_controller()
    lab.start_controller(extra=['--move-timeout', '3'])
    mig = stream = None
    try:
        wait_until(api.synced, 30, what='controller back')
        stream = far.tool_bg('udp-echo', '--dst', '10.86.0.1', '--rate',
                             1000, '--seconds', 120)
        time.sleep(0.5)
        h1.libvirt.virsh('migrate-setspeed', g.name, '1')
        mig = migrate_bg(g, h1, h2)
        wait_until(lambda: sum(l.count('->tun_dst') for l in
                               flows_of(lab.hosts[2], cookie)) == 2, 30,
                   what='far end sends to both hosts')
        dual_at = time.time()
        nic = next(iter(g.nics))
        assert api.wire(wid)['moving'] == {nic: {
            'source': 'h1', 'destination': 'h2', 'activated': False}}
        wait_until(lambda: wire_flows(lab, wid) == before, 20,
                   what='flows as before the migration')
        # Undone by the timeout, not by anything else: the move lasted at
        # least the timeout since it was announced (the dual send starts
        # later, once the source's agent has said so too), and the
        # destination's tap is still there.
        started = [m['started_at'] for m in api.ok(
            'GET', '/v1/migrations')['migrations'] if m['vm_uuid'] == g.uuid]
        assert len(started) == 1 and time.time() - started[0] > 2.5 and \
            time.time() > dual_at, started
        assert guest_taps(h2, g.name), 'destination tap gone already'
        assert mig.poll() is None, 'the migration is no longer stuck'
        assert api.wire(wid)['moving'] == {}
        wait_until(lambda: [m['state'] for m in api.ok(
            'GET', '/v1/migrations')['migrations']
            if m['vm_uuid'] == g.uuid] == ['timed-out'], 10,
            what='migration recorded as timed-out')
        h1.libvirt.virsh('domjobabort', g.name)
        _out, err = mig.communicate(timeout=60)
        assert mig.returncode != 0, err
        assert domstate(h1, g.name) == 'running'
        wait_until(lambda: domstate(h2, g.name) is None, 20,
                   what='destination guest gone')
        r = stop_probe(stream, after=0)
        assert r['lost'] == 0 and r['duplicates'] == 0, r
        assert wire_flows(lab, wid) == before
        assert api.wire(wid)['host_a'] == 'h1'
    finally:
        for p in (mig, stream):
            if p is not None and p.poll() is None:
                p.kill()
        lab.stop_controller()
        lab.start_controller()
        wait_until(api.synced, 30, what='controller back with defaults')


def test_controller_down_the_migration_goes_ahead_and_the_wire_follows(
        lab, api, wired_guest):
    """The hook's policy when the controller cannot be reached: the
    migration goes ahead (a guest is never stranded on a host being
    evacuated). Back up, the controller finds the guest's vNIC in the
    destination's OVSDB and the wire follows it."""
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest('10.87.0')
    cookie = '0x%x' % ids.wire_cookie(wid)
    lab.stop_controller()
    try:
        lab.migrate(g, h1, h2)          # LabError if the hook refused
    finally:
        lab.start_controller()
    assert domstate(h2, g.name) == 'running'
    assert domstate(h1, g.name) is None
    wait_until(api.synced, 30, what='controller back')
    wait_until(lambda: wire_hosts(api, wid) == ('tunnelled', {'h2', 'h3'}),
               20, what='wire follows the guest to h2')
    wait_until(lambda: far.ping('10.87.0.1', count=1)[1] == 1, 20,
               what='guest answers on h2')
    r = far.tool('udp-echo', '--dst', '10.87.0.1', '--rate', 1000,
                 '--seconds', 1)
    assert r['lost'] == 0 and r['duplicates'] == 0, r
    wait_until(lambda: not flows_of(h1, cookie), 10, what='h1 clean')


@pytest.mark.parametrize('rings', ['on-hosts', 'none'])
def test_controller_killed_mid_migration_the_wire_still_converges(
        lab, api, wired_guest, tmp_path, rings):
    """The controller dies (SIGKILL) once the destination is prepared; the
    migration finishes without it, and traffic follows the guest with the
    controller still down. Where hosts keep frames (the default), the
    destination's ring, never released, passes frames on BEAT_LOST after
    the guest runs there, its controller's beats gone (dropping what it
    held: a loss, never a duplicate); without rings the destination switch activates itself on
    the guest's RARP. Restarted, the controller reads the migration from
    its database and the activation from the switch, and cleans up."""
    if rings == 'none':
        with frames_held_by_the_controller(lab, api):
            _killed_mid_migration(lab, api, wired_guest, tmp_path, 0.0)
    else:
        _killed_mid_migration(lab, api, wired_guest, tmp_path, BEAT_LOST)


def _killed_mid_migration(lab, api, wired_guest, tmp_path, orphan_s):
    h1, h2, h3 = lab.hosts
    g, far, wid = wired_guest('10.85.0')
    nic = next(iter(g.nics))
    h1.libvirt.virsh('migrate-setspeed', g.name, '1')   # slow copy
    taps = guest_taps(h1, g.name)
    for h in lab.hosts:
        h.log_datapath_flow_changes()
    with HostCaptures(lab.hosts, tmp_path) as caps, \
            EventWatch([h1, h2]) as watch:
        stream = far.tool_bg('udp-echo', '--dst', '10.85.0.1', '--rate',
                             1000, '--seconds', 120)
        time.sleep(0.5)
        mig = migrate_bg(g, h1, h2)
        try:
            # Prepared: the far end's host sends the wire to both hosts.
            wait_until(lambda: dual_send(h3, (h1, h2), wid), 30,
                       what='dual send on h3')
            # Mid-migration, a moment after the move was prepared: the
            # controller has begun beating the destination's ring (killed
            # within its first poll, it would not have, and the ring
            # waits ORPHAN_AFTER instead).
            time.sleep(0.3)
            lab.stop_controller(kill=True)
            h1.libvirt.virsh('migrate-setspeed', g.name, '10000')
            _out, err = mig.communicate(timeout=90)
            assert mig.returncode == 0, err
        except BaseException:
            stream.kill()
            raise
        finally:
            if mig.poll() is None:
                mig.kill()
        assert domstate(h2, g.name) == 'running'
        dst_taps = guest_taps(h2, g.name)
        caps.note_interfaces()
        # Controller still down: the guest answers on h2 (once a ring no
        # controller released has passed frames on).
        if orphan_s:
            wait_until(lambda: far.ping('10.85.0.1', count=1)[1] == 1,
                       orphan_s + 5, what='the ring passes frames on')
        r = far.tool('udp-echo', '--dst', '10.85.0.1', '--rate', 1000,
                     '--seconds', 1)
        assert r['lost'] == 0 and r['duplicates'] == 0, r
        lab.start_controller()
        wait_until(api.synced, 30, what='controller back')
        wait_until(lambda: wire_hosts(api, wid) == ('tunnelled',
                                                     {'h2', 'h3'}),
                   20, what='wire on h2')
        report = stop_probe(stream)
    windows = stop_resume_windows(watch.events, g.name)
    assert len(windows) == 1, windows
    for h in lab.hosts:
        h.log_datapath_flow_changes(False)
    if orphan_s:
        # The ring's bound is all it cost: every datagram lost was sent
        # between STOP and the ring passing frames on (BEAT_LOST after
        # the guest's first frame there, which a TCG guest sends up to
        # ~0.5 s after RESUME), none came twice. From before STOP too,
        # by up to AROUND_S: one the source had not read by STOP (a TCG
        # guest behind on its queue: from 54 ms before STOP once) is lost
        # with the ring's frames, of which no controller said which the
        # guest had read.
        stop, _s, resume, _d = windows[0]
        print('lost (seq, ms from STOP): %s' % [
            (q, round((t - stop) * 1e3, 1))
            for q, t in report['lost_sent_at']])
        outside = [(q, round((t - stop) * 1e3, 1))
                   for q, t in report['lost_sent_at']
                   if not stop - switchover.AROUND_S <= t <=
                   resume + orphan_s + 0.5]
        assert not outside and report['duplicates'] == 0, (
            'lost outside STOP .. the ring\'s bound (ms from STOP)',
            outside, report['duplicates'])
    else:
        # The controller's death cost nothing: the switch-over within the
        # goal and nothing else lost by the network around the move.
        switchover.check(switchover.judge(
            report, caps.datagrams(switchover.heads_near([report], windows)),
            '10.85.0.1', taps, dst_taps, windows[0],
            switchover.races(lab.hosts)))
    # Cleaned up: exactly the flows a fresh start would have (no dual send,
    # no RARP flow), and the record says how it went.
    cookie = '0x%x' % ids.wire_cookie(wid)
    wait_until(lambda: not flows_of(h1, cookie), 20, what='h1 clean')
    assert not [l for h in lab.hosts for l in flows_of(h, cookie)
                if 'learn' in l or 'rarp' in l]
    assert sum('tun_dst' in l for l in flows_of(h3, cookie)) == 1
    rec = [m for m in api.ok('GET', '/v1/migrations')['migrations']
           if m['vm_uuid'] == g.uuid]
    assert [(m['state'], m['vnics']) for m in rec] == \
        [('completed', [nic])], rec
