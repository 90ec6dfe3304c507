"""The collector reads a switch only as the host its certificate names
(issue 39, point 4): before, any certificate of the CA could connect as
another host's datapath id, replace the real switch's poller and credit
that host's wires as it liked."""
from types import SimpleNamespace

from virtualwire.collectord.fleet import Fleet
from virtualwire.collectord.switch_trust import SwitchTrust
from virtualwire.core import ids
from virtualwire.tls import Identity
from virtualwire.store.revocations import certificate_entry, host_entry

CID = 7
A_IN = ids.wire_cookie(CID) | ids.ROLE_ENTERS_A


def stat(cookie, packets):
    return SimpleNamespace(table_id=0, priority=100, match={'in_port': 1},
                           cookie=cookie, packet_count=packets,
                           byte_count=packets * 100)


def cert(name, fp='ab' * 32, not_before=900.0):
    return Identity.of({name}, fp, not_before)


class World:
    def __init__(self):
        self.t, self.xid, self.hung_up = 1000.0, 0, []
        self.fleet = Fleet(self.send, interval=2.0, clock=lambda: self.t,
                           rng=lambda: 0.0, trust=SwitchTrust(
                               hang_up=self.hung_up.append,
                               require_identity=True, clock=lambda: self.t))
        self.fleet.wire_events([(CID, 't0')])
        self.fleet.learn_names({1: 'h1', 2: 'h2'})

    def send(self, conn, msg):
        self.xid += 1
        return self.xid

    def read(self, dpid, conn, packets):
        s = self.fleet.switches[dpid]
        self.t += 3
        self.fleet.tick()
        self.fleet.reply(dpid, conn, s.xid, [stat(A_IN, packets)], False)

    def entered(self):
        return self.fleet.counters.wire(CID)['a_to_b']['entered_packets']

    def refusals(self):
        return [r['why'] for r in self.fleet.status()['recent_refusals']]


def test_another_hosts_certificate_cannot_take_a_switchs_reading():
    w = World()
    f = w.fleet
    assert f.switch_up(1, 'h1-conn', cert('h1')) is not None
    w.read(1, 'h1-conn', 10)
    # h2's certificate claiming h1's datapath id: hung up, not read, and
    # the real switch keeps its poller.
    assert f.switch_up(1, 'thief', cert('h2')) is None
    assert w.hung_up == ['thief'] and f.switches[1].conn == 'h1-conn'
    assert w.refusals() == ["datapath 0000000000000001 is host h1's but "
                            "the certificate names h2"]
    assert f.status()['switches_refused'] == 1
    w.read(1, 'h1-conn', 15)
    assert w.entered() == 15
    # No certificate at all (the collector runs TLS): refused too.
    assert f.switch_up(2, 'plain', None) is None
    assert w.refusals()[-1] == 'no verified certificate'


def test_a_switch_named_later_is_checked_when_its_host_is_known():
    w = World()
    f = w.fleet
    f.switch_up(3, 'early', cert('h2'))       # datapath 3: no host row yet
    assert f.unnamed() == [3] and w.hung_up == []
    f.learn_names({3: 'h3'})
    assert 3 not in f.switches and w.hung_up == ['early']
    assert w.refusals() == ["datapath 0000000000000003 is host h3's but "
                            "the certificate names h2"]


def test_the_same_hosts_reconnect_replaces_the_old_connection():
    w = World()
    f = w.fleet
    f.switch_up(1, 'first', cert('h1'))
    f.switch_up(1, 'again', cert('h1'))
    assert f.switches[1].conn == 'again' and w.hung_up == ['first']
    assert f.status()['switches_refused'] == 0


def test_revocation_hangs_up_at_once_and_refuses_after():
    w = World()
    f = w.fleet
    f.switch_up(1, 'h1-conn', cert('h1', fp='cd' * 32))
    f.switch_up(2, 'h2-conn', cert('h2'))
    f.on_revocations([certificate_entry('h1', 'cd' * 32, 'key stolen',
                                        now=950.0)])
    assert w.hung_up == ['h1-conn'] and sorted(f.switches) == [2]
    assert f.switch_up(1, 'h1-again', cert('h1', fp='cd' * 32)) is None
    # A new certificate for h1 is read; a host revocation takes back
    # every certificate of h2 from before it.
    assert f.switch_up(1, 'h1-new', cert('h1', fp='ef' * 32)) is not None
    f.on_revocations([host_entry('h2', 'decommissioned', now=990.0)])
    assert 2 not in f.switches and w.hung_up[-1] == 'h2-conn'
    assert 'host h2 was revoked' in w.refusals()[-1]
    assert f.switch_up(2, 'h2-newer', cert('h2', fp='01' * 32,
                                          not_before=995.0)) is not None
