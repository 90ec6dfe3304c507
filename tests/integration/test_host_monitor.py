"""Our own monitor of a host's OVSDB (southbound.host_monitor) against a
real ovsdb-server with Open vSwitch's schema: what the controller reads
of a host, each kind of change, and a server restart."""
import os
import threading
import time

import pytest

from virtualwire.southbound.host_ovsdb import HostDb
from vwlab import shell

SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema'


def sh(*cmd):
    return shell.sh(list(cmd))      # LabError with the command's stderr


class Server:
    def __init__(self, d):
        self.d = d
        self.db = os.path.join(d, 'conf.db')
        self.sock = os.path.join(d, 'db.sock')
        sh('ovsdb-tool', 'create', self.db, SCHEMA)

    def start(self):
        sh('ovsdb-server', self.db, '--remote=punix:' + self.sock,
           '--pidfile=%s/s.pid' % self.d, '--unixctl=%s/s.ctl' % self.d,
           '--log-file=%s/s.log' % self.d, '--detach', '--no-chdir')

    def stop(self):
        # 'exit' is answered before the process has gone: until it has, it
        # still holds the database's lock and a new server on the same file
        # refuses to start (seen once in CI). Wait for the process itself.
        with open('%s/s.pid' % self.d) as f:
            pid = int(f.read())
        sh('ovs-appctl', '-t', '%s/s.ctl' % self.d, 'exit')
        deadline = time.monotonic() + 10
        while not shell.gone(pid):
            assert time.monotonic() < deadline, 'ovsdb-server %d lingers' % pid
            time.sleep(0.01)

    def vsctl(self, *args):
        return sh('ovs-vsctl', '--no-wait', '--db=unix:' + self.sock, *args)


@pytest.fixture
def server(tmp_path):
    s = Server(str(tmp_path))
    s.start()
    s.vsctl('init')
    yield s
    try:
        s.stop()
    except shell.LabError:
        pass


class Seen:
    """The newest hosts each on_hosts call reported."""

    def __init__(self):
        self.hosts, self.calls = None, 0
        self.cond = threading.Condition()

    def __call__(self, remote, hosts, identity):
        with self.cond:
            self.hosts = {h.name: h for h in hosts}
            self.calls += 1
            self.cond.notify_all()

    def until(self, check, timeout=10):
        end = time.time() + timeout
        with self.cond:
            while not (self.hosts is not None and check(self.hosts)):
                left = end - time.time()
                assert left > 0, 'never: %s' % (self.hosts,)
                self.cond.wait(left)
        return self.hosts


def plug(server, br, port, vnic, ofport, **ext):
    extra = ['external_ids:%s=%s' % kv for kv in sorted(ext.items())]
    server.vsctl('add-port', br, port, '--', 'set', 'interface', port,
                 'ofport=%d' % ofport, 'external_ids:iface-id=' + vnic,
                 *extra)


def test_reads_a_host_follows_each_change_and_a_restart(server):
    server.vsctl('add-br', 'br-int', '--', 'set', 'bridge', 'br-int',
                 'datapath_type=netdev', 'datapath_id=0000000000000a01',
                 'external_ids:vw-host-name=h1', 'external_ids:vw-site=s1',
                 'external_ids:vw-tunnel-ip=10.0.0.1',
                 '--', 'add-port', 'br-int', 'vw-gre', '--', 'set',
                 'interface', 'vw-gre', 'type=gre', 'ofport=65000',
                 'options:local_ip=10.0.0.1', 'options:remote_ip=flow')
    for i in range(200):
        plug(server, 'br-int', 'vnet%d' % i, 'v%d' % i, i + 1,
             **{'attached-mac': '52:54:00:00:00:%02x' % (i % 256),
                'vm-id': 'vm%d' % i, 'libvirt-extra': 'x' * 40})
    seen = Seen()
    db = HostDb('unix:' + server.sock, seen).start()
    try:
        hosts = seen.until(lambda h: 'h1' in h and len(h['h1'].vnics) == 200)
        h1 = hosts['h1']
        assert h1.dpid == 0xa01 and h1.site == 's1'
        assert h1.datapath_type == 'netdev'
        assert [(e.type, e.ip, e.ofport) for e in h1.encaps] == [
            ('gre', '10.0.0.1', 65000)]
        v7 = {v.vnic_id: v for v in h1.vnics}['v7']
        assert (v7.port_name, v7.ofport, v7.mac, v7.vm_id) == (
            'vnet7', 8, '52:54:00:00:00:07', 'vm7')

        # A modified row keeps its other columns; a new port; a removed one.
        server.vsctl('set', 'interface', 'vnet7', 'ofport=700')
        seen.until(lambda h: {v.vnic_id: v.ofport for v in h['h1'].vnics}
                   ['v7'] == 700)
        v7 = {v.vnic_id: v for v in seen.hosts['h1'].vnics}['v7']
        assert (v7.port_name, v7.mac, v7.vm_id) == ('vnet7',
                                                    '52:54:00:00:00:07', 'vm7')
        plug(server, 'br-int', 'vnet-new', 'v-new', 900)
        server.vsctl('del-port', 'br-int', 'vnet3')
        seen.until(lambda h: 'v-new' in {v.vnic_id for v in h['h1'].vnics})
        seen.until(lambda h: 'v3' not in {v.vnic_id for v in h['h1'].vnics})
        assert len(seen.hosts['h1'].vnics) == 200

        # A host's identity lives in the bridge's external_ids.
        server.vsctl('set', 'bridge', 'br-int', 'external_ids:vw-site=s2')
        seen.until(lambda h: h['h1'].site == 's2')

        # The server goes away and comes back with a change made meanwhile:
        # the monitor asks again and reports the rows as they are now.
        # (datapath_id is ephemeral: ovs-vswitchd writes it again.)
        server.stop()
        server.start()
        server.vsctl('del-port', 'br-int', 'vnet5', '--', 'set', 'bridge',
                     'br-int', 'datapath_id=0000000000000a01')
        hosts = seen.until(lambda h: 'h1' in h and 'v5' not in {
            v.vnic_id for v in h['h1'].vnics})
        assert len(hosts['h1'].vnics) == 199
    finally:
        db.stop()
