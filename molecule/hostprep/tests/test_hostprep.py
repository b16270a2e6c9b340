"""Host preparation on a lab host: merged daemon.json, pinned toolkit, nvidia runtime, docker
group, the DOCKER-USER allow-list seen from an allowed and a refused lab host, after a docker
restart and after the lab host itself restarts (the last test: it restarts hostprep-01), and the
host-input allow-list (SPECDEC-INPUT) of a host listener, jumped to from INPUT once."""

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

PROJECT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(PROJECT / "collections"))
sys.path.insert(0, str(PROJECT / "lab"))
from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving  # noqa: E402
import lab  # noqa: E402

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
TARGET = RUNNER.get_hosts("hostprep_target")[0]
PORT = 8000
LISTENER = 9470  # the host listener prepare starts (firewall_host_ports in hostprep_vars.yml)
VERSION = "1.17.8-1"
PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1"]
IMAGE = "specdec-hostprep/usr:latest"
LAB = "molecule-" + os.environ.get("MOLECULE_SCENARIO_NAME", "hostprep")
LINK = "enp1s0f0np0"  # the stack's link interface (lab.py link in prepare; molecule.yml's inventory)
LINK_ADDRESSES = {"hostprep_target": "172.29.102.10/24", "hostprep_allowed": "172.29.102.11/24"}


@pytest.fixture(name="target")
def target_host():
    """Every test here is about the prepared host, hostprep-01 (the others are its clients)."""
    return lab_host("hostprep_target")


def lab_host(group):
    name = RUNNER.get_hosts(group)[0]
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def lab_ip(name):
    """The host's address on the lab network (not on the stack's link network)."""
    return lab.lab_ip(name, LAB)


