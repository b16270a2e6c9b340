"""The sweep's record decided by the draft_sweep planner's entries, and inference_server's planner entries for its
changes and failures: registered, their arguments as the roles pass them (typed settings, strings where Jinja gives
them), and errors as planner refusals that name the step."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import draft_sweep
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import inference_server
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import rollout
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_records import measured_on_drift
from sweep_decisions import entry, settings


def test_the_filters_and_entries_are_registered():
    # the sweep's own decisions are its planner's, what a rollout sweeps again and takes from a sweep the rollout's
    assert sorted(rollout.PLANNERS) == ["adopted", "batches", "plan", "preflight", "resweep", "soak", "soak_verdict", "status"]
    assert sorted(draft_sweep.PLANNERS) == ["instance", "main", "mode", "mode_outcome", "prepare", "record", "report",
                                            "select", "serve", "serving", "stack", "verdict", "verify"]
    assert sorted(inference_server.PLANNERS) == ["changes", "expected_files", "failure", "images", "plan",
                                                 "stack_preflight", "stack_restart"]


def test_a_candidate_instance_from_a_draft_length_as_jinja_gives_it():
    original = {"engine": "vllm", "speculative": {"method": "eagle3", "max_draft_len": 2,
                                                  "draft_len_schedule": {1: 2}}}
    got = entry("instance", original=original, declared=original, draft_len="4")["instance"]
    # an earlier winner's schedule does not outlive the length it was made for
    assert got["speculative"] == {"method": "eagle3", "max_draft_len": 4}
    assert entry("instance", original=original, declared=original, draft_len=0)["instance"] == {
        "engine": "vllm", "speculative": {"method": "none"}}


def test_measured_on_and_drift_as_the_role_reports_them():
    serving = {"gpt-oss-120b": {"engine": "vllm", "engine_version": "0.32.0", "image": "i", "image_id": "sha256:a",
                                "model": "x"}}
    got = entry("report", serving=serving, groups=["b", "a"], verdicts=[], baseline={}, candidates=[0, 2],
                phases=[])["measured_on"]
    assert got["host_groups"] == ["a", "b"] and got["image_id"] == "sha256:a"
    assert measured_on_drift(got, dict(serving["gpt-oss-120b"], image_id="sha256:b")) == ["image_id"]
    with pytest.raises(PlanRefusal, match="draft_sweep report: the serving facts must be"):
        entry("report", serving="nope", verdicts=[], phases=[])


def test_the_sweep_entries_refuse_what_they_cannot_record_naming_the_step():
    with pytest.raises(PlanRefusal, match="draft_sweep instance: the draft length must be an integer"):
        entry("instance", original={}, declared={}, draft_len=None)
    with pytest.raises(PlanRefusal, match="draft_sweep record: .*has no runs"):
        entry("record", step="measured", draft_len=2, results=[{"item": [{"name": "w"}, 1]}],
              times={"t0": 1, "ready": 2, "probed": 3})
    with pytest.raises(PlanRefusal, match="draft_sweep record: a workload must be a mapping"):
        entry("record", step="rejected", draft_len=2, workloads=["code"], reason="x",
              times={"t0": 1, "ready": 2, "probed": 3})
    with pytest.raises(PlanRefusal, match="draft_sweep record: step must be one of"):
        entry("record", step="guess", draft_len=2)
    with pytest.raises(PlanRefusal, match="times.t0 and times.ready must be timestamps"):
        entry("record", step="baseline_probe", draft_len=0, times={})


def test_a_failed_candidate_is_recorded_unmeasured_unverified_and_timed():
    given = draft_sweep.PLANNERS["record"]
    typed = {"concurrency": [1, 4], "equivalence": True, "equivalence_min_prefix": None}
    out = given(typed, None, {"reported": {
        "step": "failed", "draft_len": 2, "failure": {"msg": "boom"}, "measure": "True",
        "workloads": [{"name": "w"}], "baseline": {}, "times": {"t0": 0}, "measurements": [], "verdicts": [],
        "phases": []}})
    assert out["measurements"] == [
        {"draft_len": 2, "concurrency": 1, "workload": "w", "runs": [], "error": "boom"},
        {"draft_len": 2, "concurrency": 4, "workload": "w", "runs": [], "error": "boom"}]
    assert [(v["draft_len"], v["verdict"], v["eligible"]) for v in out["verdicts"]] == [(2, "unverified", False)]
    assert "could not be probed: boom" in out["verdicts"][0]["reason"]
    (phase,) = out["phases"]
    assert phase["step"] == "candidate" and phase["failed"] and phase["restart_s"] > 0 and phase["probe_s"] == 0
    # a candidate already judged keeps its verdict; the baseline served for the probe alone adds no items
    again = given(typed, None, {"reported": dict(
        step="failed", draft_len=0, failure={"msg": "x"}, measure=False, workloads=[{"name": "w"}],
        times={"t0": 0}, measurements=out["measurements"], phases=out["phases"],
        verdicts=[{"draft_len": 0, "verdict": "reference", "eligible": True}])})
    assert again["measurements"] == out["measurements"] and len(again["verdicts"]) == 1
    assert [p["step"] for p in again["phases"]] == ["candidate", "baseline_probe"]


def test_the_winners_are_each_workloads_and_a_rejected_length_is_excluded():
    items = [{"workload": "w", "concurrency": 1, "draft_len": dl, "repetition": r, "output_throughput": v + r}
             for dl, v in ((0, 100), (2, 150), (4, 200)) for r in range(3)]
    verdicts = [{"draft_len": 4, "eligible": False}, {"draft_len": 2, "eligible": True}]
    out = entry("select", measurements=items, verdicts=verdicts)
    assert out["excluded"] == [4]
    assert out["result"]["winner"]["draft_len"] == 2 and out["winners"] == {"w": 2}
    # an empty rule (a `-e draft_sweep_workload_rule=`) is the role's default, read from its spec
    two = items + [dict(m, workload="v") for m in items]
    assert entry("select", settings(instance="gpt-oss-120b", workload_rule=""), measurements=two,
                 verdicts=[])["result"]["rule"]["name"] == "worst_case"


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
    assert planned("changes", settings, probe=[], plan=[entry], expected=[want], host_ids={"img:1": "sha256:1"})["changes"] == [
        {"instance": "u", "reasons": ["engine.env absent", "unit none", "unit not enabled"]}]
    out = planned("changes", settings, probe=[], plan=[entry], expected=[want], host_ids={"img:1": ""})["changes"]
    assert out and out[0]["instance"] == "u" and "image img:1 to pull" in out[0]["reasons"]
    # the archive holds another image behind the tag than the host's: loaded
    archived = planned("changes", dict(settings, image_archive="/srv/a.tar"), probe=[], plan=[entry], expected=[want],
                       host_ids={"img:1": "sha256:1"}, archive={"img:1": "sha256:2"})["changes"]
    assert "image img:1 to load" in archived[0]["reasons"]
    always = planned("changes", dict(settings, image_pull="always"), probe=[], plan=[entry], expected=[{}], host_ids={})
    assert any("image pull always" in c["reasons"] for c in always["changes"])


def _rollout_settings(**given):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    return dict(role_spec.defaults("rollout"), **given)


def test_the_canary_sweeps_again_what_its_update_changed_and_no_other_host_does():
    sweep = {"measured_on": {"engine": "vllm", "engine_version": "0.31.0", "image": "i", "image_id": "sha256:a",
                             "model": "m"}}
    upgraded = {"name": "main", "engine": "vllm", "engine_version": "0.32.0", "image": "i", "image_id": "sha256:b",
                "model": "m", "last_sweep": sweep}
    same = dict(sweep["measured_on"], name="side", last_sweep=sweep)
    reported = {"instances": [upgraded, same], "canary": True}
    assert rollout.resweep(_rollout_settings(), None, {"reported": reported}) == ["main"]
    assert rollout.resweep(_rollout_settings(), None, {"reported": dict(reported, canary=False)}) == []
    assert rollout.resweep(_rollout_settings(resweep=False), None, {"reported": reported}) == []
    with pytest.raises(PlanRefusal, match="the instances to sweep again"):
        rollout.resweep(_rollout_settings(), None, {"reported": {"instances": ["main"], "canary": True}})


def test_a_host_takes_the_sweeps_of_its_class_from_the_canary_or_the_re_tuned_host():
    entry = {"last_sweep": {"measured_on": {"host_groups": ["b200-nodes"]}}, "draft_len": 3}
    other = {"last_sweep": {"measured_on": {"host_groups": ["spark-nodes"]}}, "draft_len": 2}
    hostvars = {"b200-01": {"rollout_retuned": {"main": entry},
                            "ansible_facts": {"ansible_local": {"specdec_sweep": {"main": entry, "side": entry}}}},
                "spark-01": {"rollout_retuned": {"main": other}}, "b200-03": {}}
    ctx = {"hostvars": hostvars, "reported": {"groups": ["b200-nodes"], "names": ["main", "side"],
                                              "from": ["spark-01", "b200-01", "b200-03"], "instances": None}}
    # from the canaries, what each swept again in this rollout, the first of the host's groups in batch order
    assert rollout.adopted({}, None, ctx) == {"main": dict(entry, adopted_from="b200-01")}
    # from a re-tuned host, the instances named from its recorded sweeps
    ctx["reported"] = dict(ctx["reported"], **{"from": ["b200-01"], "instances": ["side"]})
    assert rollout.adopted({}, None, ctx) == {"side": dict(entry, adopted_from="b200-01")}
    with pytest.raises(PlanRefusal, match="the sweeps to take"):
        rollout.adopted({}, None, {"hostvars": {"x": {"rollout_retuned": {"main": "bad"}}},
                                   "reported": {"groups": [], "names": ["main"], "from": ["x"], "instances": None}})
