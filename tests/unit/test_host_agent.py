"""vw-host-agent's reading of libvirt and /proc (fakes of both): it
reports each guest migrating out once, with its vNICs and the address of
QEMU's migration stream, waits a moment for that stream, and reports
again on the guest's next migration."""
import os
import socket

import libvirt

from virtualwire.host import agent, libvirt_watch

XML = """<domain><name>g</name><devices>
<interface type='bridge'><virtualport type='openvswitch'>
<parameters interfaceid='v-one'/></virtualport></interface>
<interface type='bridge'><virtualport type='openvswitch'>
<parameters interfaceid='v-two'/></virtualport></interface>
<interface type='network'/></devices></domain>"""


def _hex(ip, port):
    return '%08X:%04X' % (int.from_bytes(socket.inet_aton(ip), 'little'),
                          port)


def fake_proc(tmp_path, pid, conns):
    """/proc/PID with sockets `conns`: [(inode, remote ip, port, state)]."""
    d = tmp_path / str(pid)
    (d / 'fd').mkdir(parents=True)
    (d / 'net').mkdir()
    rows = ['  sl  local_address rem_address   st tx_queue rx_queue tr '
            'tm->when retrnsmt   uid  timeout inode']
    for i, (inode, ip, port, st) in enumerate(conns):
        os.symlink('socket:[%d]' % inode, d / 'fd' / str(10 + i))
        rows.append('%4d: %s %s %s 00000000:00000000 00:00000000 00000000 '
                    '0 0 %d' % (i, _hex('198.18.0.11', 40000 + i),
                                _hex(ip, port), st, inode))
    (d / 'net' / 'tcp').write_text('\n'.join(rows) + '\n')
    return str(tmp_path)


def test_the_stream_peer_is_the_migration_port_connection(tmp_path):
    proc = fake_proc(tmp_path, 7, [(1, '10.0.0.9', 5900, '01'),
                                   (2, '198.18.0.12', 49152, '01'),
                                   (3, '127.0.0.1', 49153, '01')])
    assert agent.stream_peer(7, proc) == '198.18.0.12'


def test_no_peer_when_the_stream_is_not_connected(tmp_path):
    proc = fake_proc(tmp_path, 8, [(1, '198.18.0.12', 49152, '02'),
                                   (2, '10.0.0.1', 22, '01'),
                                   (3, '10.0.0.2', 22, '01')])
    assert agent.stream_peer(8, proc) is None
    assert agent.stream_peer(999, proc) is None


def test_the_vnics_are_the_openvswitch_interfaceids():
    assert agent.vnics_of(XML) == ['v-one', 'v-two']


class Dom:
    def __init__(self, uuid, out=True):
        self.uuid, self.out = uuid, out

    def UUIDString(self):
        return self.uuid

    def name(self):
        return 'g'

    def XMLDesc(self, _flags):
        return XML

    def jobStats(self):
        if not self.out:
            return {'type': libvirt.VIR_DOMAIN_JOB_NONE}
        return {'type': libvirt.VIR_DOMAIN_JOB_UNBOUNDED,
                'operation': libvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT}


class Conn:
    def __init__(self, doms):
        self.doms = doms

    def listAllDomains(self, _flags):
        return self.doms


class Client:
    def __init__(self):
        self.posts = []

    def call(self, method, path, doc):
        self.posts.append((method, path, doc))
        return {'moved': doc['vnics']}


def test_each_outgoing_migration_is_reported_once(monkeypatch):
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74353')
    client = Client()
    a = agent.Agent(Conn([dom]), lambda: client, 'h1')
    peer = {'ip': None}
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: peer['ip'])
    a.poll()
    assert client.posts == []          # the stream is not there yet
    peer['ip'] = '198.18.0.12'
    a.poll()
    a.poll()
    assert client.posts == [('POST', '/v1/migrations/departures', {
        'host': 'h1', 'vm_uuid': dom.uuid, 'vnics': ['v-one', 'v-two'],
        'to_address': '198.18.0.12'})]
    dom.out = False                    # the job ended
    a.poll()
    dom.out = True                     # and the guest migrates again
    a.poll()
    assert len(client.posts) == 2


def test_a_reported_guest_costs_no_more_peer_lookups(monkeypatch):
    """The stream's peer is a walk of the kernel's TCP tables: looked up
    until the report, then no more for the rest of the job, however many
    polls and passes come (they cost half the agent's CPU, issue 42)."""
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74353')
    client = Client()
    a = agent.Agent(Conn([dom]), lambda: client, 'h1')
    looked = []
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer',
                        lambda pid: looked.append(pid) or '198.18.0.12')
    a.poll()
    for _ in range(5):
        a.poll()
        a.on_iteration(None, dom, 3, None)
    assert len(client.posts) == 1 and looked == [42], looked


