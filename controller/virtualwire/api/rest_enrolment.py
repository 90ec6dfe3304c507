"""Enrolment over REST (`core.enrolment`, `store.enrolment`).

Without a token, on either listener (a host has none yet): a host asks
for a certificate (POST /v1/enrolments) and polls for it with the secret
the answer gave it (POST /v1/enrolments/NAME/poll). A join token in the
request enrols at once. With the operator's token: the pending list,
approve, refuse, and join tokens.

The controller signs only with --host-ca-key; without it every call says
so (503) and hosts take certificates from an offline CA (vw-pki)."""
import os
import time
from typing import Any

import webob

from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import enrolment, errors, revocation

MAX_ENROL_BODY = 16384


class Signer:
    """The host CA, read from its files at each signing (a rotated CA is
    used without a restart)."""

    def __init__(self, ca_cert, ca_key):
        self.ca_cert, self.ca_key = ca_cert, ca_key

    def for_host(self, name, not_before_floor=None):
        """`not_before_floor`: the host's last revocation (Unix time): its
        new certificate starts after it, or it would be refused too."""
        with open(self.ca_cert) as f:
            ca_pem = f.read()
        with open(self.ca_key) as f:
            key_pem = f.read()
        return lambda csr: enrolment.sign(csr, name, ca_pem, key_pem,
                                          not_before_floor=not_before_floor)


def _str(doc, key, required=True):
    v = doc.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise errors.Invalid('%s must be a non-empty string' % key)
    return v


class EnrolmentHandlers:
    signer: Any = None     # Signer, when --host-ca-key is given
    intent: Any            # store.intent.IntentStore

    def _floor(self, name):
        revs = getattr(self.intent, 'revocations', None)
        return revocation.host_floor(revs.entries(), name) if revs else None

    def _signer(self):
        if self.signer is None:
            raise errors.Unavailable(
                'this controller does not sign (no --host-ca-key): take a '
                'certificate from your offline CA (vw-pki issue)')
        return self.signer

    # -- hosts, no token -------------------------------------------------
    def request_enrolment(self, req):
        doc = read_json_object(req, MAX_ENROL_BODY)
        unknown = set(doc) - {'name', 'csr', 'join_token'}
        if unknown:
            raise errors.Invalid('unknown field(s): %s'
                                 % ', '.join(sorted(unknown)))
        name = enrolment.check_name(_str(doc, 'name'))
        signer = self._signer()
        state, cert, secret = self.intent.enrolment.request(
            name, _str(doc, 'csr'), req.remote_addr or '', time.time(),
            signer.for_host(name, self._floor(name)), _str(doc, 'join_token', required=False))
        fp = enrolment.fingerprint(enrolment.load_csr(doc['csr']))
        if state == 'approved':
            return json_response(201, {'name': name, 'state': state,
                                       'fingerprint': fp,
                                       'certificate': cert})
        return json_response(202, {'name': name, 'state': state,
                                   'fingerprint': fp,
                                   'poll_secret': secret})

    def poll_enrolment(self, req, name):
        doc = read_json_object(req, 1024)
        state, cert = self.intent.enrolment.poll(
            enrolment.check_name(name), _str(doc, 'poll_secret'))
        body = {'name': name, 'state': state}
        if cert:
            body['certificate'] = cert
        return json_response(200 if state == 'approved' else 202, body)

    # -- the operator ----------------------------------------------------
    def list_enrolments(self, req):
        return json_response(200, {'enrolments':
                                   self.intent.enrolment.pending()})

    def approve_enrolment(self, req, name):
        signer = self._signer()
        self.intent.enrolment.approve(enrolment.check_name(name),
                                      signer.for_host(name, self._floor(name)))
        return json_response(200, {'name': name, 'state': 'approved'})

    def refuse_enrolment(self, req, name):
        self.intent.enrolment.refuse(enrolment.check_name(name))
        return webob.Response(status=204)

    def issue_join_token(self, req):
        self._signer()              # a token nobody can redeem helps none
        doc = read_json_object(req)
        name = enrolment.check_name(_str(doc, 'name'))
        ttl = doc.get('ttl', 3600)
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise errors.Invalid('ttl must be whole seconds')
        token, expires = self.intent.enrolment.issue_token(
            name, ttl, time.time())
        return json_response(201, {'name': name, 'token': token,
                                   'expires_at': expires})


def signer_from(args):
    """A Signer from --host-ca-key (with --ca-cert, the host CA), or None;
    exits saying why when the key cannot be read."""
    key = getattr(args, 'host_ca_key', '')
    if not key:
        return None
    for path in (key, args.ca_cert):
        if not path or not os.access(path, os.R_OK):
            raise SystemExit('virtualwire-controller: --host-ca-key needs '
                             'the host CA certificate (--ca-cert) and key '
                             'readable: %s' % (path or '--ca-cert'))
    return Signer(args.ca_cert, key)