def fetch(client, ip, port=PORT):
    """HTTP status of a port (the engine's) seen from a lab host, or the curl exit code (28: timed out)."""
    res = client.run(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 http://{ip}:{port}/")
    return res.stdout.strip() if res.rc == 0 else f"curl rc={res.rc}"


def docker_user_rules(run):
    out = run("iptables -S DOCKER-USER").stdout.splitlines()
    return [line for line in out if "specdec" in line or "ESTABLISHED" in line]


def wait_for(check, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_daemon_json_is_the_merge_of_the_fragments(target):
    merged = json.loads(target.file("/etc/docker/daemon.json").content_string)
    # written by hand before the roles ran, kept as fragment 00-preexisting
    assert merged["max-concurrent-downloads"] == 4
    assert target.file("/etc/docker/daemon.json.d/00-preexisting.json").exists
    # docker_host_daemon_options (user options), log limits, and container_toolkit's runtime
    assert merged["labels"] == ["specdec.role=hostprep"]
    assert merged["log-opts"] == {"max-file": "3", "max-size": "100m"}
    assert merged["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert merged["exec-opts"] == ["native.cgroupdriver=cgroupfs"]
    info = json.loads(target.check_output("docker info --format '{{json .}}'"))
    assert "specdec.role=hostprep" in info["Labels"]
    assert "nvidia" in info["Runtimes"]
    assert info["CgroupDriver"] == "cgroupfs"


def test_toolkit_comes_from_the_signed_repository_pinned(target):
    # deb822 (deb822_repository): the guide's `deb [signed-by=KEYRING] URL/stable/deb/$(ARCH) /` as fields
    source = target.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").content_string
    fields = dict(line.split(": ", 1) for line in source.splitlines() if ": " in line)
    assert fields["Types"] == "deb" and fields["URIs"] == "http://127.0.0.1:8642/stable/deb/$(ARCH)"
    assert fields["Suites"] == "/" and "Components" not in fields
    assert fields["Signed-By"] == "/usr/share/keyrings/nvidia-container-toolkit-keyring.asc"
    assert not target.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").exists
    for name in PACKAGES:
        assert target.package(name).version == VERSION, name
    # a newer version is in the repository: only the pin keeps it out
    policy = target.check_output("apt-cache policy nvidia-container-toolkit")
    assert "1.18.0-1" in policy
    assert f"Candidate: {VERSION}" in policy
    assert "NVIDIA Container Toolkit CLI version 1.17.8" in target.check_output("nvidia-ctk --version")


def test_nvidia_runtime_runs_a_container(target):
    log = "/var/log/nvidia-container-runtime.log"
    before = len(target.file(log).content_string.splitlines()) if target.file(log).exists else 0
    out = target.check_output(f"docker run --rm --runtime=nvidia {IMAGE} python3 -c 'print(6 * 7)'")
    assert out.strip() == "42"
    calls = target.file(log).content_string.splitlines()[before:]
    assert any(" create " in line for line in calls), calls


def test_user_is_in_the_docker_group_and_can_use_docker(target):
    assert "docker" in target.user("alice").groups
    assert target.run("runuser -u alice -- docker ps").rc == 0


def test_rules_are_loaded_by_a_unit_bound_to_docker(target):
    unit = target.service("specdec-docker-user")
    assert unit.is_enabled
    assert unit.is_valid
    assert target.run("systemctl is-active specdec-docker-user").stdout.strip() == "active"
    allowed = lab_ip(RUNNER.get_hosts("hostprep_allowed")[0])
    rules = docker_user_rules(target.run)
    assert rules[0] == "-A DOCKER-USER -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
    assert rules[1].startswith(f"-A DOCKER-USER -s {allowed}/32 -i eth0 -p tcp -m conntrack --ctorigdstport {PORT}")
    assert rules[1].endswith("-j RETURN")
    assert rules[2].endswith("-j DROP") and f"--ctorigdstport {PORT}" in rules[2]
    assert len(rules) == 3
    v6 = target.check_output("ip6tables -S DOCKER-USER")
    assert f"-s 2001:db8:10::/48 -i eth0 -p tcp -m conntrack --ctorigdstport {PORT}" in v6
    assert target.run("iptables -S FORWARD").stdout.splitlines()[1] == "-A FORWARD -j DOCKER-USER"


def test_engine_port_answers_allowed_and_refuses_others(target):
    target_ip = lab_ip(TARGET)
    assert fetch(target, "127.0.0.1") == "200"
    assert fetch(lab_host("hostprep_allowed"), target_ip) == "200"
    assert fetch(lab_host("hostprep_refused"), target_ip) == "curl rc=28"


def test_rules_come_back_after_docker_restart(target):
    rules = docker_user_rules(target.run)
    target.run_expect([0], "systemctl restart docker")
    wait_for(lambda: fetch(target, "127.0.0.1") == "200", what="the web container after the docker restart")
    assert docker_user_rules(target.run) == rules
    target_ip = lab_ip(TARGET)
    assert fetch(lab_host("hostprep_allowed"), target_ip) == "200"
    assert fetch(lab_host("hostprep_refused"), target_ip) == "curl rc=28"


def reach(client, ip, port):
    """Whether a TCP connection from a lab host to ip:port opens within 3 s."""
    code = f"import socket; socket.create_connection(('{ip}', {port}), 3).close()"
    return client.run(f'python3 -c "{code}"').rc == 0


def input_jumps(run, tool="iptables"):
    return [line for line in run(f"{tool} -S INPUT").stdout.splitlines() if "SPECDEC-INPUT" in line]


def test_host_listener_answers_the_allowed_host_only_and_ssh_stays_open(target):
    """A host process (not a container) on the exporter's port: filtered in INPUT by SPECDEC-INPUT."""
    target_ip = lab_ip(TARGET)
    allowed, refused = lab_host("hostprep_allowed"), lab_host("hostprep_refused")
    chain = target.check_output("iptables -S SPECDEC-INPUT")
    assert f"-A SPECDEC-INPUT -s {lab_ip(RUNNER.get_hosts('hostprep_allowed')[0])}/32 -p tcp -m tcp --dport {LISTENER}" in chain
    assert f"-A SPECDEC-INPUT -p tcp -m tcp --dport {LISTENER} -m comment --comment \"specdec deny exporter\" -j DROP" in chain
    assert f"-s 2001:db8:10::/48 -p tcp -m tcp --dport {LISTENER}" in target.check_output("ip6tables -S SPECDEC-INPUT")
    assert fetch(allowed, target_ip, LISTENER) == "200"
    assert fetch(target, target_ip, LISTENER) == "200"  # the host itself (loopback)
    assert fetch(refused, target_ip, LISTENER) == "curl rc=28"
    for client in (allowed, refused):
        assert reach(client, target_ip, 22)


def test_a_reload_keeps_one_jump_from_input(target):
    rules = target.check_output("iptables -S SPECDEC-INPUT")
    for _ in range(2):
        target.run_expect([0], "systemctl restart specdec-docker-user")
    assert input_jumps(target.run) == ["-A INPUT -j SPECDEC-INPUT"]
    assert input_jumps(target.run, "ip6tables") == ["-A INPUT -j SPECDEC-INPUT"]
    assert target.check_output("iptables -S SPECDEC-INPUT") == rules
    assert fetch(lab_host("hostprep_refused"), lab_ip(TARGET), LISTENER) == "curl rc=28"


def link_state(host):
    return json.loads(host.check_output(f"ip -json address show dev {LINK}"))[0]


@pytest.mark.parametrize("group", sorted(LINK_ADDRESSES))
def test_the_stack_link_is_configured_by_networkd_persistently(group):
    host = lab_host(group)
    unit = host.file("/etc/systemd/network/60-specdec-stack-link.network")
    assert unit.mode == 0o644 and unit.user == "root"
    assert f"Name={LINK}\n" in unit.content_string and "MTUBytes=9000\n" in unit.content_string
    assert f"Address={LINK_ADDRESSES[group]}\n" in unit.content_string
    assert host.service("systemd-networkd").is_running and host.service("systemd-networkd").is_enabled
    # its wait-online service would hold every boot for two minutes (the last test reboots hostprep-01)
    assert not host.service("systemd-networkd-wait-online").is_enabled
    state = link_state(host)
    assert state["mtu"] == 9000 and "LOWER_UP" in state["flags"]
    assert [f"{a['local']}/{a['prefixlen']}" for a in state["addr_info"] if a.get("scope") == "global"] == \
        [LINK_ADDRESSES[group]], "the link holds the role's address only (the lab's docker address was flushed)"
    assert "configured" in host.check_output(f"networkctl status {LINK} --no-pager")


@pytest.mark.parametrize("group", sorted(LINK_ADDRESSES))
def test_the_link_leaves_the_hosts_own_network_alone(group):
    """networkd manages the link only: the lab address and the default route stay as docker made them."""
    host = lab_host(group)
    routes = json.loads(host.check_output("ip -json route show default"))
    assert [r["dev"] for r in routes] == ["eth0"]
    assert lab_ip(RUNNER.get_hosts(group)[0]) in host.check_output("ip -o -4 address show dev eth0")
    assert "unmanaged" in host.check_output("networkctl list eth0 --no-pager")


def test_the_link_carries_exactly_its_mtu_unfragmented(target):
    """8972 bytes of ICMP payload + 28 of headers = 9000: answered; one byte more does not leave the host."""
    ok = target.run(f"ping -4 -n -q -c 2 -W 2 -M do -s 8972 -I {LINK} 172.29.102.11")
    assert ok.rc == 0, ok.stdout + ok.stderr
    too_big = target.run(f"ping -4 -n -q -c 1 -W 2 -M do -s 8973 -I {LINK} 172.29.102.11")
    assert too_big.rc != 0, too_big.stdout


def test_the_link_accepts_the_peer_only(target):
    """hostprep-01's firewall (firewall_links, from the inventory) accepts its peer on the link and drops
    hostprep-03, which prepare put on the same link with an address of its own; hostprep-02, without the
    firewall role, answers hostprep-03, so the cable is there and the drop is the firewall's."""
    rules = target.check_output("iptables -S SPECDEC-INPUT").splitlines()
    assert rules[1:4] == [
        f"-A SPECDEC-INPUT -i {LINK} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        f'-A SPECDEC-INPUT -s 172.29.102.11/32 -i {LINK} -m comment --comment "specdec link allow" -j ACCEPT',
        f'-A SPECDEC-INPUT -i {LINK} -m comment --comment "specdec link deny" -j DROP']
    assert f'-A SPECDEC-INPUT -i {LINK} -m comment --comment "specdec link deny" -j DROP' in \
        target.check_output("ip6tables -S SPECDEC-INPUT").splitlines()
    intruder = lab_host("hostprep_refused")
    peer = lab_host("hostprep_allowed")
    assert peer.run(f"ping -4 -n -q -c 2 -W 2 -I {LINK} 172.29.102.10").rc == 0
    assert intruder.run(f"ping -4 -n -q -c 2 -W 2 -I {LINK} 172.29.102.11").rc == 0
    assert intruder.run(f"ping -4 -n -q -c 2 -W 2 -I {LINK} 172.29.102.10").rc == 1


# The worker's sshd and the head's SSH exactly as the stack's engine containers run them (plugin_utils/_stack_serving.py),
# run on the lab hosts with the stack's directory mounted read-only where the containers mount it.
STACK_DIR = "/etc/specdec/stack"
HEAD_SSH = (f"systemd-run --quiet --wait --pipe -p BindReadOnlyPaths={STACK_DIR}:{stack_serving.STACK_DIR} "
            f"ssh {stack_serving.ssh_args(2233)} -o ConnectTimeout=5 root@172.29.102.11 hostname")


def ssh_from(host, command):
    """An ssh command's exit status and output, run on a lab host (testinfra takes a 255, ssh's own failure, for
    a failure of its connection to the lab host, so the status travels in the output)."""
    out = host.run(f"{command} 2>&1; echo \"rc=$?\"").stdout.rstrip().rsplit("\n", 1)
    return int(out[-1].split("=", 1)[1]), out[0] if len(out) > 1 else ""


def start_worker_sshd(worker, trust_dir=STACK_DIR):
    worker.run("systemctl stop specdec-stack-sshd-test; systemctl reset-failed specdec-stack-sshd-test")
    sshd = " ".join(shlex.quote(w) for w in stack_serving.sshd_command("172.29.102.11", 2233))
    worker.run_expect([0], "systemd-run --unit specdec-stack-sshd-test "
                           f"-p BindReadOnlyPaths={trust_dir}:{stack_serving.STACK_DIR} {sshd}")
    wait_for(lambda: worker.run("ss -Hltn 'sport = :2233'").stdout.strip() != "", timeout=30,
             what="the test sshd on the worker's link address")


def test_the_stacks_ssh_trust_was_made_on_each_member(target):
    worker = lab_host("hostprep_allowed")
    assert target.file(STACK_DIR).mode == 0o700 and worker.file(STACK_DIR).mode == 0o700
    assert target.file(f"{STACK_DIR}/id_ed25519").mode == 0o600
    assert not target.file(f"{STACK_DIR}/ssh_host_ed25519_key").exists
    assert not worker.file(f"{STACK_DIR}/id_ed25519").exists, "the head's private key never leaves the head"
    host_key = worker.file(f"{STACK_DIR}/ssh_host_ed25519_key.pub").content_string.split()[:2]
    assert target.file(f"{STACK_DIR}/known_hosts").content_string == "[172.29.102.11]:2233 %s %s\n" % tuple(host_key)
    head_key = target.file(f"{STACK_DIR}/id_ed25519.pub").content_string.split()[:2]
    assert worker.file(f"{STACK_DIR}/authorized_keys").content_string == \
        'from="172.29.102.10",restrict %s %s specdec-stack-hostprep_stack-head\n' % tuple(head_key)


def test_the_head_reaches_a_worker_over_the_link_and_nobody_else_does(target):
    worker = lab_host("hostprep_allowed")
    intruder = lab_host("hostprep_refused")
    start_worker_sshd(worker)
    try:
        rc, out = ssh_from(target, HEAD_SSH)
        assert rc == 0 and out.strip() == "hostprep-02", out
        # on the link, with a key of its own: refused
        intruder.run("rm -f /tmp/intruder && ssh-keygen -q -t ed25519 -N '' -f /tmp/intruder")
        rc, out = ssh_from(intruder, "ssh -p 2233 -i /tmp/intruder -o StrictHostKeyChecking=no "
                                     "-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5 "
                                     "root@172.29.102.11 true")
        assert rc == 255 and "Permission denied" in out, out
        # a worker answering with another host key: the head refuses it (the key is pinned)
        worker.run_expect([0], "rm -rf /tmp/other-trust && install -d -m 0700 /tmp/other-trust && "
                               f"cp -p {STACK_DIR}/authorized_keys /tmp/other-trust/ && "
                               "ssh-keygen -q -t ed25519 -N '' -f /tmp/other-trust/ssh_host_ed25519_key")
        start_worker_sshd(worker, "/tmp/other-trust")
        rc, out = ssh_from(target, HEAD_SSH)
        assert rc == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in out, out
    finally:
        worker.run("systemctl stop specdec-stack-sshd-test")


def test_rules_come_back_after_the_host_restarts(target):
    """Restarting the lab host's container gives it a fresh network namespace (empty iptables)
    and boots systemd again: only the unit can bring the rules back. Its SSH port may change, so
    the target is reached with `docker exec` from here on."""
    rules = docker_user_rules(target.run)

    def on_target(cmd):
        return subprocess.run(["docker", "exec", TARGET, "sh", "-c", cmd],
                              capture_output=True, text=True, timeout=30)

    subprocess.run(["docker", "restart", TARGET], check=True, capture_output=True, timeout=120)
    wait_for(lambda: on_target("systemctl is-system-running").stdout.strip() in ("running", "degraded"),
             timeout=120, what="systemd on the restarted host")
    wait_for(lambda: on_target(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 http://127.0.0.1:{PORT}/").stdout == "200",
             timeout=60, what="the web container after the host restart")
    assert docker_user_rules(on_target) == rules
    target_ip = lab_ip(TARGET)
    assert fetch(lab_host("hostprep_allowed"), target_ip) == "200"
    assert fetch(lab_host("hostprep_refused"), target_ip) == "curl rc=28"
