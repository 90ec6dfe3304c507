"""`vwlab`: the namespace lab from a shell.

  vwlab demo [--topology FILE] [--keep]   lab + controller + wires + traffic
       [--sites S1,S2,.. --extenders X:SITE[:NAT],..]   ... across clouds
  vwlab list                              labs on this machine
  vwlab down PREFIX | --all               remove labs
"""
import argparse
import json
import os
import sys
import tempfile
import time

from tabulate import tabulate

from vwlab import topology as topo_mod
from virtualwire.cli.vwctl import Client, cmd_hosts, cmd_stats, cmd_wires
from vwlab import Lab, LabError, extenders, list_labs, teardown
from virtualwire import version


def say(step, total, msg):
    print('[%d/%d] %s' % (step, total, msg), flush=True)


def _wait(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if fn():
                return
        except LabError:
            raise
        except Exception:
            pass
        time.sleep(0.1)
    raise LabError('timed out after %ds waiting for %s' % (timeout, what))


def deploy(lab, topo, client):
    """Create the file's VMs on their hosts, report each as libvirt's hook
    would, then apply the file through the controller's REST (as `vwctl
    topology apply` does). Returns [(wire, vm_a, ip_a, vm_b, ip_b)]."""
    vms = topo_mod.create_vms(lab, topo)
    want = {v for vm in vms.values() for v in vm.nics}
    _wait(lambda: want <= {v['id'] for v in
                           client.call('GET', '/v1/vnics')['vnics']},
          30, 'the controller to see every vNIC plugged')
    doc = client.call('PUT', '/v1/topologies/%s?wait=programmed'
                      % topo.name, {'source': topo.source})
    print('      applied %s through the REST API (vwctl topology apply): '
          '%d wires created, in one transaction' % (
              topo.name, len(doc['plan']['create'])), flush=True)
    out = []
    for link in topo.links:
        w = client.call('GET', '/v1/wires/%d' % int(doc['wires'][link.key],
                                                    16))
        (na, ia), (nb, ib) = link.a.split(':'), link.b.split(':')
        out.append((w, vms[na], topo.nodes[na].nics[ia].ip, vms[nb],
                    topo.nodes[nb].nics[ib].ip))
    return out


def _traffic(vm_a, vm_b, ip_b, port):
    ready = tempfile.mktemp(prefix='vwready')
    tx, rx = vm_a.ping(ip_b, count=5)
    p = vm_b.tool_bg('udp-recv', '--port', port, '--seconds', 2.5,
                     '--ready-file', ready)
    _wait(lambda: os.path.exists(ready), 10, 'UDP receiver')
    sent = vm_a.tool('udp-send', '--dst', ip_b, '--port', port, '--rate',
                     1000, '--seconds', 1)
    got = json.loads(p.communicate(timeout=30)[0].strip().splitlines()[-1])
    os.unlink(ready)
    ready2 = tempfile.mktemp(prefix='vwready')
    p = vm_b.tool_bg('tcp-recv', '--port', port + 1, '--ready-file', ready2)
    _wait(lambda: os.path.exists(ready2), 10, 'TCP receiver')
    vm_a.tool('tcp-send', '--dst', ip_b, '--port', port + 1, '--bytes',
              16 << 20)
    tcp = json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1])
    os.unlink(ready2)
    return {'ping': '%d/%d' % (rx, tx),
            'udp': '%d/%d' % (got['received'], sent['sent']),
            'tcp_mbit_s': round(tcp['mbit_s'], 1)}


def _links(lab, client):
    """Every pair of extenders linked (encrypted, through the NATs); wait
    until the controller sees the links up."""
    names = [x.name for x in lab.extenders]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    print('      extender links: %s (WireGuard, pinned public keys)'
          % ', '.join('%s-%s' % p for p in pairs), flush=True)
    extenders.connect(lab, pairs)

    def all_up():
        hosts = client.call('GET', '/v1/hosts')['hosts']
        ups = sum(1 for h in hosts for k in h.get('links', ()) if k['up'])
        return ups == 2 * len(pairs)
    _wait(all_up, 60, 'extender links to come up')


