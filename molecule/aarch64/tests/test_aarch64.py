"""Verify of the aarch64 lane (molecule/aarch64): the DGX Spark converge as converge and idempotence left it on
an arm64 host (Debian's arm64 kernel and packages under full-system emulation), then an image built for
another platform refused with the engine still serving. The tests run in file order."""

import json
import os
import shlex
import subprocess
from pathlib import Path

import testinfra.utils.ansible_runner
from openai import OpenAI

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

NAME = "gpt-oss-120b"  # the spark-nodes class's instance (inventories/lab/group_vars/spark-nodes)
UNIT = "specdec-%s.service" % NAME
PORT = 8000
IMAGE = "specdec-lab/tensorrt-llm-emulator:1.2.0rc6"  # the class's image in the lab, built for arm64
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")


def lab_address(host):
    return [a for a in host.check_output("hostname -I").split() if a.startswith("172.29.10.")][0]


def chat(host):
    """A streaming chat completion on the engine's published port, from this machine to the host."""
    client = OpenAI(base_url="http://%s:%d/v1" % (lab_address(host), PORT), api_key="none", timeout=120, max_retries=0)
    model = client.models.list().data[0].id
    chunks = list(client.chat.completions.create(model=model, stream=True, max_tokens=16,
                                                 messages=[{"role": "user", "content": "Say hello."}]))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def starts(host, after=None):
    """How many times the engine's unit started since boot, or since the journal cursor `after`."""
    where = "--after-cursor=%s" % shlex.quote(after) if after else "-b"
    text = host.check_output("journalctl %s -u %s -o cat --no-pager" % (where, UNIT))
    return sum(1 for line in text.splitlines() if line.startswith("Started %s" % UNIT))


def test_the_host_is_aarch64_and_its_packages_are_debian_arm64_builds(host):
    assert host.check_output("uname -m") == "aarch64"
    facts = host.ansible("setup", "gather_subset=!all")["ansible_facts"]
    assert facts["ansible_architecture"] == "aarch64"
    assert host.check_output("dpkg --print-architecture") == "arm64"
    for package in ("docker.io", "containerd", "runc", "iptables", "python3") + TOOLKIT:
        assert host.check_output("dpkg-query -W -f '${Architecture}' %s" % package) == "arm64", package


def test_the_toolkit_is_the_pinned_arm64_build_and_docker_knows_its_runtime(host):
    for package in TOOLKIT:
        assert host.check_output("dpkg-query -W -f '${Version}' %s" % package) == "1.17.8-1", package
    assert "http://127.0.0.1:8642/stable/deb/arm64" in host.check_output("apt-get indextargets --format '$(URI)'")
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert runtimes["nvidia"]["path"] == "nvidia-container-runtime"


def test_the_model_cache_venv_runs_the_aarch64_wheels(host):
    venv = "/opt/specdec/hf-venv"
    assert host.check_output("%s/bin/python -c 'import platform, hf_xet, huggingface_hub; print(platform.machine())'"
                             % venv) == "aarch64"
    tags = host.check_output("cat %s/lib/python3*/site-packages/hf_xet-*.dist-info/WHEEL | grep '^Tag:'" % venv)
    assert "aarch64" in tags and "x86_64" not in tags
    config = json.loads(host.file("/var/lib/specdec/models/openai/gpt-oss-120b/config.json").content_string)
    assert config["model_type"] == "gpt_oss"


def test_the_engine_port_is_open_to_the_lab_network_only(host):
    rules = host.check_output("iptables -w -S DOCKER-USER").splitlines()
    port = "--ctorigdstport %d" % PORT
    allow = [rule for rule in rules if port in rule and "specdec allow" in rule]
    deny = [rule for rule in rules if port in rule and "specdec deny" in rule]
    assert allow and all(" -s 172.29.10.0/24 " in rule for rule in allow), rules
    assert deny and deny[0].endswith("-j DROP") and rules.index(allow[-1]) < rules.index(deny[0]), rules


def test_the_engine_serves_the_arm64_image_once_started(host):
    assert host.service(UNIT).is_running
    assert starts(host) == 1  # converge started it; idempotence restarted nothing
    image = host.check_output("docker inspect --format '{{.Image}}' specdec-%s" % NAME)
    assert host.check_output("docker image inspect --format '{{.Os}}/{{.Architecture}}' %s" % image) == "linux/arm64"
    assert host.check_output("docker image inspect --format '{{.Id}}' %s" % IMAGE) == image
    assert chat(host).strip()


def test_an_image_of_another_platform_is_refused_and_the_engine_keeps_serving(host):
    """The class's image retagged for x86_64 (an HGX B200's): refused on the host before anything changes,
    naming the image's platform and the host's; the engine keeps serving the image it served."""
    tag = IMAGE + "-amd64"
    script = (PROJECT / "molecule" / "shared" / "other_platform_image.py").read_text()
    host.check_output("python3 -c %s %s amd64 /var/tmp/other-platform.tar && docker load -q -i /var/tmp/other-platform.tar"
                      " && rm /var/tmp/other-platform.tar" % (shlex.quote(script), tag))
    before = host.check_output("docker inspect --format '{{.Image}}' specdec-%s" % NAME)
    cursor = host.check_output("journalctl -u %s -n 0 --show-cursor --no-pager" % UNIT).split("cursor: ", 1)[1].strip()
    env = dict({k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"},  # molecule forces colour
               ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / "collections"))
    try:
        proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "rollout.yml"),
                               "-e", "fleet_trtllm_image=" + tag], env=env, capture_output=True, text=True, timeout=3600)
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert "fatal: [arm-spark-01]" in proc.stdout, proc.stdout[-3000:]
        failed = proc.stdout[proc.stdout.index("fatal: [arm-spark-01]"):]
        assert "is built for linux/amd64, and this host is linux/arm64 (aarch64)" in failed, proc.stdout[-3000:]
        assert "the running engine keeps serving" in failed
        assert host.check_output("docker inspect --format '{{.Image}}' specdec-%s" % NAME) == before
        assert starts(host, cursor) == 0
        assert chat(host).strip()
    finally:
        host.run("docker rmi %s" % tag)
