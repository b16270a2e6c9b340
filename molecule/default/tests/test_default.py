"""A lab host is a real host: systemd as PID 1, its own docker engine, sshd."""

import os
import socket

import testinfra.utils.ansible_runner

TESTINFRA_HOSTS = testinfra.utils.ansible_runner.AnsibleRunner(
    os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")


def test_systemd_is_pid_1_and_running(host):
    assert host.process.get(pid=1).comm == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state
    failed = host.run("systemctl --failed --no-legend --plain").stdout.strip()
    assert failed == "", failed


def test_dockerd_is_active_and_answers(host):
    docker = host.service("docker")
    assert docker.is_running
    assert docker.is_enabled
    info = host.run("docker info --format '{{.Driver}} {{.ServerVersion}}'")
    assert info.rc == 0, info.stderr
    assert info.stdout.split()[0] == "overlay2"


def test_docker_data_is_a_volume_not_overlay(host):
    mount = host.mount_point("/var/lib/docker")
    assert mount.exists
    assert mount.filesystem != "overlay"


def test_sshd_listens_and_answers_from_the_controller(host):
    assert host.service("ssh").is_running
    assert host.socket("tcp://0.0.0.0:22").is_listening
    inventory = host.ansible.get_variables()
    with socket.create_connection((inventory["ansible_host"], int(inventory["ansible_port"])), timeout=5) as conn:
        banner = conn.recv(64)
    assert banner.startswith(b"SSH-2.0-OpenSSH")


def test_host_keys_are_this_hosts_own(host):
    key = host.file("/etc/ssh/ssh_host_ed25519_key.pub")
    assert key.exists
    assert host.file("/etc/ssh/ssh_host_ed25519_key").mode == 0o600


def test_operator_is_in_the_docker_group_and_reaches_dockerd(host):
    assert "docker" in host.user("operator1").groups
    result = host.run("runuser -u operator1 -- docker info --format '{{.ServerVersion}}'")
    assert result.rc == 0, result.stderr


def test_daemon_json_is_the_merge_of_the_fragments(host):
    import json
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["log-opts"] == {"max-size": "50m", "max-file": "3"}
    info = host.run("docker info --format '{{json .LoggingDriver}}'")
    assert json.loads(info.stdout) == daemon.get("log-driver", "json-file")
