"""The loss audit gives each lost datagram of a migration stream one cause,
from where the captures saw it."""
from vwlab.capture import Datagram
from forensics.loss_audit import (explain, guest_state, handed_to_guest,
                              last_seen, ovs_glitches, summary, tunnel_dips)

G, P, PORT = '10.0.0.1', '10.0.0.2', 7000
TAPS = {('h1', 'vnet0'), ('h2', 'vnet5')}
UNDERLAY = {('h1', 'br-phy'), ('h2', 'br-phy')}
WIN = [(10.0, 'h1', 10.2, 'h2')]        # STOP on h1 at 10.0, RESUME on h2


def req(q, t, host, iface, outgoing=True, key=None):
    return Datagram(t, host, iface, outgoing, P, G, 40000, PORT,
                    q.to_bytes(8, 'big') + bytes(8), key)


def rep(q, t, host, iface, outgoing=False):
    return Datagram(t, host, iface, outgoing, G, P, PORT, 40000,
                    q.to_bytes(8, 'big') + bytes(8), None)


def causes(lost, grams, margin=0.005, glitches=None, overruns=None):
    return [(v.seq, v.cause) for v in explain(
        lost, grams, G, P, PORT, TAPS, UNDERLAY, WIN, margin, glitches,
        overruns)]


def test_where_the_guest_is():
    assert [guest_state(WIN, t) for t in (9.0, 10.1, 10.3)] == \
        ['h1', None, 'h2']


def test_delivered_to_the_running_source_and_unanswered_is_the_guests():
    # Sent 15 ms before STOP (slow host), reached the tap 1 ms before it.
    assert causes([(1, 9.985)], [req(1, 9.999, 'h1', 'vnet0')]) == \
        [(1, 'guest')]


def test_undelivered_is_judged_by_send_time_against_the_pause():
    lost = [(1, 9.990), (2, 10.1), (3, 10.204), (4, 10.3)]
    assert causes(lost, []) == [(1, 'network'), (2, 'pause'),
                                (3, 'pause'), (4, 'network')]


def test_arriving_at_the_source_while_paused_is_the_pause():
    assert causes([(1, 9.99)], [req(1, 10.05, 'h1', 'vnet0')]) == \
        [(1, 'pause')]


def test_a_copy_left_on_the_source_after_resume_does_not_excuse_it():
    # Dual-sent copy reached the old tap after RESUME, the new one never.
    assert causes([(1, 10.25)], [req(1, 10.251, 'h1', 'vnet0')]) == \
        [(1, 'network')]


def test_delivered_after_resume_and_unanswered_is_the_guests():
    assert causes([(1, 10.25)], [req(1, 10.251, 'h2', 'vnet5')]) == \
        [(1, 'guest')]


def test_an_answer_lost_on_its_way_back_is_the_networks():
    grams = [req(1, 10.251, 'h2', 'vnet5'), rep(1, 10.252, 'h2', 'vnet5')]
    assert causes([(1, 10.25)], grams) == [(1, 'network')]


def test_frames_on_other_interfaces_or_streams_do_not_count():
    grams = [req(1, 9.5, 'h1', 'vwveth3'),            # the far end's veth
             req(1, 9.5, 'h1', 'vnet0', outgoing=False),
             Datagram(9.5, 'h1', 'vnet0', True, '10.9.9.9', G, 1, PORT,
                      (1).to_bytes(8, 'big'), None)]
    assert causes([(1, 9.49)], grams) == [(1, 'network')]


def test_a_tunnel_frame_handed_to_the_underlay_kernel_is_ovs_decap():
    grams = [req(1, 9.5, 'h1', 'br-phy', outgoing=False, key=77)]
    assert causes([(1, 9.49)], grams) == [(1, 'ovs-race')]


