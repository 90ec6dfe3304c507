"""`virtualwire-collector`: flow counters read off the controllers' loop,
in a process of its own (Faucet's Gauge is the model). Argument parsing
and assembly only: `fleet` counts, `ofapp` reads switches as a SLAVE,
`intent` reads wires and saves the counter base, `http` answers the
controllers (`metrics.remote`) and Prometheus.

Every switch is configured with this process as one more controller
target (`vw-host-setup --controller` lists it after the controllers).
"""
import argparse
import logging
import os

from virtualwire.metrics import loss
from virtualwire import config_file, daemon, version


def parse_args(argv=None):
    p = build_parser()
    args = config_file.parse(p, argv, '/etc/virtualwire/collector.yaml')
    if not 1.0 <= args.stats_interval <= 5.0:
        p.error('--stats-interval must be 1 to 5 seconds')
    return args


def build_parser():
    p = argparse.ArgumentParser(
        prog='virtualwire-collector',
        description='VirtualWire flow-counter collector: reads every '
                    "switch's counters as an OpenFlow SLAVE and serves "
                    'them to the controllers.')
    version.add_argument(p)
    p.add_argument('--state-dir', default='/var/lib/virtualwire-collector',
                   help='where its saved counters live')
    p.add_argument('--intent-db', default='unix:/var/lib/virtualwire/'
                   'intent.sock',
                   help='the controllers\' intent database (as their '
                        '--intent-db; default: the local one of a '
                        'controller on this machine, %(default)s)')
    daemon.add_intent_db_tls(p)
    p.add_argument('--of-listen', default='0.0.0.0:6654',
                   help='OpenFlow listen address HOST:PORT, where switches '
                        'connect (default: %(default)s)')
    p.add_argument('--rest-listen', default='127.0.0.1:8790',
                   help='HTTP(S) listen address of the figures API '
                        '(default: %(default)s)')
    p.add_argument('--token-file', default='',
                   help='the bearer token its callers present (created '
                        'with a random one if missing; default: '
                        'STATE_DIR/collector-token)')
    p.add_argument('--stats-interval', type=float, default=2.0,
                   metavar='SECONDS',
                   help='read each switch this often, 1-5 s (default: '
                        '%(default)s)')
    loss.add_arguments(p)
    p.add_argument('--southbound-netns', default='',
                   help='open OpenFlow and intent sockets in this network '
                        'namespace; the API stays where it started')
    tls = p.add_argument_group(
        'TLS', 'a certificate from the controller CA (hosts trust only '
        'that CA: vw-pki issue DIR collector --role controller), and the '
        'host CA whose certificates switches present')
    daemon.add_tls_files(tls, 'the only CA whose certificates peers may show')
    tls.add_argument('--insecure-plaintext-lab', action='store_true',
                     help='plain TCP OpenFlow and HTTP: a lab on one '
                          'machine only')
    daemon.add_log_arguments(p)
    return p


