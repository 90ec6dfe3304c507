"""The OpenAPI of many wires at once (`core.batch`), of waiting until a
change is programmed (`?wait=programmed`, `control.programming`) and of
paging through wires."""
from virtualwire.core.batch import MAX_ITEMS

_ERR = {'$ref': '#/components/responses/Error'}
_WAIT = [{'name': 'wait', 'in': 'query', 'required': False,
          'description': 'answer once every connected switch holds the '
                         'change (504 if not within timeout: the change is '
                         'stored all the same)',
          'schema': {'type': 'string', 'enum': ['programmed']}},
         {'name': 'timeout', 'in': 'query', 'required': False,
          'schema': {'type': 'number', 'exclusiveMinimum': 0,
                     'maximum': 300}}]
_PROGRAMMED = {'type': 'object', 'properties': {
    'generation': {'type': 'integer'}, 'programmed': {'type': 'boolean'},
    'switches_confirmed': {'type': 'integer'},
    'pending': {'type': 'array', 'items': {'type': 'string'}},
    'not_connected': {'type': 'array', 'items': {'type': 'string'}},
    'not_answering': {'type': 'array', 'items': {'type': 'string'}},
    'hosts_pending': {'type': 'integer'},
    'hosts_not_connected': {'type': 'integer'},
    'hosts_not_answering': {'type': 'integer'}}}
_ID = {'type': 'integer', 'minimum': 1, 'maximum': 0xFFFFFFFF}


def add_batch(doc, end_schema):
    paths = doc['paths']
    connect = paths['/v1/wires']['post']
    connect['parameters'] = _WAIT
    connect['responses']['504'] = _ERR
    listing = paths['/v1/wires']['get']
    listing['parameters'] = [
        {'name': 'after', 'in': 'query', 'required': False,
         'description': 'the last connector id of the page before',
         'schema': _ID},
        {'name': 'limit', 'in': 'query', 'required': False,
         'schema': {'type': 'integer', 'minimum': 1, 'maximum': 10000}}]
    listing['responses'].setdefault('422', _ERR)
    delete = paths['/v1/wires/{wire_id}']['delete']
    delete['parameters'] = _WAIT
    delete['responses']['200'] = {
        'description': 'Removed and programmed (with wait=programmed)',
        'content': {'application/json': {'schema': {
            'type': 'object', 'properties': {
                'deleted': _ID, 'programmed': _PROGRAMMED}}}}}
    delete['responses']['504'] = _ERR
    paths['/v1/wires/batch'] = {'post': {
        'summary': 'Connect and disconnect many wires in one transaction: '
                   'all or nothing; a refusal lists every item that is '
                   'wrong and why (at most %d items)' % MAX_ITEMS,
        'parameters': _WAIT,
        'requestBody': {'required': True, 'content': {'application/json': {
            'schema': {'type': 'object', 'additionalProperties': False,
                       'properties': {
                           'create': {'type': 'array', 'items': {
                               'type': 'object', 'required': ['a', 'b'],
                               'additionalProperties': False,
                               'properties': {'a': end_schema,
                                              'b': end_schema}}},
                           'delete': {'type': 'array', 'items': _ID}}}}}},
        'responses': {
            '200': {'description': 'Done', 'content': {'application/json': {
                'schema': {'type': 'object', 'properties': {
                    'created': {'type': 'array', 'items': {
                        'type': 'object', 'properties': {
                            'id': _ID, 'connector_id': {'type': 'string'},
                            'a': {'type': 'string'},
                            'b': {'type': 'string'}}}},
                    'deleted': {'type': 'array', 'items': _ID},
                    'generation': {'type': 'integer'},
                    'programmed': _PROGRAMMED}}}}},
            '404': _ERR, '409': _ERR, '411': _ERR, '413': _ERR, '422': _ERR,
            '503': _ERR, '504': _ERR}}}