def test_a_stream_never_seen_is_reported_without_its_peer(monkeypatch):
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74354')
    client = Client()
    a = agent.Agent(Conn([dom]), lambda: client, 'h1')
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: None)
    a.poll()
    a.first_seen[dom.uuid] -= agent.PEER_WAIT + 0.1
    a.poll()
    assert [d for _m, _p, d in client.posts] == [{
        'host': 'h1', 'vm_uuid': dom.uuid, 'vnics': ['v-one', 'v-two']}]


class FlakyClient:
    """The controller down, then up but without the destination's word,
    then settling the report."""
    def __init__(self):
        self.posts, self.answers = [], [
            ConnectionError('controller down'),
            {'moved': [], 'settled': False},
            {'moved': ['v-one', 'v-two'], 'settled': True}]

    def call(self, method, path, doc):
        self.posts.append(doc)
        a = self.answers.pop(0) if self.answers else {'settled': True}
        if isinstance(a, Exception):
            raise a
        return a


def test_an_unsettled_report_is_said_again_until_the_controller_settles_it(
        monkeypatch):
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74355')
    client = FlakyClient()
    a = agent.Agent(Conn([dom]), lambda: client, 'h1', post_retries=1)
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: '198.18.0.12')
    a.poll()                                   # refused: controller down
    assert len(client.posts) == 1 and dom.uuid in a.unsettled
    dom.out = False                            # the job ends meanwhile
    t0 = a.unsettled[dom.uuid][2]
    a.say_again(t0 + 0.5)                      # not yet due
    assert len(client.posts) == 1
    a.say_again(t0 + agent.RETRY_EVERY)        # taken, not settled
    a.say_again(t0 + 2 * agent.RETRY_EVERY)    # settled
    a.say_again(t0 + 3 * agent.RETRY_EVERY)
    assert len(client.posts) == 3 and a.unsettled == {}
    assert all(p['vm_uuid'] == dom.uuid and p['to_address'] ==
               '198.18.0.12' for p in client.posts)


def test_a_report_nobody_settles_is_given_up_after_the_window(monkeypatch):
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74356')
    client = FlakyClient()
    client.answers = [{'moved': [], 'settled': False}] * 1000
    a = agent.Agent(Conn([dom]), lambda: client, 'h1', post_retries=1)
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: '198.18.0.12')
    a.poll()
    t0 = a.unsettled[dom.uuid][2]
    a.say_again(t0 + agent.RETRY_WINDOW + 1)
    assert a.unsettled == {} and len(client.posts) == 1


def test_a_pause_for_the_last_copy_is_said_on_the_departures_connection(
        monkeypatch, caplog):
    """Libvirt's 'suspended, migrated' (QEMU's STOP) on the source is said
    at once, through the client its leaving was reported with (its
    connection open); any other pause, or resume, is not."""
    caplog.set_level('INFO', logger='vw-host-agent')
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74399')
    made = []

    class Counted(Client):
        def call(self, method, path, doc):
            self.posts.append((method, path, doc))
            return {}

    def new_client():
        made.append(Counted())
        return made[-1]
    a = agent.Agent(Conn([dom]), new_client, 'h1')
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: '198.18.0.12')
    a.poll()
    ran = []
    monkeypatch.setattr(agent.threading, 'Thread', lambda target, args,
                        daemon: type('T', (), {
                            'start': lambda self: ran.append(target(*args))
                        })())
    for event, detail in (
            (libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
             libvirt.VIR_DOMAIN_EVENT_SUSPENDED_PAUSED),
            (libvirt.VIR_DOMAIN_EVENT_RESUMED,
             libvirt.VIR_DOMAIN_EVENT_RESUMED_MIGRATED),
            (libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
             libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED)):
        a.on_lifecycle(None, dom, event, detail, None)
    assert len(ran) == 1
    stops = [(c, p) for c in made for p in c.posts if 'stopped' in p[1]]
    assert [p for _c, p in stops] == [
        ('POST', '/v1/migrations/%s/stopped' % dom.uuid, {'host': 'h1'})]
    # The same client as the departure's.
    assert any('departures' in p[1] for p in stops[0][0].posts)
    # The log says when libvirt's event came and how long the answer took.
    [said] = [r.getMessage() for r in caplog.records
              if 'stopped to leave' in r.getMessage()]
    assert "said (the event at " in said and 'ms later)' in said


TAPPED = """<domain><name>g</name><devices>
<interface type='bridge'><target dev='vnet7'/>
<virtualport type='openvswitch'><parameters interfaceid='v-one'/>
</virtualport></interface>
<interface type='bridge'><target dev='vnet8'/>
<virtualport type='openvswitch'><parameters interfaceid='v-two'/>
</virtualport></interface></devices></domain>"""


def _leaving(monkeypatch, dom):
    """(an agent that saw `dom` start leaving, its client recording
    each call), threads run at once."""
    client = Client()
    a = agent.Agent(Conn([dom]), lambda: client, 'h1')
    monkeypatch.setattr(agent, 'qemu_pid', lambda name: 42)
    monkeypatch.setattr(agent, 'stream_peer', lambda pid: '198.18.0.12')
    a.poll()
    monkeypatch.setattr(agent.threading, 'Thread', lambda target, args,
                        daemon: type('T', (), {
                            'start': lambda self: target(*args)})())
    client.call = lambda method, path, doc: client.posts.append(
        (method, path, doc)) or {}
    return a, client


