"""link_state: the link as `ip -json addr show` reports it, what differs from its plan, and the ping."""

import json

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import link_state

# iproute2 6.1's output for a configured link and for one a tired operator changed by hand
UP = [{'ifindex': 7, 'ifname': 'enp1s0f0np0', 'flags': ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'], 'mtu': 9000,
       'qdisc': 'noqueue', 'operstate': 'UP', 'group': 'default', 'link_type': 'ether',
       'addr_info': [{'family': 'inet', 'local': '192.168.100.10', 'prefixlen': 24, 'scope': 'global',
                      'label': 'enp1s0f0np0'},
                     {'family': 'inet6', 'local': 'fe80::42:acff:fe1d:6602', 'prefixlen': 64, 'scope': 'link'}]}]
DOWN = [{'ifindex': 7, 'ifname': 'enp1s0f0np0', 'flags': ['NO-CARRIER', 'BROADCAST', 'MULTICAST', 'UP'], 'mtu': 1500,
         'operstate': 'DOWN', 'addr_info': []}]


def test_a_configured_link():
    state = link_state.parse_link(json.dumps(UP), 'enp1s0f0np0')
    assert state == {'exists': True, 'admin_up': True, 'carrier': True, 'operstate': 'UP', 'mtu': 9000,
                     'addresses': ['192.168.100.10/24']}
    assert link_state.problems(state, 'enp1s0f0np0', '192.168.100.10/24', 9000) == []


def test_every_difference_is_said():
    state = link_state.parse_link(json.dumps(DOWN), 'enp1s0f0np0')
    assert link_state.problems(state, 'enp1s0f0np0', '192.168.100.10/24', 9000) == [
        'enp1s0f0np0: no carrier (is the cable plugged in, the peer up?)',
        'enp1s0f0np0: MTU 1500, want 9000',
        'enp1s0f0np0: 192.168.100.10/24 not configured (has none)']


def test_another_prefix_is_another_address():
    state = link_state.parse_link(json.dumps(UP), 'enp1s0f0np0')
    assert link_state.problems(state, 'enp1s0f0np0', '192.168.100.10/16', 9000) == [
        'enp1s0f0np0: 192.168.100.10/16 not configured (has 192.168.100.10/24)']


def test_an_interface_down_by_hand():
    entry = dict(UP[0], flags=['BROADCAST', 'MULTICAST'])
    state = link_state.parse_link(json.dumps([entry]), 'enp1s0f0np0')
    assert link_state.problems(state, 'enp1s0f0np0', '192.168.100.10/24', 9000) == [
        'enp1s0f0np0: down (administratively)']


@pytest.mark.parametrize('text', ['', 'Device "enp1s0f0np0" does not exist.', '[]', json.dumps(UP)])
def test_an_absent_interface(text):
    state = link_state.parse_link(text, 'enp9s0')
    assert state['exists'] is False
    assert link_state.problems(state, 'enp9s0', '192.168.100.10/24', 9000) == ['enp9s0: no such interface on the host']


def test_the_ping_sets_dont_fragment_and_fills_the_mtu():
    argv = link_state.ping_argv('192.168.100.11', 'enp1s0f0np0', link_state.ping_payload(9000, 4), 4)
    assert argv == ['ping', '-4', '-n', '-q', '-c', '2', '-W', '2', '-M', 'do', '-s', '8972', '-I', 'enp1s0f0np0',
                    '192.168.100.11']
    assert link_state.family('fd00::1/64') == 6 and link_state.ping_payload(9000, 6) == 8952


def test_the_summary_is_pings_last_line():
    out = ('PING 192.168.100.11 (192.168.100.11) from 192.168.100.10 enp1s0f0np0: 8972(9000) bytes of data.\n\n'
           '--- 192.168.100.11 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 1010ms\n\n')
    assert link_state.ping_summary(out) == '2 packets transmitted, 0 received, 100% packet loss, time 1010ms'
    assert link_state.ping_summary('') == 'no output'
