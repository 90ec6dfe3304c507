"""Each member of the intent database, asked what it says of itself.

The IDL talks to one member at a time (a cluster's leader), so a
controller that reaches the database says nothing of the others: a
three-member cluster with one member down still takes writes, and
nobody notices until a second one fails and writes stop. So every
listed member is asked, every few seconds on a connection of its own,
for its `_Server` database's row of ours (ovsdb-server(5)): a member is
up when it answers and is connected to its cluster; `leader` says
whether it is the RAFT leader (a standalone server is its own).
Exported per member (`metrics.exporter.member_families`) for the
VirtualWireIntentDbMemberDown alert."""
import logging
import time

from os_ken.lib import hub

from virtualwire.ovsdb import rawrpc
from virtualwire.store.errors import StoreError

LOG = logging.getLogger(__name__)
DB = 'VirtualWire'
EVERY = 5.0
TIMEOUT = 2.0
_ASK = [{'op': 'select', 'table': 'Database',
         'where': [['name', '==', DB]],
         'columns': ['connected', 'leader', 'model']}]


def label(member):
    """The member as the operator wrote it (ssl:, not our vwdb-ssl:)."""
    return 'ssl:' + member[len('vwdb-ssl:'):] \
        if member.startswith('vwdb-ssl:') else member


def judge(rows):
    """Pure: (up, leader, why) from the member's `_Server` rows."""
    if not rows:
        return False, False, 'it does not serve %s' % DB
    r = rows[0]
    if not r.get('connected'):
        return False, False, 'it is not connected to its cluster (%s)' \
            % r.get('model', '?')
    return True, bool(r.get('leader')), ''


class MemberProbe:
    def __init__(self, remote, every=EVERY, ask=rawrpc.transact,
                 clock=time.time):
        self.members = [m for m in remote.split(',') if m]
        self.every, self.ask, self.clock = every, ask, clock
        self.state: dict = {}          # replaced whole: readers need no lock
        self._thread = None

    def check_once(self):
        state = {}
        for m in self.members:
            try:
                rows = self.ask(m, '_Server', _ASK, timeout=TIMEOUT)[0]['rows']
                up, leader, why = judge(rows)
            except (StoreError, OSError, KeyError, IndexError) as e:
                up, leader, why = False, False, str(e) or type(e).__name__
            was = self.state.get(label(m))
            if was is not None and was['up'] != up:
                LOG.warning('intent database member %s is %s%s', label(m),
                            'up' if up else 'down', ': ' + why if why else '')
            state[label(m)] = {'up': up, 'leader': leader, 'why': why,
                               'checked_at': self.clock()}
        self.state = state
        return state

    def _run(self):
        while True:
            try:
                self.check_once()
            except Exception:                   # never stop watching
                LOG.exception('probing the intent database members')
            hub.sleep(self.every)

    def start(self):
        self._thread = hub.spawn(self._run)
        return self

    def stop(self):
        if self._thread is not None:
            hub.kill(self._thread)
            self._thread = None
