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
    peer = wireguard.parse_dump(DUMP % (KEY['xa'], KEY['xb'], 1000, 92, 148))
    assert peer == {KEY['xb']: {'endpoint': '203.0.113.12:51820',
                                'handshake': 1000.0, 'rx_bytes': 92,
                                'tx_bytes': 148}}
    s = wireguard.judge(LinkState(), peer[KEY['xb']], KEY['xb'], 1001.0)
    assert s.up and s.since == 1001.0 and s.peer_key == KEY['xb']
    # Keepalives keep it up; silence for DEAD_AFTER takes it down.
    s = wireguard.judge(s, dict(peer[KEY['xb']], rx_bytes=124), KEY['xb'],
                        1003.0)
    assert s.up and s.since == 1001.0 and s.heard == 1003.0
    s = wireguard.judge(s, dict(peer[KEY['xb']], rx_bytes=124), KEY['xb'],
                        1003.0 + wireguard.DEAD_AFTER)
    assert s.state == 'down' and s.since == 1003.0 + wireguard.DEAD_AFTER
    # Never a handshake: connecting; no such peer: down.
    assert wireguard.judge(LinkState(), dict(peer[KEY['xb']], handshake=0),
                           KEY['xb'], 5.0).state == 'connecting'
    assert wireguard.judge(s, None, KEY['xb'], 2000.0).state == 'down'


def test_a_new_peer_key_replaces_the_old_in_one_call():
    args = wireguard.peer_args(spec(peer_key=KEY['new']), KEY['xb'])
    assert args[:2] == ['peer', KEY['new']] and \
        args[-3:] == ['peer', KEY['xb'], 'remove']
    assert 'remove' not in wireguard.peer_args(spec(), KEY['xb'])
    # Device names: unique per (extender, peer) across namespaces.
    assert spec().wg_dev('xa') != spec().wg_dev('xr')
    assert len(spec().wg_dev('xa')) <= 15 and spec().dev == 'xl-xb'


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
    assert sw.calls == [('private-key', agent.key_file)]
    # The peer's own new key is taken in place, its old one removed.
    agent.want = {'xb': spec(peer_key=KEY['new'])}
    agent.reconcile()
    assert sw.calls[-1][:2] == ('peer', KEY['new']) and \
        sw.calls[-1][-3:] == ('peer', KEY['xb'], 'remove')
