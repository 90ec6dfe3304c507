"""The REST client vwctl uses, and its configuration (see `cli.vwctl`)."""
import configparser
import os

import requests

DEFAULT_CONFIG = os.path.expanduser('~/.config/virtualwire/vwctl.conf')


class CliError(Exception):
    pass


def load_config(args):
    url, token = args.url or os.environ.get('VWCTL_URL'), \
        args.token or os.environ.get('VWCTL_TOKEN')
    path = args.config or os.environ.get('VWCTL_CONFIG') or DEFAULT_CONFIG
    if os.path.exists(path):
        cp = configparser.ConfigParser()
        cp.read(path)
        sect = cp['vwctl'] if cp.has_section('vwctl') else {}
        url = url or sect.get('url')
        if not token and sect.get('token_file'):
            try:
                with open(sect['token_file']) as f:
                    token = f.read().strip()
            except OSError as e:
                raise CliError('cannot read token file %s: %s'
                               % (sect['token_file'], e.strerror))
        token = token or sect.get('token')
    elif args.config:
        raise CliError('config file %s does not exist' % args.config)
    return (url or 'http://127.0.0.1:8780').rstrip('/'), token or ''


class Client:
    def __init__(self, url, token, timeout=15):
        self.url, self.timeout = url, timeout
        self.session = requests.Session()
        if token:
            self.session.headers['Authorization'] = 'Bearer ' + token

    def call(self, method, path, body=None):
        try:
            r = self.session.request(method, self.url + path, json=body,
                                     timeout=self.timeout)
        except requests.RequestException as e:
            raise CliError('cannot reach the controller at %s: %s'
                           % (self.url, e.__class__.__name__))
        if r.status_code >= 400:
            try:
                msg = r.json()['error']['message']
            except (ValueError, KeyError, TypeError):
                msg = r.text.strip() or r.reason
            raise CliError('%s (HTTP %d)' % (msg, r.status_code))
        return r.json() if r.content else {}
