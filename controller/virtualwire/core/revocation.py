"""Is a certificate revoked? Pure: from its identity (virtualwire.tls.Identity:
names, SHA-256 fingerprint, not-before) and the revocation list's entries
(store.revocations), as every channel that takes host certificates asks.

Two kinds of entry take certificates back:
- `certificate`: one certificate, by fingerprint (a key known stolen while
  its host is re-issued a new one);
- `host`: every certificate naming the host that was valid before the
  revocation: the host is out until it is given a new certificate (the
  enrolment signer dates new ones after the revocation; `vw-pki issue`
  dates them now).
What this cannot do: take back a certificate on a channel whose server
has no hook for it (ovsdb-server has no revocation list: the intent
database's members trust the controller CA alone).
"""
import time

CERT_PREFIX = 'sha256:'


def certificate_digest(fingerprint):
    return CERT_PREFIX + fingerprint.lower()


def refusal(identity, entries):
    """Why `identity`'s certificate is refused, or None."""
    if identity is None:
        return None
    fp = getattr(identity, 'fingerprint', None)
    nb = getattr(identity, 'not_before', None)
    for e in entries:
        if e['kind'] == 'certificate' and fp and \
                e['digest'] == certificate_digest(fp):
            return 'its certificate (sha256 %s...) was revoked at %s: %s' % (
                fp[:16], _when(e['revoked_at']), e['reason'])
        if e['kind'] == 'host' and e['name'] in identity and \
                (nb is None or nb <= e['revoked_at']):
            return ('host %s was revoked at %s (%s): its certificates from '
                    'before then are refused' % (
                        e['name'], _when(e['revoked_at']), e['reason']))
    return None


def host_floor(entries, name):
    """The time after which a new certificate for `name` must start (its
    latest revocation), or None."""
    times = [e['revoked_at'] for e in entries
             if e['kind'] == 'host' and e['name'] == name]
    return max(times) if times else None


def _when(t):
    return time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime(t))
