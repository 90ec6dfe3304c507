"""The intent database over TLS, checked as strictly as a browser checks a
web site: the server's certificate must come from the database's own CA
(`--intent-db-ca`, e.g. the controller CA) and name the database
(`--intent-db-name`), verified in the handshake, before one byte of the
database is read.

Why a stream of our own: the `ovs` library's SSL settings are one
process-wide CA file, which for the hosts' OVSDB is the host CA; with it, a
host's certificate would pass for the intent database's. So `ssl:` remotes
of the intent database are opened as `vwdb-ssl:`, a subclass of the
library's SSL stream with its own CA and a host-name check (`check_hostname`
against the expected name, not the address dialled). Our own key and
certificate are the controller's, as for every other channel.
"""
import socket
import ssl

import ovs.socket_util
import ovs.stream

from virtualwire import netns

SCHEME = 'vwdb-ssl'


class _IntentDbStream(ovs.stream.SSLStream):
    ca_file = ''
    server_name = ''

    @staticmethod
    def _open(suffix, dscp):
        address = ovs.socket_util.inet_parse_active(suffix, 0, raises=False)
        with netns.at_home():       # not in the southbound namespace
            family, sock = ovs.socket_util.inet_create_socket_active(
                socket.SOCK_STREAM, address)
        if sock is None:
            return family, sock
        ssl_sock = _context().wrap_socket(sock, do_handshake_on_connect=False,
                                   server_hostname=_IntentDbStream.server_name)
        error = ovs.socket_util.inet_connect_active(ssl_sock, address, family,
                                                    dscp)
        return error, ssl_sock


def configure(ca_file, server_name):
    """Open the intent database's `ssl:` remotes with this CA and name
    (after `virtualwire.tls.configure_ovs_streams` set our key and
    certificate)."""
    _IntentDbStream.ca_file = ca_file
    _IntentDbStream.server_name = server_name
    ovs.stream.Stream.register_method(SCHEME, _IntentDbStream)


def _context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = True
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(_IntentDbStream.ca_file)
    ctx.load_cert_chain(ovs.stream.Stream._SSL_certificate_file,
                        ovs.stream.Stream._SSL_private_key_file)
    return ctx


def why_not(remote, timeout=5.0):
    """Each `ssl:` member's handshake tried as the IDL will make it: {member:
    why it failed} for those that fail (a wrong CA, a certificate that does
    not name the database, nobody listening), so a start that cannot trust
    the database says why instead of waiting."""
    out = {}
    for part in remote.split(','):
        if not part.startswith('ssl:'):
            continue
        host, _, port = part[4:].rpartition(':')
        try:
            with socket.create_connection((host.strip('[]'), int(port)),
                                          timeout) as raw:
                with _context().wrap_socket(
                        raw, server_hostname=_IntentDbStream.server_name):
                    pass
        except ssl.SSLCertVerificationError as e:
            out[part] = 'its certificate is not the intent database\'s: %s' \
                % e.verify_message
        except (OSError, ValueError) as e:
            out[part] = str(e) or e.__class__.__name__
    return out


def translate(remote):
    """'ssl:a:p,ssl:b:p' -> the same members over our checked stream."""
    return ','.join(SCHEME + part[3:] if part.startswith('ssl:') else part
                    for part in remote.split(','))
