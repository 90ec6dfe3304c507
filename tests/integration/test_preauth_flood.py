"""Floods before authentication on the real controller (issue 39): from a
namespace on the management network holding 150 addresses, an attacker
opens 25,000 connections to the OpenFlow and southbound REST ports and
holds them, then drip-feeds 1,000 TLS handshakes and 1,000 request heads
a byte a second, then runs the controller out of descriptors. Meanwhile a
1 kHz stream crosses a victim's wire. The listeners live, the switches
stay connected, a normal request is answered within 1 s, every drip-fed
connection is closed at the deadline while it was still sending, and the
stream loses nothing."""
import json
import os
import re
import subprocess
import sys

from vwtest import wait_until
from vwlab import rogue as rogue_mod
from vwlab.libvirt_host import HOOK_PORT
from vwlab.preauth_flood import TIMED_GET, kept_out as slow
from vwlab.shell import CONTROLLER_IP, MGMT_NET, sh

DEADLINE = 10.0                 # virtualwire.listen_guard.DEADLINE
SOURCES = '%s.100-249' % MGMT_NET


def refusals(api):
    text = api.req('GET', '/metrics').text
    return {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
        r'^virtualwire_listener_refused_total\{listener="([^"]+)",'
        r'reason="([^"]+)"\} (\S+)$', text, re.M)}


def log_tail(lab, n=40):
    with open(os.path.join(lab.state_dir(0), 'controller.log'),
              errors='replace') as f:
        return ''.join(f.readlines()[-n:])


def grew(after, before, key):
    return after.get(key, 0.0) - before.get(key, 0.0)


