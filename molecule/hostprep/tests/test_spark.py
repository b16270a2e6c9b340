"""A host as a DGX Spark ships (hostprep-04, molecule/shared/prepare_spark_host.yml) after docker_host,
container_toolkit and firewall: its engine (docker-ce from Docker's source) and its toolkit (NVIDIA's source
and keyring) are kept as they are, apt still updates, and an unattended upgrade, with newer versions of both
in their repositories, leaves the engine running as it was."""

import json
import os

import pytest
import testinfra
import testinfra.utils.ansible_runner

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
ENGINE = {"docker-ce": "5:20.10.24-1~debian.12~bookworm", "docker-ce-cli": "5:20.10.24-1~debian.12~bookworm",
          "containerd.io": "1.6.20-1"}
TOOLKIT = {name: "1.17.8-1" for name in ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                                         "libnvidia-container-tools", "libnvidia-container1")}
DOCKER_SOURCE = "deb [arch=amd64 signed-by=/etc/apt/keyrings/docker.asc] http://127.0.0.1:8642/docker/linux/debian bookworm stable"
NVIDIA_SOURCE = ("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
                 "http://127.0.0.1:8642/stable/deb/$(ARCH) /")


@pytest.fixture(name="spark", scope="module")
def spark_host():
    name = RUNNER.get_hosts("hostprep_spark")[0]
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def versions(host, names):
    out = host.check_output("dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(names))
    return dict(line.split(" ", 1) for line in out.splitlines())


def source_lines(host):
    """Every active deb line or deb822 URI of the host's apt sources."""
    out = host.run("grep -hsE '^(deb |URIs:)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list "
                   "/etc/apt/sources.list.d/*.sources").stdout
    return [line.strip() for line in out.splitlines()]


def test_the_vendors_engine_and_toolkit_are_kept(spark):
    assert versions(spark, ENGINE) == ENGINE
    assert versions(spark, TOOLKIT) == TOOLKIT
    assert spark.run("dpkg-query -W -f='${Status}' docker.io").stdout.strip() in ("", "deinstall ok config-files"), \
        "docker.io must not come back beside docker-ce"
    assert not spark.package("docker.io").is_installed
    assert spark.service("docker").is_running


def test_one_source_line_for_each_vendor_and_apt_updates(spark):
    lines = source_lines(spark)
    assert [line for line in lines if "8642/docker" in line] == [DOCKER_SOURCE]
    assert [line for line in lines if "8642/stable" in line] == [NVIDIA_SOURCE]
    assert not spark.file("/etc/apt/sources.list.d/docker.sources").exists
    assert not spark.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").exists
    assert not spark.file("/etc/apt/preferences.d/nvidia-container-toolkit").exists
    update = spark.run("apt-get update")
    assert update.rc == 0, update.stdout + update.stderr
    assert "Signed-By" not in update.stderr and "configured multiple times" not in update.stderr, update.stderr


def test_the_runtime_is_registered_and_the_admin_stays_out_of_the_docker_group(spark):
    info = json.loads(spark.check_output("docker info --format '{{json .}}'"))
    assert "nvidia" in info["Runtimes"]
    assert "docker" not in spark.user("nvidia").groups
    assert "Status: inactive" in spark.check_output("ufw status")
    assert spark.file("/run/systemd/network/10-netplan-eth0.network").exists


def test_the_engine_restarting_packages_are_held_from_unattended_upgrades(spark):
    listed = spark.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    for name in ("docker-ce", "docker-ce-cli", "containerd", "nvidia-container-toolkit", "libnvidia-container1"):
        assert f'"^{name}' in listed.replace("\\", ""), listed
    # newer versions are there for the taking
    policy = spark.check_output("apt-cache policy docker-ce nvidia-container-toolkit")
    assert "5:20.10.25-1~debian.12~bookworm" in policy and "1.18.0-1" in policy


def test_an_unattended_upgrade_leaves_the_engine_running_as_it_was(spark):
    def engine():
        return spark.check_output("systemctl show docker -p ActiveEnterTimestampMonotonic -p MainPID")

    before = engine()
    run = spark.run("unattended-upgrade -d")
    assert run.rc == 0, run.stdout + run.stderr
    log = run.stdout + run.stderr
    # unattended-upgrades looked at them (their origins are allowed) and skipped them for the hold
    assert "skipping blacklisted package docker-ce" in log, log[-4000:]
    assert "skipping blacklisted package nvidia-container-toolkit" in log, log[-4000:]
    assert engine() == before
    assert versions(spark, ENGINE) == ENGINE
    assert versions(spark, TOOLKIT) == TOOLKIT
