"""virtualwire-extender: the command that runs an extender's agent
(`extender.agent`): its arguments, checked, and its signals."""
import argparse
import logging
import signal
import sys

from virtualwire.extender.agent import RELAY_RECHECK, REPROBE_AFTER, Agent
from virtualwire.extender.network_io import ControllerClient, check_urls
from virtualwire.extender.switch import Switch
from virtualwire import config_file, daemon, version

LOG = logging.getLogger('virtualwire.extender')


def build_parser():
    p = argparse.ArgumentParser(prog='virtualwire-extender',
                                description="keeps an extender's encrypted "
                                'links as its controller says')
    version.add_argument(p)
    p.add_argument('--name', required=True, help="this extender's host name")
    p.add_argument('--state-dir', required=True,
                   help='identity (WireGuard key), logs, links cache')
    p.add_argument('--controller', required=True,
                   help="URL of the controller's southbound REST; of "
                        'an HA set, every instance\'s, comma-separated')
    p.add_argument('--token-file', required=True,
                   help='bearer token for the controller')
    p.add_argument('--ca-cert', default='',
                   help='the controller CA (controller-ca.pem): the only '
                        'issuer whose certificate the controller may show')
    p.add_argument('--insecure-plaintext-lab', action='store_true',
                   help='allow an http:// controller URL: whoever sits on '
                        'the path could then swap peers\' keys. Lab only.')
    p.add_argument('--rendezvous', required=True,
                   help="IP:PORT of the controller's rendezvous (it also "
                        'answers on PORT+1)')
    p.add_argument('--db', help='OVSDB of this host (ovs-vsctl --db)')
    p.add_argument('--bridge', default='br-vw',
                   help="VirtualWire's integration bridge on this host "
                        '(vw-host-setup --bridge; default: %(default)s)')
    p.add_argument('--vswitchd-ctl', default='ovs-vswitchd',
                   help='ovs-appctl target of this host\'s ovs-vswitchd')
    p.add_argument('--wireguard', default='boringtun-cli',
                   help='the userspace WireGuard daemon: boringtun-cli '
                        '(measured faster here) or wireguard-go')
    p.add_argument('--interval', type=float, default=1.0,
                   help='seconds between reports to the controller '
                        '(default: %(default)s)')
    p.add_argument('--link-rate', default='', metavar='RATE',
                   help="the rate each link carries (tc units, e.g. 95mbit: "
                        "a little below the slower of the path's rate and "
                        "what the WireGuard daemon carries here): the link "
                        "is shaped to it, the wires' frames first, a "
                        "migration's stream after them. Default: unshaped "
                        "(nothing caps a link, and nothing keeps the wires "
                        "ahead of other traffic on it)")
    p.add_argument('--reprobe-after', type=config_file.seconds(0.5, 3600),
                   default=REPROBE_AFTER,
                   metavar='SECONDS',
                   help='how long a link stays down before its port is '
                        'probed again through the NAT (default: %(default)s)')
    p.add_argument('--relay-recheck', type=config_file.seconds(0.5, 3600),
                   default=RELAY_RECHECK,
                   metavar='SECONDS',
                   help='while a link goes through a relay, how often the NAT '
                        'is asked again whether a direct link would work '
                        '(default: %(default)s)')
    daemon.add_log_arguments(p)
    return p


def main(argv=None):
    p = build_parser()
    args = config_file.parse(p, argv, '/etc/virtualwire/extender.yaml')
    urls = [u.strip() for u in args.controller.split(',') if u.strip()]
    try:                       # every URL of an HA set, not just the first
        check_urls(urls, args.insecure_plaintext_lab)
    except ValueError as e:
        p.error('--controller: %s: anyone on the path could read the token '
                'and swap peers\' keys; use https:// with --ca-cert, or '
                '--insecure-plaintext-lab in a lab' % e)
    if any(u.lower().startswith('https://') for u in urls) and \
            not args.ca_cert:
        p.error('an https:// controller needs --ca-cert (the controller '
                'CA, pinned)')
    daemon.configure_logging(args)
    token = daemon.read_token(args.token_file)
    host, _, port = args.rendezvous.rpartition(':')
    agent = Agent(args.name, args.state_dir,
                  ControllerClient(args.controller, token,
                                   args.ca_cert or None), (host, int(port)),
                  Switch(args.db, bridge=args.bridge,
                         vswitchd_ctl=args.vswitchd_ctl),
                  args.wireguard, args.link_rate, args.reprobe_after,
                  args.relay_recheck)

    def bye(*_):
        agent.shutdown()
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    signal.signal(signal.SIGINT, bye)
    LOG.info('extender %s, public key %s', args.name, agent.public_key)
    agent.run(args.interval)


if __name__ == '__main__':
    main()
