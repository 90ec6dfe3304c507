"""The REST client vwctl uses, and its configuration (see `cli.vwctl`)."""
import configparser
import os

import requests

DEFAULT_CONFIG = os.path.expanduser('~/.config/virtualwire/vwctl.conf')


class CliError(Exception):
    def __init__(self, message, items=()):
        super().__init__(message)
        self.items = list(items)     # a refused batch's items, as the API


def read_token_file(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        raise CliError('cannot read token file %s: %s' % (path, e.strerror))


def load_config(args):
    """(url, token, ca_cert): ca_cert the controller CA to verify its
    certificate against (None: the system's CAs)."""
    url = args.url or os.environ.get('VWCTL_URL')
    token = read_token_file(args.token_file) if args.token_file \
        else os.environ.get('VWCTL_TOKEN')
    ca = args.ca_cert or os.environ.get('VWCTL_CA_CERT')
    path = args.config or os.environ.get('VWCTL_CONFIG') or DEFAULT_CONFIG
    if os.path.exists(path):
        cp = configparser.ConfigParser()
        cp.read(path)
        sect = cp['vwctl'] if cp.has_section('vwctl') else {}
        url = url or sect.get('url')
        ca = ca or sect.get('ca_cert')
        if not token and sect.get('token_file'):
            token = read_token_file(sect['token_file'])
        token = token or sect.get('token')
    elif args.config:
        raise CliError('config file %s does not exist' % args.config)
    if ca and not os.access(ca, os.R_OK):
        raise CliError('cannot read CA certificate %s' % ca)
    return (url or 'https://127.0.0.1:8780').rstrip('/'), token or '', \
        ca or None


class Client:
    def __init__(self, url, token, timeout=15, ca_cert=None):
        self.url, self.timeout = url, timeout
        self.session = requests.Session()
        # Per request: a session's `verify` loses to $REQUESTS_CA_BUNDLE.
        self.verify = ca_cert or True
        if token:
            self.session.headers['Authorization'] = 'Bearer ' + token

    def call(self, method, path, body=None, timeout=None):
        try:
            r = self.session.request(method, self.url + path, json=body,
                                     timeout=timeout or self.timeout,
                                     verify=self.verify)
        except requests.exceptions.SSLError as e:
            raise CliError('the controller at %s failed TLS verification '
                           '(is ca_cert the controller CA?): %s'
                           % (self.url, e.__class__.__name__))
        except requests.RequestException as e:
            raise CliError('cannot reach the controller at %s: %s'
                           % (self.url, e.__class__.__name__))
        if r.status_code >= 400:
            items: list = []
            try:
                err = r.json()['error']
                msg, items = err['message'], err.get('items') or []
            except (ValueError, KeyError, TypeError):
                msg = r.text.strip() or r.reason
            raise CliError('%s (HTTP %d)' % (msg, r.status_code), items)
        return r.json() if r.content else {}
