"""firewall_links on the controller: each refusal names the place (firewall_links[1].interface), the value and
what is allowed."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_settings

OPTIONS = role_spec.load_options('firewall')
GOOD = {'interface': 'enp1s0f0np0', 'sources': ['192.168.100.11']}


def check(value):
    return check_settings(OPTIONS, {'firewall_links': value})['firewall_links']


def refused(value):
    with pytest.raises(SettingsError) as err:
        check(value)
    return '\n'.join(err.value.errors)


def test_entries_pass_and_sources_may_be_empty():
    assert check([GOOD]) == [GOOD]
    assert check([{'interface': 'ib0', 'sources': []}]) == [{'interface': 'ib0', 'sources': []}]
    assert check([]) == []


@pytest.mark.parametrize('entry, words', [
    ({'interface': 'enp1s0f0np0 -j ACCEPT', 'sources': []}, "firewall_links[1].interface: 'enp1s0f0np0 -j ACCEPT' must be "
                                                            "an interface name"),
    ({'interface': 'eth1', 'sources': ['0.0.0.0/0']}, 'firewall_links[1].sources'),
    ({'interface': 'eth1', 'sources': ['10.0.0.300']}, 'firewall_links[1].sources'),
    ({'interface': 'enp1s0f0np0', 'sources': []}, "firewall_links[1].interface: 'enp1s0f0np0' is the interface of [0] too"),
    ({'sources': []}, 'firewall_links[1].interface'),
    ({'interface': 'eth1', 'sources': [], 'ports': [22]}, 'has the keys ports; an entry has interface and sources'),
])
def test_a_bad_entry_is_refused_naming_its_place(entry, words):
    assert words in refused([GOOD, entry])
