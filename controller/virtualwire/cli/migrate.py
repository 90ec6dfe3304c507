"""`vwctl migrate VM DEST`: a live migration through libvirt-python, with
progress and the controller's view of each of the guest's wires as it
changes (prepared on both hosts, activated by the guest, re-pointed), then
the wires as they end up.

Hosts are named as VirtualWire names them; their libvirt URIs come from the
[libvirt] section of the vwctl config (`h1 = qemu+ssh://h1/system`). The
guest is looked up on every configured host unless --source is given.
"""
import configparser
import os
import sys
import threading
import time
import xml.etree.ElementTree as ET

from tabulate import tabulate

from virtualwire.cli import migration_profile as profiles
from virtualwire.cli.client import CliError


class MigrateError(Exception):
    pass


def libvirt_uris(config_path):
    cp = configparser.ConfigParser()
    if config_path and os.path.exists(config_path):
        cp.read(config_path)
    return dict(cp['libvirt']) if cp.has_section('libvirt') else {}


def plan(args, memory_bytes, libvirt_version=profiles.NATIVE_ZSTD):
    """The migration's plan from the arguments: --profile (default, wan,
    deltas), --bandwidth MiB/s (a cap on the stream, so the wires' own
    traffic keeps its share of a slow link), --postcopy."""
    try:
        return profiles.plan(profiles.PROFILES[getattr(args, 'profile', None)
                                               or 'default'],
                             memory_bytes, getattr(args, 'bandwidth', None),
                             bool(getattr(args, 'postcopy', False)),
                             libvirt_version)
    except profiles.ProfileError as e:
        raise MigrateError(str(e))


def libvirt_version(*conns):
    """The oldest libvirt of the connections (both ends must agree)."""
    return min(c.getLibVersion() for c in conns)


def launch(libvirt, dom, dconn, how):
    """migrate3 with the plan (its downtime limit set on the domain first);
    where libvirt cannot ask QEMU for multifd compression (< 9.4), the
    source QEMU is told over QMP and the destination's through its XML
    first (migration_profile)."""
    params, flags = profiles.libvirt_call(libvirt, how)
    if how.get('max_downtime_ms'):
        dom.migrateSetMaxDowntime(how['max_downtime_ms'], 0)
    if profiles.asks_qemu(how):
        import libvirt_qemu
        libvirt_qemu.qemuMonitorCommand(dom, profiles.source_qmp(how), 0)
        params[libvirt.VIR_MIGRATE_PARAM_DEST_XML] = \
            profiles.destination_xml(
                dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE))
    dom.migrate3(dconn, params, flags)


def memory_bytes(dom):
    return int(dom.info()[1]) * 1024      # maxMem, KiB


class PostcopySwitch:
    """With --postcopy: once the first pass is done (QEMU counts it as
    iteration 1), ask for post-copy, once."""

    def __init__(self, wanted):
        self.pending = wanted

    def poll(self, dom, stats):
        if self.pending and (stats.get('memory_iteration') or 0) >= 2:
            self.pending = False
            try:
                dom.migrateStartPostCopy(0)
            except Exception:       # e.g. already completing: pre-copy ends
                pass


def guest_vnics(xml):
    root = ET.fromstring(xml)
    return [p.get('interfaceid') for p in root.findall(
        "./devices/interface/virtualport[@type='openvswitch']/parameters")
        if p.get('interfaceid')]


def progress_line(stats, elapsed):
    """One line from virDomainGetJobStats."""
    mib = 1 << 20
    total = stats.get('data_total') or 0
    done = stats.get('data_processed') or 0
    pct = 100.0 * done / total if total else 0.0
    dirty = (stats.get('memory_dirty_rate') or 0) * (
        stats.get('memory_page_size') or 4096)
    extra = ''
    if stats.get('compression_bytes') is not None:
        extra += '  deltas %.1f MiB (%d misses)' % (
            stats['compression_bytes'] / mib,
            stats.get('compression_cache_misses') or 0)
    if stats.get('auto_converge_throttle'):
        extra += '  guest throttled %d%%' % stats['auto_converge_throttle']
    return ('%5.1fs  %5.1f%%  pass %d  %7.1f MiB sent  %7.1f MiB left  '
            'dirty %5.1f MiB/s  expected pause %s ms%s' % (
                elapsed, pct, stats.get('memory_iteration') or 0,
                done / mib, (stats.get('data_remaining') or 0) / mib,
                dirty / mib, stats.get('downtime', '-'), extra))


def wire_phase(wire):
    """The controller's view of one wire during a move, in one line."""
    hosts = [h for h in (wire.get('host_a'), wire.get('host_b')) if h]
    where = '%s %s' % (wire['state'], '-'.join(
        hosts[:1] if len(set(hosts)) == 1 else hosts) or '-')
    parts = ['wire %s %s' % (wire['connector_id'], where)]
    for vnic, m in sorted((wire.get('moving') or {}).items()):
        parts.append('%s moving %s -> %s: %s' % (
            vnic, m['source'], m['destination'],
            'activated by the guest, sisters being re-pointed'
            if m['activated'] else
            "both hosts receive, %s delivers until the guest's first frame "
            "on %s" % (m['source'], m['destination'])))
    return ', '.join(parts)