def test_a_hole_the_log_ties_to_the_ovs_race_in_part_is_the_races():
    grams = [req(3, 8.003, 'h1', 'br-phy', outgoing=False, key=77)]
    lost = [(1, 8.001), (2, 8.002), (3, 8.003), (5, 8.005)]
    assert causes(lost, grams) == [(1, 'ovs-race'), (2, 'ovs-race'),
                                   (3, 'ovs-race'), (5, 'network')]


def test_summary_groups_runs_relative_to_stop():
    vs = explain([(1, 9.99), (2, 9.991), (3, 10.1)], [], G, P, PORT, TAPS,
                 UNDERLAY, WIN, 0.005)
    assert summary(vs, WIN) == {'network': [(2, -10.0, -9.0)],
                                'pause': [(1, 100.0, 100.0)],
                                'network last seen': [('never captured', 2)]}


def test_a_network_loss_says_where_it_was_captured_last():
    # Crossed the far end's veth and the source's underlay, never the tap.
    grams = [req(1, 9.5, 'h3', 'vwveth3', outgoing=False),
             req(1, 9.501, 'h1', 'br-phy', outgoing=False)]
    v, = explain([(1, 9.49)], grams, G, P, PORT, TAPS, UNDERLAY, WIN, 0.005)
    assert (v.cause, v.seen) == ('network', 'h1 br-phy in')
    assert summary([v], WIN)['network last seen'] == [('h1 br-phy in', 1)]


# As OVS 3.1's vswitchd logs them with dpif_netdev at debug level (cut).
PUSH = ('tnl_push(tnl_port(4),header(size=42,type=3,eth(dst=1a:1a:1b:f4:59:40'
        '),ipv4(src=198.19.0.11,dst=198.19.0.13,proto=47)),out_port(2))')
LOG = """\
2026-11-23T01:34:20.446Z|00001|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:a \
recirc_id(0),in_port(2),eth_type(0x0800), old_actions:tnl_pop(4), actions:1
2026-11-23T01:34:20.446Z|00002|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:b \
recirc_id(0),in_port(5),eth_type(0x0800), old_actions:%(push)s, actions:drop
2026-11-23T01:34:20.452Z|00003|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:a \
recirc_id(0),in_port(2),eth_type(0x0800), old_actions:1, actions:tnl_pop(4)
2026-11-23T01:34:20.452Z|00004|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:b \
recirc_id(0),in_port(5),eth_type(0x0800), old_actions:drop, actions:%(push)s
2026-11-23T01:34:30.000Z|00005|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:c \
recirc_id(0),in_port(5),eth_type(0x0800), old_actions:%(push)s, actions:3
2026-11-23T01:34:31.000Z|00006|dpif_netdev(revalidator5)|DBG|flow_mod: ufid:c \
recirc_id(0),in_port(5),eth_type(0x0800), old_actions:3, actions:%(push)s
""".replace('\\\n', '') % {'push': PUSH}
T0 = 1795397660.446         # 2026-11-23T01:34:20.446Z


def test_a_tunnel_flow_dropped_and_restored_within_ms_is_a_glitch():
    (s, e), = ovs_glitches(LOG)
    assert abs(s - T0) < 1e-6 and abs(e - (T0 + 0.006)) < 1e-6
    # The wire collapsed at :30 and expanded at :31 again: a rewire, not a
    # glitch (it did not undo itself within FLIP_BACK).


def test_a_send_to_two_tunnels_briefly_to_one_is_a_dip_not_a_glitch():
    two = PUSH + ',' + PUSH.replace('tnl_port(4)', 'tnl_port(6)')
    log = ("2026-11-23T01:34:20.446Z|00001|dpif_netdev(revalidator5)|DBG|"
           "flow_mod: ufid:d recirc_id(0),in_port(5), old_actions:%s, "
           "actions:%s\n"
           "2026-11-23T01:34:20.449Z|00002|dpif_netdev(revalidator5)|DBG|"
           "flow_mod: ufid:d recirc_id(0),in_port(5), old_actions:%s, "
           "actions:%s\n") % (two, PUSH, PUSH, two)
    assert ovs_glitches(log) == []          # a tunnel remained throughout
    (s, e), = tunnel_dips(log)
    assert abs(s - T0) < 1e-6 and abs(e - (T0 + 0.003)) < 1e-6
    # And the one-tunnel glitches are dips too; the rewire is not.
    assert tunnel_dips(LOG) == ovs_glitches(LOG)


