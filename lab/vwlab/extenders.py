"""Running the extender agents of a lab, and linking extenders through the
controller's API (as an operator would: POST /v1/extender-links).

Each agent runs in its extender's namespace, talks to the controller's
southbound REST over the management network and to its rendezvous over
the public segment (through the site's NAT)."""
import json
import os
import subprocess
import sys

import requests

from vwlab.sites import CONTROLLER_PUBLIC_IP, RENDEZVOUS_PORT

SOUTHBOUND_PORT = 8781          # lab.start_controller's --southbound-rest
# What the lab tells its agents its links carry (--link-rate): the agent
# shapes nothing unless told, and a lab link is a userspace WireGuard
# daemon that carried 130-330 Mbit/s here (docs/benchmarks.rst, extender
# throughput), below which the wires' traffic keeps its place in the queue
# ahead of a migration's.
LAB_LINK_RATE = '80mbit'


def start_agent(x, link_rate=None, wireguard=None):
    """Run virtualwire-extender in the extender's namespace, with a token
    of its own: an extender credential, good only for its own reports and
    key rotation (the controller must be up). `link_rate`: the agent's
    --link-rate (None: the lab's LAB_LINK_RATE; '': links unshaped);
    `wireguard`: its --wireguard daemon (None: the agent's default)."""
    token_file = getattr(x, 'token_file', None) or \
        x.lab.credential('extender', x.name)
    x.token_file = token_file
    state = os.path.join(x.dir, 'extender')
    os.makedirs(state, exist_ok=True)
    log = open(os.path.join(state, 'agent.log'), 'a')
    p = subprocess.Popen(
        ['ip', 'netns', 'exec', x.ns, sys.executable, '-m',
         'virtualwire.extender.command', '--name', x.name, '--state-dir', state,
         '--controller', x.lab.southbound_urls(),
         '--token-file', token_file] + (
             ['--ca-cert', x.lab.pki.controller_ca] if x.lab.pki
             else ['--insecure-plaintext-lab']) + [
         '--rendezvous', '%s:%d' % (CONTROLLER_PUBLIC_IP, RENDEZVOUS_PORT),
         '--db', x.db, '--bridge', 'br-int',
         '--vswitchd-ctl', '%s/vswitchd.ctl' % x.dir,
         '--interval', '0.5',
         # Shorter than an operator's defaults (15 s, 30 s): the NAT
         # and relay tests wait on both.
         '--reprobe-after', '8', '--relay-recheck', '12'] +
        ['--link-rate', LAB_LINK_RATE if link_rate is None else link_rate] +
        (['--wireguard', wireguard] if wireguard else []),
        stdout=log, stderr=subprocess.STDOUT, env=x.env())
    with open(os.path.join(state, 'agent.pid'), 'w') as f:
        f.write('%d\n' % p.pid)
    x.agent = p
    return p


def start_agents(lab, link_rate=None, wireguard=None):
    for x in lab.extenders:
        if getattr(x, 'agent', None) is None or x.agent.poll() is not None:
            start_agent(x, link_rate, wireguard)


def api(lab, method, path, body=None):
    with open(lab.token_file) as f:
        token = f.read().strip()
    r = requests.request(method, lab.url + path, timeout=15,
                         verify=lab.verify,
                         headers={'Authorization': 'Bearer ' + token},
                         data=None if body is None else json.dumps(body))
    if r.status_code >= 300:
        raise RuntimeError('%s %s: %d %s' % (method, path, r.status_code,
                                             r.text))
    return r.json() if r.content else None


def connect(lab, pairs, link_rate=None, wireguard=None):
    """Start every extender's agent (once) and link the pairs."""
    start_agents(lab, link_rate, wireguard)
    have = {(k['a'], k['b']) for k in
            api(lab, 'GET', '/v1/extender-links')['links']}
    for a, b in pairs:
        if tuple(sorted((a, b))) not in have:
            api(lab, 'POST', '/v1/extender-links', {'a': a, 'b': b})


def link_view(lab, a, b):
    a, b = sorted((a, b))
    return next(k for k in api(lab, 'GET', '/v1/extender-links')['links']
                if (k['a'], k['b']) == (a, b))
