"""Host certificates taken back (core.revocation, control.admission,
`POST /v1/hosts/NAME/revoke`): a revoked certificate, or every one a
revoked host had until then, is hung up when the list says so and refused
after, on OpenFlow and in host database reports; a certificate issued
after the revocation lets the host back; bad input changes nothing; only
the operator may revoke. Shown on the lab in test_southbound_trust."""
import datetime
import json
import time

import webob
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from virtualwire.api.rest import RestApi
from virtualwire.core import enrolment, revocation
from virtualwire.core.ids import derived_dpid
from virtualwire.tls import Identity
from virtualwire.store.revocations import certificate_entry, host_entry
from virtualwire.testing.harness import TUN, Harness

D1 = derived_dpid('h1')

FP1, FP2 = 'a1' * 32, 'b2' * 32
ADMIN = 'operator-token'


def ident(name, fp, not_before):
    return Identity.of({name}, fp, not_before)


def test_a_certificate_is_refused_by_fingerprint_or_by_its_hosts_revocation():
    t = 1000.0
    old, new = ident('h1', FP1, t - 10), ident('h1', FP2, t + 10)
    assert revocation.refusal(old, []) is None
    by_fp = [certificate_entry('h1', FP1.upper(), 'stolen', now=t)]
    assert 'sha256 a1a1' in revocation.refusal(old, by_fp)
    assert revocation.refusal(new, by_fp) is None
    by_host = [host_entry('h1', 'decommissioned', now=t)]
    assert 'host h1 was revoked' in revocation.refusal(old, by_host)
    assert revocation.refusal(new, by_host) is None    # issued after
    assert revocation.refusal(ident('h2', FP1, t - 10), by_host) is None
    assert revocation.host_floor(by_host + by_fp, 'h1') == t


def test_a_new_certificate_starts_after_its_hosts_revocation():
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'host CA')])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, 'h1')]))
        .sign(key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = ca_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    revoked_at = time.time() - 60           # a minute ago
    for floor, later in ((None, False), (revoked_at, True)):
        pem = enrolment.sign(csr, 'h1', ca_pem, key_pem,
                             not_before_floor=floor)
        start = x509.load_pem_x509_certificate(pem.encode()) \
            .not_valid_before_utc.timestamp()
        # Backdated five minutes, except past the revocation.
        assert (start > revoked_at) is later, (floor, start, revoked_at)


def _lab():
    h = Harness(require_identity=True)
    h.host('h1', ('a', 1), identity=ident('h1', FP1, 100.0))
    h.host('h2', ('b', 1), identity=ident('h2', FP2, 100.0))
    h.connect('a', 'b')
    assert h.send('h1', 1) == [('h2', 1)]
    return h


def test_revoking_a_host_hangs_up_its_switch_and_refuses_it_after():
    h = _lab()
    s1, s2 = h.fabric.switches['h1'], h.fabric.switches['h2']
    h.loop.post(h.ctl.on_revocations, [host_entry('h1', 'stolen', 200.0)])
    h.settle()
    assert s1.closed and not s2.closed and D1 not in h.ctl.sessions
    why = h.call(h.ctl.views.status)['admission']['recent_refusals'][-1]['why']
    assert 'hung up: host h1 was revoked' in why
    # Its old certificate again (its switch reconnecting, or a thief).
    again = h.fabric.add('h1-again', D1, {TUN: h.ip('h1')})
    h.loop.post(h.ctl.on_switch_up, again, ident('h1', FP1, 100.0))
    h.settle()
    assert again.closed and D1 not in h.ctl.sessions
    # Its database's reports are not believed either.
    h.host('h1', ('a', 1), ('z', 9), identity=ident('h1', FP1, 100.0),
           connect=False)
    assert 'z' not in [v.vnic_id for v in h.ctl.tables.hosts['h1'].vnics]
    # A certificate issued after the revocation lets it back.
    fresh = h.fabric.add('h1-new', D1, {TUN: h.ip('h1')})
    h.loop.post(h.ctl.on_switch_up, fresh, ident('h1', FP1[::-1], 300.0))
    h.settle()
    assert not fresh.closed and h.ctl.sessions[D1].dp is fresh
    assert h.send('h2', 1) == [('h1', 1)]


def test_revoking_one_certificate_leaves_the_others():
    h = _lab()
    h.loop.post(h.ctl.on_revocations,
                [certificate_entry('h2', FP2, 'key leaked')])
    h.settle()
    assert h.fabric.switches['h2'].closed
    assert not h.fabric.switches['h1'].closed and D1 in h.ctl.sessions


def _rest():
    h = Harness()
    h.host('h1', ('a', 1))
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, ADMIN)

    def call(method, path, body=None, token=ADMIN):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        return resp.status_int, resp.json
    return h, call


def test_the_operator_revokes_with_a_clear_answer_and_bad_input_changes_nothing():
    h, call = _rest()
    stop = h.run_threads()
    try:
        hyp = h.intent.credentials.issue('hypervisor', 'h1')[0]
        reader = h.intent.credentials.issue('reader', 'noc')[0]
        for body, what in (({'certificate': 'xyz'}, '64 hex digits'),
                           ({'certificate': None}, 'SHA-256 fingerprint'),
                           ({'certificat': FP1}, 'unknown field'),
                           ({'reason': ''}, 'reason must be')):
            status, doc = call('POST', '/v1/hosts/h1/revoke', body)
            assert status == 422 and what in doc['error']['message'], doc
        assert call('POST', '/v1/hosts/h1/revoke', {}, token=reader)[0] \
            == 403
        assert call('GET', '/v1/revocations', token=reader)[0] == 403
        assert call('GET', '/v1/revocations')[1] == {'revocations': []}
        assert h.intent.credentials.holder(hyp) == ('hypervisor', 'h1')
        status, doc = call('POST', '/v1/hosts/h1/revoke',
                           {'certificate': ':'.join([FP1[i:i + 2] for i in
                                                     range(0, 64, 2)])})
        assert status == 200 and doc['kind'] == 'certificate' and \
            doc['digest'] == 'sha256:' + FP1 and doc['tokens_revoked'] == []
        status, doc = call('POST', '/v1/hosts/h1/revoke',
                           {'reason': 'decommissioned'})
        assert status == 200 and doc['kind'] == 'host' and \
            doc['tokens_revoked'] == ['hypervisor']
        assert h.intent.credentials.holder(hyp) is None
        kinds = [e['kind'] for e in call('GET', '/v1/revocations')[1][
            'revocations']]
        assert kinds == ['certificate', 'host']
    finally:
        stop()
