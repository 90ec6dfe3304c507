"""Reading what OVS counted dropped or failed, from its appctl output."""
from vwlab.switch_counters import (parse_coverage, parse_pmd, parse_ports,
                                   worth_reporting)

COVERAGE = """\
Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=72c66b0a:
bridge_reconfigure         0.0/sec     0.533/sec        0.0089/sec   total: 32
rconn_overflow             0.0/sec     0.000/sec        0.0000/sec   total: 3
datapath_drop_upcall_error 0.0/sec     0.000/sec        0.0000/sec   total: 7
xlate_actions              0.4/sec     4.117/sec        0.0686/sec   total: 253
"""
PMD = """\
pmd thread numa_id 0 core_id 1:
  packets received: 100
  miss with success upcall: 30
  miss with failed upcall: 2
main thread:
  packets received: 12807
  miss with failed upcall: 1
"""


def test_coverage_totals_and_the_datapath_failed_upcalls_summed():
    assert parse_coverage(COVERAGE) == {
        'bridge_reconfigure': 32, 'rconn_overflow': 3,
        'datapath_drop_upcall_error': 7, 'xlate_actions': 253}
    assert parse_pmd(PMD) == {'packets received': 12907,
                              'miss with failed upcall': 3}


def test_only_drop_and_failure_counters_that_moved_are_reported():
    before = {'rconn_overflow': 3, 'xlate_actions': 10,
              'miss with failed upcall': 1, 'datapath_drop_tunnel_pop': 4}
    after = {'rconn_overflow': 8, 'xlate_actions': 900,
             'datapath_drop_userspace_action_error': 1500,
             'miss with failed upcall': 1, 'datapath_drop_tunnel_pop': 4,
             'datapath_drop_invalid_port': 2}
    assert worth_reporting(before, after) == {
        'datapath_drop_invalid_port': 2, 'rconn_overflow': 5}


def test_each_ports_drop_and_error_statistics_are_read():
    doc = {'headings': ['name', 'statistics'], 'data': [
        ['vw-hold', ['map', [['rx_packets', 12], ['tx_dropped', 3939],
                             ['tx_errors', 0]]]],
        ['vnet3', ['map', [['rx_dropped', 2], ['collisions', 0]]]]]}
    got = parse_ports(doc)
    assert got == {'port vw-hold tx_dropped': 3939,
                   'port vw-hold tx_errors': 0, 'port vnet3 rx_dropped': 2}
    assert worth_reporting({'port vw-hold tx_dropped': 3000}, got) == {
        'port vnet3 rx_dropped': 2, 'port vw-hold tx_dropped': 939}
