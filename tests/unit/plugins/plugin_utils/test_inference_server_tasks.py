"""plugin_utils/_inference_server.py: the files changes.yml expects and the report of a failed start."""

import hashlib

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import expected_files, failure_message

STAT = {"engine.env": "600:root:root", "unit": "644:root:root", "engine.yaml": "644:root:root",
        "facts.json": "644:root:root", "facts_script": "755:root:root"}
TRT = {"name": "a", "state": "started", "dir": "/etc/specdec/a", "unit": "specdec-a.service",
       "spec": {"engine": "trtllm", "config_yaml": "speculative_config:\n  max_draft_len: 3\n"}}


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def test_expected_files_of_a_trtllm_instance_with_facts():
    got = expected_files(TRT, STAT, "HF_TOKEN=x\n", "[Unit]\nDescription=a \u00e9\n", facts='{"name": "a"}\n')
    assert got == {
        "/etc/specdec/a/engine.env": "600:root:root " + sha1("HF_TOKEN=x\n"),
        "/etc/systemd/system/specdec-a.service": "644:root:root " + sha1("[Unit]\nDescription=a \u00e9\n"),
        "/etc/specdec/a/engine.yaml": "644:root:root " + sha1(TRT["spec"]["config_yaml"]),
        "/etc/specdec/a/facts.json": "644:root:root " + sha1('{"name": "a"}\n'),
    }
    # the order plan_changes lists the reasons in
    assert [p.rsplit("/", 1)[1] for p in got] == ["engine.env", "specdec-a.service", "engine.yaml", "facts.json"]


def test_expected_files_known_digest():
    got = expected_files(TRT, STAT, "", "", facts=None)
    assert got["/etc/specdec/a/engine.env"] == "600:root:root da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_expected_files_of_a_vllm_instance_without_facts_and_of_one_to_remove():
    vllm = dict(TRT, spec={"engine": "vllm", "config_yaml": None})
    assert list(expected_files(vllm, STAT, "e", "u")) == ["/etc/specdec/a/engine.env",
                                                          "/etc/systemd/system/specdec-a.service"]
    assert expected_files(dict(TRT, state="absent", spec=None), STAT, None, None) == {}


def test_expected_files_change_with_the_content_and_the_mode():
    base = expected_files(TRT, STAT, "e", "u")
    assert expected_files(TRT, STAT, "e2", "u")["/etc/specdec/a/engine.env"] != base["/etc/specdec/a/engine.env"]
    assert expected_files(TRT, dict(STAT, unit="600:root:root"), "e", "u") != base


FAILED = {"failed": True, "msg": "engine down\n--- last 2 log lines ---\nA\nB"}
HEAD = "specdec-a.service did not become healthy with the new configuration: engine down\n--- last 2 log lines ---\nA\nB "


@pytest.mark.parametrize("rollback, can, previous, tail", [
    (False, True, {"stage": "ready"},
     "Rollback is off (inference_server_rollback=false): the new files stay and the unit is stopped."),
    (True, False, {},
     "There is no previous version to go back to (first start, or no file changed): the unit is stopped and disabled."),
    (True, True, {"stage": "generate", "msg": "still down"},
     "The previous files are back, but the previous engine did not become healthy either: still down"),
    (True, True, {"skipped": True},
     "The previous files are back, but the previous engine did not become healthy either: (not checked)"),
    (True, True, None,
     "The previous files are back, but the previous engine did not become healthy either: (not checked)"),
    (True, True, {"stage": "ready", "timings": {"total": 2.345}},
     "The previous files are back and the previous engine serves again (2.3 s to ready)."),
    (True, True, {"stage": "ready", "timings": {"total": 7}},
     "The previous files are back and the previous engine serves again (7 s to ready)."),
    (True, True, {"stage": "ready"},
     "The previous files are back and the previous engine serves again (0 s to ready)."),
])
def test_failure_message(rollback, can, previous, tail):
    assert failure_message(FAILED, "specdec-a.service", rollback, can, previous) == HEAD + tail


def test_failure_message_without_a_message():
    assert failure_message({}, "u.service", True, False).startswith(
        "u.service did not become healthy with the new configuration: (no message) There is no previous")