def attack(ns, mode, target, n, ready, *extra):
    # Niced: on a real network the attacker's CPU is not the server's;
    # here the two share two cores.
    return subprocess.Popen(
        ['ip', 'netns', 'exec', ns, 'nice', '-n', '19', sys.executable, '-m',
         'vwlab.preauth_flood', mode, target, '--n', str(n), '--sources',
         SOURCES, '--ready-file', ready] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(p, timeout):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return json.loads(out)


def timed_gets(lab, n):
    """n requests from h1 (a hypervisor) to the southbound REST, and n
    from here to the operators' REST: [(status, seconds)]."""
    with open(lab.token_file) as f:
        token = f.read().strip()
    p = subprocess.run(
        ['ip', 'netns', 'exec', lab.host('h1').ns, sys.executable, '-c',
         TIMED_GET, 'https://%s:%d/v1/status' % (CONTROLLER_IP, HOOK_PORT),
         token, lab.verify, str(n)],
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    here = subprocess.run([sys.executable, '-c', TIMED_GET,
                           lab.url + '/v1/status', token, lab.verify, str(n)],
                          capture_output=True, text=True, timeout=120)
    assert here.returncode == 0, here.stderr
    return json.loads(p.stdout) + json.loads(here.stdout)


def test_unauthenticated_floods_stop_no_listener_and_no_wire(
        lab, api, streams, tmp_path):
    h1, h2, _ = lab.hosts
    va = h1.add_vm('pfa', [('pfa-nic', '10.62.0.1/24')])
    vb = h2.add_vm('pfb', [('pfb-nic', '10.62.0.2/24')])
    wid = api.connect('pfa-nic', 'pfb-nic')['id']
    api.wait_state(wid, 'tunnelled')
    wait_until(lambda: va.ping('10.62.0.2', count=1)[1] == 1, 20,
               what='ping over the wire')
    attacker = rogue_mod.impostor(lab, 'preauth', index=82)
    for i in range(100, 250):
        sh(['ip', 'addr', 'add', '%s.%d/24' % (MGMT_NET, i), 'dev', 'mgmt0'],
           ns=attacker.ns)
    before = refusals(api)
    stream = streams(va, vb, '10.62.0.2', 6001)
    mid = hold_flood(lab, api, attacker, before, tmp_path)
    after = drip_flood(lab, api, attacker, mid, tmp_path)
    starve(lab, attacker, tmp_path)
    # It ran through all three attacks (stop() shows it was sending).
    sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)
    final = refusals(api)
    assert grew(final, after, ('openflow', 'no_descriptor')) >= 1, final
    assert not slow(timed_gets(lab, 2))
    assert api.ok('GET', '/v1/status')['switches_connected'] == len(lab.hosts)
    assert api.wire(wid)['state'] == 'tunnelled'


def targets(lab):
    return ('%s:%d' % (CONTROLLER_IP, lab.of_ports[0]),
            '%s:%d' % (CONTROLLER_IP, HOOK_PORT))


def hold_flood(lab, api, attacker, before, tmp_path):
    """25,000 connections held, saying nothing; returns the refusals."""
    of_target, rest_target = targets(lab)
    ready = [str(tmp_path / ('hold-%d' % k)) for k in range(2)]
    # Watched up to 30 s once all are open (it ends when the server has
    # closed them all). Each is closed 10 s after its accept, and a loaded
    # machine accepts late: CI once had 631 of 12,500 still open 15 s on.
    holds = [attack(attacker.ns, 'hold', t, 12500, r, '--hold', '30')
             for t, r in zip((of_target, rest_target), ready)]
    wait_until(lambda: all(os.path.exists(r) for r in ready) or any(
        p.poll() is not None for p in holds), 120,
        what='25,000 connections opened')
    answers = timed_gets(lab, 5)
    status = api.ok('GET', '/v1/status')
    held_of, held_rest = (result(p, 60) for p in holds)
    assert not slow(answers), (slow(answers), held_of, held_rest)
    assert status['switches_connected'] == len(lab.hosts), status
    # The flood was real: every connection opened, and those within the
    # caps were still held by the server when we asked.
    for got in (held_of, held_rest):
        assert got['opened'] + got['connect_errors'] == 12500, got
        assert got['opened'] >= 12000, got
        assert got['still_open'] == 0, got      # all closed, none kept
    mid = refusals(api)
    for listener, got in (('openflow', held_of), ('southbound_rest',
                                                   held_rest)):
        # Over the caps: refused (an address over its share) or evicted
        # (the oldest unproven, for a newcomer); the rest at the deadline.
        # How many of each depends on how fast the server accepts: when
        # the flood takes longer than the deadline to accept, its oldest
        # connections reach the deadline before a newcomer needs their
        # place (CI once: REST evicted 6,999 and 9,603 at the deadline;
        # another run 8,406 and 4,990). Every one was closed by a guard,
        # and the caps took thousands.
        capped = grew(mid, before, (listener, 'over_cap')) + grew(
            mid, before, (listener, 'evicted'))
        timed_out = grew(mid, before, (listener, 'deadline'))
        assert capped >= 4000, mid
        assert timed_out >= 1000, mid
        assert capped + timed_out >= got['opened'], (mid, got)
    return mid


def drip_flood(lab, api, attacker, mid, tmp_path):
    """1,000 TLS handshakes and 1,000 request heads, a byte a second."""
    of_target, rest_target = targets(lab)
    ready = [str(tmp_path / ('drip-%d' % k)) for k in range(2)]
    drips = [attack(attacker.ns, 'drip', of_target, 1000, ready[0],
                    '--kind', 'hello', '--hold', '25'),
             attack(attacker.ns, 'drip', rest_target, 1000, ready[1],
                    '--kind', 'head', '--hold', '25')]
    wait_until(lambda: all(os.path.exists(r) for r in ready) or any(
        p.poll() is not None for p in drips), 120,
        what='2,000 drip-fed connections opened')
    answers = timed_gets(lab, 3)
    hello, head = (result(p, 90) for p in drips)
    assert not slow(answers), (slow(answers), log_tail(lab))
    for got in (hello, head):
        why = json.dumps(got)       # whole: pytest cuts a dict short
        assert got['opened'] == 1000 and got['still_open'] == 0, why
        # Closed at the deadline while still sending: none finished, and
        # each sent its last byte well inside the 10 s timeout per read,
        # which so never fired. A close is seen as late as the (niced)
        # client ran its rounds late: that is its lateness, not the
        # server's.
        assert got['finished_payload'] == 0, why
        assert got['closed_after_max'] <= \
            DEADLINE + 3 + got['client_late_max'], why
        assert got['last_byte_before_close_max'] < 3.0, why
    after = refusals(api)
    assert grew(after, mid, ('openflow', 'deadline')) >= 1000, after
    assert grew(after, mid, ('southbound_rest', 'deadline')) >= 1000, after
    return after


def starve(lab, attacker, tmp_path):
    """Out of descriptors: the controller left 30 more than it holds,
    2,000 connections at its OpenFlow port. It sheds them and lives."""
    pid = lab.controller.pid
    open_now = len(os.listdir('/proc/%d/fd' % pid))
    hard = sh(['prlimit', '--pid', str(pid), '--nofile', '--raw',
               '--noheadings', '--output', 'HARD']).strip()
    sh(['prlimit', '--pid', str(pid), '--nofile=%d:%s' % (open_now + 30,
                                                           hard)])
    try:
        result(attack(attacker.ns, 'hold', targets(lab)[0], 2000,
                      str(tmp_path / 'starve'), '--hold', '3'), 60)
    finally:
        sh(['prlimit', '--pid', str(pid), '--nofile=%s:%s' % (hard, hard)])
