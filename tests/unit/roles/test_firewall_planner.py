"""The firewall's planner (plugin_utils/_roles/firewall.py): the defaults the inventory decides - firewall_host_ports
(the collection's host listeners and who needs them), firewall_allowed_cidrs (the gateways' addresses), firewall_links
(a stack's link) - and the judgement of the loaded host-input chain against its file, with the probe that lists it."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall, _host_probe
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import firewall as planner


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


def ctx(host, hostvars=None, groups=None, instances=None):
    return {'host': host, 'hostvars': hostvars or HOSTVARS, 'groups': groups or GROUPS,
            'vars': {} if instances is None else {'inference_server_instances': instances}}


def ports(host, hostvars=None, groups=None, cidrs=('10.20.0.0/16',)):
    return planner.default_host_ports({'firewall_allowed_cidrs': list(cidrs)}, ctx(host, hostvars, groups))


def firewall_gateway_addresses(hostvars, groups):
    return planner.default_allowed_cidrs({}, ctx(None, hostvars, groups))


def firewall_links(hostvars, groups, host):
    return planner.default_links({}, ctx(host, hostvars, groups))


def test_the_defaults_are_filled_in_order_and_read_the_inventory():
    assert [name for name, _default in planner.INVENTORY_DEFAULTS] == [
        'firewall_engine_ports', 'firewall_allowed_cidrs', 'firewall_host_ports', 'firewall_links']
    instances = [{'name': 'a', 'port': 8001}, {'name': 'b'}, {'name': 'c', 'port': 8002, 'state': 'absent'},
                 {'name': 'd', 'port': 8003, 'stack': 'spark-stack-a'}]
    assert planner.default_engine_ports({}, ctx('spark-01', instances=instances)) == [8000, 8001]
    assert planner.default_engine_ports({}, ctx('spark-01')) == []


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
    default takes no play hosts: spark-02, in the inventory, is a source whether or not it is in the play."""
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
    with pytest.raises(PlanRefusal, match=r"from mon-02, whose address \(monitoring_address, else ansible_host\) "
                                                 r"is 'mon-02.example.org'.*set monitoring_address of mon-02"):
        ports('spark-01', hostvars)


def test_a_bad_port_names_the_setting():
    hostvars = dict(HOSTVARS, **{'gw-01': dict(HOSTVARS['gw-01'], gateway_stats_port='many')})
    with pytest.raises(PlanRefusal, match="gateway_stats_port of gw-01, which is 'many'"):
        ports('gw-01', hostvars)


@pytest.mark.parametrize('given, sources', [('10.0.0.0/8,10.1.0.0/16', ['10.0.0.0/8', '10.1.0.0/16']),
                                             ({'not': 'a list'}, [])])
def test_the_front_door_reads_the_allowed_networks_as_the_settings_check_does(given, sources):
    # a string is a comma-separated list, as Ansible's list type reads it; what is no list gets no source here and is
    # refused by the settings check, naming firewall_allowed_cidrs (test_the_action_* below)
    gateway = [p for p in planner.default_host_ports({'firewall_allowed_cidrs': given}, ctx('gw-01'))
               if p['name'] == 'gateway']
    assert gateway == [{'name': 'gateway', 'port': role_spec.default('gateway_port'), 'sources': sources}]


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
    probe = _host_probe.argv(execs=['/bin/sh'])
    argv = _firewall.probe_argv(probe, tools, planner.INPUT_CHAIN)
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    # the host probe's own reading of the output is not disturbed by the listing
    assert _host_probe.drift(out.splitlines(), execs=['/bin/sh']) == []
    return out


def firewall_loaded_drift(listing, expected):
    return planner.loaded({}, None, {'reported': {'listing': listing, 'expected': expected}})


def test_the_probe_lists_the_loaded_chain_and_a_chain_like_its_file_passes(tmp_path):
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
    out = run_probe(tmp_path, {4: fake_iptables(tmp_path, loaded)})
    assert said in firewall_loaded_drift(out, {4: RULES})


