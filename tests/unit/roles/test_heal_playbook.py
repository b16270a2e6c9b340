# -*- coding: utf-8 -*-
"""playbooks/heal.yml, the heal's play, run by ansible-playbook on this machine (localhost only; the engine hosts'
SSH port answers nothing): the guards refuse with their reason and change nothing, or record the heal in progress; a
stack is healed as one engine, its workers named first; past the restart limit the engine is drained for a person;
check mode writes nothing; an alert label holding a template is data, never code."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# the hosts' SSH port answers nothing: an allowed heal stops at its first task on a host
UNREACHABLE = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh"}
ALONE = {"inference_server_instances": [{"name": "gpt-oss-120b"}]}
STACKED = {"inference_server_instances": [{"name": "gpt-oss-120b", "stack": "stack_a"}]}
INVENTORY = {"all": {"children": {
    "spark-nodes": {"hosts": {"spark-01": dict(UNREACHABLE, **STACKED), "spark-02": dict(UNREACHABLE, **STACKED),
                              "spark-03": dict(UNREACHABLE, **ALONE), "spark-04": dict(UNREACHABLE, **ALONE)}},
    "stack_a": {"hosts": {"spark-01": {}, "spark-02": {}}}}}}
ENGINE = "spark-03/gpt-oss-120b"


def play(tmp_path, state_file, *extra):
    (tmp_path / "inventory.json").write_text(json.dumps(INVENTORY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.json"),
                           str(REPO / "playbooks" / "heal.yml"), "-e", "heal_state_file=%s" % state_file] + list(extra),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def alert(host, instance="gpt-oss-120b"):
    return ["-e", "heal_host=%s" % host, "-e", "heal_instance=%s" % instance]


def test_allowed_the_play_records_the_heal_in_progress_then_refuses_the_next(tmp_path):
    state = tmp_path / "state" / "heal.json"
    rc, out = play(tmp_path, state, *alert("spark-03"))
    # the restart starts on the host, which cannot be reached here: the run stops there (4: a host unreachable), and
    # the class stays in progress until a person has looked
    assert rc == 4, out
    assert "Healing %s on spark-03 (class spark-nodes): all guards pass" % ENGINE in out
    assert "PLAY [Restart the engine, health-gated, drained at the gateways meanwhile]" in out
    assert "Record the heal on the controller" not in out
    recorded = json.loads(state.read_text())
    assert recorded["classes"]["spark-nodes"]["in_progress"]["engine"] == ENGINE
    assert stat.S_IMODE(state.stat().st_mode) == 0o640 and stat.S_IMODE(state.parent.stat().st_mode) == 0o750
    rc, out = play(tmp_path, state, *alert("spark-04"))
    assert rc == 0, out
    assert "Not healing spark-04/gpt-oss-120b (class spark-nodes): in progress: a heal of %s" % ENGINE in out
    assert json.loads(state.read_text()) == recorded


def test_a_stack_is_one_engine_every_member_restarted_its_worker_first(tmp_path):
    state = tmp_path / "heal.json"
    rc, out = play(tmp_path, state, *alert("spark-01"))
    assert rc == 4, out
    assert "Healing spark-01/gpt-oss-120b on spark-02, spark-01 (class spark-nodes)" in out
    assert json.loads(state.read_text())["classes"]["spark-nodes"]["in_progress"]["hosts"] == ["spark-02", "spark-01"]
    # both members are in the restart play (each fails to connect here)
    assert "fatal: [spark-02]: UNREACHABLE" in out and "fatal: [spark-01]: UNREACHABLE" in out


def test_past_the_restart_limit_the_engine_is_drained_and_left_so(tmp_path):
    state = tmp_path / "heal.json"
    now = int(time.time())
    state.write_text(json.dumps({"classes": {}, "engines": {ENGINE: {"restarts": [now - 600, now - 300],
                                                                      "drained": False, "hosts": ["spark-03"]}}}))
    rc, out = play(tmp_path, state, *alert("spark-03"))
    # the drain play runs (no gateway here: nothing to drain), then the hosts' record cannot be written (unreachable)
    assert rc == 4, out
    assert "Not healing %s (class spark-nodes): restart limit: spark-03 was restarted 2 times within 3600 s" % ENGINE in out
    assert "PLAY [Drain the engine past its restart limit, and leave it so]" in out
    assert re.search(r"PLAY \[Restart the engine, health-gated[^\n]*\nskipping: no hosts matched", out), out
    assert re.search(r"TASK \[Restart the instance \(its stack in order\), health-gated\][^\n]*\n[^\n]*\nskipping: \[spark-03\]",
                     out), out
    assert json.loads(state.read_text())["engines"][ENGINE]["drained"] is True
    # a higher limit restarts it
    rc, out = play(tmp_path, state, *alert("spark-03"), "-e", "heal_restart_limit=3", "-e", "heal_by_hand=true")
    assert "Healing %s on spark-03" % ENGINE in out and "by hand" in out, out


def test_check_mode_decides_and_writes_nothing(tmp_path):
    state = tmp_path / "heal.json"
    rc, out = play(tmp_path, state, *alert("spark-03"), "--check")
    assert rc == 4, out
    assert "Healing %s" % ENGINE in out
    assert not state.exists()


def test_a_bad_alert_fails_naming_the_value(tmp_path):
    state = tmp_path / "heal.json"
    for extra, message in (
            (alert("spark-09"), "heal_host: 'spark-09' is not a host of the inventory"),
            (alert("spark-03", "mistral"), "heal_instance: 'mistral' is not an instance of spark-03"),
            ([], "heal_host: None must be a name of letters"),
            (alert("spark-03") + ["-e", "heal_by_hand=maybe"], "heal_by_hand: 'maybe' must be true or false"),
            (alert("spark-03") + ["-e", "heal_restart_limit=0"], "heal_restart_limit: '0' must be from 1 to 1000")):
        rc, out = play(tmp_path, state, *extra)
        assert rc == 2 and message in out, (extra, out)
        assert not state.exists()


def test_an_alert_label_holding_a_template_is_data_never_code(tmp_path):
    """ansible-rulebook hands the alert's labels to the play as extra vars, and extra vars are templates: the guard
    reads them as given and refuses them before anything evaluates them."""
    state = tmp_path / "heal.json"
    marker = tmp_path / "marker"
    hostile = {
        "host": {"heal_host": "{{ lookup('ansible.builtin.pipe', 'touch %s') }}spark-03" % marker,
                 "heal_instance": "gpt-oss-120b"},
        "instance": {"heal_host": "spark-03", "heal_instance": "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % marker},
        "statement": {"heal_host": "{%% if lookup('ansible.builtin.pipe', 'touch %s') %%}spark-03{%% endif %%}" % marker,
                      "heal_instance": "gpt-oss-120b"},
        "by-hand": {"heal_host": "spark-03", "heal_instance": "gpt-oss-120b",
                    "heal_by_hand": "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % marker},
    }
    for case, extravars in hostile.items():
        (tmp_path / "extravars.json").write_text(json.dumps(extravars))
        rc, out = play(tmp_path, state, "-e", "@%s" % (tmp_path / "extravars.json"))
        assert rc == 2, (case, out)
        assert "nothing was restarted" in out, (case, out)
        assert not marker.exists(), case
        assert not state.exists(), case
        assert "Healing" not in out, case
