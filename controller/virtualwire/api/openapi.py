"""The OpenAPI 3 description of /v1 (served at /v1/openapi.json)."""
from virtualwire.api.openapi_access import (credential_paths, intent_paths,
                                            revocation_paths)
from virtualwire.api.openapi_batch import add_batch
from virtualwire.api.openapi_tenants import tenant_paths
from virtualwire.api.openapi_switches import switch_paths
from virtualwire.api.openapi_topologies import topology_paths


def _ref(name):
    return {'$ref': '#/components/schemas/%s' % name}


def _ok(schema, desc='OK'):
    return {'description': desc,
            'content': {'application/json': {'schema': schema}}}


_ERR = {'$ref': '#/components/responses/Error'}
# What core.ids accepts, declared so that clients (and the fuzzer) know.
_VNIC = {'type': 'string', 'pattern': r'^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$',
         'maxLength': 128}
# A wire end: a vNIC id, a gateway's HOST/PORT or HOST/PORT/VLAN, or a
# provider switch's port sw:SWITCH/PORT.
_END = {'type': 'string', 'maxLength': 128, 'description': 'a vNIC id, or a '
        "gateway's physical port HOST/PORT, or a VLAN on its trunk port "
        "HOST/PORT/VLAN (1-4094), or a provider switch's port "
        'sw:SWITCH/PORT',
        'pattern': r'^([A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}|[A-Za-z0-9]'
                   r'[A-Za-z0-9_.-]{0,63}/[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}'
                   r'(/[0-9]{1,4})?|sw:[a-z0-9][a-z0-9_.-]{0,31}/'
                   r'[A-Za-z0-9][A-Za-z0-9_.-]{0,14})$'}
_WIRE_ID = {'name': 'wire_id', 'in': 'path', 'required': True,
            'description': 'connector id: decimal, or 0x and 1-8 hex digits',
            'schema': {'type': 'integer', 'minimum': 1,
                       'maximum': 0xFFFFFFFF}}


def openapi_document():
    doc = _document()
    doc['paths'].update(credential_paths())
    doc['paths'].update(intent_paths())
    doc['paths'].update(revocation_paths())
    doc['paths'].update(tenant_paths(_VNIC))
    doc['paths'].update(topology_paths())
    doc['paths'].update(switch_paths())
    add_batch(doc, _END)
    # Any request can be malformed (400: e.g. control characters in its
    # path), lack the token (401), carry a scoped credential that does
    # not allow it (403) or is over its rate (429, api.rate_limit).
    for ops in doc['paths'].values():
        for name, op in ops.items():
            if name != 'parameters' and 'responses' in op:
                op['responses'].setdefault('400', _ERR)
                if 'security' not in op:
                    op['responses'].setdefault('401', _ERR)
                    op['responses'].setdefault('403', _ERR)
                    op['responses'].setdefault('429', _ERR)
    return doc


