"""Checks that relate two settings, or a setting and the host, refuse before any task changes a host.

Each case runs the role for real with ansible-playbook against this machine (connection local): the
role's first tasks are read-only (the settings check on the controller, a fact lookup), so a refused
input stops the play before anything is written. The message names the variable and the bad value.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INSTANCE = {"name": "a", "engine": "vllm", "image": "x/y:0.11.0", "model": "m/n", "port": 8000}


def run_role(tmp_path, role, extra):
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.import_role:\n        name: specdec.serve.%s\n" % role)
    # the collection from this checkout, as ansible.cfg has it, and the result as JSON
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\ncollections_path = %s\ninject_facts_as_vars = False\n"
                   "stdout_callback = ansible.builtin.json\n" % (REPO / "collections"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(cfg), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    extra = dict(extra, ansible_python_interpreter=sys.executable)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(play), "-e", json.dumps(extra)],
                          cwd=str(REPO), env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    failed = [t for t in tasks if t["hosts"]["localhost"].get("failed")]
    assert len(failed) == 1 and failed[0] is tasks[-1], [t["task"]["name"] for t in tasks]
    # nothing before the refusal changed anything
    assert not any(t["hosts"]["localhost"].get("changed") for t in tasks)
    return failed[0]["task"]["name"], failed[0]["hosts"]["localhost"]["msg"]


@pytest.mark.parametrize("extra, said", [
    ({"firewall_interfaces": ["nosuch0"], "inference_server_instances": [INSTANCE]},
     ['firewall_interfaces: ["nosuch0"] not an interface of localhost (it has ']),
    ({"firewall_engine_ports": [9000], "inference_server_instances": [INSTANCE]},
     ["firewall_engine_ports=[9000] leaves [8000] unfiltered, which inference_server_instances publish on localhost"]),
    ({"firewall_interfaces": ["nosuch0"], "firewall_engine_ports": [9000], "inference_server_instances": [INSTANCE]},
     ['firewall_interfaces: ["nosuch0"] not an interface', "firewall_engine_ports=[9000] leaves [8000] unfiltered"]),
])
def test_firewall_refuses_an_unknown_interface_and_an_unfiltered_port(tmp_path, extra, said):
    task, msg = run_role(tmp_path, "firewall", extra)
    assert task == "specdec.serve.firewall : Check the firewall settings on the controller"
    for text in said:
        assert text in msg, msg
    # each cause is said once, and only a cause that is there
    assert msg.count("not an interface") == ("firewall_interfaces" in extra), msg
    assert msg.count("unfiltered") == ("firewall_engine_ports" in extra), msg


@pytest.mark.parametrize("extra, said", [
    ({"model_cache_source": "mirror"}, "model_cache_source=mirror needs model_cache_mirror_endpoint (it is empty)."),
    ({"model_cache_source": "peer", "model_cache_peer_seed": "gpu-99"},
     'model_cache_peer_seed="gpu-99" is not one of the play\'s hosts (localhost): the seed downloads for its peers '
     'in the same run; add gpu-99 to the limit (-l)'),
])
def test_model_cache_refuses_a_mirror_without_endpoint_and_a_seed_outside_the_play(tmp_path, extra, said):
    task, msg = run_role(tmp_path, "model_cache", extra)
    assert task == "specdec.serve.model_cache : Check the model_cache settings on the controller"
    assert "model_cache refused on the controller (no host was changed)" in msg, msg
    assert said in msg, msg


def test_inference_server_refuses_an_ipv6_publish_while_the_firewall_has_no_ipv6_rules(tmp_path):
    task, msg = run_role(tmp_path, "inference_server", {"firewall_ipv6": False, "inference_server_publish_address": "::",
                                                        "inference_server_instances": [INSTANCE]})
    assert task.startswith("specdec.serve.inference_server : "), task
    assert "settings refused on the controller" in msg, msg
    assert "inference_server_publish_address: '::' publishes the engine ports on IPv6 while firewall_ipv6 is false" in msg, msg


def test_inference_server_refuses_a_docker_socket_mount(tmp_path):
    inst = dict(INSTANCE, volumes=["/var/run/docker.sock:/var/run/docker.sock"])
    task, msg = run_role(tmp_path, "inference_server", {"inference_server_instances": [inst]})
    assert "inference_server_instances[0].volumes:" in msg and "mounts '/var/run/docker.sock'" in msg, msg
