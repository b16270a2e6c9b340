"""A play's decision reaches inference_server under its own name, inference_server_run_instances, so an
extra var -e inference_server_instances (which outranks include_role vars) stays the plan's input and
cannot replace what the play decided: the fleet plan with an applied sweep winner, a sweep candidate.
The role's own check-and-render entry (tasks/validate.yml) runs in a real playbook."""

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"


def instance(name, port):
    return {"name": name, "image": IMAGE, "profile": "trtllm-gpt-oss-120b-eagle3-b200", "port": port}


def served(tmp_path, extra=None, run_instances=None):
    """The names of the instances the role's plan holds."""
    include = {"ansible.builtin.include_role": {"name": "specdec.serve.inference_server", "tasks_from": "validate"}}
    if run_instances is not None:
        include["vars"] = {"inference_server_run_instances": run_instances}
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "play.yml").write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"inference_server_instances": [instance("inventory", 8000)],
                 "ansible_python_interpreter": sys.executable},
        "tasks": [include, {"ansible.builtin.copy": {
            "dest": str(tmp_path / "plan.json"),
            "content": "{{ _inference_server_planned.plan | map(attribute='name') | list | to_json }}"}}]}]))
    argv = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-c", "local", "play.yml"]
    if extra is not None:
        argv += ["-e", json.dumps(extra)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads((tmp_path / "plan.json").read_text())


def test_the_plays_decision_outranks_an_instances_extra_var(tmp_path):
    extra = {"inference_server_instances": [instance("extra-var", 8000)]}
    assert served(tmp_path, extra=extra, run_instances=[instance("decided", 8001)]) == ["decided"]


def test_without_a_decision_the_instances_are_served_extra_var_first(tmp_path):
    assert served(tmp_path) == ["inventory"]
    assert served(tmp_path, extra={"inference_server_instances": [instance("extra-var", 8000)]}) == ["extra-var"]


def _includes(node):
    if isinstance(node, list):
        for item in node:
            yield from _includes(item)
    elif isinstance(node, dict):
        include = node.get("ansible.builtin.include_role") or node.get("ansible.builtin.import_role")
        if isinstance(include, dict) and include.get("name") == "specdec.serve.inference_server":
            yield node
        for value in node.values():
            yield from _includes(value)


FILES = sorted(glob.glob(os.path.join(REPO, "playbooks", "*.yml")) +
               glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")))


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, REPO))
def test_no_play_passes_its_decision_as_inference_server_instances(path):
    """An include of inference_server that set inference_server_instances would lose to -e."""
    with open(path) as handle:
        doc = yaml.safe_load(handle)
    for task in _includes(doc):
        assert "inference_server_instances" not in (task.get("vars") or {}), (path, task.get("name"))


def test_the_plays_that_decide_pass_their_decision():
    """The rollout, deploy, the fleet preflight and the sweep's candidate, restore, recovery and served winner."""
    passing = set()
    for path in FILES:
        with open(path) as handle:
            for task in _includes(yaml.safe_load(handle)):
                if "inference_server_run_instances" in (task.get("vars") or {}):
                    passing.add(os.path.relpath(path, REPO))
    assert passing >= {"roles/rollout/tasks/batch.yml", "playbooks/deploy.yml", "roles/rollout/tasks/main.yml",
                       "roles/draft_sweep/tasks/candidate.yml", "roles/draft_sweep/tasks/restore.yml",
                       "roles/draft_sweep/tasks/recover.yml", "roles/draft_sweep/tasks/serve.yml"}, passing