def _document():
    return {
        'openapi': '3.1.0',
        'info': {'title': 'VirtualWire controller', 'version': '1',
                 'description': 'Connect and disconnect vNICs with wires: '
                                'point-to-point L2 tunnels keyed by a '
                                '32-bit connector id.'},
        'security': [{'bearer': []}],
        'paths': {
            '/metrics': {'get': {
                'summary': 'Prometheus text format: per-wire and per-host '
                           'counters, hosts, migrations, extender links, '
                           "the controller's own timings (bearer token)",
                'responses': {'200': {'description': 'text/plain; '
                                                     'version=0.0.4',
                                      'content': {'text/plain': {
                                          'schema': {'type': 'string'}}}},
                              '401': _ERR}}},
            '/healthz': {'get': {
                'summary': 'Alive: the control loop answers (no token)',
                'security': [],
                'responses': {'200': _ok({'type': 'object'}),
                              '503': _ok({'type': 'object'})}}},
            '/readyz': {'get': {
                'summary': 'Ready: intent database connected, a role, '
                           "every known host's switch in session (no "
                           'token; says only which checks fail)',
                'security': [],
                'responses': {'200': _ok({'type': 'object'}),
                              '503': _ok({'type': 'object'})}}},
            '/v1/status': {'get': {'summary': 'Controller status',
                                   'responses': {'200': _ok({'type': 'object'}),
                                                 '401': _ERR}}},
            '/v1/hosts': {'get': {
                'summary': 'Hypervisors known from their OVSDB',
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'hosts': {'type': 'array', 'items': _ref('Host')}}}),
                    '401': _ERR}}},
            '/v1/hosts/{name}': {'get': {
                'summary': 'One host',
                'parameters': [{'name': 'name', 'in': 'path',
                                'required': True,
                                'schema': {'type': 'string'}}],
                'responses': {'200': _ok(_ref('Host')), '401': _ERR,
                              '404': _ERR}}},
            '/v1/vnics': {'get': {
                'summary': 'vNICs plugged on any host (OVS iface-id)',
                'responses': {'200': _ok({'type': 'object', 'properties': {
                    'vnics': {'type': 'array', 'items': _ref('Vnic')}}}),
                    '401': _ERR}}},
            '/v1/vnics/{vnic_id}': {'get': {
                'summary': 'One vNIC',
                'parameters': [{'name': 'vnic_id', 'in': 'path',
                                'required': True, 'schema': _VNIC}],
                'responses': {'200': _ok(_ref('Vnic')), '401': _ERR,
                              '404': _ERR, '422': _ERR}}},
            '/v1/wires': {
                'get': {'summary': 'All wires',
                        'responses': {'200': _ok({'type': 'object',
                                                  'properties': {'wires': {
                                                      'type': 'array',
                                                      'items': _ref('Wire')}}}),
                                      '401': _ERR}},
                'post': {
                    'summary': 'Connect two vNICs with a wire',
                    'description': 'A vNIC holds at most one wire. The wire '
                                   'may be created before its vNICs exist; '
                                   'it is active once both are plugged.',
                    'requestBody': {'required': True, 'content': {
                        'application/json': {'schema': _ref('ConnectRequest')}}},
                    'responses': {'201': _ok(_ref('Wire'), 'Created'),
                                  '400': _ERR, '401': _ERR, '404': _ERR,
                                  '409': _ERR,
                                  '411': _ERR, '413': _ERR, '422': _ERR,
                                  '503': _ERR}}},
            '/v1/wires/{wire_id}': {
                'parameters': [_WIRE_ID],
                'get': {'summary': 'One wire',
                        'responses': {'200': _ok(_ref('Wire')), '401': _ERR,
                                      '404': _ERR, '422': _ERR}},
                'delete': {'summary': 'Disconnect: remove the wire everywhere',
                           'responses': {'204': {'description': 'Removed'},
                                         '401': _ERR, '404': _ERR,
                                         '422': _ERR}}},
            '/v1/wires/{wire_id}/stats': {
                'parameters': [_WIRE_ID],
                'get': {'summary': 'Packets and bytes each way and the '
                                   'loss between the ends, from the '
                                   "collector's last reading of the "
                                   "wire's flow counters (no switch is "
                                   'asked); 503 until the first reading',
                        'responses': {'200': _ok(_ref('WireStats')),
                                      '401': _ERR, '404': _ERR, '422': _ERR,
                                      '503': _ERR}}},
            '/v1/stats': {
                'get': {'summary': "Every wire's figures as in "
                                   '/v1/wires/{id}/stats, from memory '
                                   '(vwctl top); 503 until the first '
                                   'reading',
                        'responses': {'200': _ok({'type': 'object',
                                                  'properties': {
                                                      'wires': {
                                                          'type': 'array',
                                                          'items': _ref(
                                                              'WireStats')},
                                                      'read_every_s': {
                                                          'type': 'number'}}}),
                                      '401': _ERR, '503': _ERR}}},
            '/v1/migrations': {
                'get': {'summary': 'Live migrations: in progress, then the '
                                   'last 200 finished',
                        'responses': {'200': _ok({'type': 'object'}),
                                      '401': _ERR}},
                'post': {'summary': "A guest is arriving (the destination's "
                                    "libvirt hook, at 'migrate begin'); a "
                                    'refusal fails the migration',
                         'requestBody': {'required': True, 'content': {
                             'application/json': {'schema': _ref(
                                 'MigrationAnnounce')}}},
                         'responses': {'201': _ok(_ref('Migration')),
                                       '400': _ERR, '401': _ERR, '404': _ERR,
                                       '409': _ERR, '413': _ERR,
                                       '422': _ERR, '503': _ERR}}},
            '/v1/migrations/departures': {
                'post': {'summary': "A guest is migrating out of a host (its "
                                    'vw-host-agent, from libvirt\'s job): '
                                    'with the destination\'s announcement, '
                                    'the cloud\'s word that its vNICs move',
                         'requestBody': {'required': True, 'content': {
                             'application/json': {'schema': {
                                 'type': 'object',
                                 'required': ['host', 'vm_uuid', 'vnics'],
                                 'additionalProperties': False,
                                 'properties': {
                                     'host': {'type': 'string'},
                                     'vm_uuid': {'type': 'string',
                                                 'format': 'uuid'},
                                     'vnics': {'type': 'array',
                                               'minItems': 1,
                                               'maxItems': 64,
                                               'items': {'type': 'string'}},
                                     'to_address': {'type': 'string'}}}}}},
                         'responses': {'200': _ok({'type': 'object'}),
                                       '400': _ERR, '401': _ERR, '403': _ERR,
                                       '413': _ERR, '422': _ERR}}},
            '/v1/migrations/{vm_uuid}/released': _guest_host_word(
                "The guest left a host (libvirt hook, 'release end'): "
                'completes or aborts its migration', ('404',)),
            '/v1/migrations/{vm_uuid}/stopped': _guest_host_word(
                'Libvirt paused the guest on its source for the last copy '
                '(vw-host-agent): its vNICs are delivered on the '
                'destination from now (--activate-at-stop); `reads`: each '
                "vNIC's tap read count then (frames QEMU read); "
                "`stopped_at`: QEMU's STOP event's own time (Unix "
                "seconds, the source host's clock)",
                ('403', '404', '409', '503'),
                {'reads': {'type': 'object', 'maxProperties': 64,
                           'additionalProperties': {
                               'type': 'integer', 'minimum': 0,
                               'maximum': (1 << 63) - 1}},
                 'stopped_at': {'type': 'number', 'exclusiveMinimum': 0,
                                'exclusiveMaximum': 1e11}}),
            **_extender_paths(),
        },
        'components': {
            'securitySchemes': {'bearer': {
                'type': 'http', 'scheme': 'bearer',
                'description': "the operator's token (everything), or a "
                               'scoped credential from POST '
                               '/v1/credentials (403 beyond its scope)'}},
            'responses': {'Error': _ok(_ref('Error'), 'Error')},
            'schemas': {
                'Error': {'type': 'object', 'required': ['error'],
                          'properties': {'error': {
                              'type': 'object',
                              'properties': {'status': {'type': 'integer'},
                                             'message': {'type': 'string'}}}}},
                'MigrationAnnounce': {
                    'type': 'object',
                    'required': ['vm', 'vm_uuid', 'vnics', 'destination'],
                    'additionalProperties': False,
                    'properties': {
                        'vm': {'type': 'string', 'minLength': 1,
                               'maxLength': 256},
                        'vm_uuid': {'type': 'string', 'format': 'uuid'},
                        'vnics': {'type': 'array', 'maxItems': 64,
                                  'uniqueItems': True, 'items': _VNIC},
                        'destination': {'type': 'string', 'minLength': 1},
                        'hold': {'type': 'boolean', 'description':
                                 "keep the frames its destination gets "
                                 'while the guest is paused and deliver '
                                 'those it never read (held frames); '
                                 "default: the controller's --hold"}}},
                'Migration': {'type': 'object', 'properties': {
                    'id': {'type': 'string'}, 'vm': {'type': 'string'},
                    'vm_uuid': {'type': 'string'},
                    'vnics': {'type': 'array', 'items': {'type': 'string'}},
                    'sources': {'type': 'object'},
                    'destination': {'type': 'string'},
                    'state': {'type': 'string', 'enum': [
                        'prepared', 'completed', 'aborted', 'timed-out']},
                    'started_at': {'type': 'number'},
                    'ended_at': {'type': ['number', 'null']},
                    'activated': {'type': 'object', 'description':
                                  "vNIC -> when the guest's first frame on "
                                  'the destination switched delivery there'},
                    'activated_by': {'type': 'object', 'description':
                                     'vNIC -> what activated it: the kind '
                                     'of that first frame (rarp, garp, arp, '
                                     'ipv6-na, ipv4, ipv6, ...) or a last '
                                     'resort (release-hook: the source\'s '
                                     'hook said the guest left; source-left: '
                                     'its source port went; found-in-table: '
                                     'read from the switch after a restart)'},
                    'moves': {'type': 'object', 'description':
                              'vNIC -> how its move ended in the data plane'},
                    'found_by': {'type': 'string', 'enum': ['hook', 'ovsdb'],
                                 'description': 'announced by the hook, or '
                                 'seen in OVSDB (hook unreachable)'},
                    'steps': {'type': 'object', 'description':
                              'vNIC -> {step: when (Unix time)}: '
                              'tap_appeared (its tap on the destination, '
                              'in OVSDB), source_stopped (its source '
                              "said QEMU stopped), held_released (the "
                              "destination told where the guest stopped "
                              "reading), held_delivered (its ring "
                              'answered), sisters_moved (every other '
                              'switch confirmed its flows after '
                              'activation), and how the move ended: '
                              'source_left, destination_left (aborted) '
                              'or timed_out'},
                    'sisters': {'type': 'object', 'description':
                                'vNIC -> the hosts whose flows changed at '
                                'its activation'},
                    'hold': {'type': ['boolean', 'null'], 'description':
                             'asked to hold frames (null: the default)'},
                    'held': {'type': 'object', 'description':
                             'vNIC -> its held frames: held, '
                             'read_on_source, delivered, evicted (by the '
                             'bound), skipped, late, aligned, '
                             'source_reads, stop_window (copies between '
                             'the last source poll that saw the guest '
                             'reading and the first that saw it stopped: '
                             'the most a late cut can cost), '
                             'source_dropped (the source tap\'s drops '
                             'during the move), drops_placed (of those, '
                             'before the cut, which moved it on), '
                             'drops_unplaced (the most the cut can fall '
                             'short: a duplicate each); or abandoned: why '
                             'holding stopped (frames faster than '
                             '--hold-rate, or the controller behind its '
                             'switches) and abandoned_at: when (epoch '
                             'seconds)'}}},
                'ConnectRequest': {
                    'type': 'object', 'required': ['a', 'b'],
                    'additionalProperties': False,
                    'description': 'a and b must differ',
                    'properties': {'a': _END, 'b': _END}},
                'Wire': {'type': 'object', 'properties': {
                    'id': {'type': 'integer', 'minimum': 1,
                           'maximum': 4294967295},
                    'connector_id': {'type': 'string'},
                    'a': {'type': 'string'}, 'b': {'type': 'string'},
                    'state': {'type': 'string',
                              'enum': ['pending', 'collapsed', 'tunnelled',
                                       'extended', 'waiting-host'],
                              'description': 'tunnelled: ends on two hosts '
                              'of one site; extended: in two sites, through '
                              'their extenders; waiting-host: no usable path '
                              '(no carrier, or no extender link up)'},
                    'path': {'type': 'array', 'items': {'type': 'string'},
                             'description': 'hosts its frames cross from a '
                             'to b'},
                    'relayed': {'type': 'boolean', 'description': 'through '
                                "an extender of a site neither end is in"},
                    'host_a': {'type': ['string', 'null']},
                    'host_b': {'type': ['string', 'null']},
                    'created_at': {'type': 'string'},
                    'moving': {'type': 'object', 'description':
                               'vNIC -> {source, destination, activated} '
                               'for each end being live-migrated: until '
                               "activated (the guest's first frame on the "
                               'destination) the far end sends to both '
                               'hosts and the source delivers'}}},
                'Direction': {'type': 'object', 'description':
                              'entered at the sending end, delivered to '
                              "the far end's port; lost: frames that "
                              'entered and can no longer be delivered '
                              '(counted only once the far end was read '
                              'after every frame up to the near end\'s '
                              'reading had arrived or could not any '
                              'more: never more than were lost, never '
                              'goes down); unsettled: entered, neither '
                              'delivered nor lost beyond doubt (in '
                              'flight, not counted yet, or counts a '
                              'switch lost; loss_cuts says how often '
                              'that happened); held: dropped on a '
                              'migration\'s destination until activation; '
                              "window: the collector's last ~10 s, where "
                              'surely_lost_packets is what was shown '
                              'lost in it and uncertain_packets what of '
                              'its entered minus delivered is not '
                              'settled yet',
                              'properties': dict({
                                  k: {'type': 'integer'} for k in (
                                      'entered_packets', 'entered_bytes',
                                      'delivered_packets', 'delivered_bytes',
                                      'lost_packets', 'unsettled_packets',
                                      'loss_cuts', 'held_packets')},
                                  window={'type': 'object'})},
                'WireStats': {'type': 'object', 'properties': {
                    'id': {'type': 'integer'},
                    'connector_id': {'type': 'string'},
                    'state': {'type': 'string'},
                    'read_every_s': {'type': 'number'},
                    'a_to_b': _ref('Direction'),
                    'b_to_a': _ref('Direction')}},
                'Host': {'type': 'object', 'properties': {
                    'name': {'type': 'string'}, 'dpid': {'type': 'string'},
                    'tunnel_ip': {'type': 'string'},
                    'site': {'type': 'string'},
                    'role': {'type': 'string',
                             'enum': ['hypervisor', 'extender', 'gateway']},
                    'ports': {'type': 'array', 'description': "a gateway's "
                              'physical ports', 'items': {'type': 'string'}},
                    'links': {'type': 'array', 'description': "an "
                              "extender's links to other sites' extenders",
                              'items': {'type': 'object', 'properties': {
                                  'peer': {'type': 'string'},
                                  'up': {'type': 'boolean'}}}},
                    'connected': {'type': 'boolean'},
                    'synced': {'type': 'boolean'},
                    'switch_address': {
                        'type': ['string', 'null'],
                        'description': 'where its switch connected from'},
                    'certificate': {
                        'type': ['array', 'null'],
                        'items': {'type': 'string'},
                        'description': "names of its switch's verified "
                                       'certificate (null without TLS)'},
                    'datapath_type': {'type': 'string'},
                    'underlay_mtu': {'type': ['integer', 'null']},
                    'hold_port': {
                        'type': ['integer', 'null'],
                        'description': 'the port where it keeps frames '
                                       'towards guests migrating in '
                                       '(vw-host-setup --hold-frames)'},
                    'vnics': {'type': 'integer'},
                    'warnings': {'type': 'array',
                                 'items': {'type': 'string'}}}},
                'Vnic': {'type': 'object', 'properties': {
                    'id': {'type': 'string'}, 'host': {'type': 'string'},
                    'port': {'type': 'string'}, 'ofport': {'type': 'integer'},
                    'mac': {'type': 'string'}, 'vm_id': {'type': 'string'},
                    'wire': {'type': ['string', 'null']},
                    'tenant': {'type': ['string', 'null']},
                    'placed_on': {
                        'type': ['string', 'null'],
                        'description': "the cloud's word on where it runs "
                                       '(PUT .../placement); null if unsaid'},
                    'refused_on': {
                        'type': 'array', 'items': {'type': 'string'},
                        'description': 'hosts that plugged it and were '
                                       'refused (the cloud placed it '
                                       'elsewhere)'}}},
            },
        },
    }


