# -*- coding: utf-8 -*-
"""playbooks/retune.yml, the tune loop's play, run by ansible-playbook on this machine (localhost only): the guards
refuse with their reason and change nothing, or record the re-tune in progress in the state file; check mode
writes nothing; a bad alert fails naming the value; an existing state directory keeps its mode."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# the hosts' SSH port answers nothing: an allowed re-tune stops at its first task on the host
UNREACHABLE = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh"}
INVENTORY = {"all": {"children": {"spark-nodes": {"hosts": {"spark-01": UNREACHABLE, "spark-02": UNREACHABLE}},
                                  "b200-nodes": {"hosts": {"b200-01": {}, "b200-02": {}}}}}}


def play(tmp_path, state_file, *extra):
    (tmp_path / "inventory.json").write_text(json.dumps(INVENTORY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.json"),
                           str(REPO / "playbooks" / "retune.yml"), "-e", "retune_state_file=%s" % state_file] + list(extra),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def alert(host, instance="gpt-oss-120b"):
    return ["-e", "retune_host=%s" % host, "-e", "retune_instance=%s" % instance]


def test_allowed_the_play_records_the_re_tune_in_progress_then_refuses_the_next(tmp_path):
    state = tmp_path / "state" / "retune.json"
    rc, out = play(tmp_path, state, *alert("spark-01"))
    # the re-tune starts on the host, which cannot be reached here: the run stops there (4: a host unreachable),
    # and the class stays in progress until a person has looked
    assert rc == 4, out
    assert "Re-tuning spark-01 (gpt-oss-120b, class spark-nodes): all guards pass" in out
    assert "PLAY [Sweep the host again and serve its winner]" in out and "Record the end of the re-tune" not in out
    recorded = json.loads(state.read_text())
    assert recorded["spark-nodes"]["in_progress"]["host"] == "spark-01"
    assert stat.S_IMODE(state.stat().st_mode) == 0o640 and stat.S_IMODE(state.parent.stat().st_mode) == 0o750
    # the class is busy now: its other host is refused, and the state stays as it was
    rc, out = play(tmp_path, state, *alert("spark-02"))
    assert rc == 0, out
    assert "Not re-tuning spark-02 (gpt-oss-120b, class spark-nodes): in progress: a re-tune of spark-01" in out
    assert json.loads(state.read_text()) == recorded
    assert "Re-tuning spark-02" not in out


def test_refused_by_the_cool_down_the_play_ends_with_the_reason(tmp_path):
    state = tmp_path / "retune.json"
    before = json.dumps({"b200-nodes": {"in_progress": None, "last_retune": int(time.time()) - 100}})
    state.write_text(before)
    os.chmod(tmp_path, 0o755)
    rc, out = play(tmp_path, state, *alert("b200-02"), "-e", "retune_cooldown=10m")
    assert rc == 0, out
    assert "Not re-tuning b200-02 (gpt-oss-120b, class b200-nodes): cool-down: class b200-nodes was last re-tuned" in out
    assert "within its cool-down of 600 s" in out
    assert state.read_text() == before
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755  # an existing directory keeps its mode


def test_check_mode_decides_and_writes_nothing(tmp_path):
    state = tmp_path / "retune.json"
    rc, out = play(tmp_path, state, *alert("spark-01"), "--check")
    assert rc == 4, out  # the host's play: unreachable here
    assert "Re-tuning spark-01" in out
    assert not state.exists()


def test_a_bad_alert_or_state_fails_naming_the_value(tmp_path):
    state = tmp_path / "retune.json"
    rc, out = play(tmp_path, state, *alert("spark-09"))
    assert rc == 2 and "retune_host: 'spark-09' is not a host of the inventory" in out, out
    rc, out = play(tmp_path, state)
    assert rc == 2 and "retune_host: None must be a name of letters" in out, out
    state.write_text("{not json")
    rc, out = play(tmp_path, state, *alert("spark-01"))
    assert rc == 2 and "retune_state_file: its content is not JSON" in out, out


def test_an_alert_label_holding_a_template_is_data_never_code(tmp_path):
    """ansible-rulebook hands the alert's labels to the play as extra vars in a file (-e @file), and extra vars are
    templates: the guard reads them as given and refuses them before anything evaluates them."""
    state = tmp_path / "retune.json"
    marker = tmp_path / "marker"
    inventory_secret = "s3cret-inventory-value-4417"
    hostile = {
        "host": {"retune_host": "{{ lookup('ansible.builtin.pipe', 'touch %s') }}spark-01" % marker,
                 "retune_instance": "gpt-oss-120b"},
        "instance": {"retune_host": "spark-01", "retune_instance": "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % marker},
        "secret": {"retune_host": "spark-01", "retune_instance": "{{ specdec_test_secret }}"},
        "statement": {"retune_host": "{%% if lookup('ansible.builtin.pipe', 'touch %s') %%}spark-01{%% endif %%}" % marker,
                      "retune_instance": "gpt-oss-120b"},
        "not-a-string": {"retune_host": ["spark-01"], "retune_instance": "gpt-oss-120b"},
    }
    for case, extravars in hostile.items():
        (tmp_path / "extravars.json").write_text(json.dumps(extravars))
        rc, out = play(tmp_path, state, "-e", "@%s" % (tmp_path / "extravars.json"),
                       "-e", "specdec_test_secret=%s" % inventory_secret)
        assert rc == 2, (case, out)
        assert "must be a name of letters, digits and _ . -" in out and "nothing was re-tuned" in out, (case, out)
        assert not marker.exists(), case
        assert inventory_secret not in out, case
        assert not state.exists(), case
        assert "Re-tuning" not in out, case