def test_a_missing_iptables_is_drift_and_bad_arguments_are_refused(tmp_path):
    out = run_probe(tmp_path, {6: str(tmp_path / 'nosuch')})
    assert firewall_loaded_drift(out, {6: RULES}) == ['IPv6: the loaded SPECDEC-INPUT is not its rules file',
                                                      'IPv6: INPUT jumps to SPECDEC-INPUT 0 times']
    with pytest.raises(_firewall.FirewallError, match='expects the argv of the host probe'):
        _firewall.probe_argv(['echo'], {4: '/usr/sbin/iptables'}, planner.INPUT_CHAIN)
    with pytest.raises(_firewall.FirewallError, match='not an absolute path'):
        _firewall.probe_argv(['sh', '-c', 'true', 'host-probe'], {4: 'iptables'}, planner.INPUT_CHAIN)
    with pytest.raises(PlanRefusal, match='expected must map a family'):
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
    hv = stack_hostvars()
    assert firewall_links(hv, STACK_GROUPS, 'spark-01') == [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.11']}]
    assert firewall_links(hv, STACK_GROUPS, 'spark-02') == [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.10']}]
    assert firewall_links(hv, STACK_GROUPS, 'mon-01') == []
    assert firewall_links(HOSTVARS, GROUPS, 'spark-01') == []


@pytest.mark.parametrize('over, words', [
    ({'spark-02': {'stack_link_address': '10.9.9.9/24'}}, "firewall_links: stack_link_address of spark-02: '10.9.9.9/24' "
                                                          "is not on spark-01's link network 192.168.100.0/24"),
    ({'spark-01': {'stack_link_interface': ''}}, 'firewall_links: stack_link_interface: not set on spark-01'),
    ({'spark-01': {'stack_link_group': 'nope'}}, "firewall_links: stack_link_group: 'nope' is not a group"),
    ({'spark-02': {'stack_link_address': None}}, 'firewall_links: stack_link_address of spark-02: not set'),
])
def test_a_wrong_stack_fails_the_default_naming_the_variable(over, words):
    with pytest.raises(PlanRefusal) as err:
        firewall_links(stack_hostvars(**over), STACK_GROUPS, 'spark-01')
    assert words in str(err.value)


# --------------------------------------------------------------------------- the plan, and the settings action

SETTINGS = {'engine_ports': [8000], 'allowed_cidrs': ['10.20.0.0/16', '2001:db8::/48', '192.0.2.7', '10.20.0.0/16'],
            'host_ports': [{'name': 'exporter', 'port': 9470, 'sources': ['10.0.8.1', '2001:db8::9']}],
            'links': [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.11']}], 'interfaces': [],
            'ipv6': True, 'rules_dir': '/etc/specdec/firewall', 'unit_name': 'specdec-docker-user',
            'iptables': '/usr/sbin/iptables', 'ip6tables': '/usr/sbin/ip6tables',
            'iptables_restore': '/usr/sbin/iptables-restore', 'ip6tables_restore': '/usr/sbin/ip6tables-restore'}


def plan(settings=None, instances=None, interfaces=('lo', 'eth0')):
    context = dict(ctx('spark-01', instances=instances), facts={'interfaces': list(interfaces)})
    return planner.plan(dict(SETTINGS, **(settings or {})), None, context)


def test_the_plan_splits_every_source_by_family_in_canonical_form():
    rules = plan()['rules']
    assert rules['4']['allowed_cidrs'] == ['10.20.0.0/16', '192.0.2.7/32']
    assert rules['6']['allowed_cidrs'] == ['2001:db8::/48']
    assert rules['4']['host_ports'] == [{'name': 'exporter', 'port': 9470, 'sources': ['10.0.8.1/32']}]
    assert rules['6']['host_ports'] == [{'name': 'exporter', 'port': 9470, 'sources': ['2001:db8::9/128']}]
    assert rules['4']['links'] == [{'interface': 'enp1s0f0np0', 'sources': ['192.168.100.11/32']}]
    assert rules['6']['links'] == [{'interface': 'enp1s0f0np0', 'sources': []}]  # the link itself is still closed


def test_the_plan_names_the_files_the_unit_and_the_probe_of_each_family():
    out = plan()
    assert out['files'] == {'docker_user': {'4': '/etc/specdec/firewall/docker-user.v4',
                                            '6': '/etc/specdec/firewall/docker-user.v6'},
                            'host_input': {'4': '/etc/specdec/firewall/host-input.v4',
                                           '6': '/etc/specdec/firewall/host-input.v6'},
                            'unit': '/etc/systemd/system/specdec-docker-user.service'}
    assert out['unit'] == 'specdec-docker-user.service' and out['chain'] == 'SPECDEC-INPUT'
    assert out['probe_argv'][:2] == ['sh', '-c'] and 'family' in out['probe_argv']
    assert out['probe_argv'][out['probe_argv'].index('family'):][:8] == [
        'family', '4', '/usr/sbin/iptables', 'SPECDEC-INPUT', 'family', '6', '/usr/sbin/ip6tables', 'SPECDEC-INPUT']
    v4 = plan({'ipv6': False})
    assert v4['execs'] == ['/usr/sbin/iptables-restore', '/usr/sbin/iptables'] and '6' not in v4['tools']


def test_the_plan_refuses_a_missing_interface_and_a_published_port_left_unfiltered():
    with pytest.raises(PlanRefusal) as err:
        plan({'interfaces': ['eth9'], 'engine_ports': [8000]}, instances=[{'name': 'a'}, {'name': 'b', 'port': 8001}])
    assert err.value.errors == [
        'firewall_interfaces: ["eth9"] not an interface of spark-01 (it has eth0, lo).',
        'firewall_engine_ports=[8000] leaves [8001] unfiltered, which inference_server_instances publish on spark-01; '
        'add them (or leave firewall_engine_ports unset: it defaults to every published port).']
    assert plan({'engine_ports': [8000, 8001]}, instances=[{'name': 'b', 'port': 8001}])['rules']


def test_the_action_fills_in_what_is_unset_keeps_what_is_given_and_refuses_a_bad_default():
    from role_defaults import role_defaults  # tests/unit, on the test path
    from settings_action import run  # tests/unit, on the test path
    given = dict(role_defaults('firewall'), inventory_hostname='gw-01', groups=GROUPS, hostvars=HOSTVARS,
                 ansible_facts={'interfaces': ['lo', 'eth0']})
    out = run('firewall', own='firewall', **given)
    assert not out.get('failed'), out.get('msg')
    assert out['engine_ports'] == [] and out['allowed_cidrs'] == ['10.0.6.1'] and out['links'] == []
    # HAProxy's stats from the monitoring hosts; the front door from the allowed networks, here the gateways' own address
    assert [p['name'] for p in out['host_ports']] == ['gateway-stats', 'gateway']
    assert out['plan']['rules']['4']['host_ports'][1]['sources'] == ['10.0.6.1/32']
    kept = run('firewall', own='firewall', **dict(given, firewall_allowed_cidrs=['10.30.0.0/16']))
    assert kept['allowed_cidrs'] == ['10.30.0.0/16'] and kept['host_ports'][1]['sources'] == ['10.30.0.0/16']
    bad = run('firewall', own='firewall', **dict(given, hostvars=dict(HOSTVARS, **{
        'gw-01': dict(HOSTVARS['gw-01'], gateway_port='many')})))
    assert bad['failed'] is True and bad['msg'].startswith(
        'firewall settings refused on the controller (no host was changed):\n- firewall_host_ports: its default needs '
        "gateway_port of gw-01, which is 'many'")
    wrong = run('firewall', own='firewall', **dict(given, firewall_allowed_cidrs=['10.0.0.0/33']))
    assert wrong['failed'] is True and "firewall_allowed_cidrs: '10.0.0.0/33': must be" in wrong['msg'], wrong['msg']


def test_the_inventory_is_read_once_per_task_however_many_defaults_need_it(monkeypatch):
    from role_defaults import role_defaults  # tests/unit, on the test path
    from settings_action import run  # tests/unit, on the test path
    calls = []
    original = _firewall.plain_hostvars
    monkeypatch.setattr(_firewall, 'plain_hostvars', lambda *a: calls.append(a) or original(*a))
    given = dict(role_defaults('firewall'), inventory_hostname='spark-01', groups=STACK_GROUPS,
                 hostvars=stack_hostvars(), ansible_facts={'interfaces': ['lo', 'eth0']})
    out = run('firewall', own='firewall', **given)
    assert not out.get('failed'), out.get('msg')
    # the allowed networks, the host ports and the link were all defaulted from it
    assert out['allowed_cidrs'] == ['10.0.6.1'] and out['host_ports'] and out['links']
    assert len(calls) == 1
    run('firewall', own='firewall', **given)
    assert len(calls) == 2  # and again for the next task: nothing is kept between tasks
