"""network filters: CIDR validation and family split without netaddr."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.network import (
    FilterModule, cidrs_by_family, invalid_cidrs)


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["invalid_cidrs"] is invalid_cidrs
    assert filters["cidrs_by_family"] is cidrs_by_family


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


def test_split_by_family_canonical_and_deduplicated():
    values = ["10.1.2.3/24", "2001:db8::1/48", "192.0.2.7", "10.1.2.0/24", "::1"]
    assert cidrs_by_family(values, 4) == ["10.1.2.0/24", "192.0.2.7/32"]
    assert cidrs_by_family(values, "6") == ["2001:db8::/48", "::1/128"]


def test_split_rejects_bad_input():
    with pytest.raises(AnsibleFilterError, match="'10.0.0.0/33'"):
        cidrs_by_family(["10.0.0.0/33"], 4)
    with pytest.raises(AnsibleFilterError, match="family must be 4 or 6"):
        cidrs_by_family(["10.0.0.0/8"], 5)


@pytest.mark.parametrize("daemon_json, bypass", [
    ({}, False), ({"iptables": True}, False), ({"log-driver": "json-file"}, False),
    ({"iptables": False}, True), ({"firewall-backend": "nftables"}, True), ({"firewall-backend": "iptables"}, False),
])
def test_firewall_bypass(daemon_json, bypass):
    from ansible_collections.specdec.serve.plugins.filter.network import firewall_bypass
    assert bool(firewall_bypass(daemon_json)) is bypass


COLONS = """pub:-:255:22:AAAAAAAAAAAAAAAA:1700000000:::-:::scSC::::::23::0:
fpr:::::::::C95B321B61E88C1809C4F759DDCAE044F796ECB0:
uid:-::::1700000000::HASH::NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>::::::::::0:
sub:-:255:22:BBBBBBBBBBBBBBBB:1700000000::::::e::::::23:
fpr:::::::::1111111111111111111111111111111111111111:
pub:-:255:22:CCCCCCCCCCCCCCCC:1700000000:::-:::scSC::::::23::0:
fpr:::::::::9dc858229fc7dd38854ae2d88d81803c0ebfcd88:
"""


def test_gpg_fingerprints_are_the_primary_keys_only():
    from ansible_collections.specdec.serve.plugins.filter.network import gpg_fingerprints
    assert gpg_fingerprints(COLONS) == ["C95B321B61E88C1809C4F759DDCAE044F796ECB0",
                                        "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"]
    assert gpg_fingerprints("") == []
    with pytest.raises(AnsibleFilterError):
        gpg_fingerprints(None)
