"""Enrolment requests and join tokens on a real ovsdb-server, two
controllers' stores side by side: a token enrols once, for its host,
before it expires; a request waits for the operator and only its poller
learns the answer; the certificate names the host and nothing the CSR
asked for beside it."""
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vwtest import wait_until
from virtualwire.core import enrolment, errors
from virtualwire.store import local as local_ovsdb
from virtualwire.store.intent import IntentStore
from vwlab.pki import LabPki


@pytest.fixture
def two(tmp_path):
    remote = local_ovsdb.ensure(str(tmp_path / 'db'))
    a, b = IntentStore(remote).start(), IntentStore(remote).start()
    yield a.enrolment, b.enrolment
    a.stop()
    b.stop()
    local_ovsdb.stop(str(tmp_path / 'db'))


@pytest.fixture(scope='module')
def ca(tmp_path_factory):
    pki = LabPki(str(tmp_path_factory.mktemp('pki'))).init()
    with open(pki.host_ca) as f, \
            open(pki.host_ca.replace('.pem', '-key.pem')) as k:
        ca_pem, key_pem = f.read(), k.read()
    return lambda name: (lambda csr: enrolment.sign(csr, name, ca_pem,
                                                    key_pem)), ca_pem


def csr_for(cn, extra_dns=()):
    key = ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    if extra_dns:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in extra_dns]), critical=False)
    return b.sign(key, hashes.SHA256()).public_bytes(
        serialization.Encoding.PEM).decode()


def names(cert_pem):
    c = x509.load_pem_x509_certificate(cert_pem.encode())
    san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return ({a.value for a in c.subject.get_attributes_for_oid(
        NameOID.COMMON_NAME)} | set(san.value.get_values_for_type(
            x509.DNSName)))


def test_a_join_token_enrols_its_host_once(two, ca):
    one, other = two
    sign, ca_pem = ca
    token, expires = one.issue_token('h7', 600, now=1000.0)
    assert expires == 1600.0
    # A token for h7 does not enrol h8, nor after it expired.
    with pytest.raises(errors.Refused):
        other.request('h8', csr_for('h8'), '10.0.0.8', 1001.0, sign('h8'),
                      join_token=token)
    with pytest.raises(errors.Refused):
        other.request('h7', csr_for('h7'), '10.0.0.7', 1601.0, sign('h7'),
                      join_token=token)
    # The other controller signs it, as asked, with its name alone, once
    # its replica has the token (CI once asked a moment before: refused).
    wait_until(lambda: any(t.name == 'h7' for t in other._rows('JoinToken')),
               10, what="the token in the other controller's replica")
    state, cert, poll = other.request(
        'h7', csr_for('h7', extra_dns=['h1', '*']), '10.0.0.7', 1002.0,
        sign('h7'), join_token=token)
    assert (state, poll) == ('approved', None)
    assert names(cert) == {'h7'}
    # Used: a second presentation, at either controller, is refused.
    for s in (one, other):
        with pytest.raises(errors.Refused):
            s.request('h7', csr_for('h7'), '10.0.0.9', 1003.0, sign('h7'),
                      join_token=token)


def test_a_request_waits_for_the_operator_and_only_its_poller_learns(
        two, ca):
    one, other = two
    sign, _ = ca
    csr = csr_for('h9')
    state, cert, secret = one.request('h9', csr, '10.0.0.9', 2000.0,
                                      sign('h9'))
    assert (state, cert) == ('pending', None) and secret
    fp = enrolment.fingerprint(enrolment.load_csr(csr))
    # The other's replica hears of the request a moment later.
    wait_until(lambda: other.pending(), 10,
               what='the request seen through the other controller')
    assert [(p['name'], p['fingerprint'], p['state'], p['peer'])
            for p in other.pending()] == [('h9', fp, 'pending', '10.0.0.9')]
    # A second request for h9 while one waits: refused, saying whose key.
    with pytest.raises(errors.Conflict) as e:
        other.request('h9', csr_for('h9'), '10.6.6.6', 2001.0, sign('h9'))
    assert fp in e.value.message
    assert one.poll('h9', secret) == ('pending', None)
    with pytest.raises(errors.NotFound):
        one.poll('h9', 'not-the-secret')
    other.approve('h9', sign('h9'))
    # One's replica hears of it a moment later, as a polling host does.
    wait_until(lambda: one.poll('h9', secret)[0] == 'approved', 10,
               what='the approval seen through the other controller')
    state, cert = one.poll('h9', secret)
    assert state == 'approved' and names(cert) == {'h9'}
    with pytest.raises(errors.NotFound):
        other.approve('h9', sign('h9'))        # nothing pending now


def test_a_refused_request_is_gone_and_pending_ones_are_capped(
        two, ca, monkeypatch):
    one, other = two
    sign, _ = ca
    _s, _c, secret = one.request('hx', csr_for('hx'), '', 1.0, sign('hx'))
    # The other's replica hears of the request a moment later.
    wait_until(lambda: any(p['name'] == 'hx' for p in other.pending()), 10,
               what='the request seen through the other controller')
    other.refuse('hx')

    def gone():
        try:
            one.poll('hx', secret)
        except errors.NotFound:
            return True
        return False
    wait_until(gone, 10, what='the refusal seen through the other')
    from virtualwire.store import enrolment as store_enrolment
    monkeypatch.setattr(store_enrolment, 'MAX_PENDING', 2)
    one.request('ha', csr_for('ha'), '', 1.0, sign('ha'))
    one.request('hb', csr_for('hb'), '', 1.0, sign('hb'))
    wait_until(lambda: len(other.pending()) == 2, 10,
               what='both requests seen through the other controller')
    with pytest.raises(errors.TooMany):
        other.request('hc', csr_for('hc'), '', 1.0, sign('hc'))


def test_bad_requests_say_what_is_wrong(two, ca):
    one, _ = two
    sign, _ = ca
    for name, csr, says in (
            ('h 1', csr_for('h1'), 'a host name is'),
            ('h1', 'not a csr', 'not a PEM certificate request'),
            ('h1', 'x' * 9000, 'at most 8192')):
        with pytest.raises(errors.Invalid) as e:
            one.request(name, csr, '', 1.0, sign('h1'))
        assert says in e.value.message
    with pytest.raises(errors.Invalid):
        one.issue_token('h1', 30 * 24 * 3600, now=1.0)
    assert enrolment.not_after(one.request(
        'h1', csr_for('h1'), '', 1.0, sign('h1'),
        join_token=one.issue_token('h1', 60, 1.0)[0])[1]) > \
        datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(days=800)