_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 64}


def _guest_host_word(summary, refusals, more=None):
    """A host's word on a migrating guest, `POST {"host": name}` (and
    `more` optional properties)."""
    return {
        'parameters': [{'name': 'vm_uuid', 'in': 'path', 'required': True,
                        'schema': {'type': 'string', 'format': 'uuid'}}],
        'post': {'summary': summary,
                 'requestBody': {'required': True, 'content': {
                     'application/json': {'schema': {
                         'type': 'object', 'required': ['host'],
                         'additionalProperties': False,
                         'properties': dict({'host': {'type': 'string'}},
                                            **(more or {}))}}}},
                 'responses': dict({'200': _ok({'type': 'object'})}, **{
                     c: _ERR for c in sorted(('400', '401', '413', '422') +
                                             tuple(refusals))})}}


def _extender_paths():
    link = {'type': 'object', 'properties': {
        'a': _NAME, 'b': _NAME, 'created_at': {'type': 'string'},
        'state': {'type': 'string', 'enum': ['up', 'down']},
        'why_down': {'type': ['string', 'null']},
        'sides': {'type': 'object', 'description': 'per extender: its UDP '
                  'port, its public endpoint as the rendezvous saw it, its '
                  'NAT kind, link state, peer endpoint, bytes, RTT'}}}
    return {
        '/v1/extender-links': {
            'get': {'summary': "Extenders' encrypted links, and how each "
                               'pair of sites is joined (direct or relayed)',
                    'responses': {'200': _ok({'type': 'object', 'properties': {
                        'links': {'type': 'array', 'items': link},
                        'sites': {'type': 'array', 'items': {
                            'type': 'object'}}}}),
                        '401': _ERR}},
            'post': {'summary': 'Link two extenders of different sites',
                     'requestBody': {'required': True, 'content': {
                         'application/json': {'schema': {
                             'type': 'object', 'required': ['a', 'b'],
                             'additionalProperties': False,
                             'properties': {'a': _NAME, 'b': _NAME}}}}},
                     'responses': {'201': _ok(link, 'Created'), '400': _ERR,
                                   '401': _ERR, '404': _ERR, '409': _ERR,
                                   '411': _ERR, '413': _ERR, '422': _ERR,
                                   '503': _ERR}}},
        '/v1/extender-links/{a}/{b}': {
            'parameters': [{'name': n, 'in': 'path', 'required': True,
                            'schema': _NAME} for n in ('a', 'b')],
            'delete': {'summary': 'Unlink two extenders',
                       'responses': {'204': {'description': 'Removed'},
                                     '401': _ERR, '404': _ERR,
                                     '503': _ERR}}},
        '/v1/extenders/{name}/rotate-key': {
            'parameters': [{'name': 'name', 'in': 'path', 'required': True,
                            'schema': _NAME}],
            'post': {'summary': "Have an extender make a new key pair; its "
                                'peers take the new public key once it '
                                'reports it',
                     'responses': {'202': _ok({'type': 'object'}),
                                   '401': _ERR, '404': _ERR}}},
        '/v1/extenders/{name}/report': {
            'parameters': [{'name': 'name', 'in': 'path', 'required': True,
                            'schema': _NAME}],
            'post': {'summary': "An extender agent's report (its "
                                'WireGuard public key, public endpoints, '
                                'NAT kind, '
                                'link stats); the answer is the links it '
                                'should keep',
                     'requestBody': {'required': True, 'content': {
                         'application/json': {'schema': {
                             'type': 'object', 'required': ['public_key'],
                             'additionalProperties': False,
                             'properties': {
                                 'public_key': {'type': 'string',
                                                'pattern': '^[A-Za-z0-9+/]'
                                                '{42}[AEIMQUYcgkosw048]=$'},
                                 'nat': {'type': 'string', 'enum': [
                                     'public', 'endpoint-independent',
                                     'symmetric', 'unknown']},
                                 'endpoints': {'type': 'object'},
                                 'links': {'type': 'object'}}}}}},
                     'responses': {'200': _ok({'type': 'object'}),
                                   '400': _ERR, '401': _ERR, '404': _ERR,
                                   '411': _ERR, '413': _ERR, '422': _ERR}}},
    }
