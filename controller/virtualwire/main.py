"""`virtualwire-controller`: argument parsing and assembly only. Starts the
stores, the control loop and its controller, the REST API and the os-ken
OpenFlow app in one process.

os-ken 4.x has no osken-manager, so apps are loaded here with AppManager.
The hub type must be chosen before os_ken is imported: eventlet by default
(its WSGI server serves REST); OSKEN_HUB_TYPE=native also works, because
all state is owned by one loop (`control.loop`) under either hub.
"""
import argparse
import logging
import os
import socket
import sys

from virtualwire.core import shared_settings
from virtualwire.metrics import loss
from virtualwire import config_file, daemon, version


def parse_args(argv=None):
    return config_file.parse(build_parser(), argv,
                             '/etc/virtualwire/controller.yaml')


def build_parser():
    p = argparse.ArgumentParser(
        prog='virtualwire-controller',
        description='VirtualWire SDN controller for Open vSwitch.')
    version.add_argument(p)
    p.add_argument('--state-dir', default='/var/lib/virtualwire',
                   help='where the local intent database lives')
    p.add_argument('--intent-db', default='',
                   help='OVSDB remote of the intent database: unix:PATH, or '
                        'ssl:IP:PORT[,ssl:IP:PORT...] (the members of a '
                        'cluster; needs --intent-db-ca); tcp: only with '
                        '--insecure-plaintext-lab (whoever reaches it can '
                        'write wires and credentials); default: start a '
                        'local ovsdb-server in --state-dir')
    daemon.add_intent_db_tls(p)
    p.add_argument('--of-listen', default='0.0.0.0:6653',
                   help='OpenFlow listen address HOST:PORT')
    tls = p.add_argument_group(
        'TLS', 'the controller\'s key and certificate (vw-pki issue --role '
        'controller) and the host CA (host-ca.pem, vw-pki). '
        'REST is served over HTTPS with that certificate. '
        'OpenFlow requires client certificates and '
        'admits a switch only as the host its certificate names; host '
        'OVSDBs are read over ssl: and must present their host\'s '
        'certificate. Files are re-read when they change (rotation needs '
        'no restart).')
    daemon.add_tls_files(tls, 'the CA whose certificates hosts present')
    tls.add_argument('--host-ca-key', default='', metavar='PEM',
                     help="the host CA's key: hosts then enrol through "
                          'this controller (vw-host-setup enroll) with a '
                          'join token or an operator\'s approval. Whoever '
                          'holds this controller holds that key; without '
                          'it, hosts take certificates from an offline CA '
                          '(vw-pki issue)')
    tls.add_argument('--insecure-plaintext-lab', action='store_true',
                     help='no TLS: OpenFlow and host OVSDB over plain TCP '
                          'and REST over plain HTTP, so anyone on those '
                          'networks can pose as a host or read tokens. For '
                          'a lab on one machine only.')
    p.add_argument('--host-ovsdb-port', type=int, default=6640,
                   help="port of each host's OVSDB, at the address its "
                        'switch connects from')
    p.add_argument('--host-ovsdb', action='append', default=[],
                   help='also read this host OVSDB remote (repeatable)')
    p.add_argument('--rest-listen', default='127.0.0.1:8780',
                   help='REST API listen address HOST:PORT')
    p.add_argument('--advertise-url', default='', metavar='URL',
                   help='the REST URL clients reach this instance at; '
                        'standbys redirect writes to the leader\'s '
                        '(default: from --rest-listen)')
    p.add_argument('--advertise-southbound-url', default='', metavar='URL',
                   help='the same for --southbound-rest-listen (what hooks '
                        'and agents are redirected to)')
    p.add_argument('--instance-name', default='',
                   help='this instance\'s name in the leadership record '
                        '(default: HOSTNAME:REST-PORT)')
    p.add_argument('--token-file', default='',
                   help='file holding the REST bearer token (created with '
                        'a random token if missing); default: '
                        'STATE_DIR/api-token')
    p.add_argument('--southbound-netns', default='',
                   help='open OpenFlow/OVSDB sockets in this network '
                        'namespace (a management VRF); REST stays in the '
                        'namespace the controller started in')
    p.add_argument('--southbound-rest-listen', default='',
                   help='also serve the REST API on HOST:PORT in the '
                        'southbound namespace, for hypervisor-side callers '
                        '(libvirt migration hooks); same token')
    p.add_argument('--rendezvous-listen', default='',
                   help='IP:PORT (and PORT+1) where extenders behind NATs '
                        'learn their public endpoints: an address they '
                        'reach over the public network (in the southbound '
                        'namespace)')
    p.add_argument('--move-timeout', type=_positive, default=900.0,
                   metavar='SECONDS',
                   help='cancel a vNIC move (migration) not activated by '
                        "the guest's first frame within this time: its wires "
                        'go back to the source alone (default: %(default)s)')
    p.add_argument('--placement', choices=(shared_settings.STRICT,
                                           shared_settings.TRUST_HOSTS),
                   default=shared_settings.STRICT,
                   help='strict: a vNIC is claimed only on the host the '
                        'cloud placed it on (`vwctl vnics place`), and moves '
                        'only when the cloud says so or its source host '
                        'reports the guest leaving (vw-host-agent); '
                        '%s: any host that plugs a vNIC the cloud '
                        'has not placed takes it (a compromised hypervisor '
                        'takes any such wire: labs only) (default: '
                        '%%(default)s)' % shared_settings.TRUST_HOSTS)
    p.add_argument('--hold', choices=('on', 'off', 'hosts'), default='hosts',
                   help="for migrations that do not say (the hook's 'hold'): "
                        "keep what a moving vNIC's destination gets while its "
                        'guest is paused; deliver what it never read on its '
                        'source, in order, once it runs there. hosts: where '
                        "the destination keeps them (vw-host-setup's "
                        'default, vw-hold); off: dropped (default: '
                        '%(default)s)')
    p.add_argument('--hold-frames', type=_hold_frames, default=512,
                   metavar='N',
                   help='held frames kept per moving vNIC, the newest '
                        '(default: %(default)s)')
    p.add_argument('--hold-bytes', type=_hold_bytes, default=1 << 20,
                   metavar='BYTES',
                   help='and at most this many bytes of them (default: '
                        '%(default)s)')
    p.add_argument('--hold-rate', type=_hold_rate, default=5000,
                   metavar='FRAMES',
                   help='a moving vNIC getting more frames a second than '
                        'this stops holding them for the rest of its move '
                        '(its destination drops them, as with --hold off; '
                        'the record says so); 0: no limit (default: '
                        '%(default)s)')
    p.add_argument('--copy-log', choices=('on', 'off'), default='on',
                   help="keep a moving guest's source copies on its host "
                        '(host.copy_log) where both hosts keep frames; '
                        'off: copies to the controller (default: '
                        '%(default)s; docs/live-migration.rst)')
    p.add_argument('--activate-at-stop', choices=('on', 'off'), default='on',
                   help="switch a moving vNIC's delivery to its destination "
                        "as soon as its source host's vw-host-agent says "
                        'libvirt paused the guest there for the last copy '
                        "(the destination's tap keeps what it is handed "
                        'until the guest runs there); off: at the guest\'s '
                        'first frame on its destination (default: '
                        '%(default)s)')
    p.add_argument('--activation-settle-ms', type=_settle_ms, default=20,
                   metavar='MS',
                   help="after a moving guest's first frame switched its "
                        'destination over, wait this long before sending '
                        'the cleanup bundles, 0-1000 (default: '
                        '%(default)s)')
    p.add_argument('--stats-interval', type=_stats_interval, default=2.0,
                   metavar='SECONDS',
                   help="read every switch's flow counters this often, "
                        '1-5 s (REST stats, /metrics, the dashboard answer '
                        'from the last reading; default: %(default)s)')
    loss.add_arguments(p)
    p.add_argument('--collector', default='', metavar='URL[,URL]',
                   help='read flow counters from these collector processes '
                        '(virtualwire-collector; the first that answers), '
                        'not on this process\'s loop; switches must list '
                        'the collector as a controller target')
    p.add_argument('--collector-token-file', default='', metavar='FILE',
                   help="the collector's token (its --token-file)")
    p.add_argument('--collector-ca', default='', metavar='PEM',
                   help="the CA of the collector's certificate (the "
                        'controller CA); default: system CAs')
    p.add_argument('--collector-listen', action='append', default=[],
                   metavar='pssl:PORT[:IP]',
                   help='the local intent database also listens here for '
                        'the collector (repeatable): a certificate of '
                        '--collector-ca may write the counter base there '
                        'and nothing else (RBAC); from the server\'s next '
                        'start; needs the TLS files, not with --intent-db')
    p.add_argument('--audit-log', default='', metavar='FILE',
                   help='append a JSON line per change asked for, refused '
                        'ones included (default: STATE_DIR/audit.log)')
    daemon.add_log_arguments(p)
    return p


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise argparse.ArgumentTypeError('must be a number of seconds > 0, '
                                         'got %r' % text)
    return value


