"""`vwctl migrate --topology NAME --to HOST|SITE [--vm NODE ...]
[--parallel N]`: a topology's VMs live-migrated together through libvirt,
at most N at a time, in the order `core.ensemble` gives, with one progress
view: each VM's state and each wire's, as they change.

Hosts' libvirt URIs come from the [libvirt] section of the vwctl config,
as for `vwctl migrate`. A member that fails to move stays on its source
(libvirt's guarantee; the controller keeps its wires there) and the others
go on; the command then fails, naming it.
"""
import sys
import threading
import time
import urllib.parse

from tabulate import tabulate

from virtualwire.cli.client import CliError
from virtualwire.cli.migrate import (MigrateError, PostcopySwitch, launch,
                                     libvirt_uris, libvirt_version,
                                     memory_bytes, plan)
from virtualwire.core import ensemble, errors

POLL_S = 0.25


def _link_state(k):
    return ('moving (%s)' % k['state']) if k.get('moving') else k['state']


class Run:
    """One member's migration, in a thread of its own."""

    def __init__(self, member, src_uri, dst_uri, dest, args):
        self.m, self.src_uri, self.dst_uri, self.dest = member, src_uri, \
            dst_uri, dest
        self.args = args
        self.state, self.error, self.dom = 'waiting', None, None
        self.switch = None
        self.started = self.ended = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.state, self.started = 'migrating', time.time()
        self.thread.start()

    @property
    def seconds(self):
        return (self.ended or time.time()) - self.started

    def _run(self):
        import libvirt
        try:
            src = libvirt.open(self.src_uri)
            self.dom = src.lookupByUUIDString(self.m.vm)
            dst = libvirt.open(self.dst_uri)
            how = plan(self.args, memory_bytes(self.dom),
                       libvirt_version(src, dst))
            self.switch = PostcopySwitch(how['postcopy'])
            launch(libvirt, self.dom, dst, how)
            self.state = 'done'
        except libvirt.libvirtError as e:
            self.state, self.error = 'failed', e.get_error_message()
        except MigrateError as e:
            self.state, self.error = 'failed', str(e)
        finally:
            self.ended = time.time()

    def progress(self):
        """libvirt's job statistics now ({} if none)."""
        try:
            stats = self.dom.jobStats() if self.dom is not None else {}
        except Exception:
            return {}
        if self.switch is not None:
            self.switch.poll(self.dom, stats)
        return stats


def _vm_line(r, stats):
    if r.state == 'migrating' and stats.get('type'):
        total = stats.get('data_total') or 0
        done = stats.get('data_processed') or 0
        return '%-10s %s -> %s  %5.1f%%  %6.1f MiB sent, dirty %s pages/s' \
            % (r.m.node, r.m.host, r.dest, 100.0 * done / total if total
               else 0.0, done / (1 << 20), stats.get('memory_dirty_rate', 0))
    if r.state == 'done':
        return '%-10s %s -> %s  done in %.1f s' % (
            r.m.node, r.m.host, r.dest, r.seconds)
    if r.state == 'failed':
        return '%-10s %s -> %s  FAILED (it stays on %s): %s' % (
            r.m.node, r.m.host, r.dest, r.m.host, r.error)
    return '%-10s %s -> %s  %s' % (r.m.node, r.m.host, r.dest, r.state)


