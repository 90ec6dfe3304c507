"""Running the extender agents of a lab and telling them their links.

Until the controller hands links out itself, the lab plays its part here:
it reads each extender's certificate fingerprint from the extender's
OVSDB (published by the agent) and writes each agent the links it should
keep: the peer's pinned fingerprint, the peer's public address (its NAT's
WAN address; with an endpoint-independent NAT the port is the one the
peer binds), which side speaks TLS server.
"""
import json
import os
import subprocess
import sys
import time

from vwlab.shell import LabError, sh

BASE_PORT = 1194


def local_port(peer):
    """The UDP port an extender binds for its link to `peer` (one per
    link, so one NAT mapping per link)."""
    return BASE_PORT + peer.index - peer.lab.n_hosts


def start_agent(x):
    """Run virtualwire-extender in the extender's namespace."""
    state = os.path.join(x.dir, 'extender')
    os.makedirs(state, exist_ok=True)
    links = os.path.join(state, 'links.json')
    if not os.path.exists(links):
        write_links(x, [])
    log = open(os.path.join(state, 'agent.log'), 'a')
    p = subprocess.Popen(
        ['ip', 'netns', 'exec', x.ns, sys.executable, '-m',
         'virtualwire.extender.agent', '--name', x.name, '--state-dir', state,
         '--links', links, '--db', x.db,
         '--vswitchd-ctl', '%s/vswitchd.ctl' % x.dir, '--interval', '0.5'],
        stdout=log, stderr=subprocess.STDOUT, env=x.env())
    with open(os.path.join(state, 'agent.pid'), 'w') as f:
        f.write('%d\n' % p.pid)
    x.agent = p
    return p


def fingerprint(x, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        out = sh(['ovs-vsctl', '--db=' + x.db, '--if-exists', 'get',
                  'bridge', 'br-int', 'external_ids:vw-fingerprint'],
                 check=False).strip().strip('"')
        if out:
            return out
        time.sleep(0.2)
    raise LabError('extender %s published no fingerprint' % x.name)


def write_links(x, specs):
    path = os.path.join(x.dir, 'extender', 'links.json')
    with open(path + '.tmp', 'w') as f:
        json.dump({'links': specs}, f, indent=1)
    os.replace(path + '.tmp', path)


def link_specs(lab, pairs):
    """{extender name: [LinkSpec dict]} for links between extender pairs."""
    xs = {x.name: x for x in lab.extenders}
    fps = {n: fingerprint(x) for n, x in xs.items()}
    out = {n: [] for n in xs}
    for a, b in pairs:
        for me, peer in ((xs[a], xs[b]), (xs[b], xs[a])):
            out[me.name].append({
                'peer': peer.name, 'peer_fingerprint': fps[peer.name],
                'remote': lab.clouds.public_ip(peer.site),
                'remote_port': local_port(me), 'local_port': local_port(peer),
                'tls': 'server' if me.name < peer.name else 'client',
                'peer_link_ip': peer.link_ip})
    return out


def connect(lab, pairs):
    """Start every extender's agent (once) and give it its links."""
    for x in lab.extenders:
        if getattr(x, 'agent', None) is None or x.agent.poll() is not None:
            start_agent(x)
    for name, specs in link_specs(lab, pairs).items():
        write_links(lab.host(name), specs)