def _stats_interval(text):
    v = _positive(text)
    if not 1.0 <= v <= 5.0:
        raise argparse.ArgumentTypeError('must be 1 to 5 seconds, got %s'
                                         % text)
    return v


def _bounded_int(text, low, high, what):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%s must be a whole number, not %r'
                                         % (what, text))
    if not low <= n <= high:
        raise argparse.ArgumentTypeError('%s must be %d-%d, not %d'
                                         % (what, low, high, n))
    return n


def _hold_frames(text):
    return _bounded_int(text, 1, 65536, '--hold-frames')


def _hold_bytes(text):
    return _bounded_int(text, 1500, 64 << 20, '--hold-bytes')


def _hold_rate(text):
    return _bounded_int(text, 0, 1000000, '--hold-rate')


def _settle_ms(text):
    return _bounded_int(text, 0, 1000, '--activation-settle-ms')


def check_collector_listen(args, prog='virtualwire-controller'):
    """--collector-listen: pssl: listeners of the local database only,
    with the files its TLS needs."""
    from virtualwire.store import collector_access
    if not args.collector_listen:
        return
    why = ('the intent database is elsewhere (--intent-db): give its '
           'servers --collector-remote' if args.intent_db else
           'needs --private-key, --certificate and --collector-ca (the '
           "collector's CA)" if not (args.private_key and args.certificate
                                     and args.collector_ca) else None)
    for t in args.collector_listen:
        try:
            collector_access.check_target(t)
        except ValueError as e:
            why = why or str(e)
    if why:
        sys.exit('%s: --collector-listen: %s' % (prog, why))


