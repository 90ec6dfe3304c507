"""The leader killed in the middle of a live migration, with a standby
ready: two controller instances on a 3-member RAFT intent cluster,
three hosts with libvirt, a real QEMU guest on h1 wired to a VM on h3,
migrating to h2. Once h3 sends the wire to both hosts (the move
prepared), the leader is killed -9. The standby takes over from the
migration record the leader stored, the guest's first frame on h2
activates the move, the source's release hook reaches the new leader
(through the standby's 307 if it asked the dead one first), the record
ends completed, the wire ends on h2-h3 with no flow of the move left,
and the probe through it saw no duplicate and lost nothing after the
guest resumed."""
import time
import uuid

import pytest

from vwtest import Api, flows_of, wait_until
from virtualwire.core import ids
from vwlab import Lab
from vwlab.qemu_events import EventWatch, stop_resume_windows
from vwtest.migration import (GUEST_BEFORE_STOP, MARGIN, domstate,
                               dual_send, migrate_bg, stop_probe,
                               wire_hosts)


@pytest.fixture(scope='module')
def ha_lab():
    with Lab(3, libvirt=True, controllers=2) as lab:
        lab.start_controllers()
        try:
            wait_until(lambda: _leader(lab) is not None and
                       all(_synced(lab, k) for k in (0, 1)), 90,
                       what='one leader and two synced instances')
        except AssertionError as e:
            raise AssertionError('%s\n%s' % (e, lab.diagnostics()))
        yield lab


def _api(lab, k):
    return Api(lab, url=lab.url_of(k))


def _status(lab, k):
    try:
        return _api(lab, k).ok('GET', '/v1/status')
    except Exception:           # noqa: BLE001 (down, or not yet up)
        return None


def _leader(lab):
    act = [k for k, p in lab.instances.items() if p.poll() is None and
           (_status(lab, k) or {}).get('role', {}).get('active')]
    return act[0] if len(act) == 1 else None


def _synced(lab, k):
    return _api(lab, k).synced()


def test_the_leader_killed_mid_migration_the_standby_completes_it(ha_lab):
    lab = ha_lab
    h1, h2, h3 = lab.hosts
    lead = _leader(lab)
    other = 1 - lead
    api = _api(lab, lead)
    nic = str(uuid.uuid4())
    g = h1.define_guest('hg1', [(nic, '10.91.0.1/24')])
    far = h3.add_vm('hf1', [('hf1-nic', '10.91.0.2/24')])
    wid = api.connect(nic, 'hf1-nic')['id']
    api.wait_state(wid, 'tunnelled', timeout=30)
    wait_until(lambda: far.ping('10.91.0.1', count=1)[1] == 1, 60,
               what='the guest answers')
    cookie = '0x%x' % ids.wire_cookie(wid)
    h1.libvirt.virsh('migrate-setspeed', g.name, '1')      # a slow copy
    with EventWatch([h1, h2]) as watch:
        stream = far.tool_bg('udp-echo', '--dst', '10.91.0.1', '--rate',
                             1000, '--seconds', 120)
        time.sleep(0.5)
        mig = migrate_bg(g, h1, h2)
        try:
            wait_until(lambda: dual_send(h3, (h1, h2), wid), 60,
                       what='dual send on h3 (the move prepared)')
            lab.instances[lead].kill()
            wait_until(lambda: (_status(lab, other) or {}).get(
                'role', {}).get('active'), 20, what='the standby leading')
            h1.libvirt.virsh('migrate-setspeed', g.name, '10000')
            _out, err = mig.communicate(timeout=120)
            assert mig.returncode == 0, err
        except BaseException:
            stream.kill()
            raise
        finally:
            if mig.poll() is None:
                mig.kill()
        report = stop_probe(stream, after=2.0)
    assert domstate(h2, g.name) == 'running'
    api = _api(lab, other)
    wait_until(lambda: wire_hosts(api, wid) == ('tunnelled', {'h2', 'h3'}),
               30, what='the wire on h2-h3')
    # No flow of the move is left: h1 holds none of the wire's, h3 sends
    # to one host only, no learn/RARP flow anywhere.
    wait_until(lambda: not flows_of(h1, cookie), 30, what='h1 clean')
    assert sum('tun_dst' in l for l in flows_of(h3, cookie)) == 1
    assert not [l for h in lab.hosts for l in flows_of(h, cookie)
                if 'learn' in l or 'rarp' in l]
    recs = [m for m in api.ok('GET', '/v1/migrations')['migrations']
            if m['vm_uuid'] == g.uuid]
    wait_until(lambda: [m['state'] for m in api.ok(
        'GET', '/v1/migrations')['migrations'] if m['vm_uuid'] == g.uuid]
        == ['completed'], 30, what='the record completed')
    recs = [m for m in api.ok('GET', '/v1/migrations')['migrations']
            if m['vm_uuid'] == g.uuid]
    assert recs[0]['vnics'] == [nic] and nic in recs[0]['activated'], recs
    [(stop, _src, resume, _dst)] = stop_resume_windows(watch.events, g.name)
    print('killed mid-migration: %s, pause %.1f ms; activated by %s' % (
        {k: report[k] for k in ('sent', 'lost', 'duplicates', 'lost_tail')},
        (resume - stop) * 1e3, recs[0]['activated_by']))
    assert report['duplicates'] == 0 and report['lost_tail'] == 0, report
    # Lost only while the guest was paused (give or take the margins the
    # other migration tests allow), none around the kill or the takeover.
    outside = [(q, t) for q, t in report['lost_sent_at']
               if not stop - GUEST_BEFORE_STOP <= t <= resume + MARGIN]
    assert not outside, (outside, stop, resume)
    assert _status(lab, other)['role']['takeovers'] == 1
    api.req('DELETE', '/v1/wires/%d' % wid)
    lab.destroy_guest(g)
