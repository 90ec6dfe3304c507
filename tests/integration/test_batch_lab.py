"""Many wires at once on the real switches: a batch answered with
?wait=programmed has every wire's flows on both hosts' Open vSwitch the
moment the answer arrives (read with ovs-ofctl, no waiting), and so has
its removal; vwctl batch does the same from a file; a batch with one
wrong line changes nothing."""
import subprocess
import sys

from vwtest import flows_of


def vwctl(lab, *args, stdin=None):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=120,
                          input=stdin)


def _wired(host, cids):
    """The wires among `cids` with flows on the host now."""
    have = {int(l.split('cookie=')[1].split(',')[0], 16) & 0xFFFFFFFF
            for l in flows_of(host)}
    return {c for c in cids if c in have}


def test_a_batch_is_on_the_switches_when_it_is_answered(lab, api, tmp_path):
    h1, h2, _ = lab.hosts
    nics = 4
    for i in range(3):
        h1.add_vm('ba%d' % i, [('ba%d-%d' % (i, k), None)
                               for k in range(nics)])
        h2.add_vm('bb%d' % i, [('bb%d-%d' % (i, k), None)
                               for k in range(nics)])
    ends = [('ba%d-%d' % (i, k), 'bb%d-%d' % (i, k))
            for i in range(3) for k in range(nics)]
    try:
        doc = api.ok('POST', '/v1/wires/batch?wait=programmed', json={
            'create': [{'a': a, 'b': b} for a, b in ends]})
        cids = {w['id'] for w in doc['created']}
        assert len(cids) == 12 and doc['programmed']['programmed']
        # No waiting here: programmed means the switches hold them.
        assert _wired(h1, cids) == cids and _wired(h2, cids) == cids
        doc = api.ok('POST', '/v1/wires/batch?wait=programmed',
                     json={'delete': sorted(cids)})
        assert _wired(h1, cids) == set() and _wired(h2, cids) == set()
        # From a file with vwctl; a wrong line refuses the whole file.
        changes = tmp_path / 'changes'
        changes.write_text('\n'.join('%s %s' % e for e in ends[:6]) +
                           '\nba0-0 ba0-0\n')
        p = vwctl(lab, 'batch', str(changes))
        assert p.returncode == 1 and 'line 7: a wire needs two different ' \
            'ends' in p.stderr, p.stderr
        assert not [w for w in api.ok('GET', '/v1/wires')['wires']
                    if w['a'].startswith('ba')]
        changes.write_text('# six wires\n' + '\n'.join(
            '%s %s' % e for e in ends[:6]) + '\n')
        p = vwctl(lab, 'batch', str(changes))
        assert p.returncode == 0, p.stderr
        assert 'connected 6, disconnected 0 wire(s); on every connected ' \
            'switch (3)' in p.stdout, p.stdout
        made = {w['id'] for w in api.ok('GET', '/v1/wires')['wires']
                if w['a'].startswith('ba')}
        assert _wired(h1, made) == made == _wired(h2, made)
    finally:
        for w in api.ok('GET', '/v1/wires')['wires']:
            if w['a'].startswith('ba'):
                api.req('DELETE', '/v1/wires/%d' % w['id'])
        for i in range(3):
            h1.remove_vm(h1.vms['ba%d' % i])
            h2.remove_vm(h2.vms['bb%d' % i])
