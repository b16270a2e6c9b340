# -*- coding: utf-8 -*-
"""The rulebook extensions/eda/rulebooks/retune.yml under the real ansible-rulebook (requirements-test.txt; its
rules engine, drools, runs in a Java 17 JVM), from this checkout, as docs/tune_loop.md runs it by hand.

Alertmanager's notifications are POSTed to the rulebook's source (specdec.serve.alertmanager, with a bearer
token); the rule runs the playbook specdec.serve.retune, whose guards decide from a state file in a temporary
directory: an alert for a host of a class re-tuned a minute ago is refused with the cool-down's reason, one for
a host of a class never re-tuned is let through and recorded in progress in the state file, and a resolved
alert runs nothing. The token never shows in the output."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
RULEBOOK = "extensions/eda/rulebooks/retune.yml"
TOKEN = "tok-rulebook-5550177-do-not-print"


def java_home():
    """A Java 17 (or later) home: $JAVA_HOME, else Debian's openjdk-17 package, else the java on the PATH."""
    candidates = [os.environ.get("JAVA_HOME"), "/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/java-17-openjdk-arm64"]
    for home in candidates:
        if home and (Path(home) / "bin" / "java").is_file():
            out = subprocess.run([str(Path(home) / "bin" / "java"), "-version"], capture_output=True, text=True)
            version = out.stderr.split('"')[1] if '"' in out.stderr else "0"
            if int(version.split(".")[0]) >= 17:
                return home
    return None