def main(argv=None):
    args = parse_args(argv)
    daemon.check_intent_remote(args)
    check_collector_listen(args)
    hub = daemon.start(args)
    daemon.on_sighup(hub, args, lambda: parse_args(argv),
                      logging.getLogger('virtualwire'))
    # After the patch: contexts must be eventlet's to wrap green sockets.
    tls_files = daemon.load_tls(args)
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    from virtualwire.api import rest_enrolment, standby
    from virtualwire.api.audit import AuditLog
    from virtualwire.api.rest import RestApi
    from virtualwire.api.server import make_server
    from virtualwire.control.controller import Controller
    from virtualwire.control.loop import Loop
    from virtualwire.control.shared_settings import SettingsWatch
    from virtualwire.listen_guard import Refusals
    from virtualwire.southbound import of_listener
    from virtualwire.southbound.host_ovsdb import HostDbs
    from virtualwire.tls import configure_ovs_streams
    from virtualwire.store import local as local_ovsdb
    from virtualwire.store.intent import IntentStore
    from virtualwire.store.leadership import Leadership
    from virtualwire.store.members import MemberProbe
    from virtualwire.control.cloud_word import PlacementWatch
    from virtualwire.control.provider_switches import SwitchWatch
    from virtualwire.control.quiet_collections import QuietCollections
    from virtualwire.metrics.exporter import MembersCollector
    from virtualwire.metrics.gc_pauses import GcPauses
    from virtualwire.store.runtime import RuntimeStore

    of_host, of_port = daemon.split_listen(args.of_listen, '--of-listen')
    rest_host, rest_port = daemon.split_listen(args.rest_listen, '--rest-listen')
    token = daemon.read_or_create_token(args.token_file or
                                 os.path.join(args.state_dir, 'api-token'))
    remote = args.intent_db or local_ovsdb.ensure(
        args.state_dir, args.collector_listen,
        (args.private_key, args.certificate, args.collector_ca))

    if tls_files is not None:
        configure_ovs_streams(tls_files)
    if 'ssl:' in remote:
        remote = daemon.trusted_intent_remote(remote, args)
    loop = Loop()
    intent = IntentStore(remote)
    runtime = RuntimeStore(intent.client)
    host_dbs = HostDbs(loop)
    remote_collector = None
    if args.collector:
        from virtualwire.metrics.remote import RemoteCollector
        with open(args.collector_token_file or os.path.join(
                args.state_dir, 'collector-token')) as f:
            remote_collector = RemoteCollector(
                loop, args.collector.split(','), f.read().strip(),
                verify=args.collector_ca or True,
                interval=args.stats_interval)
    controller = Controller(loop, intent, runtime, host_dbs,
                            ovsdb_port=args.host_ovsdb_port,
                            move_timeout=args.move_timeout,
                            stats_interval=args.stats_interval,
                            counter_lag=(args.counter_lag, args.max_flight),
                            activation_settle=(args.activation_settle_ms /
                                               1000.0),
                            hold=shared_settings.hold_mode(args.hold),
                            activate_at_stop=args.activate_at_stop == 'on',
                            strict=args.placement == shared_settings.STRICT,
                            hold_frames=args.hold_frames,
                            hold_bytes=args.hold_bytes,
                            hold_rate=args.hold_rate,
                            require_identity=tls_files is not None,
                            active=False, collector=remote_collector,
                            quiet=QuietCollections())
    host_dbs.on_hosts = controller.on_hosts
    controller.tables.copies_on_hosts = args.copy_log == 'on'
    # What every instance must share comes from the intent database.
    controller.settings = SettingsWatch(intent.settings, controller,
                                        shared_settings.from_flags(args))
    intent.client.observe = controller.instruments.ovsdb.observe
    GcPauses(controller.instruments.gc_paused).install()
    # Every member, not just the one the IDL talks to (alerts).
    members = MemberProbe(remote).start()
    controller.instruments.registry.register(MembersCollector(members))
    refusals = Refusals()       # every listener's, for /metrics
    controller.instruments.registry.register(refusals)
    scheme = 'https' if tls_files else 'http'
    own = {'rest': args.advertise_url or '%s://%s:%d' % (
        scheme, rest_host, rest_port)}
    if args.southbound_rest_listen:
        own['southbound'] = args.advertise_southbound_url or \
            '%s://%s' % (scheme, args.southbound_rest_listen)
    # One active instance: the holder of the intent database's lock.
    leadership = Leadership(
        intent.client, args.instance_name or '%s:%d' % (
            socket.gethostname(), rest_port), own['rest'],
        own.get('southbound', ''),
        on_change=lambda st: loop.post(controller.on_leadership, st))
    intent.client.on_run = leadership.poll
    api = RestApi(loop, controller, intent, runtime, token, AuditLog(
        args.audit_log or os.path.join(args.state_dir, 'audit.log')),
        own_urls=own, signer=rest_enrolment.signer_from(args))

    # REST socket first: it stays in our namespace even if the southbound
    # sockets go into the management one.
    server = make_server(rest_host, rest_port, api, tls=tls_files,
                         refusals=refusals)
    if args.southbound_netns:
        from virtualwire import netns
        netns.enter(args.southbound_netns)
    servers = [server]
    if args.rendezvous_listen:
        from virtualwire.southbound.rendezvous import Rendezvous
        Rendezvous(*daemon.split_listen(args.rendezvous_listen,
                           '--rendezvous-listen')).start()
    if args.southbound_rest_listen:
        sb_host, sb_port = daemon.split_listen(args.southbound_rest_listen,
                                  '--southbound-rest-listen')
        servers.append(make_server(sb_host, sb_port, standby.southbound(api),
                                   tls=tls_files, name='southbound_rest',
                                   refusals=refusals))

    # Wire changes are events from the first one on; the controller's
    # start (a full read) is queued first, so it runs before any of them.
    loop.post(controller.start)
    intent.on_change = lambda events, n: loop.post(controller.on_intent,
                                                   events, n)
    intent.start()
    runtime.start()
    loop.run_pending()                   # start now, before any switch
    for r in args.host_ovsdb:
        host_dbs.watch(r)

    cfg.CONF(args=['--ofp-listen-host', of_host,
                   '--ofp-tcp-listen-port', str(of_port)],
             project='os_ken')
    mgr = AppManager.get_instance()
    mgr.load_apps(['os_ken.controller.ofp_handler',
                   'virtualwire.southbound.osken_app'])
    # os-ken's handler with our listener (TLS contexts per connection).
    mgr.applications_cls['os_ken.controller.ofp_handler'] = \
        of_listener.handler_class(
            of_host, of_port, tls_files,
            lambda peer, why: loop.post(
                controller.admission.tls_refused, peer, why),
            refusals=refusals)
    services = mgr.instantiate_apps(controller=controller, loop=loop,
                                    **mgr.create_contexts())
    # What start-up built is scanned by no later collection.
    logging.getLogger('virtualwire').info(
        'start-up heap frozen: %d objects',
        controller.quiet.settle_start_up())
    services.append(hub.spawn(loop.run))
    loop.every(1.0, controller.tick)
    services.append(hub.spawn(daemon.poll_forever, hub, controller.settings,
                              'the shared settings'))
    # Revoked certificates: sessions presenting one are hung up at once.
    from virtualwire.control.admission import REVOCATION_POLL, RevocationWatch
    services.append(hub.spawn(daemon.poll_forever, hub, RevocationWatch(
        intent.revocations,
        lambda entries: loop.post(controller.on_revocations, entries)),
        'the revocation list', REVOCATION_POLL))
    # The cloud's word on placement, as other instances and tools write it.
    services.append(hub.spawn(daemon.poll_forever, hub, PlacementWatch(
        intent.placements, lambda ch: loop.post(controller.on_words, ch)),
        'the vNIC placements'))
    services.append(hub.spawn(daemon.poll_forever, hub, SwitchWatch(
        intent.switches, lambda sw: loop.post(controller.on_switches, sw)),
        'the provider switches'))
    from virtualwire.control.holding import POLL
    loop.every(POLL, controller.poll_held,
               when=lambda: controller.holding.polls_wanted)
    if tls_files is not None:       # a broken rotation is logged early
        loop.every(10.0, tls_files.refresh)
    # The collector paces itself (metrics.collector.BUDGET).
    loop.every(min(0.25, args.stats_interval / 4), controller.collect)
    services += [hub.spawn(s.serve_forever) for s in servers]
    logging.getLogger('virtualwire').info(
        'controller up: OpenFlow %s %s:%d, REST %s://%s:%d/v1, intent %s',
        'TLS' if tls_files else 'PLAIN (lab)', of_host, of_port,
        'https' if tls_files else 'http', rest_host, rest_port, remote)

    def save():     # counters read since the last save (a restart goes on)
        if controller.active:
            loop.call(controller.collector.save, timeout=2.0)
        runtime.stop(timeout=3.0)
    daemon.run_until_stopped(hub, services, mgr, save,
                              logging.getLogger('virtualwire'))


if __name__ == '__main__':
    main()
