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
    """`url`: one controller, or every instance of an HA set separated by
    commas. Requests go to the last one that answered; one that cannot be
    reached is skipped; a standby's 307 is followed only to a controller
    of the list (anyone else would receive the token)."""

    def __init__(self, url, token, timeout=15, ca_cert=None):
        self.urls = [u.strip().rstrip('/') for u in url.split(',')
                     if u.strip()]
        self.url, self.timeout = self.urls[0], timeout
        self.session = requests.Session()
        # Per request: a session's `verify` loses to $REQUESTS_CA_BUNDLE.
        self.verify = ca_cert or True
        if token:
            self.session.headers['Authorization'] = 'Bearer ' + token

    def call(self, method, path, body=None, timeout=None, text=False):
        """The JSON answer (`text`: the body as text, e.g. a picture);
        CliError with the controller's message on any error."""
        r = self._send(method, path, body, timeout)
        if r.status_code >= 400:
            items: list = []
            try:
                err = r.json()['error']
                msg, items = err['message'], err.get('items') or []
            except (ValueError, KeyError, TypeError):
                msg = r.text.strip() or r.reason
            raise CliError('%s (HTTP %d)' % (msg, r.status_code), items)
        if text:
            return r.text
        return r.json() if r.content else {}

    def _send(self, method, path, body, timeout):
        order = [self.url] + [u for u in self.urls if u != self.url]
        failed = []
        redirects = 0
        while order:
            url = order.pop(0)
            try:
                r = self.session.request(method, url + path, json=body,
                                         timeout=timeout or self.timeout,
                                         verify=self.verify,
                                         allow_redirects=False)
            except requests.exceptions.SSLError as e:
                raise CliError('the controller at %s failed TLS verification '
                               '(is ca_cert the controller CA?): %s'
                               % (url, e.__class__.__name__))
            except requests.RequestException as e:
                failed.append('%s: %s' % (url, e.__class__.__name__))
                continue
            if r.status_code in (307, 308) and redirects < len(self.urls):
                redirects += 1
                leader = _origin(r.headers.get('Location', ''))
                if leader not in self.urls:
                    raise CliError(
                        'the controller at %s sent this request to %s, which '
                        'is not one of the configured controllers (%s): not '
                        'following it with your token' % (
                            url, leader or 'nowhere', ', '.join(self.urls)))
                order = [leader] + [u for u in order if u != leader]
                continue
            if r.status_code == 503 and order:
                failed.append('%s: no leader yet' % url)
                continue
            self.url = url
            return r
        raise CliError('cannot reach the controller at %s' % (
            failed[0] if len(self.urls) == 1 else
            'any of: ' + '; '.join(failed)))


def _origin(url):
    """scheme://host:port of a URL (what the list holds)."""
    parts = url.split('/')
    return '/'.join(parts[:3]) if len(parts) >= 3 else url
