"""The OpenAPI of provider switches (`api.rest_switches`): list, show,
create, delete, place, split, advice."""
from virtualwire.core.switches import PORTS_MAX

_ERR = {'$ref': '#/components/responses/Error'}
_NAME = {'type': 'string', 'pattern': '^[a-z0-9][a-z0-9_.-]{0,31}$'}
_HOST = {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'}
_PORT = {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$'}
_LIMIT = {'type': 'integer', 'minimum': 1, 'maximum': 65535}
_COUNT = {'type': ['integer', 'null'], 'minimum': 0}
_COUNTERS = {
    'type': ['object', 'null'],
    'description': "the collector's counts (null: the switch's host not "
                   'read yet); entered, flooded and learned_macs start '
                   'again from zero when the switch moves',
    'properties': {
        'entered_packets': _COUNT, 'flooded_packets': _COUNT,
        'learned_macs': _COUNT,
        'delivered_packets': dict(_COUNT, description='sent out of the '
                                  'port onto its wire (null: not known)')}}
_PORT_VIEW = {'type': 'object', 'properties': {
    'counters': _COUNTERS,
    'name': _PORT, 'index': {'type': 'integer'},
    'end': {'type': 'string', 'description': 'the wire end: sw:NAME/PORT'},
    'wire': {'type': ['integer', 'null']},
    'peer': {'type': ['string', 'null']},
    'peer_host': {'type': ['string', 'null']},
    'part': {'type': ['string', 'null'],
             'description': 'the host of the part the port lives on'}}}
_VIEW = {'type': 'object', 'properties': {
    'name': _NAME, 'tenant': {'type': 'string'},
    'number': {'type': 'integer'}, 'host': {'type': ['string', 'null']},
    'placed': {'type': 'boolean'}, 'mac_limit': _LIMIT,
    'split': {'type': 'boolean'},
    'parts': {'type': 'array', 'items': _HOST,
              'description': 'hosts it has a part on (the operator\'s '
                             'view)'},
    'idle_timeout': _LIMIT,
    'ports': {'type': 'array', 'items': _PORT_VIEW}}}

_BPS = {'type': 'number', 'minimum': 0}
_ADVICE = {'type': 'object', 'required': ['switch', 'host', 'advised',
                                          'move', 'reason'],
           'properties': {
               'switch': _NAME, 'host': {'type': ['string', 'null']},
               'advised': {'type': ['string', 'null'],
                           'description': 'null for a split switch'},
               'move': {'type': 'boolean'},
               'reason': {'type': 'string'},
               'by_host_bps': {'type': 'object', 'additionalProperties': _BPS,
                               'description': 'bits per second, both ways, '
                                              "of the ports whose VM is on "
                                              'each host'},
               'crossing_bps': {'type': 'object', 'properties': {
                   'now': _BPS, 'advised': _BPS}},
               'unread_ports': {'type': 'array', 'items': _PORT}}}


def _ok(schema, status='OK'):
    return {'description': status,
            'content': {'application/json': {'schema': schema}}}


def switch_paths():
    by_name = [{'name': 'name', 'in': 'path', 'required': True,
                'schema': _NAME}]
    return {
        '/v1/switches': {
            'get': {
                'summary': 'Provider switches (a tenant sees its own): '
                           'ports, the wire on each and its other end',
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'switches': {'type': 'array', 'items': _VIEW}}})}},
            'post': {
                'summary': 'Create a switch the provider implements in '
                           "Open vSwitch flows; its ports are wire ends "
                           'sw:NAME/PORT. ports: a count (p1..pN) or names. '
                           "A tenant's credential makes its own tenant's "
                           'and never names the host (the one with most of '
                           "its vNICs); the operator names the tenant and "
                           'may name the host',
                'requestBody': {'required': True, 'content': {
                    'application/json': {'schema': {
                        'type': 'object', 'required': ['name', 'ports'],
                        'additionalProperties': False,
                        'properties': {
                            'name': _NAME,
                            'ports': {'oneOf': [
                                {'type': 'integer', 'minimum': 1,
                                 'maximum': PORTS_MAX},
                                {'type': 'array', 'items': _PORT,
                                 'minItems': 1, 'maxItems': PORTS_MAX,
                                 'uniqueItems': True}]},
                            'host': _HOST,
                            'tenant': {'type': 'string'},
                            'mac_limit': _LIMIT,
                            'idle_timeout': _LIMIT}}}}},
                'responses': {'201': _ok(_VIEW, 'Created'), '404': _ERR,
                              '409': _ERR, '422': _ERR}}},
        '/v1/switches/{name}': {
            'parameters': by_name,
            'get': {'summary': 'One switch',
                    'responses': {'200': _ok(_VIEW), '404': _ERR,
                                  '422': _ERR}},
            'delete': {'summary': 'Delete a switch with no wire plugged in '
                                  '(409 names the wires still plugged)',
                       'responses': {'204': {'description': 'Deleted'},
                                     '404': _ERR, '409': _ERR,
                                     '422': _ERR}}},
        '/v1/switches/{name}/host': {
            'parameters': by_name,
            'put': {'summary': "Place a switch's flows on another host "
                               '(operator); its wires follow',
                    'requestBody': {'required': True, 'content': {
                        'application/json': {'schema': {
                            'type': 'object', 'required': ['host'],
                            'additionalProperties': False,
                            'properties': {'host': _HOST}}}}},
                    'responses': {'200': _ok(_VIEW), '404': _ERR,
                                  '422': _ERR}}},
        '/v1/switches/{name}/parts': {
            'parameters': by_name,
            'put': {'summary': 'Split a switch (operator): parts on other '
                               'hosts for the ports named ({} joins it '
                               'again), or each plugged port on its other '
                               "end's host (auto); a mesh of wires joins "
                               'the parts',
                    'requestBody': {'required': True, 'content': {
                        'application/json': {'schema': {'oneOf': [
                            {'type': 'object', 'required': ['parts'],
                             'additionalProperties': False,
                             'properties': {'parts': {
                                 'type': 'object',
                                 'additionalProperties': _HOST}}},
                            {'type': 'object', 'required': ['auto'],
                             'additionalProperties': False,
                             'properties': {'auto': {
                                 'type': 'boolean', 'enum': [True]}}}]}}}},
                    'responses': {'200': _ok(_VIEW), '400': _ERR,
                                  '404': _ERR, '409': _ERR,
                                  '422': _ERR}}},
        '/v1/switches/{name}/advice': {
            'parameters': by_name,
            'get': {'summary': 'Where the switch should run by its ports\' '
                               'traffic over the collector\'s window '
                               '(operator): the host whose VMs\' ports '
                               'carry most bytes, and whether a move is '
                               'worth it',
                    'responses': {'200': _ok(_ADVICE), '403': _ERR,
                                  '404': _ERR, '422': _ERR,
                                  '503': _ERR}}},
    }
