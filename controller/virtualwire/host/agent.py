"""vw-host-agent: the source host's word that a guest is leaving.

Under strict placement (the controller's default) a vNIC moves only when
the cloud says so. Libvirt's qemu hook runs on a migration's destination
only, so the destination alone cannot be believed (a compromised
hypervisor would announce any guest). This agent runs on every
hypervisor beside libvirtd and watches libvirt's own migration jobs
(libvirt-python: the migration-iteration event, and each running
domain's job every --poll seconds in case an event was missed). When a
guest starts migrating out it reports `POST /v1/migrations/departures`:
the guest's UUID, its VirtualWire vNICs (each `<virtualport
type='openvswitch'>` interfaceid), and the address QEMU's migration
stream is connected to when it can see one (QEMU's own established TCP
connection; none when the migration is tunnelled through libvirtd). The
controller believes the move when this and the destination's
announcement agree (`core.departures`).

Settings are the hook's (`/etc/virtualwire/hook.conf`, [controller]:
url, ca_cert, token_file, host; `insecure_plaintext_lab` for a lab's
http://). The token is this hypervisor's credential: it may report only
for this host. The agent never changes a guest: if the controller is
unreachable the migration goes on, and the report is said again every
RETRY_EVERY seconds for RETRY_WINDOW: back in time, the controller pairs
it with the destination's own switch holding the guest's ports; later,
the vNIC waits at its destination until the cloud places it (`vwctl
vnics place`).

It also says when such a guest stops for the last copy (QEMU's STOP
event, or libvirt's lifecycle event 'suspended, migrated' derived from
it, whichever comes first), `POST
/v1/migrations/UUID/stopped`: from then on the guest reads its source tap
no more, and the controller delivers its frames on the destination,
where the tap keeps them until the guest runs (`--activate-at-stop`).
With it go its taps' read counts at that moment (the kernel's transmit
count: frames QEMU read), taken here in a few ms, which tell the
controller which held frames the guest never read even when this host's
switch is too busy to answer its own read in time (`control.holding`).
And QEMU's own time of the STOP (its QMP event's timestamp, `stopped_at`):
QEMU reads one more frame after STOP that the guest never gets, often
before libvirt's event comes, and this host's copy log places the count
at STOP by it (`host.copy_log`). Libvirt gives QEMU's events only to a
read-write connection, so the agent opens one for QEMU's events and the
lifecycle event, in order (every call is on its read-only one);
`--stop-time off` does without.
"""
import argparse
import configparser
import logging
import os
import threading
import time

from virtualwire import version
from virtualwire.host.guest_facts import (  # noqa: F401 (the tests' names)
    qemu_pid, stream_peer, tap_reads, taps_of, vnics_of)
from virtualwire.host.libvirt_watch import watch_migrations, watch_qemu_stops

LOG = logging.getLogger('vw-host-agent')
CONFIG = '/etc/virtualwire/hook.conf'
PEER_WAIT = 2.0     # s a job is given for its stream to connect
# A report the controller did not take, or took without settling (the
# destination had not spoken yet, or the controller was down), is said
# again this often while the controller's pairing window lasts
# (core.departures.WINDOW): a move made while it was away is then
# believed when it is back.
RETRY_EVERY = 2.0
RETRY_WINDOW = 120.0
# QEMU's STOP is believed the migration's when libvirt's event for it
# comes at most this long after, and no RESUME came between (an earlier
# pause's STOP would put the cut too early: duplicates).
STOP_FRESH = 5.0
# How long the word waits for QEMU's STOP event. It comes before the
# lifecycle event on their one connection (watch_migrations); the wait is
# for a libvirt that orders them otherwise.
STOP_WAIT = 0.02


