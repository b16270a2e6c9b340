"""No secret in any output: every playbook, at -vvvv with --diff, with a recognisable secret in every setting the
roles' argument specs mark no_log (plugin_utils/_redaction.py reads the marks) and in every instance's api_key.

Each playbook runs for real against this machine (connection local) in check mode, so nothing is changed: once with
settings the roles accept (the play goes as far as check mode on this machine takes it: the settings checks, the plans,
the fix-ups, the fleet view) and once with an instance the settings check refuses, the api_key beside the bad value
(the refusal quotes the instance). Ansible prints at a verbosity everything it prints at a lower one (a message of level
n shows when the verbosity is above n), so one run at -vvvv covers -v to -vvv; the last test checks that premise on one
playbook, level by level. The secrets may be only in the variables file the runs read (as from Vault).
"""

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction, _role_spec as role_spec

REPO = Path(__file__).resolve().parents[3]
# what differs from one run to the next: the profile's clock and durations, temporary paths, process ids
VOLATILE = re.compile(r"^[\d.]+s?$|ansible-tmp-|ansible-local-|^/tmp/")
REFUSED_PORT = re.compile(r"\(got 70000\)|70000 must be")
PLAYBOOKS = sorted(p.name for p in (REPO / "playbooks").glob("*.yml"))
INVENTORY = """all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: %s
  children:
    spark-nodes: {hosts: {node-a: {}}}
    gateways: {hosts: {gw-a: {}}}
    monitoring: {hosts: {mon-a: {}}}
""" % sys.executable


def secret(name):
    return "sEcReT-%s-5550177" % name.replace("_", "-")


def secret_value(name):
    """A secret of the shape the setting takes (its spec's type)."""
    kind = role_spec.option(name).get("type")
    if kind == "dict":
        return {"SECRET_ENV": secret(name)}
    if kind in ("list", "raw"):
        return [secret(name), {"name": "second", "key": secret(name + "-2")}]
    return secret(name)


def settings(port=8000):
    instance = {"name": "a", "engine": "vllm", "image": "x/y:0.11.0", "model": "m/n", "port": port}
    values = dict((name, secret_value(name)) for name in redaction.secret_options())
    for key in redaction.secret_keys():
        instance[key] = secret(key)
    values.update(inference_server_instances=[instance], fleet_report_dir="reports", ansible_become=False)
    return values


def every_secret(values):
    """The secret strings of the variables, found independently of redaction.secret_values."""
    found = []

    def walk(value):
        if isinstance(value, str) and value.startswith("sEcReT-"):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(values)
    return found


def run(tmp_path, playbook, values, *flags):
    """ansible-playbook in check mode in an empty directory; its output and every file it left."""
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    secrets_file = tmp_path / "vault.json"
    secrets_file.write_text(json.dumps(values))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(REPO / "playbooks" / playbook), "--check", "-e", "@" + str(secrets_file)] + list(flags),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode in (0, 2), proc.stdout[-3000:] + proc.stderr[-3000:]
    left = dict((p, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file() and p != secrets_file)
    return proc.stdout + proc.stderr, left


def test_every_secret_setting_of_the_specs_gets_a_secret():
    # api_key (an instance's) and the no_log settings: a new secret setting is swept without a change here
    assert "api_key" in redaction.secret_keys()
    assert {"inference_server_secret_env", "model_cache_hf_token", "gateway_api_keys"} <= set(redaction.secret_options())
    values = settings()
    assert len(every_secret(values)) == len(redaction.secret_options()) + len(redaction.secret_keys()) + 1


CASES = [(playbook, case) for case in ("accepted", "refused") for playbook in PLAYBOOKS]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every playbook in both cases at -vvvv with --diff, a few at a time (most of a run is waiting on its
    modules): {(playbook, case): (variables, output, files left)}."""
    def one(key):
        playbook, case = key
        values = settings(port=8000 if case == "accepted" else 70000)
        out, left = run(tmp_path_factory.mktemp("%s-%s" % key), playbook, values, "-vvvv", "--diff")
        return key, (values, out, left)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, CASES))


@pytest.mark.parametrize("playbook, case", CASES)
def test_no_secret_in_the_output_of_a_playbook_at_vvvv_with_diff(outputs, playbook, case):
    values, out, left = outputs[(playbook, case)]
    # the play ran tasks, at -vvvv (which prints its command line's options; how long the output is depends on
    # where the checkout is, and a play refused early prints little)
    assert "TASK [" in out and "\nverbosity: 4\n" in out and "diff: True" in out
    # a refusal names the bad port of the instance that holds the api_key; the gateway play serves no instance of
    # its own, the health play reads what the hosts serve, not the inventory's instances, and the retune and heal
    # plays (no alert given here) stop at their guards, before any instance is read
    if case == "refused" and playbook not in ("gateway.yml", "health.yml", "heal.yml", "retune.yml"):
        assert REFUSED_PORT.search(out), out[-3000:]
    for value in every_secret(values):
        assert value not in out, "%s printed:\n%s" % (value, out[out.index(value) - 2000:out.index(value) + 200])
        for path, data in left.items():
            assert value.encode() not in data, path


def words(out):
    """The words of an output that do not vary between runs (its formatting does: a result is one line of JSON at
    the default verbosity and indented from -vvv on)."""
    return set(w for w in re.findall(r"[A-Za-z0-9_./=-]{6,}", out) if not VOLATILE.search(w))


def test_ansible_prints_at_vvvv_every_word_it_prints_below(tmp_path):
    values = settings(port=70000)
    said = {}
    for level in ("", "-v", "-vv", "-vvv", "-vvvv"):
        out, _ = run(tmp_path, "deploy.yml", values, *([level] if level else []))
        assert "(got 70000)" in out
        said[level] = words(out)
    for lower, higher in (("", "-v"), ("-v", "-vv"), ("-vv", "-vvv"), ("-vvv", "-vvvv")):
        assert said[higher] - said[lower], (lower, higher)  # each level prints more
    for lower in ("", "-v", "-vv", "-vvv"):
        missing = said[lower] - said["-vvvv"]
        assert not missing, (lower, sorted(missing)[:20])
