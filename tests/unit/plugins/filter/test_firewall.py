"""firewall filters: the default of firewall_host_ports (the collection's host listeners and who needs
them) and of firewall_allowed_cidrs (the gateways' addresses), from the inventory."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.firewall import (
    FilterModule, firewall_gateway_addresses, firewall_host_ports)
from ansible_collections.specdec.serve.plugins.plugin_utils import role_spec

EXPORTER = role_spec.default('monitoring_exporter_port')
STATS = role_spec.default('gateway_stats_port')
PEER = role_spec.default('model_cache_peer_port')


def facts(v4, v6=None):
    out = {'default_ipv4': {'address': v4}}
    if v6:
        out['default_ipv6'] = {'address': v6}
    return {'ansible_facts': out}


HOSTVARS = {
    'spark-01': dict(ansible_host='10.0.1.1', **facts('172.16.0.1')),
    'spark-02': dict(ansible_host='10.0.1.2', **facts('172.16.0.2', '2001:db8::2')),
    'mon-01': {'ansible_host': '10.0.9.1', 'monitoring_address': '10.0.8.1'},
    'mon-02': {'ansible_host': '10.0.9.2'},
    'gw-01': {'ansible_host': '10.0.7.1', 'gateway_address': '10.0.6.1'},
}
GROUPS = {'all': sorted(HOSTVARS), 'spark-nodes': ['spark-01', 'spark-02'], 'monitoring': ['mon-01', 'mon-02'],
          'gateways': ['gw-01']}


def ports(host, hostvars=None, groups=None, play=('spark-01', 'spark-02'), cidrs=('10.20.0.0/16',)):
    return firewall_host_ports(hostvars or HOSTVARS, groups or GROUPS, host, list(play), list(cidrs))


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert filters['firewall_host_ports'] is firewall_host_ports
    assert filters['firewall_gateway_addresses'] is firewall_gateway_addresses


def test_an_engine_host_lets_the_monitoring_hosts_scrape_its_exporter():
    assert ports('spark-01') == [{'name': 'exporter', 'port': EXPORTER, 'sources': ['10.0.8.1', '10.0.9.2']}]


def test_the_exporter_port_and_the_groups_are_the_hosts_own():
    hostvars = dict(HOSTVARS, **{'spark-01': dict(HOSTVARS['spark-01'], monitoring_exporter_port=9999,
                                                    monitoring_engine_group='b200', monitoring_server_group='prom')})
    groups = dict(GROUPS, b200=['spark-01'], prom=['mon-02'])
    assert ports('spark-01', hostvars, groups) == [{'name': 'exporter', 'port': 9999, 'sources': ['10.0.9.2']}]
    # a host outside its engine group: nothing
    hostvars['spark-02'] = dict(HOSTVARS['spark-02'], monitoring_engine_group='b200')
    assert ports('spark-02', hostvars, groups) == []


def test_a_gateway_lets_the_monitoring_hosts_scrape_haproxy():
    assert ports('gw-01') == [{'name': 'gateway-stats', 'port': STATS, 'sources': ['10.0.8.1', '10.0.9.2']}]


def test_prometheus_and_alertmanager_are_listed_only_beyond_loopback():
    assert ports('mon-01') == []
    hostvars = dict(HOSTVARS, **{'mon-01': dict(HOSTVARS['mon-01'], monitoring_prometheus_listen='10.0.8.1',
                                                  monitoring_alertmanager_port=19093)})
    assert ports('mon-01', hostvars) == [
        {'name': 'prometheus', 'port': role_spec.default('monitoring_prometheus_port'), 'sources': ['10.20.0.0/16']}]
    hostvars['mon-01']['monitoring_alertmanager_listen'] = '10.0.8.1'
    assert [(p['name'], p['port']) for p in ports('mon-01', hostvars)][1] == ('alertmanager', 19093)


def test_the_peer_seed_lets_the_play_peers_copy_by_their_default_addresses():
    hostvars = dict((h, dict(v, model_cache_source='peer')) for h, v in HOSTVARS.items())
    out = ports('spark-01', hostvars, play=('spark-01', 'spark-02', 'mon-02'))
    # the seed is the first host of the play (model_cache_peer_seed's default)
    assert out[-1] == {'name': 'model-cache-peer', 'port': PEER, 'sources': ['172.16.0.2', '2001:db8::2', '10.0.9.2']}
    # a host that is not the seed serves no peers
    assert [p['name'] for p in ports('spark-02', hostvars, play=('spark-01', 'spark-02'))] == ['exporter']


def test_no_peer_port_without_the_peer_source_and_only_peers_in_peer_mode():
    assert [p['name'] for p in ports('spark-01')] == ['exporter']
    hostvars = dict(HOSTVARS, **{'spark-01': dict(HOSTVARS['spark-01'], model_cache_source='peer',
                                                    model_cache_peer_seed='spark-01', model_cache_peer_port=18555)})
    assert ports('spark-01', hostvars, play=('spark-02', 'spark-01'))[-1] == {
        'name': 'model-cache-peer', 'port': 18555, 'sources': []}


def test_loopback_addresses_are_left_out():
    hostvars = dict(HOSTVARS, **{'mon-02': {'ansible_host': '127.0.0.1'}})
    assert ports('spark-01', hostvars)[0]['sources'] == ['10.0.8.1']


def test_an_address_that_is_not_an_ip_names_the_host_and_what_to_set():
    hostvars = dict(HOSTVARS, **{'mon-02': {'ansible_host': 'mon-02.example.org'}})
    with pytest.raises(AnsibleFilterError, match=r"from mon-02, whose address \(monitoring_address, else ansible_host\) "
                                                 r"is 'mon-02.example.org'.*set monitoring_address of mon-02"):
        ports('spark-01', hostvars)


def test_a_bad_port_names_the_setting():
    hostvars = dict(HOSTVARS, **{'gw-01': dict(HOSTVARS['gw-01'], gateway_stats_port='many')})
    with pytest.raises(AnsibleFilterError, match="gateway_stats_port of gw-01, which is 'many'"):
        ports('gw-01', hostvars)


def test_bad_arguments_are_refused():
    with pytest.raises(AnsibleFilterError, match='play_hosts must be a list'):
        firewall_host_ports(HOSTVARS, GROUPS, 'spark-01', 'spark-01')
    with pytest.raises(AnsibleFilterError, match='expects the inventory groups'):
        firewall_host_ports(HOSTVARS, ['spark-01'], 'spark-01')


def test_the_gateway_addresses():
    assert firewall_gateway_addresses(HOSTVARS, GROUPS) == ['10.0.6.1']
    assert firewall_gateway_addresses(HOSTVARS, dict(GROUPS, gateways=['gw-01', 'mon-02', 'gw-x'])) == [
        '10.0.6.1', '10.0.9.2', 'gw-x']
    assert firewall_gateway_addresses(HOSTVARS, {'all': []}) == []
