"""vwlab.hole_context: the switches' and the controller's lines around a
loss, timed against a reference."""
import time

from forensics.hole_context import around

OVS = """\
2026-11-23T01:34:20.420Z|00001|bridge|INFO|bridge br-int: added interface \
vnet3 on port 7
2026-11-23T01:34:20.446Z|00002|dpif_netdev(revalidator5)|DBG|flow_mod: \
ufid:a recirc_id(0),in_port(2),eth_type(0x0800), old_actions:tnl_pop(4), \
actions:1
2026-11-23T01:34:20.447Z|00003|ofproto|INFO|something else
2026-11-23T01:34:21.000Z|00004|dpif_netdev(revalidator5)|DBG|flow_mod: \
ufid:b recirc_id(0),in_port(5), old_actions:1, actions:tnl_pop(4)
""".replace('\\\n', '')
T0 = 1795397660.446         # 2026-11-23T01:34:20.446Z


def _ctl_line(t, text):
    # As logging writes asctime: local time, milliseconds after a comma.
    return '%s,%03d INFO virtualwire.control: %s' % (
        time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(int(t))),
        round((t - int(t)) * 1000), text)


def test_it_keeps_flow_changes_and_interface_events_near_the_hole():
    ctx = around(T0, T0 + 0.005, T0, {'h1': OVS})
    assert ctx['h1'] == [
        (-26.0, 'bridge: bridge br-int: added interface vnet3 on port 7'),
        (0.0, 'dpif_netdev(revalidator5): flow_mod tnl_pop(4) -> 1')]
    # Nothing of the change a second later, nor an unrelated module's line.
    assert 'controller' not in ctx


def test_it_reads_the_controllers_bundles_and_activations_only():
    log = '\n'.join([
        _ctl_line(T0 - 0.010, 'vNIC g activated on h2 (rarp)'),
        _ctl_line(T0 + 0.002, 'host h1: +2 ~1 -3 flows'),
        _ctl_line(T0 + 0.003, 'REST GET /v1/wires'),
        _ctl_line(T0 + 0.500, 'host h2: +1 ~0 -0 flows')])
    ctx = around(T0, T0 + 0.005, T0, {}, log)
    assert ctx['controller'] == [(-10.0, 'vNIC g activated on h2 (rarp)'),
                                 (2.0, 'host h1: +2 ~1 -3 flows')]