def guest_wires(client, vnics):
    return [w for w in client.call('GET', '/v1/wires')['wires']
            if w['a'] in vnics or w['b'] in vnics]


def migrate(client, args, config_path, out=sys.stderr):
    try:
        import libvirt
    except ImportError:
        raise MigrateError('libvirt-python is not installed '
                           '(pip install virtualwire[libvirt])')
    uris = libvirt_uris(config_path)
    if args.dest not in uris:
        raise MigrateError('no libvirt URI for host %s: add "%s = URI" to '
                           'the [libvirt] section of %s' % (
                               args.dest, args.dest, config_path))
    libvirt.registerErrorHandler(lambda *_: None, None)   # quiet stderr
    candidates = [args.source] if args.source else sorted(
        h for h in uris if h != args.dest)
    src = dom = None
    for h in candidates:
        if h not in uris:
            raise MigrateError('no libvirt URI for host %s' % h)
        try:
            conn = libvirt.open(uris[h])
        except libvirt.libvirtError as e:
            raise MigrateError('cannot reach libvirt on %s: %s'
                               % (h, e.get_error_message()))
        try:
            dom = conn.lookupByName(args.vm)
            src = h
            break
        except libvirt.libvirtError:
            conn.close()
    if dom is None:
        raise MigrateError('guest %s is not running on %s' % (
            args.vm, ', '.join(candidates)))
    if src == args.dest:
        raise MigrateError('guest %s already runs on %s' % (args.vm, src))
    vnics = guest_vnics(dom.XMLDesc(0))
    try:
        dconn = libvirt.open(uris[args.dest])
    except libvirt.libvirtError as e:
        raise MigrateError('cannot reach libvirt on %s: %s'
                           % (args.dest, e.get_error_message()))
    how = plan(args, memory_bytes(dom), libvirt_version(conn, dconn))
    switch = PostcopySwitch(how['postcopy'])
    result = {}

    def run():
        try:
            launch(libvirt, dom, dconn, how)
        except libvirt.libvirtError as e:
            result['error'] = e.get_error_message()
    print('migrating %s %s -> %s (%d vNICs; %s)' % (
        args.vm, src, args.dest, len(vnics), profiles.describe(how)),
        file=out)
    try:
        wire_ids = [w['id'] for w in guest_wires(client, vnics)]
    except CliError as e:       # libvirt migrates without us (hook policy)
        print('controller: %s' % e, file=out)
        wire_ids = []
    t0 = time.time()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    # Progress at most once a second and only when it says something new;
    # wire views whenever they change (polled 5 times a second, one wire at
    # a time: the full list can hold thousands).
    last, last_at = None, -1.0
    seen: dict = {}
    while worker.is_alive():
        worker.join(0.2)
        try:
            stats = dom.jobStats()
        except libvirt.libvirtError:
            stats = {}
        switch.poll(dom, stats)
        now = time.time() - t0
        line = progress_line(stats, now) if stats.get('type', 0) else None
        if line and line[6:] != last and now - last_at >= 1.0:
            print(line, file=out)
            last, last_at = line[6:], now
        try:
            wires = [client.call('GET', '/v1/wires/%d' % i)
                     for i in wire_ids]
        except CliError as e:       # the migration goes on without us
            wires = [{'id': None, 'error': str(e)}]
        for w in wires:
            line = ('controller: %s' % w['error']) if 'error' in w else \
                wire_phase(w)
            if seen.get(w['id']) != line:
                seen[w['id']] = line
                print('%5.1fs  %s' % (time.time() - t0, line), file=out)
    took = time.time() - t0
    if 'error' in result:
        raise MigrateError('migration failed (the guest stays on %s): %s'
                           % (src, result['error']))
    wires = guest_wires(client, vnics)
    doc = {'vm': args.vm, 'source': src, 'destination': args.dest,
           'seconds': round(took, 2), 'vnics': vnics, 'wires': wires,
           'profile': how, 'job': completed_job(dconn, args.vm)}
    text = 'migrated %s %s -> %s in %.2fs%s\n%s' % (
        args.vm, src, args.dest, took, job_summary(doc['job']), tabulate(
            [[w['connector_id'], w['a'], w['b'], w['state'], w['host_a'],
              w['host_b']] for w in wires],
            headers=['connector_id', 'a', 'b', 'state', 'host_a',
                     'host_b']))
    return doc, text


def completed_job(dconn, name):
    """What the finished migration cost, from the destination's libvirt
    (its record of the domain's last job; the source's domain is gone);
    {} if it has none."""
    try:
        import libvirt
        st = dconn.lookupByName(name).jobStats(
            libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
    except Exception:
        return {}
    keys = ('time_elapsed', 'downtime', 'data_processed', 'memory_iteration',
            'compression_bytes', 'compression_cache_misses',
            'auto_converge_throttle')
    return {k: st[k] for k in keys if k in st}


def job_summary(job):
    if not job.get('data_processed'):
        return ''
    return ' (%.1f MiB sent in %s passes, pause %s ms by QEMU)' % (
        job['data_processed'] / (1 << 20), job.get('memory_iteration', '?'),
        job.get('downtime', '?'))
