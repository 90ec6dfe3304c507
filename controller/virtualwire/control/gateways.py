"""Gateway ends checked before a wire is stored (on the control loop): the
gateway and its port must exist, and a port is either one end as a whole
or a trunk of VLAN ends, never both (a whole-port end would take the
VLANs' frames too). Two wires on one VLAN are refused by the intent
database itself (Binding's unique index)."""
from virtualwire.core import errors, ids
from virtualwire.core.model import GATEWAY


def check_gateway_ends(tables, *ends):
    """Raise what is wrong with the gateway ends among `ends` against
    `tables` (pipeline.incremental); nothing for vNIC ends."""
    for end in ends:
        parsed = ids.parse_gateway_end(end)
        if parsed is None:
            continue
        host, port, vlan = parsed
        h = tables.hosts.get(host)
        if h is None:
            raise errors.NotFound('no gateway named %s' % host)
        if h.role != GATEWAY:
            raise errors.Invalid('%s is not a gateway (vw-host-setup '
                                 '--role gateway)' % host)
        if h.gateway_port(port) is None:
            raise errors.NotFound('gateway %s has no port %s (its '
                                  'ports: %s)' % (host, port, ', '.join(
                                      p.name for p in h.ports) or
                                      'none'))
        for w in tables.wires.values():
            for other in w.ends():
                o = ids.parse_gateway_end(other)
                if o is None or o[:2] != (host, port) or other == end:
                    continue
                if vlan is None or o[2] is None:
                    raise errors.Conflict(
                        '%s/%s is already wired %s (wire %s): a port is '
                        'one end as a whole, or a trunk of VLAN ends' % (
                            host, port, 'as a whole' if o[2] is None
                            else 'by VLAN %d' % o[2],
                            ids.fmt_connector(w.connector_id)))
