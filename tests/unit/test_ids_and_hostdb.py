import pytest

from virtualwire.core import ids
from virtualwire.core.model import Encap
from virtualwire.southbound.host_ovsdb import hosts_from_records


@pytest.mark.parametrize('good', ['a', 'nic-a', '4f1c0e2a-6b5d-4a1e-9d3b-1c2d3e4f5a6b',
                                  'vm1:eth0', 'x' * 128])
def test_valid_vnic_ids(good):
    assert ids.check_vnic_id(good) == good


@pytest.mark.parametrize('bad', ['', ' nic', 'nic a', '-nic', 'x' * 129,
                                 'n/ic', None, 5, 'é'])
def test_invalid_vnic_ids_say_what_is_wrong(bad):
    with pytest.raises(ids.InvalidId, match='vNIC id'):
        ids.check_vnic_id(bad)


@pytest.mark.parametrize('text,value', [('1', 1), ('0x10', 16),
                                        ('4294967295', 0xFFFFFFFF),
                                        ('0XFFFFFFFF', 0xFFFFFFFF), (7, 7)])
def test_connector_id_parsing(text, value):
    assert ids.parse_connector_id(text) == value


@pytest.mark.parametrize('bad', ['0', '4294967296', 'abc', '0x', '-1', 1.5,
                                 True, None, '0x1_0000_0000'])
def test_bad_connector_ids(bad):
    with pytest.raises(ids.InvalidId, match='connector id'):
        ids.parse_connector_id(bad)


def test_cookie_round_trip_and_foreign_cookies():
    assert ids.connector_of_cookie(ids.wire_cookie(0xABCDEF01)) == 0xABCDEF01
    assert ids.connector_of_cookie(ids.wire_cookie(0)) == 0
    assert ids.connector_of_cookie(0x1234) is None


def _bridge(name, ext, ifaces, dpid='00000000000000a1'):
    return {'name': name, 'datapath_id': dpid, 'datapath_type': 'netdev',
            'external_ids': ext, 'interfaces': ifaces}


def test_hosts_from_records_reads_libvirt_style_ports():
    recs = [
        _bridge('br-int', {'vw-host-name': 'h1', 'vw-tunnel-ip': '10.0.0.1',
                           'vw-site': 'east', 'vw-underlay-mtu': '1600'}, [
            {'name': 'vw-gre', 'type': 'gre', 'ofport': 65000, 'mtu': None,
             'external_ids': {}},
            {'name': 'vnet0', 'type': '', 'ofport': 3, 'mtu': 1500,
             'external_ids': {'iface-id': 'nic-1', 'attached-mac':
                              '52:54:00:00:00:01', 'vm-id': 'u1',
                              'iface-status': 'active'}},
            {'name': 'br-int', 'type': 'internal', 'ofport': 65534,
             'mtu': 1500, 'external_ids': {}},
        ]),
        _bridge('br-phy', {}, [], dpid='00000000000000a2'),   # not a host
    ]
    [h] = hosts_from_records(recs)
    assert (h.name, h.dpid, h.tunnel_ip, h.site, h.underlay_mtu) == \
        ('h1', 0xA1, '10.0.0.1', 'east', 1600)
    assert h.encaps == (Encap('gre', '10.0.0.1', 65000),)
    [v] = h.vnics
    assert (v.vnic_id, v.port_name, v.ofport, v.mac, v.vm_id) == \
        ('nic-1', 'vnet0', 3, '52:54:00:00:00:01', 'u1')


def test_port_without_ofport_yet_is_not_located():
    from virtualwire.core.world import World
    recs = [_bridge('br-int', {'vw-host-name': 'h1'}, [
        {'name': 'vnet0', 'type': '', 'ofport': None, 'mtu': None,
         'external_ids': {'iface-id': 'nic-1'}}])]
    [h] = hosts_from_records(recs)
    assert World(hosts={'h1': h}).locations() == {}


def test_an_extender_reports_its_link_encap_and_links():
    from virtualwire.core.model import EXTENDER, Link
    recs = [_bridge('br-int', {'vw-host-name': 'xa', 'vw-role': 'extender',
                               'vw-tunnel-ip': '198.19.1.2',
                               'vw-site': 'cloud-a', 'vw-link-xb': 'up',
                               'vw-link-xr': 'down'}, [
        {'name': 'vw-gre', 'type': 'gre', 'ofport': 65000, 'mtu': None,
         'external_ids': {}, 'options': {'local_ip': '198.19.1.2'}},
        {'name': 'vw-xl', 'type': 'gre', 'ofport': 65001, 'mtu': None,
         'external_ids': {'vw-encap': 'xl'},
         'options': {'local_ip': '100.64.0.1'}}])]
    [h] = hosts_from_records(recs)
    assert h.role == EXTENDER
    assert h.encaps == (Encap('gre', '198.19.1.2', 65000),
                        Encap('xl', '100.64.0.1', 65001))
    assert h.links == (Link('xb', True), Link('xr', False))
    assert h.link_up('xb') and not h.link_up('xr')
