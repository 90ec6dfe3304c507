"""Reading a hypervisor's own OVSDB: its integration bridge(s) and vNICs.

A bridge is a VirtualWire host when its external_ids carry `vw-host-name`
(set by ovs-config/vw-host-setup); `vw-tunnel-ip` and `vw-site` describe it.
One ovs-vswitchd may hold several such bridges (used to simulate many hosts).
vNICs are Interfaces with external_ids:iface-id, exactly as libvirt plugs
`<virtualport type='openvswitch'>` ports.
"""
import logging

import ovs.db.idl

from virtualwire.model import Host, VnicPort
from virtualwire.ovsdb_client import IdlClient, fetch_schema

LOG = logging.getLogger(__name__)

COLUMNS = {
    'Open_vSwitch': ['bridges', 'external_ids'],
    'Bridge': ['name', 'datapath_id', 'datapath_type', 'external_ids',
               'ports'],
    'Port': ['name', 'interfaces'],
    'Interface': ['name', 'type', 'ofport', 'external_ids', 'mtu'],
}


def _one(value):
    if isinstance(value, list):
        return value[0] if value else None
    return value


def bridge_records(idl):
    """IDL rows -> plain dicts (so `hosts_from_records` stays pure)."""
    recs = []
    for br in idl.tables['Bridge'].rows.values():
        ifaces = []
        for port in br.ports:
            for itf in port.interfaces:
                ifaces.append({'name': itf.name, 'type': itf.type,
                               'ofport': _one(itf.ofport),
                               'mtu': _one(itf.mtu),
                               'external_ids': dict(itf.external_ids)})
        recs.append({'name': br.name, 'datapath_id': _one(br.datapath_id),
                     'datapath_type': br.datapath_type,
                     'external_ids': dict(br.external_ids),
                     'interfaces': ifaces})
    return recs


def hosts_from_records(records, tunnel_types=('gre',)):
    hosts = []
    for br in records:
        ext = br['external_ids']
        name = ext.get('vw-host-name')
        if not name or not br['datapath_id']:
            continue
        tun_port, vnics, ul_mtu = None, [], None
        for itf in br['interfaces']:
            ie = itf['external_ids']
            if itf['type'] in tunnel_types and tun_port is None:
                tun_port = itf['ofport'] if (itf['ofport'] or -1) > 0 else None
            elif ie.get('iface-id'):
                vnics.append(VnicPort(
                    vnic_id=ie['iface-id'], port_name=itf['name'],
                    ofport=itf['ofport'] or -1,
                    mac=ie.get('attached-mac', ''), vm_id=ie.get('vm-id', ''),
                    status=ie.get('iface-status', '')))
        if ext.get('vw-underlay-mtu', '').isdigit():
            ul_mtu = int(ext['vw-underlay-mtu'])
        hosts.append(Host(
            name=name, dpid=int(br['datapath_id'], 16),
            tunnel_ip=ext.get('vw-tunnel-ip', ''),
            site=ext.get('vw-site', 'default'), tunnel_ofport=tun_port,
            datapath_type=br['datapath_type'], underlay_mtu=ul_mtu,
            vnics=tuple(sorted(vnics, key=lambda v: v.vnic_id))))
    return hosts


class HostDb:
    """Watches one host OVSDB; calls on_hosts(remote, [Host]) on change."""

    def __init__(self, remote, on_hosts):
        self.remote = remote
        self.on_hosts = on_hosts
        self.client = None

    def start(self):
        schema = fetch_schema(self.remote, 'Open_vSwitch')
        helper = ovs.db.idl.SchemaHelper(schema_json=schema)
        for table, cols in COLUMNS.items():
            helper.register_columns(table, cols)
        self.client = IdlClient(self.remote, helper, self._changed,
                                name='host-db ' + self.remote)
        self.client.start()
        return self

    def _changed(self, client):
        with client.lock:
            recs = bridge_records(client.idl)
        self.on_hosts(self.remote, hosts_from_records(recs))

    def stop(self):
        if self.client:
            self.client.stop()
