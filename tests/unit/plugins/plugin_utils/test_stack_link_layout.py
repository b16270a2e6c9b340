"""The stack_link role's planner (its ``layout`` entry): what the role writes and checks on a member of a stack, and
every refusal, each naming the variable and the host."""

import configparser

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import stack_link

GROUPS = {'all': ['spark-01', 'spark-02', 'spark-03', 'b200-01'], 'spark-stack-a': ['spark-02', 'spark-01'],
          'lonely': ['spark-03'], 'spark-nodes': ['spark-01', 'spark-02', 'spark-03']}
HOSTVARS = {'spark-01': {'stack_link_address': '192.168.100.10/24'},
            'spark-02': {'stack_link_address': '192.168.100.11/24'},
            'spark-03': {'stack_link_address': '192.168.100.12/24'},
            'b200-01': {}}


def settings(**over):
    out = {'group': 'spark-stack-a', 'interface': 'enp1s0f0np0', 'address': '192.168.100.10/24', 'head': '',
           'mtu': 9000, 'manager': 'auto', 'verify_wait': 30, 'changed': False}
    out.update(over)
    return out


def plan(host='spark-01', hostvars=None, groups=None, netplan=False, defaults=('eth0', ''), **over):
    facts = {'default_ipv4': {'interface': defaults[0]} if defaults[0] else {},
             'default_ipv6': {'interface': defaults[1]} if defaults[1:] and defaults[1] else {}}
    ctx = {'host': host, 'groups': groups or GROUPS, 'hostvars': hostvars or HOSTVARS, 'facts': facts,
           'reported': {'netplan': netplan}}
    return stack_link.PLANNERS['layout'](settings(**over), None, ctx)


def refused(**kw):
    with pytest.raises(PlanRefusal) as err:
        plan(**kw)
    return '\n'.join(err.value.errors)


def test_the_head_is_the_first_member_by_name_and_ranks_follow():
    head = plan()
    worker = plan('spark-02', address='192.168.100.11/24')
    assert (head['head'], head['role'], head['rank']) == ('spark-01', 'head', 0)
    assert (worker['role'], worker['rank']) == ('worker', 1)
    assert head['members'] == worker['members'] == ['spark-01', 'spark-02']
    assert head['peers'] == [{'host': 'spark-02', 'address': '192.168.100.11'}]
    assert worker['peers'] == [{'host': 'spark-01', 'address': '192.168.100.10'}]


def test_a_named_head_comes_first():
    out = plan(head='spark-02')
    assert out['members'] == ['spark-02', 'spark-01'] and out['role'] == 'worker' and out['rank'] == 1


def test_networkd_file_is_parsed_by_an_ini_reader_as_networkd_reads_it():
    out = plan()
    assert out['manager'] == 'networkd'
    assert out['path'] == '/etc/systemd/network/60-specdec-stack-link.network' and out['mode'] == '0644'
    ini = configparser.ConfigParser(comment_prefixes=('#',))
    ini.optionxform = str
    ini.read_string(out['content'])
    assert ini['Match']['Name'] == 'enp1s0f0np0'
    assert ini['Link']['MTUBytes'] == '9000'
    assert ini['Network']['Address'] == '192.168.100.10/24'
    assert ini['Network']['LinkLocalAddressing'] == 'no'
    assert out['apply'] == [['networkctl', 'reload'], ['networkctl', 'reconfigure', 'enp1s0f0np0']]


@pytest.mark.parametrize('netplan, manager, expected', [(True, 'auto', 'netplan'), (False, 'netplan', 'netplan'),
                                                        (True, 'networkd', 'networkd')])
def test_the_manager_follows_the_host_unless_named(netplan, manager, expected):
    assert plan(netplan=netplan, manager=manager)['manager'] == expected


def test_netplan_file_is_yaml_netplan_reads_and_private():
    out = plan(netplan=True, mtu=9000)
    assert out['path'] == '/etc/netplan/60-specdec-stack-link.yaml' and out['mode'] == '0600'
    doc = yaml.safe_load(out['content'])
    eth = doc['network']['ethernets']['enp1s0f0np0']
    assert doc['network']['version'] == 2
    assert eth['addresses'] == ['192.168.100.10/24'] and eth['mtu'] == 9000
    assert eth['dhcp4'] is False and eth['dhcp6'] is False and eth['link-local'] == []
    assert eth['optional'] is True, 'no boot waits for the link while its peer is away'
    assert 'renderer' not in doc['network'] and 'renderer' not in eth, "the host's own renderer applies it"
    assert out['apply'] == [['netplan', 'apply']]