def test_a_datagram_that_vanished_in_a_glitching_host_is_ovs_race():
    grams = [req(1, T0 + 0.002, 'h1', 'vwveth3', outgoing=False)]
    glitches = {'h1': ovs_glitches(LOG)}
    win = [(T0 + 5, 'h1', T0 + 5.2, 'h2')]
    v, = explain([(1, T0 + 0.001)], grams, G, P, PORT, TAPS, UNDERLAY, win,
                 0.005, glitches)
    assert v.cause == 'ovs-race'
    # The same loss on a host whose switch did not glitch is the network's.
    v, = explain([(1, T0 + 0.001)], grams, G, P, PORT, TAPS, UNDERLAY, win,
                 0.005, {'h2': glitches['h1']})
    assert v.cause == 'network'


def test_reading_a_capture_for_no_datagrams_reads_nothing(tmp_path):
    from vwlab.capture import read_pcap
    assert read_pcap(str(tmp_path / 'absent.pcap'), 'h1', {}, set()) == []


def test_a_loss_where_the_kernel_counted_switch_drops_is_an_overrun():
    # Three arrived on h1's underlay; vswitchd's socket there overflowed
    # twice: two overruns, the third stays the network's.
    grams = [req(q, 9.5 + q / 1e3, 'h1', 'br-phy', outgoing=False)
             for q in (1, 2, 3)]
    lost = [(q, 9.49 + q / 1e3) for q in (1, 2, 3)]
    assert causes(lost, grams, overruns={('h1', 'br-phy'): 2}) == \
        [(1, 'overrun'), (2, 'overrun'), (3, 'network')]
    # Drops on another interface excuse nothing here.
    assert causes(lost, grams, overruns={('h2', 'br-phy'): 5}) == \
        [(1, 'network'), (2, 'network'), (3, 'network')]


def test_where_lost_datagrams_were_seen_last():
    grams = [req(1, 10.05, 'h2', 'br-phy', outgoing=False, key=7),
             req(2, 10.06, 'h1', 'br-phy', outgoing=False, key=7),
             req(2, 10.061, 'h1', 'vnet0'),
             rep(3, 10.07, 'h2', 'vnet5')]   # an answer is not the datagram
    assert last_seen({1, 2, 3}, grams, G) == {
        'h2 br-phy in': 1, 'h1 vnet0 out': 1, '': 1}


def test_a_routed_datagram_last_handed_into_the_guest_is_the_guests():
    # A router guest: the request goes in on vnet5 and out on vnet6, the
    # reply back in on vnet6 and out on vnet5.
    taps = {('h2', 'vnet5'), ('h2', 'vnet6')}
    grams = [req(1, 11.0, 'h2', 'vnet5'),                 # in, never out
             req(2, 11.1, 'h2', 'vnet5'),                 # in, out, and
             req(2, 11.101, 'h2', 'vnet6', outgoing=False),
             rep(2, 11.102, 'h2', 'vnet6', outgoing=True),  # reply in
             req(3, 11.2, 'h2', 'vnet5'),                 # through both ways:
             req(3, 11.201, 'h2', 'vnet6', outgoing=False),  # lost beyond
             req(4, 11.3, 'h1', 'br-phy', outgoing=False)]   # never reached
    lost = [(1, 10.99), (2, 11.09), (3, 11.19), (4, 11.29), (5, 11.39),
            (1, 9.0)]
    assert handed_to_guest(lost, grams, taps, after=10.2) == [
        (1, 10.99), (2, 11.09)]
    # Before `after` (the guest paused or on its source) nothing is.
    assert handed_to_guest(lost, grams, taps, after=12.0) == []
