"""Provider switch tables on a real Open vSwitch (issue 41, before the
controller knows switches): the flows `pipeline.switch` and the wires'
switch-port ends compute, as bytes, decoded by `ovs-ofctl ofp-parse`,
added to a lab host's bridge and run with `ofproto/trace -generate` (its
learn actions take effect). Prints what each frame does.

    PYTHONPATH=controller:lab .venv/bin/python bench/switch_trace.py

Found on OVS 3.1 with it: set_field of OXM's 32-bit in_port to 0 is
refused (OFPBAC_BAD_SET_ARGUMENT); NXM's 16-bit one is taken.
"""

import re
import subprocess

from vwlab import Lab
from virtualwire.core.model import Encap, Host, Location, Wire
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.switch import switch_flows
from virtualwire.southbound import openflow

FLOW = re.compile(r'ADD (?:(table:\d+) )?(\S+) cookie:(\S+) '
                  r'(?:send_flow_rem )?actions=(\S+)')


def as_text(flows, path):
    """Our flows as ovs-ofctl add-flows lines, through OVS's own decoding
    of the bytes we send."""
    raw = b''.join(openflow.to_bytes(openflow.flow_mod(f, 'add'), k + 1)
                   for k, f in enumerate(sorted(flows)))
    with open(path + '.of', 'wb') as f:
        f.write(raw)
    text = subprocess.run(['ovs-ofctl', 'ofp-parse', path + '.of'],
                          capture_output=True, text=True).stdout
    lines = ['%s,%s,cookie=%s,actions=%s' % (
        (t or 'table:0').replace(':', '='), match, cookie, acts)
        for t, match, cookie, acts in FLOW.findall(text)]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return len(lines)


def main():
    with Lab(1, collector=False) as lab:
        h = lab.hosts[0]
        ofports = {}
        for i in (1, 2, 3):
            vm = h.add_vm('sv%d' % i, [('sv%d-nic' % i, '10.5.0.%d/24' % i)])
            port = vm.nics['sv%d-nic' % i]['port']
            ofports[i] = int(h.vsctl('get', 'interface', port,
                                     'ofport').strip())
        sw = ProviderSwitch('web', 't', 3, h.name, ('p1', 'p2', 'p3'),
                            mac_limit=2)
        hosts = {h.name: Host(h.name, 1,
                              encaps=(Encap('gre', '198.19.0.1', 65000),))}
        flows = set(switch_flows(sw))
        for i in (1, 2, 3):
            end = sw.end('p%d' % i)
            locs = {'v%d' % i: Location(h.name, ofports[i]),
                    end: Location(h.name, i, 'switchport', switch=3)}
            for fs in fl.wire_flows(Wire(100 + i, 'v%d' % i, end), hosts,
                                    locs).values():
                flows |= fs
        path = '%s/switch-flows.txt' % lab.dir
        print('%d flows added' % as_text(flows, path))
        h.ofctl('add-flows', path)

        def trace(i, src, dst):
            out = h.appctl('ofproto/trace', 'br-int', 'in_port=%d,dl_src=%s,'
                           'dl_dst=%s' % (ofports[i], src, dst), '-generate')
            m = re.search(r'Datapath actions: (.*)', out)
            return m.group(1) if m else out[-800:]

        def mac(k):
            return '02:00:00:00:00:%02x' % k
        print('ofports', ofports, '(the trace names datapath ports)')
        print('broadcast from 1:', trace(1, mac(1), 'ff:ff:ff:ff:ff:ff'))
        print('from 2 to mac 1 (learned):', trace(2, mac(2), mac(1)))
        print('from 3 to mac 2:', trace(3, mac(3), mac(2)))
        print('from 1 to mac 1 (hairpin):', trace(1, mac(1), mac(1)))
        for k in (10, 11, 12):
            trace(1, mac(k), 'ff:ff:ff:ff:ff:ff')
        print('port 1 limit 2, to mac 0x0a:', trace(3, mac(3), mac(10)))
        print('port 1 limit 2, to mac 0x12:', trace(3, mac(3), mac(0x12)))
        print('a group source:', trace(1, '01:00:5e:00:00:01',
                                       'ff:ff:ff:ff:ff:ff'))
        print(h.ofctl('dump-flows', 'table=2'))


if __name__ == '__main__':
    main()