def test_the_stop_says_each_taps_read_count_at_that_moment(
        monkeypatch, tmp_path):
    """With the STOP go the counts of frames QEMU read from each of the
    guest's taps (the kernel's transmit count), read when the event came:
    the controller's cut then needs no answer from a busy switch. A tap
    already gone is left out."""
    for dev, n in (('vnet7', 4711), ('vnet9', 1)):
        (tmp_path / dev / 'statistics').mkdir(parents=True)
        (tmp_path / dev / 'statistics' / 'tx_packets').write_text(
            '%d\n' % n)
    assert agent.taps_of(TAPPED) == {'v-one': 'vnet7', 'v-two': 'vnet8'}
    assert agent.tap_reads(agent.taps_of(TAPPED), str(tmp_path)) == {
        'v-one': 4711}
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74398')
    dom.XMLDesc = lambda _flags: TAPPED
    a, client = _leaving(monkeypatch, dom)
    a.sysfs = str(tmp_path)
    a.on_lifecycle(None, dom, libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
                   libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED, None)
    assert client.posts[-1] == (
        'POST', '/v1/migrations/%s/stopped' % dom.uuid,
        {'host': 'h1', 'reads': {'v-one': 4711}})


def test_qemus_stop_of_a_leaving_guest_is_said_at_once_and_once(
        monkeypatch):
    """QEMU's STOP of a guest whose migration out was seen is its last
    copy's: said at once, with QEMU's own time and the taps' counts, not
    when libvirt's lifecycle event comes (up to 94 ms later in the lab).
    That event then says nothing more; a STOP of a guest not seen
    leaving waits for it."""
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74398')
    a, client = _leaving(monkeypatch, dom)
    monkeypatch.setattr(agent.time, 'time', lambda: 1000.25)
    before = len(client.posts)
    a.on_qemu_event(None, dom, 'STOP', 1000, 125000, None, None)
    assert client.posts[before:] == [
        ('POST', '/v1/migrations/%s/stopped' % dom.uuid,
         {'host': 'h1', 'stopped_at': 1000.125})]
    a.on_lifecycle(None, dom, libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
                   libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED, None)
    a.on_qemu_event(None, dom, 'STOP', 1000, 200000, None, None)
    assert len(client.posts) == before + 1
    other = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74399')
    a.on_qemu_event(None, other, 'STOP', 1000, 0, None, None)
    assert len(client.posts) == before + 1


def test_libvirts_event_says_qemus_own_stop_time_unless_stale_or_resumed(
        monkeypatch):
    """When libvirt's event says it (the guest's leaving not seen in time
    for its STOP), QEMU's STOP event (its own timestamp) goes with the
    word, for the source's copy log to time its count at STOP by. A STOP
    followed by a RESUME (a pause that ended), or older than STOP_FRESH
    when libvirt's event comes, is not sent: a cut timed by it would go
    too early."""
    dom = Dom('4c7b9b5f-60c7-4301-a062-8fa189c74398')
    a, client = _leaving(monkeypatch, dom)
    a.taps.clear()                      # its leaving not seen yet
    now = [1000.25]
    monkeypatch.setattr(agent.time, 'time', lambda: now[0])

    def stop_said():
        a.said_stop.clear()             # as a new job
        a.on_lifecycle(None, dom, libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
                       libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED, None)
        return client.posts[-1][2].get('stopped_at')
    a.on_qemu_event(None, dom, 'STOP', 1000, 125000, None, None)
    assert stop_said() == 1000.125
    a.on_qemu_event(None, dom, 'STOP', 1000, 0, None, None)
    a.on_qemu_event(None, dom, 'RESUME', 1000, 100000, None, None)
    assert stop_said() is None
    a.on_qemu_event(None, dom, 'STOP', 990, 0, None, None)
    assert stop_said() is None          # 10.25 s before libvirt's event


class EventConn:
    """A libvirt connection that records which events were registered."""

    def __init__(self):
        self.events = []

    def domainEventRegisterAny(self, _dom, event, _cb, _opaque):
        self.events.append(event)


def test_the_pause_is_taken_where_qemus_stop_comes_so_the_stop_is_first():
    """Libvirt queues QEMU's STOP before the pause it derives from it; on
    one connection that order holds, across two it did not (issue 42).
    Without QEMU's events the read-only connection takes both."""
    a = agent.Agent(None, None, 'h1')
    ro, rw = EventConn(), EventConn()
    libvirt_watch.watch_migrations(ro, rw, a)
    assert ro.events == [libvirt.VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION]
    assert rw.events == [libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE]
    ro = EventConn()
    libvirt_watch.watch_migrations(ro, None, a)
    assert ro.events == [libvirt.VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION,
                         libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE]
