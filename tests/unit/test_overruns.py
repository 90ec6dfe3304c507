"""Reading the kernel's drop counts of ovs-vswitchd's packet sockets."""
from vwlab.overruns import parse_ss

SS = """\
Netid State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess
p_raw UNCONN 0 0 *:ul0 * users:(("ovs-vswitchd",pid=1,fd=41)) skmem:(r0,rb212992,...,o176,bl0,d17)
p_raw UNCONN 0 0 [0]:* * users:(("ovs-vswitchd",pid=1,fd=42)) skmem:(r0,rb212992,...,o0,bl0,d3)
p_raw UNCONN 0 0 *:vnet4 * users:(("ovs-vswitchd",pid=1,fd=47)) skmem:(r0,rb212992,...,o176,bl0,d0)
p_raw UNCONN 0 0 *:ul0 * users:(("tcpdump",pid=9,fd=3)) skmem:(r0,rb212992,...,o0,bl0,d99)
"""


def test_drops_per_interface_of_vswitchd_sockets_only():
    # tcpdump's own drops and the unbound socket are not the switch's.
    assert parse_ss(SS) == {'ul0': 17, 'vnet4': 0}
