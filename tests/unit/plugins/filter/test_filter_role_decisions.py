"""The filters over sweep_records, and inference_server's planner entries for its changes and failures: registered,
their arguments as the roles pass them (typed settings, bool-like strings), and errors as filter errors or planner
refusals."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter import sweep_records
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import inference_server
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_records import measured_on_drift


def test_the_filters_are_registered():
    assert sorted(sweep_records.FilterModule().filters()) == [
        "sweep_adopted", "sweep_error", "sweep_instance", "sweep_measured", "sweep_measured_on", "sweep_resweep",
        "sweep_unmeasured", "sweep_winners"]
    assert sorted(inference_server.PLANNERS) == ["changes", "expected_files", "failure", "plan", "stack_preflight",
                                                 "stack_restart"]


def test_sweep_instance_reads_bool_like_flags():
    original = {"engine": "vllm", "speculative": {"method": "eagle3", "max_draft_len": 2}}
    schedule = {"trtllm_draft_len_schedule": {1: 4}, "vllm_num_speculative_tokens_per_batch_size": [[1, 1, 4]]}
    got = sweep_records.sweep_instance(original, original, "4", schedule=schedule, apply_schedule="yes")
    assert got["speculative"] == {"method": "eagle3", "max_draft_len": 4, "draft_len_schedule": {1: 4}}
    assert sweep_records.sweep_instance(original, original, 0) == {"engine": "vllm", "speculative": {"method": "none"}}


def test_measured_on_and_drift_as_the_roles_pass_them():
    serving = {"m": {"engine": "vllm", "engine_version": "0.32.0", "image": "i", "image_id": "sha256:a", "model": "x"}}
    got = sweep_records.sweep_measured_on(serving, "m", ["b", "a"])
    assert got["host_groups"] == ["a", "b"] and got["image_id"] == "sha256:a"
    assert measured_on_drift(got, dict(serving["m"], image_id="sha256:b")) == ["image_id"]
    with pytest.raises(AnsibleFilterError, match="sweep_measured_on: the serving facts must be"):
        sweep_records.sweep_measured_on("nope", "m")


def test_sweep_filters_report_errors_as_filter_errors():
    with pytest.raises(AnsibleFilterError, match="sweep_instance: the draft length must be an integer"):
        sweep_records.sweep_instance({}, {}, None)
    with pytest.raises(AnsibleFilterError, match="sweep_measured: .*has no runs"):
        sweep_records.sweep_measured([{"item": [{"name": "w"}, 1]}], 2)
    with pytest.raises(AnsibleFilterError, match="sweep_winners: the workloads must be a mapping"):
        sweep_records.sweep_winners(["code"])
    with pytest.raises(AnsibleFilterError, match="sweep_unmeasured: a workload must be a mapping"):
        sweep_records.sweep_unmeasured(["code"], [1], 2, "x")


def test_sweep_record_filters():
    assert sweep_records.sweep_unmeasured([{"name": "w"}], [1, 4], 2, "boom") == [
        {"draft_len": 2, "concurrency": 1, "workload": "w", "runs": [], "error": "boom"},
        {"draft_len": 2, "concurrency": 4, "workload": "w", "runs": [], "error": "boom"}]
    assert sweep_records.sweep_error({"msg": "boom"}) == "boom"
    assert sweep_records.sweep_winners({"w": {"winner": {"draft_len": 3}}}) == {"w": 3}


def planned(entry, settings=None, **reported):
    return inference_server.PLANNERS[entry](settings or {}, None, {"reported": reported})


def test_inference_server_expected_files_and_failure_message_as_the_role_reports_them():
    entry = {"name": "u", "state": "started", "dir": "/d", "unit": "u.service", "spec": {"engine": "vllm"}}
    stat = {"engine.env": "600:root:root", "unit": "644:root:root"}
    assert sorted(planned("expected_files", instance=entry, stat=stat, env="", unit="")["files"]) == [
        "/d/engine.env", "/etc/systemd/system/u.service"]
    assert planned("expected_files", instance=dict(entry, state="absent"), stat=stat) == {"files": {}}
    with pytest.raises(PlanRefusal, match="env and unit .* are required"):
        planned("expected_files", instance=entry, stat=stat)
    with pytest.raises(PlanRefusal, match="reported.instance must be an entry of the plan"):
        planned("expected_files", instance="u", stat=stat, env="", unit="")
    msg = planned("failure", {"rollback": False}, failure={"msg": "m"}, unit="u.service", can_roll_back="true")["message"]
    assert msg == ("u.service did not become healthy with the new configuration: m Rollback is off "
                   "(inference_server_rollback=false): the new files stay and the unit is stopped.")
    assert "no previous version" in planned("failure", {"rollback": True}, failure={}, unit="u",
                                            can_roll_back="False")["message"]


def test_inference_server_changes_from_the_probe_and_the_expected_files():
    entry = {"name": "u", "state": "started", "dir": "/d", "unit": "u.service", "image": "img:1"}
    want = {"/d/engine.env": "600:root:root abc"}
    settings = {"image_archive": "", "image_pull": "missing"}
    assert planned("changes", settings, probe=[], plan=[entry], expected=[want], to_fetch=[])["changes"] == [
        {"instance": "u", "reasons": ["engine.env absent", "unit none", "unit not enabled"]}]
    out = planned("changes", settings, probe=[], plan=[entry], expected=[want], to_fetch=["img:1"])["changes"]
    assert out and out[0]["instance"] == "u" and "image img:1 to pull" in out[0]["reasons"]
    archived = planned("changes", dict(settings, image_archive="/srv/a.tar"), probe=[], plan=[entry], expected=[want],
                       to_fetch=["img:1"])["changes"]
    assert "image img:1 to load" in archived[0]["reasons"]
    always = planned("changes", dict(settings, image_pull="always"), probe=[], plan=[entry], expected=[{}], to_fetch=[])
    assert any("image pull always" in c["reasons"] for c in always["changes"])
