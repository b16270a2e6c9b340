"""firewall_host_ports on the controller: each refusal names the place (firewall_host_ports[1].port), the
value and what is allowed; SSH is never filtered; the settings action is given ansible_port."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import (
    SettingsError, check_settings, context_needs)

OPTIONS = role_spec.load_options('firewall')
GOOD = {'name': 'exporter', 'port': 9470, 'sources': ['10.0.8.1', '2001:db8::/48']}


def check(value, **extra):
    return check_settings(OPTIONS, dict(extra, firewall_host_ports=value))['firewall_host_ports']


def refused(value, **extra):
    with pytest.raises(SettingsError) as err:
        check(value, **extra)
    return err.value.errors


def test_entries_pass_and_sources_may_be_empty_or_left_out():
    value = [GOOD, {'name': 'peer', 'port': 18090, 'sources': []}, {'name': 'stats', 'port': 8404}]
    assert check(value) == value
    assert check([]) == []


@pytest.mark.parametrize('entry, error', [
    ({'name': 'a b', 'port': 1}, "firewall_host_ports[1].name: 'a b' must be a name of letters"),
    ({'name': 'x', 'port': 70000}, 'firewall_host_ports[1].port: 70000 must be a port number from 1 to 65535'),
    ({'name': 'x', 'port': 0}, 'firewall_host_ports[1].port: 0 must be a port number from 1 to 65535'),
    ({'name': 'x', 'port': 22}, 'firewall_host_ports[1].port: 22 is the SSH port (22): the host-input allow-list never '
                                'filters SSH'),
    ({'name': 'x', 'port': 1, 'sources': ['10.0.0.1/8']},
     "firewall_host_ports[1].sources: ['10.0.0.1/8'] '10.0.0.1/8': has host bits set"),
    ({'name': 'x', 'port': 1, 'sources': ['::/0']}, "firewall_host_ports[1].sources: ['::/0'] '::/0': allows every address"),
    ({'name': 'x', 'port': 1, 'sources': ['mon-01']}, "firewall_host_ports[1].sources: ['mon-01'] 'mon-01': must be an IPv4/IPv6 address or CIDR"),
    ({'name': 'x', 'port': 1, 'sources': '10.0.0.1'}, "firewall_host_ports[1].sources: '10.0.0.1' must be a list"),
    ({'port': 1}, 'firewall_host_ports[1].name: None is required'),
    ({'name': 'x'}, 'firewall_host_ports[1].port: None is required'),
    ({'name': 'x', 'port': 1, 'from': ['10.0.0.1']},
     "firewall_host_ports[1]: {'name': 'x', 'port': 1, 'from': ['10.0.0.1']} has the keys from; an entry has name, port "
     "and sources"),
    ({'name': 'exporter', 'port': 1}, "firewall_host_ports[1].name: 'exporter' is the name of [0] too"),
    ({'name': 'x', 'port': 9470}, 'firewall_host_ports[1].port: 9470 is the port of [0] too'),
])
def test_a_bad_entry_is_refused_naming_its_place_value_and_what_is_allowed(entry, error):
    errors = refused([GOOD, entry])
    assert any(error in e for e in errors), errors


def test_the_hosts_ssh_port_is_refused_too():
    errors = refused([{'name': 'x', 'port': 2222}], ansible_port=2222)
    assert errors == ['firewall_host_ports[0].port: 2222 is the SSH port (ansible_port): the host-input allow-list '
                      'never filters SSH; leave it out of firewall_host_ports'], errors
    assert check([{'name': 'x', 'port': 2222}], ansible_port='2200') == [{'name': 'x', 'port': 2222}]


def test_every_refusal_is_listed_at_once():
    errors = refused([GOOD, {'name': 'exporter', 'port': 22}, {'name': 'y', 'port': 70000}])
    assert [e.split(':')[0] for e in errors] == ['firewall_host_ports[1].name', 'firewall_host_ports[1].port',
                                                'firewall_host_ports[2].port'], errors


def test_the_settings_action_is_given_ansible_port():
    assert context_needs(OPTIONS) == ['ansible_port']