def main(argv=None):
    args = parse_args(argv)
    prog = 'virtualwire-collector'
    daemon.check_intent_remote(args, prog)
    hub = daemon.start(args)
    daemon.on_sighup(hub, args, lambda: parse_args(argv),
                      logging.getLogger('virtualwire'))
    tls_files = daemon.load_tls(args, prog)
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    from virtualwire.api.server import make_server
    from virtualwire.collectord import ofapp
    from virtualwire.collectord.fleet import Fleet
    from virtualwire.collectord.http import CollectorApi
    from virtualwire.collectord.switch_trust import SwitchTrust
    from virtualwire.southbound.session import hang_up
    from virtualwire.collectord.intent import CollectorIntent
    from virtualwire.control.loop import Loop
    from virtualwire.listen_guard import Refusals
    from virtualwire.southbound import of_listener
    from virtualwire.tls import configure_ovs_streams

    log = logging.getLogger('virtualwire.collector')
    of_host, of_port = daemon.split_listen(args.of_listen, '--of-listen', prog)
    rest_host, rest_port = daemon.split_listen(args.rest_listen, '--rest-listen',
                                             prog)
    token = daemon.read_or_create_token(
        args.token_file or os.path.join(args.state_dir, 'collector-token'))
    loop = Loop('collector')
    fleet = Fleet(ofapp.send, interval=args.stats_interval,
                  lag=args.counter_lag, flight=args.max_flight,
                  trust=SwitchTrust(hang_up=hang_up,
                                    require_identity=tls_files is not None))
    refusals = Refusals()       # every listener's, for /metrics
    api = CollectorApi(loop, fleet, token, refusals=refusals)
    # The API socket and the intent database's first: they stay in our
    # namespace (reconnections too: ovsdb.tls_remote).
    server = make_server(rest_host, rest_port, api, tls=tls_files,
                         refusals=refusals)
    if tls_files is not None:
        configure_ovs_streams(tls_files)
    remote = args.intent_db
    if 'ssl:' in remote:
        remote = daemon.trusted_intent_remote(remote, args, prog)
    # The database may come up after us (a controller starting its local
    # one): wait for it, saying so.
    waited = 0
    while True:
        try:
            intent = CollectorIntent(
                remote, lambda ev: loop.post(fleet.wire_events, ev))
            break
        except ConnectionError as e:
            if waited % 10 == 0:
                log.warning('intent database not reachable yet: %s', e)
            waited += 1
            hub.sleep(1.0)
    api.has_lock = lambda: intent.has_lock
    loop.post(fleet.restore, intent.saved_counters())
    intent.start()

    def sample():
        if fleet.sample() and intent.has_lock:
            intent.save(fleet.snapshot())

    def name_switches():
        # A switch is read once the controller admitted it (its host row).
        # Every host known at start, connected yet or not (`learn_names`).
        first = True
        while True:
            hub.sleep(1.0)
            try:
                if first or loop.call(fleet.unnamed):
                    first = False
                    loop.post(fleet.learn_names, intent.host_names())
            except Exception as e:      # noqa: BLE001 (retried each second)
                log.warning('reading host names: %s', e)

    def revocations():
        # Switches whose certificate is taken back are hung up at once.
        from virtualwire.control.admission import (REVOCATION_POLL,
                                                   RevocationWatch)
        watch = RevocationWatch(intent.revocations, lambda entries:
                                loop.post(fleet.on_revocations, entries))
        daemon.poll_forever(hub, watch, 'the revocation list',
                               REVOCATION_POLL)

    if args.southbound_netns:
        from virtualwire import netns
        netns.enter(args.southbound_netns)
    cfg.CONF(args=['--ofp-listen-host', of_host,
                   '--ofp-tcp-listen-port', str(of_port)], project='os_ken')
    mgr = AppManager.get_instance()
    mgr.load_apps(['os_ken.controller.ofp_handler',
                   'virtualwire.collectord.ofapp'])
    mgr.applications_cls['os_ken.controller.ofp_handler'] = \
        of_listener.handler_class(of_host, of_port, tls_files,
                                  refusals=refusals)
    services = mgr.instantiate_apps(fleet=fleet, loop=loop,
                                    **mgr.create_contexts())
    services.append(hub.spawn(loop.run))
    if intent.revocations is not None:      # schema 1.13.0 on
        services.append(hub.spawn(revocations))
    services.append(hub.spawn(name_switches))
    services.append(hub.spawn(server.serve_forever))
    loop.every(0.1, fleet.tick)
    loop.every(args.stats_interval, sample)
    if tls_files is not None:
        loop.every(10.0, tls_files.refresh)
    log.info('collector up: OpenFlow %s %s:%d (as SLAVE), API %s://%s:%d, '
             'intent %s', 'TLS' if tls_files else 'PLAIN (lab)', of_host,
             of_port, 'https' if tls_files else 'http', rest_host,
             rest_port, remote)

    def save():     # counts read since the last save (a restart goes on)
        if intent.has_lock:
            intent.save(loop.call(fleet.snapshot, timeout=2.0)).result(3.0)
    daemon.run_until_stopped(hub, services, mgr, save, log)


if __name__ == '__main__':
    main()
