"""Reading a hypervisor's own OVSDB: its integration bridge(s) and vNICs.

A bridge is a VirtualWire host when its external_ids carry `vw-host-name`
(set by vw-host-setup); `vw-site` names its site, `vw-role`
says if it is an extender, and an extender's agent reports each of its
links as `vw-link-<peer host>` = up | down. Each port whose Interface type
is a carrier's (`pipeline.carriers`), or whose external_ids name one as
`vw-encap` (the extender link is a GRE port too), is an Encap of the host,
at `options:local_ip` or else the bridge's `vw-tunnel-ip`.
One ovs-vswitchd may hold several such bridges (used to simulate many hosts).
vNICs are Interfaces with external_ids:iface-id, exactly as libvirt plugs
`<virtualport type='openvswitch'>` ports; a gateway's physical ports carry
external_ids:vw-gateway-port=true. An internal port `vw-hold` is where the
host keeps frames towards guests migrating in (host.hold_ring).
"""
import logging

from os_ken.lib import hub

from virtualwire.core.model import (EXTENDER, GATEWAY, HYPERVISOR, Encap,
                                    GatewayPort, Host, Link, VnicPort)
from virtualwire.core.links import LINK_KEY
from virtualwire.pipeline import carriers
from virtualwire.southbound.host_monitor import HostMonitor

LOG = logging.getLogger(__name__)
HOLD_PORT = 'vw-hold'       # vw-frame-hold's (host.hold_port)


def hosts_from_records(records, carrier_types=carriers.TYPES):
    hosts = []
    for br in records:
        ext = br['external_ids']
        name = ext.get('vw-host-name')
        if not name or not br['datapath_id']:
            continue
        encaps, vnics, ul_mtu = {}, [], None
        ports, hold_port = [], None
        for itf in sorted(br['interfaces'], key=lambda i: i['name']):
            ie = itf['external_ids']
            kind = ie.get('vw-encap', itf['type'])
            if kind in carrier_types:
                if kind not in encaps:            # one port per carrier
                    port = itf['ofport'] if (itf['ofport'] or -1) > 0 \
                        else None
                    ip = itf.get('options', {}).get('local_ip', 'flow')
                    ip = ip if ip != 'flow' else \
                        ext.get('vw-tunnel-ip', '')
                    encaps[kind] = Encap(kind, ip, port)
            elif itf['name'] == HOLD_PORT and itf['type'] == 'internal':
                hold_port = itf['ofport'] if (itf['ofport'] or -1) > 0 \
                    else None
            elif ie.get('vw-gateway-port') == 'true':
                ports.append(GatewayPort(itf['name'], itf['ofport'] or -1))
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
            encaps=tuple(encaps[t] for t in carrier_types if t in encaps),
            site=ext.get('vw-site', 'default'),
            datapath_type=br['datapath_type'], underlay_mtu=ul_mtu,
            vnics=tuple(sorted(vnics, key=lambda v: v.vnic_id)),
            role=ext.get('vw-role') if ext.get('vw-role') in (
                EXTENDER, GATEWAY) else HYPERVISOR,
            ports=tuple(sorted(ports, key=lambda p: p.name)),
            public_key=ext.get('vw-public-key', ''), hold_port=hold_port,
            links=tuple(Link(k[len(LINK_KEY):], v == 'up')
                        for k, v in sorted(ext.items())
                        if k.startswith(LINK_KEY))))
    return hosts


class HostDb:
    """Watches one host OVSDB; calls on_hosts(remote, [Host], identity)
    on change, identity the names of the server's certificate (ssl:
    remotes; None otherwise), read with the rows it vouches for."""

    def __init__(self, remote, on_hosts):
        self.remote = remote
        self.on_hosts = on_hosts
        self.client = None
        self.identity = None    # the server's certificate, last seen

    def start(self):
        self.client = HostMonitor(self.remote, self._changed,
                                  name='host-db ' + self.remote).start()
        return self

    def _changed(self, client):
        with client.lock:
            recs = client.rows.records()
            identity = client.peer_names()
        if self.remote.startswith('ssl:') and identity is None:
            return      # rows from before a reconnect; the next run tells
        self.identity = identity
        self.on_hosts(self.remote, hosts_from_records(recs), identity)

    def stop(self):
        if self.client:
            self.client.stop()


class HostDbs:
    """The host OVSDBs being watched. Each one's changes become an event
    on the control loop: on_hosts(remote, [Host], identity) runs there."""

    def __init__(self, loop, on_hosts=None):
        self.loop = loop
        self.on_hosts = on_hosts
        self.dbs = {}

    def watch(self, remote):
        if remote in self.dbs:
            return
        db = self.dbs[remote] = HostDb(remote, self._post)
        hub.spawn(self._start, db)

    def _post(self, remote, hosts, identity):
        self.loop.post(self.on_hosts, remote, hosts, identity)

    def forget_revoked(self, refusal):
        """Stop reading every host database whose server's certificate
        `refusal(identity)` takes back (its switch reconnecting would
        start a new watch, refused in turn)."""
        for remote, db in list(self.dbs.items()):
            ident = db.identity
            if ident is not None and refusal(ident):
                LOG.warning('host OVSDB %s: its certificate is revoked; no '
                            'longer read', remote)
                del self.dbs[remote]
                hub.spawn(db.stop)

    @staticmethod
    def _start(db):
        delay = 0.2
        while True:
            try:
                db.start()
                LOG.info('reading host OVSDB %s', db.remote)
                return
            except Exception as e:  # not up yet: keep trying, slowly
                LOG.warning('host OVSDB %s: %s', db.remote, e)
                hub.sleep(delay)
                delay = min(delay * 2, 5)