class Agent:
    """Reports each guest once per outgoing migration."""

    def __init__(self, conn, client, host, post_retries=3):
        # client(): a REST client, made per report so a token file
        # written (or rotated) after the agent started is read.
        self.conn, self.client, self.host = conn, client, host
        self.post_retries = post_retries
        self.reported = set()           # UUIDs reported, until their job ends
        self.first_seen = {}            # UUID -> when its job was first seen
        # UUID -> [report, name, first said, last said]: not settled yet.
        self.unsettled: dict = {}
        # UUID -> the client its leaving was reported with: its connection
        # is open (TLS done) when the guest stops, a few ms that count.
        self.clients: dict = {}
        # UUID -> {vNIC: tap} of a guest leaving: read at once at STOP.
        self.taps: dict = {}
        # UUID -> QEMU's last STOP (Unix time), from its QMP event, when
        # this agent gets QEMU's events (`stop_events`).
        self.stop_at: dict = {}
        self.stop_events = False
        # UUIDs whose stop for the last copy was said, until the guest
        # runs again or its job ends: said once, by whichever event is
        # first.
        self.said_stop: set = set()
        # The read-write connection QEMU's events (and so libvirt's
        # lifecycle event) come on: kept open here, used for nothing else.
        self.rw = None
        self.sysfs = '/sys/class/net'
        self.lock = threading.Lock()

    def on_iteration(self, _conn, dom, _iteration, _opaque):
        # QEMU's pass: reported now if its stream's peer shows, else by
        # poll() (which reports without it after PEER_WAIT).
        with self.lock:
            self.first_seen.setdefault(dom.UUIDString(), time.monotonic())
        self.leaving(dom, wait_for_peer=True)

    def poll(self):
        """Each running domain's job: report those migrating out, and
        forget those whose job ended (a later migration reports again)."""
        import libvirt
        out = set()
        for dom in self.conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            try:
                stats = dom.jobStats()
            except libvirt.libvirtError:
                continue
            if stats.get('type', 0) != libvirt.VIR_DOMAIN_JOB_NONE and \
                    stats.get('operation') == \
                    libvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT:
                uuid = dom.UUIDString()
                out.add(uuid)
                with self.lock:
                    seen = self.first_seen.setdefault(uuid, time.monotonic())
                # Libvirt's job starts before QEMU's stream connects: wait
                # a moment for the stream's peer (the iteration event
                # usually comes first), then report without it.
                self.leaving(dom, wait_for_peer=time.monotonic() - seen <
                             PEER_WAIT)
        with self.lock:
            self.reported &= out
            for uuid in set(self.first_seen) - out:
                del self.first_seen[uuid]
            for uuid in set(self.clients) - out:
                del self.clients[uuid]
            for uuid in set(self.taps) - out:
                del self.taps[uuid]
            self.said_stop &= out
        self.say_again()

    def on_qemu_event(self, _conn, dom, event, seconds, micros, _details,
                      _opaque):
        """QEMU's STOP (kept, with QEMU's own timestamp) or RESUME (a STOP
        forgotten: the guest ran again), any guest. The STOP of a guest
        leaving (its migration job seen) is its last copy's: said at once.
        Libvirt derives its lifecycle event from it under the guest's lock,
        which its migration job holds at times: in the lab that event came
        up to 94 ms after this one, and a pause can be 38 ms (issue 42).
        A guest paused by hand during its migration is taken for stopped
        too: its delivery moves to the destination, and back only if the
        migration fails."""
        uuid = dom.UUIDString()
        with self.lock:
            if event != 'STOP':
                self.stop_at.pop(uuid, None)
                self.said_stop.discard(uuid)
                return
            at = seconds + micros / 1e6
            taps = self.taps.get(uuid)
            first = taps is not None and uuid not in self.said_stop
            if first:
                self.said_stop.add(uuid)
            else:                       # for libvirt's event to send
                self.stop_at[uuid] = at
        if first:
            self._say_stop(uuid, dom.name(), taps, at)

    def stop_time(self, uuid, seen):
        """QEMU's STOP of the guest that libvirt said (at `seen`) paused
        to leave: None if it did not come (in STOP_WAIT) or is stale."""
        end = time.monotonic() + (STOP_WAIT if self.stop_events else 0)
        while True:
            with self.lock:
                at = self.stop_at.pop(uuid, None)
            if at is not None or time.monotonic() >= end:
                break
            time.sleep(0.002)
        if at is None or seen is None or not 0 <= seen - at <= STOP_FRESH:
            return None
        return at

    def on_lifecycle(self, _conn, dom, event, detail, _opaque):
        """Libvirt paused a guest for its migration's last copy (QEMU's
        STOP on this, its source): say so at once, off libvirt's event
        thread, so the controller delivers its frames on the destination
        before the guest runs there."""
        import libvirt
        if event != libvirt.VIR_DOMAIN_EVENT_SUSPENDED or \
                detail != libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED:
            return
        uuid = dom.UUIDString()
        with self.lock:
            if uuid in self.said_stop:      # said at QEMU's STOP
                return
            self.said_stop.add(uuid)
            taps = self.taps.get(uuid)
        self._say_stop(uuid, dom.name(), taps)

    def _say_stop(self, uuid, name, taps, at=None):
        seen = time.time()
        # The counts first, here: every ms after STOP, a frame QEMU reads
        # and keeps (it never reaches the guest) would count as read.
        reads = tap_reads(taps, self.sysfs) if taps else {}
        threading.Thread(target=self.stopped, args=(uuid, name, reads, seen,
                                                    at),
                         daemon=True).start()

    def stopped(self, uuid, name, reads=None, seen=None, at=None):
        """Say it; the log says when the event came (`seen`, Unix time)
        and how long the controller took to answer: with QEMU's STOP
        (`at`, else looked up), where a late activation's time went."""
        with self.lock:
            c = self.clients.get(uuid)
        doc = {'host': self.host}
        if reads:
            doc['reads'] = reads
        if at is None:
            at = self.stop_time(uuid, seen)
        if at is not None:
            doc['stopped_at'] = round(at, 6)
        try:
            (c or self.client()).call(
                'POST', '/v1/migrations/%s/stopped' % uuid, doc)
        except Exception as e:      # the guest's first frame activates
            LOG.warning('saying guest %s stopped to leave failed: %s',
                        name, e)
            return
        if seen is None:
            LOG.info('guest %s (%s) stopped to leave: said', name, uuid)
            return
        LOG.info('guest %s (%s) stopped to leave: said (the event at '
                 '%.3f, %s, answered %.0f ms later)', name, uuid, seen,
                 'no STOP from QEMU' if at is None else
                 "%.0f ms after QEMU's STOP" % ((seen - at) * 1e3),
                 (time.time() - seen) * 1e3)

    def say_again(self, now=None):
        """Say each unsettled report again, every RETRY_EVERY seconds,
        until the controller settles it or RETRY_WINDOW has passed."""
        now = time.monotonic() if now is None else now
        with self.lock:
            due = [(u, e) for u, e in self.unsettled.items()
                   if now - e[3] >= RETRY_EVERY]
        for uuid, entry in due:
            doc, name, first, _last = entry
            if now - first > RETRY_WINDOW:
                LOG.warning('guest %s (%s): the controller never settled '
                            'its leaving; given up (place its vNICs with '
                            'vwctl vnics place)', name, uuid)
                with self.lock:
                    self.unsettled.pop(uuid, None)
                continue
            entry[3] = now
            self._post(uuid, name, doc, attempts=1)

    def leaving(self, dom, wait_for_peer=False):
        uuid = dom.UUIDString()
        # Reported: no lookup. The peer reads the TCP tables (a walk of
        # the kernel's whole hash), which poll() and each pass repeated:
        # half the agent's CPU, and its word late at STOP (issue 42).
        with self.lock:
            if uuid in self.reported:
                return
        pid = qemu_pid(dom.name())
        peer = stream_peer(pid) if pid else None
        if peer is None and wait_for_peer:
            return
        with self.lock:
            if uuid in self.reported:
                return
            self.reported.add(uuid)
        taps = taps_of(dom.XMLDesc(0))
        vnics = sorted(taps)
        if not vnics:
            return
        doc = {'host': self.host, 'vm_uuid': uuid, 'vnics': vnics}
        if peer:
            doc['to_address'] = peer
        now = time.monotonic()
        with self.lock:
            self.unsettled[uuid] = [doc, dom.name(), now, now]
            self.clients[uuid] = self.client()
            self.taps[uuid] = taps
        self._post(uuid, dom.name(), doc, self.post_retries)

    def _post(self, uuid, name, doc, attempts):
        for attempt in range(attempts):
            try:
                with self.lock:
                    c = self.clients.get(uuid) or self.client()
                r = c.call('POST', '/v1/migrations/departures', doc)
            except Exception as e:          # CliError, or worse: say why
                LOG.warning('reporting guest %s leaving failed (%d/%d): %s',
                            name, attempt + 1, attempts, e)
                time.sleep(0.2)
                continue
            LOG.info('guest %s (%s) leaving%s: reported; moved %s', name,
                     uuid, ' to %s' % doc['to_address']
                     if 'to_address' in doc else '',
                     ', '.join(r.get('moved', [])) or 'nothing yet')
            if r.get('settled', True):
                with self.lock:
                    self.unsettled.pop(uuid, None)
            return


