"""draft_sweep refuses inference_server_instances given as an extra var: it would outrank the instance the
sweep passes to inference_server for each candidate, so every candidate would run the instance as given
(one configuration measured under several draft lengths). The check's task file runs in a real playbook."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = os.path.join(REPO, "roles", "draft_sweep", "tasks", "precedence.yml")
INSTANCES = [{"name": "gpt-oss-120b", "profile": "trtllm-gpt-oss-120b-eagle3-b200", "port": 8000}]


def play(tmp_path, extra=None, play_vars=None):
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "play.yml").write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False, "vars": play_vars or {},
        "tasks": [{"ansible.builtin.import_tasks": TASKS}]}]))
    argv = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-c", "local", "play.yml"]
    if extra is not None:
        argv += ["-e", json.dumps(extra)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)


def test_inference_server_instances_as_an_extra_var_is_refused(tmp_path):
    proc = play(tmp_path, extra={"inference_server_instances": INSTANCES})
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "inference_server_instances is given as an extra var (-e)" in proc.stdout
    assert "draft_sweep_instances" in proc.stdout


@pytest.mark.parametrize("where", ["none", "play", "draft_sweep_instances extra var"])
def test_instances_from_the_inventory_or_as_draft_sweep_instances_pass(tmp_path, where):
    if where == "play":  # what group_vars and host_vars give: the sweep's own value outranks it
        proc = play(tmp_path, play_vars={"inference_server_instances": INSTANCES})
    elif where == "none":
        proc = play(tmp_path)
    else:
        proc = play(tmp_path, extra={"draft_sweep_instances": INSTANCES})
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "ok=1" in proc.stdout and "failed=0" in proc.stdout
