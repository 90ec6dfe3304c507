"""The OpenAPI of topologies (`api.rest_topologies`): apply, inspect,
graph, destroy; the published file schema; guests as the libvirt hook
reports them."""
from virtualwire.core.topology_file import MAX_SOURCE

_ERR = {'$ref': '#/components/responses/Error'}
_NAME = {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'}
_OBJ = {'type': 'object'}
_TENANT_Q = {'name': 'tenant', 'in': 'query', 'required': False,
             'description': "the tenant whose topology (operator only; a "
                            "tenant's credential names its own)",
             'schema': _NAME}
_WAIT = [{'name': 'wait', 'in': 'query', 'required': False,
          'schema': {'type': 'string', 'enum': ['programmed']}},
         {'name': 'timeout', 'in': 'query', 'required': False,
          'schema': {'type': 'number', 'exclusiveMinimum': 0,
                     'maximum': 300}}]
_PLAN = {'type': 'object', 'properties': {
    'create': {'type': 'array', 'items': _OBJ},
    'delete': {'type': 'array', 'items': _OBJ},
    'keep': {'type': 'array', 'items': _OBJ}}}


def _ok(schema, ctype='application/json'):
    return {'description': 'OK', 'content': {ctype: {'schema': schema}}}


def topology_paths():
    by_name = [{'name': 'name', 'in': 'path', 'required': True,
                'schema': _NAME}, _TENANT_Q]
    return {
        '/v1/topologies': {'get': {
            'summary': 'Topologies applied (a tenant sees its own): nodes, '
                       "links, their wires' states",
            'parameters': [_TENANT_Q],
            'responses': {'200': _ok({'type': 'object', 'properties': {
                'topologies': {'type': 'array', 'items': _OBJ}}}),
                '404': _ERR, '422': _ERR}}},
        '/v1/topologies/{name}': {
            'parameters': by_name,
            'get': {
                'summary': 'Inspect: each node with its VM and vNICs where '
                           'they run, each link with its wire, state, hosts '
                           'and rate; the file as applied',
                'responses': {'200': _ok(_OBJ), '404': _ERR, '422': _ERR}},
            'put': {
                'summary': 'Apply a topology file: create the wires it lacks, '
                           "delete the topology's wires no longer in it, "
                           'keep the rest untouched, in one transaction. '
                           'dry_run: the plan only. A bad file is refused '
                           'naming its line (error.line) and changes nothing',
                'parameters': _WAIT,
                'requestBody': {'required': True, 'content': {
                    'application/json': {'schema': {
                        'type': 'object', 'required': ['source'],
                        'additionalProperties': False,
                        'properties': {
                            'source': {'type': 'string',
                                       'maxLength': MAX_SOURCE},
                            'dry_run': {'type': 'boolean'}}}}}},
                'responses': {
                    '200': _ok({'type': 'object', 'properties': {
                        'plan': _PLAN, 'changed': {'type': 'boolean'}}}),
                    '201': _ok({'type': 'object', 'properties': {
                        'plan': _PLAN, 'changed': {'type': 'boolean'}}}),
                    '404': _ERR, '409': _ERR, '411': _ERR, '413': _ERR,
                    '422': _ERR, '503': _ERR, '504': _ERR}},
            'delete': {
                'summary': "Destroy: delete the topology's wires (and only "
                           'those) and the topology, in one transaction',
                'parameters': _WAIT,
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'deleted': {'type': 'array', 'items': {
                        'type': 'string'}}}}),
                    '404': _ERR, '409': _ERR, '422': _ERR, '503': _ERR,
                    '504': _ERR}}},
        '/v1/topologies/{name}/graph': {
            'parameters': by_name,
            'get': {
                'summary': "The user's logical network as SVG: VMs with "
                           'their vNICs, wires with state and rate',
                'responses': {'200': _ok({'type': 'string'},
                                         'image/svg+xml'),
                              '404': _ERR, '422': _ERR}}},
        '/v1/topology.schema.json': {'get': {
            'summary': 'The JSON schema of topology files',
            'security': [],
            'responses': {'200': _ok(_OBJ)}}},
        '/v1/guests': {'get': {
            'summary': 'Guests as their hosts\' libvirt hook reported them '
                       '(name, host, interfaces); a tenant sees its own',
            'responses': {'200': _ok({'type': 'object', 'properties': {
                'guests': {'type': 'array', 'items': _OBJ}}}),
                '422': _ERR}}},
        '/v1/guests/{vm_uuid}': {
            'parameters': [{'name': 'vm_uuid', 'in': 'path',
                            'required': True, 'schema': {'type': 'string'}}],
            'put': {
                'summary': "A guest runs on a host: the libvirt hook's "
                           'report (a hypervisor credential: its own host '
                           'only)',
                'requestBody': {'required': True, 'content': {
                    'application/json': {'schema': {
                        'type': 'object',
                        'required': ['name', 'host', 'nics'],
                        'additionalProperties': False,
                        'properties': {
                            'name': {'type': 'string'},
                            'host': {'type': 'string'},
                            'nics': {'type': 'array', 'items': {
                                'type': 'object',
                                'required': ['index'],
                                'additionalProperties': False,
                                'properties': {
                                    'index': {'type': 'integer'},
                                    'vnic': {'type': 'string'},
                                    'mac': {'type': 'string'},
                                    'alias': {'type': 'string'}}}}}}}}},
                'responses': {'200': _ok(_OBJ), '411': _ERR, '413': _ERR,
                              '422': _ERR, '503': _ERR}}},
    }
