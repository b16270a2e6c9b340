"""network filters: dpkg's output, the apt.conf.d hold (the CIDR family split is the firewall planner's:
tests/unit/roles/test_firewall_planner.py)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.network import FilterModule, packages_missing


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert "invalid_cidrs" not in filters and "cidrs_by_family" not in filters  # the firewall planner's
    assert "firewall_bypass" not in filters  # internal: plugin_utils/_roles/docker_host.py


# dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' as the roles run it: a known package is a line
# (status ii when installed, rc when removed with its config kept, un when known and never installed);
# an unknown one is no line at all (dpkg-query names it on stderr and exits 1).
DPKG_STATUS = "prometheus ii \nprometheus-alertmanager rc \nhaproxy un \nlibc6:amd64 ii \n"


def test_packages_missing_is_registered():
    assert FilterModule().filters()["packages_missing"] is packages_missing


def test_packages_missing_names_what_is_not_installed_in_list_order():
    names = ["prometheus-alertmanager", "prometheus", "curl", "haproxy", "libc6"]
    assert packages_missing(DPKG_STATUS, names) == ["prometheus-alertmanager", "curl", "haproxy"]


def test_packages_missing_on_a_host_whose_probe_found_nothing():
    assert packages_missing("", ["docker.io", "containerd"]) == ["docker.io", "containerd"]


def test_packages_missing_when_everything_is_installed():
    assert packages_missing(DPKG_STATUS, ["prometheus", "libc6:amd64"]) == []


@pytest.mark.parametrize("status, names", [(None, ["x"]), ("x ii", "x"), ("x ii", [1])])
def test_packages_missing_refuses_what_is_not_dpkg_output_and_names(status, names):
    with pytest.raises(AnsibleFilterError, match="packages_missing"):
        packages_missing(status, names)


def test_packages_missing_at_a_pinned_version_counts_another_version_as_missing():
    status = "nvidia-container-toolkit ii 1.17.8-1\nnvidia-container-toolkit-base ii 1.17.7-1\nlibnvidia-container1 rc 1.17.8-1\n"
    names = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1"]
    assert packages_missing(status, names, "1.17.8-1") == ["nvidia-container-toolkit-base", "libnvidia-container1"]
    assert packages_missing(status, names) == ["libnvidia-container1"]


def test_packages_missing_refuses_a_version_that_is_not_a_string():
    with pytest.raises(AnsibleFilterError, match="version must be a string"):
        packages_missing("x ii 1", ["x"], 1)


def test_apt_upgrade_hold_anchors_and_escapes_each_package_under_its_owner():
    from ansible_collections.specdec.serve.plugins.filter.network import apt_upgrade_hold
    text = apt_upgrade_hold(['docker-ce', 'containerd.io', 'libnvidia-container1'], 'specdec.serve.docker_host')
    lines = text.splitlines()
    assert lines[0].startswith('// Managed by specdec.serve.docker_host:')
    assert lines[2:] == ['Unattended-Upgrade::Package-Blacklist {', '    "^docker\\-ce$";', '    "^containerd\\.io$";',
                         '    "^libnvidia\\-container1$";', '};']
    assert text.endswith('};\n')


@pytest.mark.parametrize('packages, role', [('docker-ce', 'r'), ([''], 'r'), ([1], 'r'), (['docker-ce'], '')])
def test_apt_upgrade_hold_refuses_what_is_not_a_list_of_names_and_a_role(packages, role):
    from ansible_collections.specdec.serve.plugins.filter.network import apt_upgrade_hold
    with pytest.raises(AnsibleFilterError, match='apt_upgrade_hold: expects'):
        apt_upgrade_hold(packages, role)