def migrate_topology(client, a, config_path, out=sys.stderr):
    try:
        import libvirt
    except ImportError:
        raise MigrateError('libvirt-python is not installed '
                           '(pip install virtualwire[libvirt])')
    libvirt.registerErrorHandler(lambda *_: None, None)
    plan(a, 1 << 30)        # a profile QEMU cannot do fails before any move
    q = '?tenant=%s' % urllib.parse.quote(a.tenant) if a.tenant else ''
    path = '/v1/topologies/%s%s' % (urllib.parse.quote(a.topology, safe=''),
                                    q)
    view = client.call('GET', path)
    try:
        group = ensemble.members(view, a.vm or ())
        dest = ensemble.destination(
            a.to, client.call('GET', '/v1/hosts')['hosts'], group)
    except errors.VwError as e:
        raise MigrateError(e.message)
    uris = libvirt_uris(config_path)
    for h in {dest} | {m.host for m in group if m.host}:
        if h not in uris:
            raise MigrateError('no libvirt URI for host %s: add "%s = URI" '
                               'to the [libvirt] section of %s'
                               % (h, h, config_path))
    down = [m.node for m in group if m.host is None]
    if down:
        raise MigrateError('not running: %s' % ', '.join(down))
    stay = [m for m in group if m.host == dest]
    seq = ensemble.order([m.node for m in group if m.host != dest],
                         ensemble.link_rates(view), [m.node for m in stay])
    by_node = {m.node: m for m in group}
    runs = [Run(by_node[n], uris[by_node[n].host], uris[dest], dest, a)
            for n in seq]
    t0 = time.time()

    def say(line):
        print('%6.1fs  %s' % (time.time() - t0, line), file=out, flush=True)
    say('topology %s: %d VMs to %s, %d at a time, in this order: %s%s' % (
        view['name'], len(runs), dest, a.parallel, ', '.join(seq) or '-',
        ''.join('; %s stays (already on %s)' % (m.node, dest)
                for m in stay)))
    seen: dict = {}
    shown_at: dict = {}

    def show(key, line):
        if seen.get(key) == line:
            return False
        seen[key] = line
        say(line)
        return True
    pending = list(runs)
    while pending or any(r.state == 'migrating' for r in runs):
        while pending and sum(r.state == 'migrating' for r in runs) < \
                a.parallel:
            pending.pop(0).start()
        for r in runs:
            if r.state == 'waiting':
                continue
            # A VM's progress at most once a second; its state at once.
            if r.state == 'migrating' and \
                    time.time() - shown_at.get(r.m.node, 0) < 1.0:
                continue
            if show(('vm', r.m.node), _vm_line(r, r.progress())):
                shown_at[r.m.node] = time.time()
        try:
            for k in client.call('GET', path)['links']:
                show(('wire', k['link']), 'wire %-24s %s%s' % (
                    k['link'].replace('|', ' - '), _link_state(k),
                    (' ' + ' > '.join(k['path'])) if k['path'] else ''))
        except CliError as e:           # the moves go on without us
            show(('controller',), 'controller: %s' % e)
        time.sleep(POLL_S)
    for r in runs:
        show(('vm', r.m.node), _vm_line(r, {}))
    took = time.time() - t0
    final = client.call('GET', path)
    doc = {'topology': view['name'], 'destination': dest,
           'parallel': a.parallel, 'order': seq, 'seconds': round(took, 2),
           'vms': [{'node': r.m.node, 'vm': r.m.vm, 'source': r.m.host,
                    'destination': dest, 'state': r.state, 'error': r.error,
                    'seconds': round(r.seconds, 2)} for r in runs],
           'links': [{'link': k['link'], 'state': k['state'],
                      'path': k['path'], 'connector_id': k['connector_id']}
                     for k in final['links']]}
    failed = [r for r in runs if r.state == 'failed']
    text = 'moved %d of %d VMs of %s to %s in %.1f s\n\n%s\n\n%s' % (
        len(runs) - len(failed), len(runs), view['name'], dest, took,
        tabulate([[r.m.node, r.m.host, dest, r.state,
                   '%.1f' % r.seconds] for r in runs],
                 headers=['vm', 'from', 'to', 'state', 'seconds']),
        tabulate([[k['link'].replace('|', ' - '), k['state'],
                   ' > '.join(k['path']) or '-'] for k in final['links']],
                 headers=['link', 'state', 'path']))
    if failed:
        print(text, file=out)
        raise MigrateError('%d of %d migrations failed: %s' % (
            len(failed), len(runs), '; '.join('%s: %s' % (r.m.node, r.error)
                                              for r in failed)))
    return doc, text