@pytest.mark.parametrize('mtu, v4, v6', [(9000, 8972, 8952), (1500, 1472, 1452), (1280, 1252, 1232)])
def test_the_ping_fills_the_mtu_exactly(mtu, v4, v6):
    assert plan(mtu=mtu)['ping_payload'] == v4
    hv = {'spark-01': {'stack_link_address': 'fd00:100::10/64'}, 'spark-02': {'stack_link_address': 'fd00:100::11/64'}}
    out = plan(hostvars=hv, address='fd00:100::10/64', mtu=mtu)
    assert out['ping_payload'] == v6 and out['family'] == 6 and out['peers'][0]['address'] == 'fd00:100::11'


@pytest.mark.parametrize('kw, words', [
    ({'group': ''}, 'stack_link_group: not set on spark-01'),
    ({'interface': ''}, 'stack_link_interface: not set on spark-01'),
    ({'address': ''}, 'stack_link_address: not set on spark-01'),
    ({'group': 'nope'}, "stack_link_group: 'nope' is not a group of the inventory"),
    ({'group': 'lonely', 'host': 'spark-03'}, "stack 'lonely' has one host (spark-03)"),
    ({'host': 'spark-03'}, "stack_link_group: spark-03 is not a member of stack 'spark-stack-a'"),
    ({'head': 'spark-03'}, "stack_link_head: 'spark-03' is not a member of stack 'spark-stack-a' (members: spark-01, "
                           "spark-02)"),
    ({'interface': 'eth0'}, "stack_link_interface: 'eth0' of spark-01 carries the host's default route"),
    ({'address': '192.168.100.10'}, "stack_link_address of spark-01: '192.168.100.10' must be the link address with "
                                    "its prefix length"),
    ({'address': '192.168.100.300/24'}, 'is not an IPv4 or IPv6 address with a prefix length'),
    ({'address': '127.0.0.2/8'}, 'loopback, multicast, unspecified or link-local'),
    ({'address': 'fe80::1/64'}, 'loopback, multicast, unspecified or link-local'),
    ({'address': '192.168.100.10/32'}, 'has no room for a peer (/32)'),
    ({'address': '192.168.100.0/24'}, 'is the network or broadcast address of 192.168.100.0/24'),
    ({'address': '192.168.100.255/24'}, 'is the network or broadcast address'),
    ({'address': '192.168.101.10/24'}, "stack_link_address of spark-02: '192.168.100.11/24' is not on spark-01's link "
                                       "network 192.168.101.0/24"),
    ({'address': '192.168.100.11/24'}, 'stack_link_address of spark-02: 192.168.100.11 is also the address of '
                                       'spark-01'),
    ({'hostvars': {'spark-01': {}, 'spark-02': {}}}, "stack_link_address of spark-02: not set; every member of stack "
                                                     "'spark-stack-a' needs its link address"),
    ({'hostvars': {'spark-02': {'stack_link_address': '192.168.100.11/24\nAddress=10.0.0.1/8'}}},
     'is not an IPv4 or IPv6 address'),
    ({'manager': 'ifupdown'}, "stack_link_manager: 'ifupdown' must be auto, networkd or netplan"),
])
def test_refusals_name_the_variable_and_the_host(kw, words):
    assert words in refused(**kw)


def test_a_point_to_point_31_is_accepted():
    hv = {'spark-01': {'stack_link_address': '10.0.0.0/31'}, 'spark-02': {'stack_link_address': '10.0.0.1/31'}}
    assert plan(hostvars=hv, address='10.0.0.0/31')['peers'] == [{'host': 'spark-02', 'address': '10.0.0.1'}]


def test_a_stack_of_three_pings_both_peers():
    groups = dict(GROUPS, trio=['spark-01', 'spark-02', 'spark-03'])
    out = plan(groups=groups, group='trio')
    assert [p['host'] for p in out['peers']] == ['spark-02', 'spark-03'] and out['members'][0] == 'spark-01'
