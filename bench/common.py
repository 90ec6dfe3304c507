"""Shared helpers for benchmarks: percentiles, results files, a REST client."""
import json
import os
import re
import shutil
import platform
import statistics
import subprocess
import sys
import time

import requests

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values, scale=1.0, digits=2):
    return {'n': len(values),
            'min': round(min(values) * scale, digits),
            'p50': round(pct(values, 50) * scale, digits),
            'p99': round(pct(values, 99) * scale, digits),
            'max': round(max(values) * scale, digits),
            'mean': round(statistics.mean(values) * scale, digits)}


def machine():
    def ver(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True
                                  ).stdout.splitlines()[0]
        except (OSError, IndexError):
            return None
    return {'cpus': os.cpu_count(), 'python': platform.python_version(),
            'ovs': ver(['ovs-vswitchd', '--version']),
            'kernel': platform.release()}


def commit():
    """The checkout's commit, '+dirty' if it has uncommitted changes."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(['git', '-C', here, 'rev-parse', 'HEAD'],
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', here, 'status', '--porcelain',
                                '--untracked-files=no'], capture_output=True,
                               text=True).stdout.strip()
    except OSError:
        return None
    return (rev + ('+dirty' if dirty else '')) or None


# The os-ken hubs the controllers measured said they ran (their own
# virtualwire_build_info), proof of which hub a figure is of.
HUBS_SEEN: set = set()


def _note_hub(api):
    note_hub(api.url, api.s.headers, api.verify)


def note_hub(url, headers, verify):
    """Record the hub the controller at `url` says it runs."""
    try:
        r = requests.get(url + '/metrics', headers=headers, timeout=10,
                         verify=verify)
        m = re.search(r'^virtualwire_build_info\{[^}]*hub="([^"]+)"',
                      r.text, re.M)
        if m:
            HUBS_SEEN.add(m.group(1))
    except requests.RequestException:
        pass


def write_result(name, doc):
    os.makedirs(RESULTS, exist_ok=True)
    if HUBS_SEEN:
        doc = dict(doc, controller_hubs=sorted(HUBS_SEEN))
    doc = dict(doc, benchmark=name, commit=commit(),
               command=' '.join([sys.executable] + sys.argv),
               when=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
               machine=machine())
    path = os.path.join(RESULTS, name + '.json')
    with open(path, 'w') as f:
        json.dump(doc, f, indent=2)
        f.write('\n')
    print('wrote %s' % os.path.relpath(path))
    return path


class Api:
    def __init__(self, lab, note=True):
        """`note`: read the controller's hub from /metrics now. Not once
        it holds many wires: a scrape of 100,000 then held its loop for
        about 17 s and 850 MiB (scale-final-100k-run1: every switch went
        away and came back)."""
        self.s = requests.Session()
        self.verify = lab.verify     # per request: the env would win
        with open(lab.token_file) as f:
            self.s.headers['Authorization'] = 'Bearer ' + f.read().strip()
        self.url = lab.url
        if note:
            _note_hub(self)

    def call(self, method, path, body=None, timeout=60):
        r = self.s.request(method, self.url + path, json=body,
                           timeout=timeout, verify=self.verify)
        if r.status_code >= 300:
            raise RuntimeError('%s %s -> %d %s' % (method, path,
                                                    r.status_code, r.text))
        return r.json() if r.content else None

    def wait_hosts(self, n, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            try:
                hosts = self.call('GET', '/v1/hosts')['hosts']
                if len(hosts) >= n and all(h['synced'] for h in hosts):
                    _note_hub(self)     # serving now, if not at __init__
                    return
            except (requests.RequestException, RuntimeError):
                pass
            time.sleep(0.2)
        raise RuntimeError('%d hosts did not connect in %ds' % (n, timeout))


def ofctl_flow(f):
    """A flows.Flow in ovs-ofctl syntax (for the hand-installed baseline)."""
    names = {'tunnel_id': 'tun_id', 'tun_ipv4_src': 'tun_src',
             'tun_ipv4_dst': 'tun_dst'}
    m = ','.join('%s=%s' % (names.get(k, k), v) for k, v in f.match)
    acts = []
    for a in f.actions:
        if a[0] == 'output':
            acts.append('output:%d' % a[1])
        else:
            v = hex(a[2]) if isinstance(a[2], int) else a[2]
            acts.append('set_field:%s->%s' % (v, names.get(a[1], a[1])))
    return 'table=%d,priority=%d,cookie=%#x%s actions=%s' % (
        f.table, f.priority, f.cookie, (',' + m) if m else '',
        ','.join(acts) or 'drop')


def echo_wire(lab, api, prefix, net):
    """A wire from a VM on h1 (answering the udp-echo probe on port 7000)
    to one on h3, both up: (VM on h1, VM on h3, the echo server's
    process). `net` is the /24's first three octets."""
    h1, h3 = lab.hosts[0], lab.hosts[2]
    a = h1.add_vm(prefix + 'a', [(prefix + 'a', net + '.1/24')])
    b = h3.add_vm(prefix + 'b', [(prefix + 'b', net + '.2/24')])
    api.call('POST', '/v1/wires', {'a': prefix + 'a', 'b': prefix + 'b'})
    srv = a.tool_bg('echo-server', '--port', 7000)
    for _ in range(100):
        if b.ping(net + '.1', count=1, wait=1)[1]:
            break
    return a, b, srv


def keep_logs(lab, dest):
    """Every *.log under the lab's directory, to `dest` (same layout)."""
    for root, _dirs, files in os.walk(lab.dir):
        for f in files:
            if f.endswith('.log'):
                to = os.path.join(dest, os.path.relpath(root, lab.dir))
                os.makedirs(to, exist_ok=True)
                shutil.copy2(os.path.join(root, f), to)
    print('logs kept in %s' % dest, flush=True)