JAVA_HOME = java_home()
pytestmark = pytest.mark.skipif(JAVA_HOME is None, reason="ansible-rulebook's rules engine (drools) needs Java 17, "
                                                          "and no Java 17 is installed (apt-get install openjdk-17-jre-headless)")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def notification(host, instance, status="firing", alertname="SpeculationStoppedPaying"):
    return {
        "version": "4", "groupKey": '{}:{alertname="%s", host="%s"}' % (alertname, host), "truncatedAlerts": 0,
        "status": status, "receiver": "specdec", "groupLabels": {"alertname": alertname},
        "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
        "alerts": [{"status": status, "labels": {"alertname": alertname, "host": host,
                                                 "engine_instance": instance, "severity": "warning"},
                    "annotations": {"summary": "Speculation stopped paying on %s/%s" % (host, instance)},
                    "startsAt": "2026-09-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://127.0.0.1:9090/graph",
                    "fingerprint": "%016x" % abs(hash((host, alertname)))}],
    }


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def wait_for(what, check, out, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("%s did not happen in %d s; ansible-rulebook said:\n%s" % (what, timeout, out.read_text()[-6000:]))


# a host whose SSH port answers nothing: the re-tune's play on it stops at once
UNREACHABLE = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_connection": "ssh"}


@pytest.fixture
def rulebook(tmp_path):
    """ansible-rulebook running the rulebook from the checkout: (url, output file, state file)."""
    assert (BIN / "ansible-rulebook").exists(), "ansible-rulebook is not installed: pip install -r requirements-test.txt"
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir()
    # b200-nodes was re-tuned a minute ago (within the cool-down); spark-nodes never was
    state.write_text(json.dumps({"b200-nodes": {"in_progress": None, "last_retune": int(time.time()) - 60}}))
    # the heal's: b200-01's engine was restarted twice in the last ten minutes (its restart limit)
    heal_state = tmp_path / "state" / "heal.json"
    now = int(time.time())
    heal_state.write_text(json.dumps({"classes": {}, "engines": {"b200-01/gpt-oss-120b": {
        "restarts": [now - 600, now - 300], "drained": False, "hosts": ["b200-01"]}}}))
    instances = {"inference_server_instances": [{"name": "gpt-oss-120b"}]}
    (tmp_path / "inventory.yml").write_text(json.dumps({"all": {
        "vars": {"retune_state_file": str(state), "retune_cooldown": "1h", "retune_capacity_floor": 0.5,
                 "heal_state_file": str(heal_state)},
        "children": {"spark-nodes": {"hosts": {"spark-01": {}, "spark-02": dict(UNREACHABLE, **instances),
                                               "spark-03": {}}},
                     "b200-nodes": {"hosts": {"b200-01": dict(UNREACHABLE, **instances), "b200-02": {}}}}}}))
    port = free_port()
    # the token from a file, as the monitoring role's tune loop gives it
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "vars.yml").write_text(json.dumps({"retune_listen_address": "127.0.0.1", "retune_listen_port": port,
                                                   "retune_listen_token_file": str(tmp_path / "token")}))
    out = tmp_path / "rulebook.out"
    env = dict(os.environ, JAVA_HOME=JAVA_HOME, PATH="%s:%s" % (BIN, os.environ.get("PATH", "")),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    with open(out, "w") as handle:
        proc = subprocess.Popen([str(BIN / "ansible-rulebook"), "--rulebook", RULEBOOK, "-i", str(tmp_path / "inventory.yml"),
                                 "-S", "extensions/eda/plugins/event_source", "--vars", str(tmp_path / "vars.yml")],
                                cwd=str(REPO), env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        def listening():
            assert proc.poll() is None, "ansible-rulebook ended (rc %s):\n%s" % (proc.returncode, out.read_text()[-6000:])
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for("the source listening", listening, out)
        yield "http://127.0.0.1:%d/alerts" % port, out, state, heal_state
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_rulebook_runs_the_retune_play_whose_guards_refuse_and_allow(rulebook):
    url, out, state, _ = rulebook

    # a class re-tuned a minute ago: refused by the cool-down, the state untouched
    assert post(url, notification("b200-01", "gpt-oss-120b")) == 202
    wait_for("the refusal", lambda: "Not re-tuning b200-01" in out.read_text(), out)
    text = out.read_text()
    assert "cool-down: class b200-nodes was last re-tuned" in text
    assert "within its cool-down of 3600 s" in text
    assert json.loads(state.read_text())["b200-nodes"]["in_progress"] is None

    # a class never re-tuned: allowed, recorded in progress before the re-tune
    assert post(url, notification("spark-02", "gpt-oss-120b")) == 202
    wait_for("the state file's in-progress re-tune",
             lambda: (json.loads(state.read_text()).get("spark-nodes") or {}).get("in_progress"), out)
    recorded = json.loads(state.read_text())
    assert recorded["spark-nodes"]["in_progress"]["host"] == "spark-02"
    assert recorded["spark-nodes"]["in_progress"]["instance"] == "gpt-oss-120b"
    assert abs(recorded["spark-nodes"]["in_progress"]["since"] - time.time()) < 120
    assert recorded["b200-nodes"]["last_retune"] is not None  # the other class kept
    wait_for("the allowed decision", lambda: "Re-tuning spark-02" in out.read_text(), out)
    assert "all guards pass" in out.read_text()
    # the re-tune itself starts on the host; here it cannot be reached, so the run stops there and the class stays
    # in progress (a person looks before another host of it is re-tuned)
    # (ansible-rulebook then logs the failed run's output once more, as an error)
    wait_for("the re-tune stopped at the unreachable host",
             lambda: "UNREACHABLE" in out.read_text() and "run_playbook - ERROR" in out.read_text(), out)
    assert "PLAY [Sweep the host again and serve its winner]" in out.read_text()
    assert json.loads(state.read_text())["spark-nodes"]["in_progress"]["host"] == "spark-02"

    # a resolved alert runs no playbook
    plays = out.read_text().count("PLAY RECAP")
    assert post(url, notification("spark-02", "gpt-oss-120b", "resolved")) == 202
    wait_for("the resolution's message", lambda: "nothing to run" in out.read_text(), out)
    time.sleep(1)
    assert out.read_text().count("PLAY RECAP") == plays

    # an alert is data: a label holding a template, or naming a host the inventory lacks, runs nothing
    marker = state.parent / "marker"
    hostile = notification("spark-01", "gpt-oss-120b")
    hostile["alerts"][0]["labels"]["host"] = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % marker
    hostile["alerts"][0]["fingerprint"] = "hostile"
    plays = out.read_text().count("PLAY RECAP")
    assert post(url, hostile) == 202
    assert post(url, notification("spark-99", "gpt-oss-120b")) == 202
    wait_for("the unknown host's refusal", lambda: "retune_host: 'spark-99' is not a host of the inventory" in out.read_text(), out)
    # the refusal is printed before its play's recap; the events are handled in order, so once that recap is out the
    # hostile alert (posted first) has been handled too
    wait_for("the refused play's recap", lambda: out.read_text().count("PLAY RECAP") > plays, out)
    assert not marker.exists()
    assert out.read_text().count("PLAY RECAP") == plays + 1
    assert json.loads(state.read_text())["spark-nodes"]["in_progress"]["host"] == "spark-02"

    # the bearer token is required, and never printed
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10)
    assert refused.value.code == 401
    assert TOKEN not in out.read_text()


def test_the_rulebook_runs_the_heal_play_for_a_wedged_engine(rulebook):
    """SpecdecEngineWedged runs the heal (playbooks/heal.yml): an engine past its restart limit is drained, not
    restarted; another is let through and recorded in progress; a resolved one runs nothing; the re-tune's state is
    not touched."""
    url, out, state, heal_state = rulebook
    retune_before = state.read_text()

    assert post(url, notification("b200-01", "gpt-oss-120b", alertname="SpecdecEngineWedged")) == 202
    wait_for("the restart limit's refusal", lambda: "Not healing b200-01/gpt-oss-120b" in out.read_text(), out)
    assert "restart limit: b200-01 was restarted 2 times within 3600 s" in out.read_text()
    wait_for("the drain play", lambda: "PLAY [Drain the engine past its restart limit, and leave it so]" in out.read_text(),
             out)
    assert json.loads(heal_state.read_text())["engines"]["b200-01/gpt-oss-120b"]["drained"] is True

    assert post(url, notification("spark-02", "gpt-oss-120b", alertname="SpecdecEngineWedged")) == 202
    wait_for("the heal recorded in progress",
             lambda: (json.loads(heal_state.read_text())["classes"].get("spark-nodes") or {}).get("in_progress"), out)
    assert json.loads(heal_state.read_text())["classes"]["spark-nodes"]["in_progress"]["engine"] == "spark-02/gpt-oss-120b"
    # (the drain run above printed the restart play's header too, with no host: wait for this heal's own line)
    wait_for("the heal's decision", lambda: "Healing spark-02/gpt-oss-120b on spark-02 (class spark-nodes): all guards "
             "pass" in out.read_text(), out)
    # both runs stop at their unreachable host (ansible-rulebook then logs each failed run's output once more)
    wait_for("both runs ended", lambda: out.read_text().count("run_playbook - ERROR") >= 2, out)

    plays = out.read_text().count("PLAY RECAP")
    assert post(url, notification("spark-02", "gpt-oss-120b", "resolved", alertname="SpecdecEngineWedged")) == 202
    wait_for("the resolution's message", lambda: "SpecdecEngineWedged resolved for spark-02" in out.read_text(), out)
    time.sleep(1)
    assert out.read_text().count("PLAY RECAP") == plays
    assert state.read_text() == retune_before
    assert TOKEN not in out.read_text()
