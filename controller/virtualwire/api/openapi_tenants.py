"""The OpenAPI paths of tenants (`core.tenancy`: the operator assigns
vNICs to tenants) and of the audit log (`api.audit`)."""
_ERR = {'$ref': '#/components/responses/Error'}
_TENANT = {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'}


def _ok(schema):
    return {'description': 'OK',
            'content': {'application/json': {'schema': schema}}}


def tenant_paths(vnic_schema):
    return {
        '/v1/tenants': {'get': {
            'summary': 'Tenants named by a vNIC assignment or a credential, '
                       'with their vNIC count and credential roles',
            'responses': {'200': _ok({'type': 'object', 'properties': {
                'tenants': {'type': 'array', 'items': {
                    'type': 'object', 'properties': {
                        'name': _TENANT, 'vnics': {'type': 'integer'},
                        'credentials': {'type': 'array', 'items': {
                            'type': 'string'}}}}}}})}}},
        '/v1/vnics/{vnic_id}/tenant': {
            'parameters': [{'name': 'vnic_id', 'in': 'path',
                            'required': True, 'schema': vnic_schema}],
            'put': {
                'summary': 'Assign a vNIC to a tenant (operator only): its '
                           'tenant credentials then see and wire it. It may '
                           'be assigned before it is plugged.',
                'requestBody': {'required': True, 'content': {
                    'application/json': {'schema': {
                        'type': 'object', 'required': ['tenant'],
                        'additionalProperties': False,
                        'properties': {'tenant': _TENANT}}}}},
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'vnic': {'type': 'string'}, 'tenant': _TENANT,
                    'assigned_at': {'type': 'string'}}}),
                    '411': _ERR, '413': _ERR, '422': _ERR, '503': _ERR}},
            'delete': {
                'summary': "Take a vNIC from its tenant (operator only)",
                'responses': {'204': {'description': 'Released'},
                              '404': _ERR, '422': _ERR, '503': _ERR}}},
        '/v1/vnics/{vnic_id}/placement': {
            'parameters': [{'name': 'vnic_id', 'in': 'path',
                            'required': True, 'schema': vnic_schema}],
            'put': {
                'summary': "The cloud's word on where a vNIC runs (operator "
                           'or orchestrator): another host plugging it is '
                           'refused. Naming a new host authorizes a live '
                           'migration from the old one.',
                'requestBody': {'required': True, 'content': {
                    'application/json': {'schema': {
                        'type': 'object', 'required': ['host'],
                        'additionalProperties': False,
                        'properties': {'host': {
                            'type': 'string', 'minLength': 1,
                            'maxLength': 64}}}}}},
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'vnic': {'type': 'string'}, 'host': {'type': 'string'},
                    'previous': {'type': ['string', 'null']}}}),
                    '411': _ERR, '413': _ERR, '422': _ERR, '503': _ERR}},
            'delete': {
                'summary': 'The cloud no longer says where a vNIC runs: '
                           'whoever plugs it claims it (operator or '
                           'orchestrator)',
                'responses': {'204': {'description': 'Forgotten'},
                              '404': _ERR, '422': _ERR, '503': _ERR}}},
        '/v1/audit': {'get': {
            'summary': 'The last changes asked for, refused ones included: '
                       'when, who, from where, what, the result (operator '
                       'only)',
            'parameters': [{'name': 'limit', 'in': 'query',
                            'required': False,
                            'schema': {'type': 'integer', 'minimum': 1,
                                       'maximum': 1000}}],
            'responses': {'200': _ok({'type': 'object', 'properties': {
                'entries': {'type': 'array', 'items': {'type': 'object'}},
                'path': {'type': 'string'},
                'write_failures': {'type': 'integer'},
                'unauthenticated_total': {
                    'type': 'integer',
                    'description': 'changes asked for with no valid '
                                   'credential: summarized, not logged '
                                   'one by one'}}}),
                '422': _ERR}}},
    }
