"""One extender link's WireGuard side, without a daemon: what `wg show
dump` says becomes a link state, and a key rotation switches each link to
the new key only once its peer uses it."""
import base64

from virtualwire.extender import wireguard
from virtualwire.extender.agent import Agent
from virtualwire.extender.wireguard import LinkSpec, LinkState

KEY = {n: base64.b64encode(bytes([i]) * 32).decode()
       for i, n in enumerate(('xa', 'xb', 'new'), 1)}
DUMP = ('cHJpdg==\t%s\t51820\toff\n'
        '%s\t(none)\t203.0.113.12:51820\t169.254.16.12/32\t%d\t%d\t%d\t1\n')


def spec(**kw):
    d = dict(peer='xb', peer_key=KEY['xb'], remote='203.0.113.12',
             remote_port=51820, local_port=51820, peer_link_ip='100.64.0.12',
             inner='169.254.16.11', peer_inner='169.254.16.12',
             vni=11 << 12 | 12)
    d.update(kw)
    return LinkSpec(**d)


def test_dump_and_judge_follow_the_peer():
    T = 1795540000.0
    peer = wireguard.parse_dump(DUMP % (KEY['xa'], KEY['xb'], T, 92, 148))
    assert peer == {KEY['xb']: {'endpoint': '203.0.113.12:51820',
                                'handshake': T, 'rx_bytes': 92,
                                'tx_bytes': 148}}
    s = wireguard.judge(LinkState(), peer[KEY['xb']], KEY['xb'], T + 1)
    assert s.up and s.since == T + 1 and s.peer_key == KEY['xb']
    # Keepalives keep it up; silence for DEAD_AFTER takes it down.
    s = wireguard.judge(s, dict(peer[KEY['xb']], rx_bytes=124), KEY['xb'],
                        T + 3)
    assert s.up and s.since == T + 1 and s.heard == T + 3
    s = wireguard.judge(s, dict(peer[KEY['xb']], rx_bytes=124), KEY['xb'],
                        T + 3 + wireguard.DEAD_AFTER)
    assert s.state == 'down' and s.since == T + 3 + wireguard.DEAD_AFTER
    # A session older than WireGuard lets one live: down.
    assert wireguard.judge(LinkState(), peer[KEY['xb']], KEY['xb'],
                           T + wireguard.SESSION_LIFE).state == 'down'
    # boringtun says how many whole seconds ago instead of when: 0 with
    # data received is a handshake under a second ago, not none.
    s = wireguard.judge(LinkState(), dict(peer[KEY['xb']], handshake=4),
                        KEY['xb'], T, ages=True)
    assert s.up and s.handshake == T - 4
    s = wireguard.judge(LinkState(), dict(peer[KEY['xb']], handshake=0),
                        KEY['xb'], T, ages=True)
    assert s.up and s.handshake == T
    assert wireguard.judge(LinkState(), dict(peer[KEY['xb']], handshake=0,
                                             rx_bytes=0), KEY['xb'], T,
                           ages=True).state == 'connecting'
    # Never a handshake: connecting; no such peer: down.
    assert wireguard.judge(LinkState(), dict(peer[KEY['xb']], handshake=0),
                           KEY['xb'], T).state == 'connecting'
    assert wireguard.judge(s, None, KEY['xb'], T + 1000).state == 'down'


def test_a_peer_is_added_with_its_endpoint_and_tunnel_address():
    assert wireguard.peer_args(spec(remote='203.0.113.99'))[:4] == [
        'peer', KEY['xb'], 'endpoint', '203.0.113.99:51820']
    # Device names: unique per (extender, peer) across namespaces.
    assert spec().wg_dev('xa') != spec().wg_dev('xr')
    assert len(spec().wg_dev('xa')) <= 15 and spec().dev == 'xl-xb'


def test_link_devices_of_peers_sharing_a_long_prefix_are_distinct():
    names = ['extender-west-1', 'extender-west-2', 'x' * 12, 'x' * 13,
             'x' * 64]
    devs = [spec(peer=n).dev for n in names]
    assert len(set(devs)) == len(names), devs
    assert all(len(d) <= 15 for d in devs)
    assert spec(peer='x' * 12).dev == 'xl-' + 'x' * 12    # readable if it fits


class Switch:
    def __init__(self):
        self.calls = []

    def wg(self, dev, *args):
        self.calls.append(args)

    def ofport(self, dev):
        return 7

    def set_flows(self, ports):
        pass


class Proc:
    def poll(self):
        return None


def test_our_new_key_waits_for_the_peer_to_use_it(tmp_path):
    sw = Switch()
    agent = Agent('xa', str(tmp_path), None, ('127.0.0.1', 9), sw)
    agent.procs['xb'] = (spec(), Proc())
    agent.gen['xb'] = 0
    agent.sw.publish = lambda *a: None
    agent.rotate()
    assert agent.key_gen == 1
    # Told before our report carried the new key: nothing yet.
    agent.want = {'xb': spec(pinned=True)}
    agent.reconcile()
    assert sw.calls == []
    # A reply to a report with the new key, peer not using it yet: wait.
    agent.reply_gen = 1
    agent.want = {'xb': spec(pinned=False)}
    agent.reconcile()
    assert sw.calls == []
    # The peer uses it: switch this link, once.
    agent.want = {'xb': spec(pinned=True)}
    agent.reconcile()
    agent.reconcile()
    assert sw.calls[0] == ('private-key', agent.key_file)
    # ... with the peer entry made again (no old session lingers).
    assert sw.calls[1] == ('peer', KEY['xb'], 'remove')
    assert sw.calls[2][:2] == ('peer', KEY['xb']) and len(sw.calls) == 3
    # The peer's own new key is taken in place, its old one removed.
    # The peer's own new key: its old entry removed, then the new one
    # added, in two calls (boringtun cannot do both in one).
    agent.want = {'xb': spec(peer_key=KEY['new'])}
    agent.reconcile()
    assert sw.calls[-2] == ('peer', KEY['xb'], 'remove')
    assert sw.calls[-1][:2] == ('peer', KEY['new'])
    # A new endpoint alone: the same.
    agent.want = {'xb': spec(peer_key=KEY['new'], remote='203.0.113.99')}
    agent.reconcile()
    assert sw.calls[-2] == ('peer', KEY['new'], 'remove')
    assert '203.0.113.99:51820' in sw.calls[-1]