class ConfigError(Exception):
    pass


def _settings(path):
    cp = configparser.ConfigParser(inline_comment_prefixes=(';', '#'))
    if not cp.read(path) or not cp.has_section('controller'):
        raise ConfigError('vw-host-agent: no [controller] section in %s'
                         % path)
    c = cp['controller']
    for key in ('url', 'token_file', 'host'):
        if not c.get(key):
            raise ConfigError('vw-host-agent: %s: [controller] %s is '
                             'required' % (path, key))
    url = c['url']
    if not c.getboolean('insecure_plaintext_lab', False) and any(
            not u.strip().lower().startswith('https://')
            for u in url.split(',')):
        raise ConfigError('vw-host-agent: %s: url must be https:// (plain '
                         'http only with insecure_plaintext_lab = yes)'
                         % path)
    return c


def main(argv=None):
    p = argparse.ArgumentParser(prog='vw-host-agent', description=__doc__.split(
        '\n\n')[0])
    version.add_argument(p)
    p.add_argument('--config', default=os.environ.get('VW_HOOK_CONFIG',
                                                      CONFIG),
                   help='the hook\'s settings file (default: %(default)s)')
    p.add_argument('--libvirt-uri', default='qemu:///system')
    p.add_argument('--poll', type=float, default=0.5, metavar='SECONDS',
                   help='read running domains\' jobs this often (default: '
                        '%(default)s)')
    p.add_argument('--stop-time', choices=('qmp', 'off'), default='qmp',
                   help="qmp: QEMU's STOP events, on a read-write libvirt "
                        'connection used for nothing else, time each leaving '
                        "guest's count at STOP (one frame a vNIC a move "
                        'otherwise lost); off: the read-only connection '
                        'alone (default: %(default)s)')
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format='%(asctime)s %(name)s %(levelname)s '
                               '%(message)s')
    try:
        c = _settings(args.config)
    except ConfigError as e:
        raise SystemExit(str(e)) from None
    import libvirt
    from virtualwire.cli.client import Client, read_token_file

    def client():
        # Read again each time, as the hook does: a new token or
        # controller address needs no restart.
        now = _settings(args.config)
        return Client(now['url'], read_token_file(now['token_file']),
                      timeout=now.getfloat('timeout', 3.0),
                      ca_cert=now.get('ca_cert') or None)
    # Libvirt prints every failed call; jobStats of an incoming migration
    # fails by design ("available only on the source host").
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    libvirt.virEventRegisterDefaultImpl()
    conn = libvirt.openReadOnly(args.libvirt_uri)
    agent = Agent(conn, client, c['host'])
    if args.stop_time == 'qmp':
        agent.rw = watch_qemu_stops(args.libvirt_uri, agent)
        agent.stop_events = agent.rw is not None
    watch_migrations(conn, agent.rw, agent)

    def events():
        while True:
            libvirt.virEventRunDefaultImpl()
    threading.Thread(target=events, daemon=True).start()
    LOG.info('watching %s for guests migrating out of %s', args.libvirt_uri,
             c['host'])
    while True:
        try:
            agent.poll()
        except libvirt.libvirtError as e:
            LOG.warning('reading jobs: %s', e)
        time.sleep(args.poll)


if __name__ == '__main__':
    main()
