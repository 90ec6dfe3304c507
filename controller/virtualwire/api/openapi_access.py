"""The OpenAPI paths of the operator's own business: scoped credentials
(`core.credentials`: issued, listed and revoked with the operator's
token) and the intent database's safe start (`control.safe_start`)."""
from virtualwire.core.credentials import MAX_LIFETIME, ROLES

_ERR = {'$ref': '#/components/responses/Error'}
_ROLE = {'type': 'string', 'enum': list(ROLES)}
_HOST = {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'}
_EXPIRES = {'type': ['number', 'null'],
            'description': 'Unix time after which the token is refused '
                           '(null: until revoked)'}
_LISTED = {'type': 'object', 'properties': {
    'role': _ROLE, 'name': _HOST, 'created_at': {'type': 'string'},
    'expires_at': _EXPIRES}}
_ISSUED = {'type': 'object', 'properties': {
    'role': _ROLE, 'name': _HOST, 'created_at': {'type': 'string'},
    'expires_at': _EXPIRES, 'token': {'type': 'string'}}}
_ORPHANS = {'type': 'object', 'properties': {
    'held_wires': {'type': 'array', 'items': {'type': 'string'}},
    'hosts': {'type': 'object',
              'additionalProperties': {'type': 'integer'}},
    'released': {'type': 'boolean'}}}


def intent_paths():
    ok = {'description': 'OK', 'content': {
        'application/json': {'schema': _ORPHANS}}}
    return {
        '/v1/intent/orphans': {'get': {
            'summary': 'Flows on switches of wires the intent database does '
                       'not have, held (not deleted) since the start',
            'responses': {'200': ok}}},
        '/v1/intent/release-orphans': {'post': {
            'summary': 'The intent database is right: delete the held '
                       'flows at the next sync (operator only)',
            'responses': {'200': ok}}},
    }


_REVOKED_FIELDS: dict = {
    'kind': {'type': 'string', 'enum': ['host', 'certificate', 'credential',
                                        'join-token']},
    'name': {'type': 'string'}, 'digest': {'type': 'string'},
    'revoked_at': {'type': 'number'}, 'reason': {'type': 'string'}}
_REVOKED = {'type': 'object', 'properties': _REVOKED_FIELDS}


def revocation_paths():
    return {
        '/v1/hosts/{name}/revoke': {
            'parameters': [{'name': 'name', 'in': 'path', 'required': True,
                            'schema': _HOST}],
            'post': {
                'summary': "Take back a host's certificates (operator "
                           'only): one, by SHA-256 fingerprint, or with no '
                           'fingerprint every one valid until now, with its '
                           'hypervisor and extender tokens. Connected '
                           'switches presenting one are hung up within a '
                           'second; a new certificate (enrolment, vw-pki) '
                           'lets the host back.',
                'requestBody': {'required': False, 'content': {
                    'application/json': {'schema': {
                        'type': 'object', 'additionalProperties': False,
                        'properties': {
                            'certificate': {'type': 'string',
                                            'pattern': '^[0-9a-fA-F:]{64,95}$'},
                            'reason': {'type': 'string', 'minLength': 1,
                                       'maxLength': 200}}}}}},
                'responses': {
                    '200': {'description': 'Revoked', 'content': {
                        'application/json': {'schema': {
                            'type': 'object', 'properties': dict(
                                _REVOKED_FIELDS, tokens_revoked={
                                    'type': 'array',
                                    'items': {'type': 'string'}})}}}},
                    '411': _ERR, '413': _ERR, '422': _ERR, '503': _ERR}}},
        '/v1/revocations': {'get': {
            'summary': 'The revocation list: credentials, join tokens, '
                       'certificates and hosts taken back (digests only)',
            'responses': {'200': {'description': 'OK', 'content': {
                'application/json': {'schema': {
                    'type': 'object', 'properties': {
                        'revocations': {'type': 'array',
                                        'items': _REVOKED}}}}}}}}},
    }


def credential_paths():
    return {
        '/v1/credentials': {
            'get': {'summary': 'Scoped credentials issued (never their '
                               'tokens)',
                    'responses': {'200': {'description': 'OK', 'content': {
                        'application/json': {'schema': {
                            'type': 'object', 'properties': {
                                'credentials': {'type': 'array',
                                                'items': _LISTED}}}}}}}},
            'post': {'summary': 'Issue a token for an extender (its reports '
                                'and key rotation only), a hypervisor (its '
                                "libvirt hook's migration calls only), a "
                                'reader (GETs only), a tenant or a named '
                                'operator (everything, audited by name); '
                                'replaces the one it had, optionally '
                                'expiring. The token is shown once.',
                     'requestBody': {'required': True, 'content': {
                         'application/json': {'schema': {
                             'type': 'object', 'required': ['role', 'name'],
                             'additionalProperties': False,
                             'properties': {
                                 'role': _ROLE, 'name': _HOST,
                                 'expires_in': {'type': 'integer',
                                                'minimum': 1,
                                                'maximum': MAX_LIFETIME}}}}}},
                     'responses': {
                         '201': {'description': 'Issued', 'content': {
                             'application/json': {'schema': _ISSUED}}},
                         '411': _ERR, '413': _ERR, '422': _ERR}}},
        '/v1/credentials/{role}/{name}': {
            'parameters': [
                {'name': 'role', 'in': 'path', 'required': True,
                 'schema': _ROLE},
                {'name': 'name', 'in': 'path', 'required': True,
                 'schema': _HOST}],
            'delete': {'summary': 'Revoke a credential: its token is '
                                  'refused from the next request on',
                       'responses': {'204': {'description': 'Revoked'},
                                     '404': _ERR, '422': _ERR}}},
    }
