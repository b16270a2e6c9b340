"""plugin_utils/_cidrs.py: CIDR validation without netaddr (the cidrs_by_family filter's check; internal since
invalid_cidrs stopped being a public filter, its errors still filter errors)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.plugin_utils._cidrs import invalid_cidrs


@pytest.mark.parametrize("value", [
    "10.0.0.0/8", "192.0.2.7", "10.1.2.3/24", "2001:db8::/48", "::1", "0.0.0.0/0"])
def test_valid_entries(value):
    assert invalid_cidrs([value]) == []


@pytest.mark.parametrize("value", [
    "10.0.0.0/33", "300.1.1.1", "10.0.0/8x", "2001:db8::/129", "", " 10.0.0.0/8", "eth0", 8000, None,
    "10.0.0.0/8,10.1.0.0/16"])
def test_invalid_entries(value):
    assert invalid_cidrs(["10.0.0.0/8", value]) == [value]


def test_invalid_cidrs_needs_a_list():
    with pytest.raises(AnsibleFilterError, match="expects a list"):
        invalid_cidrs("10.0.0.0/8")