def cmd_demo(args):
    if args.topology:
        topo = topo_mod.load(args.topology)
    else:
        topo = topo_mod.parse(topo_mod.DEMO, 'embedded demo')
    n_hosts = max(args.hosts, max(int(h[1:]) for h in topo_mod.hosts(topo)))
    total = 6
    sites = args.sites.split(',') if args.sites else None
    if sites and len(sites) != n_hosts:
        raise LabError('--sites names %d sites for %d hosts'
                       % (len(sites), n_hosts))
    lab = Lab(n_hosts, sites=sites, extenders=args.extenders)
    n_all = n_hosts + len(lab.extender_specs) + len(lab.gateway_specs)
    try:
        say(1, total, 'building a %d-host lab %s (namespaces, OVS netdev, '
            'GRE underlay%s)' % (n_all, lab.prefix, ', %d sites apart, NATs'
                                 % len(lab.clouds.order) if lab.clouds
                                 else ''))
        lab.up(progress=lambda m: print('      ' + m, flush=True))
        say(2, total, 'starting virtualwire-controller (REST %s)'
            % '127.0.0.1')
        lab.start_controller()
        client = Client(lab.url, open(lab.token_file).read().strip(),
                        ca_cert=lab.pki.controller_ca if lab.pki else None)
        seen = {}

        def hosts_up():
            if lab.controller.poll() is not None:
                raise LabError('virtualwire-controller exited (code %d)'
                               % lab.controller.returncode)
            hosts = client.call('GET', '/v1/hosts')['hosts']
            seen.update((h['name'], 'synced' if h['synced'] else
                         'connected' if h['connected'] else 'not connected')
                        for h in hosts)
            return len(hosts) == n_all and all(h['connected'] and
                                               h['synced'] for h in hosts)
        try:
            _wait(hosts_up, 60, 'hosts to connect')
        except LabError as e:
            print('vwlab: %s; hosts seen: %s\n%s' % (
                e, ', '.join('%s %s' % kv for kv in sorted(seen.items()))
                or 'none', lab.diagnostics()), file=sys.stderr)
            raise
        print(cmd_hosts(client, None)[1])
        if lab.extender_specs:
            _links(lab, client)
        say(3, total, 'deploying topology "%s": %d VMs, %d wires'
            % (topo.name, len(topo.nodes), len(topo.links)))
        wired = deploy(lab, topo, client)
        _wait(lambda: all(w['state'] != 'pending' for w in
                          client.call('GET', '/v1/wires')['wires']) and
              all(h['synced'] for h in
                  client.call('GET', '/v1/hosts')['hosts']),
              30, 'wires to come up')
        print(cmd_wires(client, None)[1])
        say(4, total, 'sending traffic over every wire (ping, 1 kHz UDP for '
            '1 s, 16 MiB TCP)')
        rows = []
        for i, (w, va, ia, vb, ib) in enumerate(wired):
            if not ia or not ib:
                # e.g. a firewall's or a switch's vNIC: it has no address
                # to ping; the wire is shown, not probed.
                now = client.call('GET', '/v1/wires/%d' % w['id'])
                rows.append([w['connector_id'], '%s -> %s' % (va.name,
                                                             vb.name),
                             now['state'], ' > '.join(now.get('path', ())),
                             'no IP address: not probed', '', ''])
                continue
            ip_b = ib.split('/')[0]
            _wait(lambda: va.ping(ip_b, count=1)[1] == 1, 15, 'first ping')
            r = _traffic(va, vb, ip_b, 7000 + 10 * i)
            now = client.call('GET', '/v1/wires/%d' % w['id'])
            rows.append([w['connector_id'], '%s -> %s' % (va.name, vb.name),
                         now['state'], ' > '.join(now.get('path', ())),
                         r['ping'], r['udp'], r['tcp_mbit_s']])
        print(tabulate(rows, headers=['wire', 'vms', 'state', 'hosts',
                                      'ping', 'udp rx/tx', 'tcp Mbit/s']))
        say(5, total, 'per-wire flow statistics (OVS folds its counters in '
            'each ~1 s; the collector reads them each second)')
        time.sleep(2.5)
        for w, *_ in wired:
            print(cmd_stats(client, argparse.Namespace(
                wire=w['connector_id']))[1])
        if args.keep:
            say(6, total, 'lab %s left running. Try:\n'
                '      VWCTL_CONFIG=%s vwctl wires\n'
                '      the dashboard: %s/ui/ (token: the contents of %s;\n'
                '      the certificate is from the lab CA %s)\n'
                '      vwlab down %s' % (lab.prefix, lab.vwctl_config,
                                         lab.url, lab.token_file,
                                         lab.verify, lab.prefix))
            return 0
        say(6, total, 'tearing the lab down (use --keep to explore it)')
    finally:
        if not args.keep:
            lab.down()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab', description='VirtualWire lab')
    version.add_argument(p)
    sub = p.add_subparsers(dest='cmd', required=True)
    d = sub.add_parser('demo', help='lab + controller + wires + traffic')
    d.add_argument('--topology', help='topology YAML (default: embedded demo)')
    d.add_argument('--hosts', type=int, default=3)
    d.add_argument('--sites', help='site of each host, e.g. '
                   'cloud-a,cloud-b,cloud-b (with --extenders: clouds apart)')
    d.add_argument('--extenders', help='NAME:SITE[:NAT],... extenders, NAT '
                   'one of nat, symmetric, public; e.g. xa:cloud-a,'
                   'xb:cloud-b,xr:relay:public')
    d.add_argument('--keep', action='store_true',
                   help='leave the lab and controller running')
    sub.add_parser('list', help='labs on this machine')
    d = sub.add_parser('down', help='remove a lab')
    d.add_argument('prefix', nargs='?')
    d.add_argument('--all', action='store_true')
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print('vwlab: needs root (network namespaces, OVS)', file=sys.stderr)
        return 1
    try:
        if args.cmd == 'demo':
            return cmd_demo(args)
        if args.cmd == 'list':
            for prefix in list_labs():
                print(prefix)
            return 0
        if args.cmd == 'down':
            targets = list_labs() if args.all else [args.prefix]
            if not targets or targets == [None]:
                print('vwlab: name a lab or use --all', file=sys.stderr)
                return 2
            for t in targets:
                teardown(t)
                print('removed %s' % t)
            return 0
    except (LabError, topo_mod.TopologyError) as e:
        print('vwlab: error: %s' % e, file=sys.stderr)
        return 1
    except Exception as e:          # a REST error surfaces as CliError
        print('vwlab: error: %s' % e, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
