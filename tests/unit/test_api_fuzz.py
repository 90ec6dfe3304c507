"""The REST API fuzzed from its own OpenAPI document (schemathesis): every
operation, with generated valid and invalid input, against a real
controller on a fake fabric. No answer may be a server error, and every
answer must be one the document declares, in the declared shape."""
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (negative_data_rejection,
                                 positive_data_acceptance)
from schemathesis.generation.meta import GenerationMode, ParameterLocation

from virtualwire.api.rate_limit import RateLimits
from virtualwire.api.rest import RestApi
from virtualwire.core import credentials
from virtualwire.testing.harness import Harness

TOKEN = 'fuzz-token'


def _excluded(case):
    """Checks that cannot hold for this case. A schema-valid request may
    still be refused for rules the document cannot declare (a wire's two
    ends must differ). And a case whose headers were made invalid (the
    Authorization header dropped) is sent with our token put back, so the
    server rightly accepts it: CI once saw that counted as accepting bad
    input."""
    out = [positive_data_acceptance]
    header = (case.meta.components.get(ParameterLocation.HEADER)
              if case.meta is not None else None)
    if header is not None and header.mode == GenerationMode.NEGATIVE:
        out.append(negative_data_rejection)
    return out


def _app():
    h = Harness()
    h.host('h1', ('a', 1), ('b', 2), ('c', 3))
    h.host('h2', ('d', 1))
    h.connect('a', 'd')
    for v in ('a', 'b', 'd'):
        h.intent.ownership.assign(v, 'acme')
    h.intent.ownership.assign('c', 'globex')
    h.collect()         # stats answer from the collector's first reading
    return h, RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN)


HARNESS, APP = _app()
# Every generated request should reach its operation, not the limiter
# (whose 429 the document declares; test_credential_limits covers it).
APP.rate_limits = RateLimits(rate=1e9, burst=1e9)
schema = schemathesis.openapi.from_wsgi('/v1/openapi.json', APP)
# A body over an operation's limit is refused with 413 before its fields
# are read: a rejection the document declares, though not in schemathesis's
# default list (CI once saw a long Unicode host name counted as accepted).
_REJECT = schema.config.checks.negative_data_rejection
schema.config.checks.negative_data_rejection = type(_REJECT)(
    expected_statuses=[*_REJECT.expected_statuses, '413'])
# Scoped credentials (core.credentials): what each may do is narrower, and
# nothing any of them sends may make the server fail.
SCOPED = {role: HARNESS.intent.credentials.issue(role, name)[0]
          for role, name in (('reader', 'noc'), ('hypervisor', 'h2'),
                             ('extender', 'h1'), ('tenant', 'acme'),
                             ('tenant-reader', 'acme'),
                             ('orchestrator', 'nova'),
                             ('operator', 'alice'))}
assert set(SCOPED) == set(credentials.ROLES), 'every credential fuzzed'


@pytest.fixture(scope='module', autouse=True)
def loop_running():
    stop = HARNESS.run_threads()
    yield
    stop()


@schema.parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_api_answers_as_documented(case):
    auth = {'Authorization': 'Bearer ' + TOKEN}
    response = case.call(headers=auth)
    assert response.status_code < 500, (case.method, case.formatted_path,
                                        response.text)
    case.validate_response(response, headers=auth,
                           excluded_checks=_excluded(case))


@schema.parametrize()
@settings(max_examples=10, deadline=None,
          suppress_health_check=list(HealthCheck))
@pytest.mark.parametrize('role', sorted(SCOPED))
def test_scoped_credentials_never_make_the_server_fail(case, role):
    auth = {'Authorization': 'Bearer ' + SCOPED[role]}
    response = case.call(headers=auth)
    assert response.status_code < 500, (role, case.method,
                                        case.formatted_path, response.text)
    case.validate_response(response, headers=auth,
                           excluded_checks=_excluded(case))


def test_the_document_is_valid_openapi():
    """Client generators reject an invalid document: check it with a
    standard validator (3.1: nullable fields are type lists)."""
    from openapi_spec_validator import validate
    from virtualwire.api.openapi import openapi_document
    doc = openapi_document()
    assert doc['openapi'] == '3.1.0'
    validate(doc)
