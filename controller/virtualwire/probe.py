"""`python -m virtualwire.probe [--ready] [SETTINGS]`: wait until the
controller on this machine answers /healthz (or /readyz), at the address
its settings file gives. A unit's ExecStartPost, so `systemctl start`
returns when the controller serves, not when its process exists.

Only loopback is probed, and the probe sends no token: /healthz says
nothing but alive, so the certificate is not verified here (the REST
address may be 0.0.0.0, which no certificate names)."""
import argparse
import ssl
import sys
import time
import urllib.error
import urllib.request

from virtualwire import config_file


def url_of(args):
    host, _, port = args.rest_listen.rpartition(':')
    host = host.strip('[]')
    if host in ('', '0.0.0.0', '::'):
        host = '127.0.0.1'
    scheme = 'http' if args.insecure_plaintext_lab else 'https'
    return '%s://%s:%s' % (scheme, '[%s]' % host if ':' in host else host,
                           port)


def probe(url, path, timeout):
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + timeout
    last = ''
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + path, timeout=2,
                                        context=ctx) as r:
                return 0, r.read().decode()
        except urllib.error.HTTPError as e:
            last = '%d %s' % (e.code, e.read().decode()[:200])
        except OSError as e:
            last = str(e)
        time.sleep(0.25)
    return 1, last


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m virtualwire.probe')
    p.add_argument('settings', nargs='?',
                   default='/etc/virtualwire/controller.yaml')
    p.add_argument('--ready', action='store_true',
                   help='wait for /readyz, not /healthz')
    p.add_argument('--timeout', type=float, default=60.0)
    a = p.parse_args(argv)
    from virtualwire.main import build_parser
    ctl = config_file.parse(build_parser(), ['--config', a.settings], '')
    url = url_of(ctl)
    path = '/readyz' if a.ready else '/healthz'
    code, text = probe(url, path, a.timeout)
    if code:
        print('virtualwire.probe: %s%s did not answer within %.0f s: %s'
              % (url, path, a.timeout, text), file=sys.stderr)
    return code


if __name__ == '__main__':
    sys.exit(main())
