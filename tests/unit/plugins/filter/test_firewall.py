"""firewall filters: the default of firewall_host_ports (the collection's host listeners and who needs
them) and of firewall_allowed_cidrs (the gateways' addresses), from the inventory."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.firewall import (
    FilterModule, firewall_gateway_addresses, firewall_host_ports)
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec

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


def ports(host, hostvars=None, groups=None, cidrs=('10.20.0.0/16',)):
    return firewall_host_ports(hostvars or HOSTVARS, groups or GROUPS, host, list(cidrs))


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


def test_a_gateway_lets_the_monitoring_hosts_scrape_haproxy_and_the_clients_reach_its_front_door():
    assert ports('gw-01') == [{'name': 'gateway-stats', 'port': STATS, 'sources': ['10.0.8.1', '10.0.9.2']},
                              {'name': 'gateway', 'port': role_spec.default('gateway_port'), 'sources': ['10.20.0.0/16']}]
    # the front door's port and address are the gateway's own; bound to loopback, nothing to open
    hostvars = dict(HOSTVARS, **{'gw-01': dict(HOSTVARS['gw-01'], gateway_port=9443, gateway_bind_address='::')})
    assert ports('gw-01', hostvars, cidrs=['192.0.2.0/24'])[-1] == {'name': 'gateway', 'port': 9443,
                                                                    'sources': ['192.0.2.0/24']}
    hostvars['gw-01']['gateway_bind_address'] = '127.0.0.1'
    assert [p['name'] for p in ports('gw-01', hostvars)] == ['gateway-stats']
    # an engine host is no gateway
    assert 'gateway' not in [p['name'] for p in ports('spark-01')]


def test_the_tune_loop_beyond_loopback_is_reachable_from_the_monitoring_hosts_only():
    tune = role_spec.default('monitoring_tune_loop_port')
    # off, or on loopback (the default): nothing
    assert ports('mon-01', dict(HOSTVARS, **{'mon-01': dict(HOSTVARS['mon-01'], monitoring_tune_loop_listen='10.0.8.1')})) == []
    assert ports('mon-01', dict(HOSTVARS, **{'mon-01': dict(HOSTVARS['mon-01'], monitoring_tune_loop=True)})) == []
    hostvars = dict(HOSTVARS, **{'mon-01': dict(HOSTVARS['mon-01'], monitoring_tune_loop='true',
                                                  monitoring_tune_loop_listen='10.0.8.1')})
    assert ports('mon-01', hostvars) == [{'name': 'tune-loop', 'port': tune, 'sources': ['10.0.8.1', '10.0.9.2']}]


def test_prometheus_and_alertmanager_are_listed_only_beyond_loopback():
    assert ports('mon-01') == []
    hostvars = dict(HOSTVARS, **{'mon-01': dict(HOSTVARS['mon-01'], monitoring_prometheus_listen='10.0.8.1',
                                                  monitoring_alertmanager_port=19093)})
    assert ports('mon-01', hostvars) == [
        {'name': 'prometheus', 'port': role_spec.default('monitoring_prometheus_port'), 'sources': ['10.20.0.0/16']}]
    hostvars['mon-01']['monitoring_alertmanager_listen'] = '10.0.8.1'
    assert [(p['name'], p['port']) for p in ports('mon-01', hostvars)][1] == ('alertmanager', 19093)


def test_the_peer_seed_lets_the_inventory_peers_copy_by_their_default_addresses():
    hostvars = dict((h, dict(v, model_cache_source='peer')) for h, v in HOSTVARS.items())
    out = ports('spark-01', hostvars)
    # the seed is the first host of the inventory in peer mode (model_cache_peer_seed's default); gateways and
    # monitoring hosts cache nothing, so they are neither the seed nor its peers
    assert out[-1] == {'name': 'model-cache-peer', 'port': PEER, 'sources': ['172.16.0.2', '2001:db8::2']}
    # a host that is not the seed serves no peers
    assert [p['name'] for p in ports('spark-02', hostvars)] == ['exporter']


def test_no_peer_port_without_the_peer_source_and_only_peers_in_peer_mode():
    assert [p['name'] for p in ports('spark-01')] == ['exporter']
    hostvars = dict(HOSTVARS, **{'spark-01': dict(HOSTVARS['spark-01'], model_cache_source='peer',
                                                    model_cache_peer_seed='spark-01', model_cache_peer_port=18555)})
    assert ports('spark-01', hostvars)[-1] == {'name': 'model-cache-peer', 'port': 18555, 'sources': []}


def test_the_peer_rule_names_every_inventory_peer_whatever_the_limit():
    """The regression: `site.yml -l spark-01` after a full run must not drop spark-02 from the seed's rule. The
    filter takes no play hosts: spark-02, in the inventory, is a source whether or not it is in the play."""
    hostvars = dict(HOSTVARS, **{h: dict(HOSTVARS[h], model_cache_source='peer') for h in ('spark-01', 'spark-02')})
    assert ports('spark-01', hostvars)[-1] == {'name': 'model-cache-peer', 'port': PEER,
                                               'sources': ['172.16.0.2', '2001:db8::2']}
    # spark-02 has no facts (a limited run gathers none there): its ansible_host
    hostvars['spark-02'] = {'ansible_host': '10.0.1.2', 'model_cache_source': 'peer'}
    assert ports('spark-01', hostvars)[-1]['sources'] == ['10.0.1.2']


def test_the_seed_and_its_peers_follow_the_inventory_order_and_each_hosts_own_seed():
    groups = dict(GROUPS, all=['spark-02', 'spark-01', 'spark-03', 'mon-01', 'mon-02', 'gw-01'],
                  **{'spark-nodes': ['spark-02', 'spark-01', 'spark-03']})
    hostvars = dict(HOSTVARS, **{'spark-01': dict(HOSTVARS['spark-01'], model_cache_source='peer'),
                                 'spark-02': dict(HOSTVARS['spark-02'], model_cache_source='peer'),
                                 'spark-03': {'ansible_host': '10.0.1.3', 'model_cache_source': 'peer'}})
    # spark-02 comes first in the inventory: the default seed, serving spark-01 and spark-03
    assert [p['name'] for p in ports('spark-01', hostvars, groups)] == ['exporter']
    assert ports('spark-02', hostvars, groups)[-1]['sources'] == ['172.16.0.1', '10.0.1.3']
    # spark-03 names its own seed (spark-01): it copies from spark-01, and spark-02 no longer lists it
    hostvars['spark-03'] = dict(hostvars['spark-03'], model_cache_peer_seed='spark-01')
    assert ports('spark-02', hostvars, groups)[-1]['sources'] == ['172.16.0.1']
    assert ports('spark-01', hostvars, groups)[-1] == {'name': 'model-cache-peer', 'port': PEER, 'sources': ['10.0.1.3']}


def test_a_host_not_in_peer_mode_is_no_peer():
    hostvars = dict(HOSTVARS, **{'spark-01': dict(HOSTVARS['spark-01'], model_cache_source='peer'),
                                 'spark-02': dict(HOSTVARS['spark-02'], model_cache_source='hub')})
    assert ports('spark-01', hostvars)[-1] == {'name': 'model-cache-peer', 'port': PEER, 'sources': []}


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
    with pytest.raises(AnsibleFilterError, match='allowed_cidrs must be a list'):
        firewall_host_ports(HOSTVARS, GROUPS, 'spark-01', '10.0.0.0/8')
    with pytest.raises(AnsibleFilterError, match='expects the inventory groups'):
        firewall_host_ports(HOSTVARS, ['spark-01'], 'spark-01')


def test_the_gateway_addresses():
    assert firewall_gateway_addresses(HOSTVARS, GROUPS) == ['10.0.6.1']
    assert firewall_gateway_addresses(HOSTVARS, dict(GROUPS, gateways=['gw-01', 'mon-02', 'gw-x'])) == [
        '10.0.6.1', '10.0.9.2', 'gw-x']
    assert firewall_gateway_addresses(HOSTVARS, {'all': []}) == []


# --------------------------------------------------------------------------- the loaded chain against its file

RULES = """# comment
*filter
:SPECDEC-INPUT - [0:0]
-A SPECDEC-INPUT -i lo -p tcp -m tcp --dport 9470 -j ACCEPT
-A SPECDEC-INPUT -p tcp -m tcp --dport 9470 -m comment --comment "specdec deny exporter" -j DROP
-A SPECDEC-INPUT -j RETURN
COMMIT
"""
LOADED = """-N SPECDEC-INPUT
-A SPECDEC-INPUT -i lo -p tcp -m tcp --dport 9470 -j ACCEPT
-A SPECDEC-INPUT -p tcp -m tcp --dport 9470 -m comment --comment "specdec deny exporter" -j DROP
-A SPECDEC-INPUT -j RETURN
-P INPUT ACCEPT
-A INPUT -j SPECDEC-INPUT
"""


def fake_iptables(tmp_path, text):
    """An executable that prints, for -S CHAIN, the lines of `text` of that chain (as iptables -S does)."""
    listing = tmp_path / ('listing-%d' % len(list(tmp_path.iterdir())))
    listing.write_text(text)
    tool = tmp_path / ('iptables-%d' % len(list(tmp_path.iterdir())))
    tool.write_text('#!/bin/sh\n[ "$2" = -S ] || exit 2\ngrep -E -- "^-[NAP] $3( |$)" %s\n' % listing)
    tool.chmod(0o755)
    return str(tool)


def run_probe(tmp_path, tools):
    import subprocess
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_probe_argv
    from ansible_collections.specdec.serve.plugins.filter.host_probe import host_probe_argv, host_probe_drift
    probe = host_probe_argv(execs=['/bin/sh'])
    argv = firewall_probe_argv(probe, tools)
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    # the host probe's own reading of the output is not disturbed by the listing
    assert host_probe_drift(out.splitlines(), execs=['/bin/sh']) == []
    return out


def test_the_probe_lists_the_loaded_chain_and_a_chain_like_its_file_passes(tmp_path):
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_loaded_drift
    out = run_probe(tmp_path, {4: fake_iptables(tmp_path, LOADED), 6: fake_iptables(tmp_path, LOADED)})
    assert out.splitlines()[0] == 'family 4' and 'exec /bin/sh yes' in out
    assert firewall_loaded_drift(out, {4: RULES, 6: RULES}) == []


@pytest.mark.parametrize('loaded, said', [
    ('-N SPECDEC-INPUT\n-A INPUT -j SPECDEC-INPUT\n', 'IPv4: the loaded SPECDEC-INPUT is not its rules file'),  # flushed
    ('', 'IPv4: the loaded SPECDEC-INPUT is not its rules file'),  # never loaded
    (LOADED.replace('-A INPUT -j SPECDEC-INPUT\n', ''), 'IPv4: INPUT jumps to SPECDEC-INPUT 0 times'),
    (LOADED + '-A INPUT -j SPECDEC-INPUT\n', 'IPv4: INPUT jumps to SPECDEC-INPUT 2 times'),
])
def test_a_chain_that_is_not_its_file_or_a_jump_gone_or_doubled_is_drift(tmp_path, loaded, said):
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_loaded_drift
    out = run_probe(tmp_path, {4: fake_iptables(tmp_path, loaded)})
    assert said in firewall_loaded_drift(out, {4: RULES})


def test_a_missing_iptables_is_drift_and_bad_arguments_are_refused(tmp_path):
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_loaded_drift, firewall_probe_argv
    out = run_probe(tmp_path, {6: str(tmp_path / 'nosuch')})
    assert firewall_loaded_drift(out, {6: RULES}) == ['IPv6: the loaded SPECDEC-INPUT is not its rules file',
                                                      'IPv6: INPUT jumps to SPECDEC-INPUT 0 times']
    with pytest.raises(AnsibleFilterError, match='expects the argv of specdec.serve.host_probe_argv'):
        firewall_probe_argv(['echo'], {4: '/usr/sbin/iptables'})
    with pytest.raises(AnsibleFilterError, match='not an absolute path'):
        firewall_probe_argv(['sh', '-c', 'true', 'host-probe'], {4: 'iptables'})
    with pytest.raises(AnsibleFilterError, match='expected must map a family'):
        firewall_loaded_drift('', [RULES])


# --------------------------------------------------------------------------- firewall_links: a stack's link

STACK_GROUPS = dict(GROUPS, **{'spark-stack-a': ['spark-01', 'spark-02']})


def stack_hostvars(**over):
    hv = {host: dict(vars_) for host, vars_ in HOSTVARS.items()}
    for host, address in (('spark-01', '192.168.100.10/24'), ('spark-02', '192.168.100.11/24')):
        hv[host].update(stack_link_group='spark-stack-a', stack_link_interface='enp1s0f0np0',
                        stack_link_address=address)
    for host, values in over.items():
        hv[host].update(values)
    return hv


def test_a_stack_member_accepts_its_peers_on_the_link_only():
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_links
    hv = stack_hostvars()
    assert firewall_links(hv, STACK_GROUPS, 'spark-01') == [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.11']}]
    assert firewall_links(hv, STACK_GROUPS, 'spark-02') == [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.10']}]
    assert firewall_links(hv, STACK_GROUPS, 'mon-01') == []
    assert firewall_links(HOSTVARS, GROUPS, 'spark-01') == []
    assert 'firewall_links' in FilterModule().filters()


@pytest.mark.parametrize('over, words', [
    ({'spark-02': {'stack_link_address': '10.9.9.9/24'}}, "firewall_links: stack_link_address of spark-02: '10.9.9.9/24' "
                                                          "is not on spark-01's link network 192.168.100.0/24"),
    ({'spark-01': {'stack_link_interface': ''}}, 'firewall_links: stack_link_interface: not set on spark-01'),
    ({'spark-01': {'stack_link_group': 'nope'}}, "firewall_links: stack_link_group: 'nope' is not a group"),
    ({'spark-02': {'stack_link_address': None}}, 'firewall_links: stack_link_address of spark-02: not set'),
])
def test_a_wrong_stack_fails_the_default_naming_the_variable(over, words):
    from ansible_collections.specdec.serve.plugins.filter.firewall import firewall_links
    with pytest.raises(AnsibleFilterError) as err:
        firewall_links(stack_hostvars(**over), STACK_GROUPS, 'spark-01')
    assert words in str(err.value)
