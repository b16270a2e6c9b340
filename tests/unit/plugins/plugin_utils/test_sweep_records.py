"""sweep_records: what the draft_sweep role decides (inputs key, whether to measure, the instance per
draft length) and the records it keeps (unmeasured, measured, winners)."""

import copy

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as sr

DECLARED = {
    "name": "main", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "model": "nvidia/Llama-3.1-8B-Instruct-FP8",
    "engine": "trtllm", "port": 8001,
    "speculative": {"method": "eagle3", "draft_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "max_draft_len": 3,
                    "draft_len_schedule": {1: 3, 8: 2}},
}
RESOLVED = {"method": "eagle3", "max_draft_len": 3, "draft_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
WORKLOADS = [
    {"name": "code", "dataset": "/tmp/rc/a.jsonl", "dataset_format": "auto", "dataset_num": None, "seed": 0,
     "max_tokens": 64, "temperature": 0.0},
    {"name": "chat", "dataset": None, "dataset_format": "auto", "dataset_num": None, "seed": 1, "max_tokens": 64,
     "temperature": 0.0},
    {"name": "user", "dataset": "/tmp/rc/b.jsonl", "dataset_format": "jsonl", "dataset_num": 1, "seed": 3,
     "max_tokens": 64, "temperature": 0.0},
]
DATASETS = {"code": [{"prompt": "hello"}, {"prompt": "world", "max_tokens": 5}],
            "user": [{"messages": [{"role": "user", "content": "hi"}]}]}
SETTINGS = {
    "instance": "main", "instances": [DECLARED], "concurrency": [1, 8], "repetitions": 3, "requests_per_worker": 4,
    "warmup_requests_per_worker": 1, "max_tokens": 256, "temperature": 0, "allow_greedy_fallback": False,
    "ignore_eos": False, "prompt_set": "mixed", "spec_metrics": "auto", "min_runs": 3, "max_rel_mad": 0.1,
    "mad_k": 1, "rel_tol": 0.01, "apply": True, "apply_schedule": True, "client_limited": "exclude",
    "equivalence": True, "equivalence_min_prefix": None, "equivalence_prompts": 3, "equivalence_max_tokens": 32,
    "workloads": [{"name": "code"}, {"name": "chat"}, {"name": "user"}], "workload_rule": "worst_case",
    "baseline": True, "draft_lens": [4, 2, 2, 6], "force": False,
}
CANDIDATES = [0, 2, 4, 6]
# What the role's former Jinja expression (to_json(sort_keys=true) | hash('sha256')) gave for these inputs:
# a sweep recorded before keeps its key, so an unchanged inventory does not measure again.
KEY_WITH_WORKLOADS = "eac5abb65d9ee2c9de26aedae5663a434ef0b2d4acedb34b82cdc66db38c3eae"
KEY_WITHOUT_WORKLOADS = "0037c43dc46fdf47d629c9b06c536dd5aa3b30613c124b1a6a126a52ab65e7e9"


def key(instance=None, candidates=None, settings=None, workloads=None, datasets=None):
    return sr.inputs_key(sr.inventory_instance(DECLARED, RESOLVED) if instance is None else instance,
                         CANDIDATES if candidates is None else candidates,
                         SETTINGS if settings is None else settings,
                         WORKLOADS if workloads is None else workloads,
                         DATASETS if datasets is None else datasets)


# --- truncate -----------------------------------------------------------------------------------

def test_truncate_keeps_text_within_the_leeway_and_cuts_longer_text_at_a_word():
    assert sr.truncate("y" * 305) == "y" * 305
    assert sr.truncate("y" * 306) == "y" * 297 + "..."
    assert sr.truncate("word " * 80) == ("word " * 59)[:-1] + "..."
    assert len(sr.truncate("word " * 80)) == 297
    assert sr.truncate("foo bar baz qux", 9, leeway=0) == "foo..."
    assert sr.truncate("short") == "short"


# --- the inventory instance ---------------------------------------------------------------------

def test_inventory_instance_spells_out_the_resolved_settings_and_the_declared_ones_win():
    declared = {"name": "a", "profile": "p", "speculative": {"max_draft_len": 4}}
    got = sr.inventory_instance(declared, {"method": "eagle3", "max_draft_len": 3, "draft_model": "d"})
    assert got == {"name": "a", "profile": "p", "speculative": {"method": "eagle3", "max_draft_len": 4, "draft_model": "d"}}
    assert list(got["speculative"]) == ["method", "max_draft_len", "draft_model"]
    assert declared == {"name": "a", "profile": "p", "speculative": {"max_draft_len": 4}}


def test_inventory_instance_leaves_out_null_resolved_values():
    got = sr.inventory_instance({"name": "a"}, {"method": "ngram", "max_draft_len": 3, "draft_model": None})
    assert got == {"name": "a", "speculative": {"method": "ngram", "max_draft_len": 3}}


def test_inventory_instance_refuses_what_is_not_a_mapping():
    with pytest.raises(sr.SweepRecordError, match="speculative must be a mapping"):
        sr.inventory_instance({"name": "a", "speculative": "eagle3"}, {})


# --- the inputs key -----------------------------------------------------------------------------

def test_inputs_key_is_the_digest_the_role_recorded_before():
    assert key() == KEY_WITH_WORKLOADS
    assert key(settings=dict(SETTINGS, workloads=[])) == KEY_WITHOUT_WORKLOADS


def test_inputs_key_is_the_same_for_the_same_inputs():
    assert key() == key(instance=copy.deepcopy(sr.inventory_instance(DECLARED, RESOLVED)),
                        settings=copy.deepcopy(SETTINGS), workloads=copy.deepcopy(WORKLOADS),
                        datasets=copy.deepcopy(DATASETS))
    # the key order of a mapping does not matter, nor do the settings that are not inputs
    reordered = dict(reversed(list(SETTINGS.items())))
    assert key(settings=reordered) == KEY_WITH_WORKLOADS
    assert key(settings=dict(SETTINGS, force=True, instance="other", draft_lens=[9], baseline=False)) == KEY_WITH_WORKLOADS
    # numbers are compared as the typed settings mean them
    assert key(settings=dict(SETTINGS, temperature=0.0, mad_k=1.0)) == KEY_WITH_WORKLOADS


@pytest.mark.parametrize("name, value", [
    ("concurrency", [1]), ("repetitions", 5), ("requests_per_worker", 8), ("warmup_requests_per_worker", 2),
    ("max_tokens", 128), ("temperature", 0.7), ("allow_greedy_fallback", True), ("ignore_eos", True),
    ("prompt_set", "code"), ("spec_metrics", "none"), ("min_runs", 2), ("max_rel_mad", 0.2), ("mad_k", 2),
    ("rel_tol", 0.05), ("apply", False), ("client_limited", "count"), ("equivalence", False),
    ("equivalence_min_prefix", 16), ("equivalence_prompts", 5), ("equivalence_max_tokens", 64),
    ("apply_schedule", False), ("workload_rule", "mean"),
])
def test_inputs_key_changes_with_each_setting_it_covers(name, value):
    assert key(settings=dict(SETTINGS, **{name: value})) != KEY_WITH_WORKLOADS


def test_inputs_key_changes_with_the_instance_the_candidates_the_workloads_and_the_datasets():
    instance = sr.inventory_instance(DECLARED, RESOLVED)
    assert key(instance=dict(instance, image="other:1")) != KEY_WITH_WORKLOADS
    assert key(instance=dict(instance, speculative=dict(instance["speculative"], max_draft_len=4))) != KEY_WITH_WORKLOADS
    assert key(candidates=[2, 4, 6]) != KEY_WITH_WORKLOADS
    assert key(workloads=WORKLOADS[:2]) != KEY_WITH_WORKLOADS
    assert key(workloads=[dict(WORKLOADS[0], seed=9)] + WORKLOADS[1:]) != KEY_WITH_WORKLOADS
    assert key(datasets=dict(DATASETS, code=[{"prompt": "hello"}])) != KEY_WITH_WORKLOADS
    assert key(datasets={}) != KEY_WITH_WORKLOADS


def test_inputs_key_without_workloads_ignores_the_workloads_and_the_datasets():
    plain = dict(SETTINGS, workloads=[])
    assert key(settings=plain, workloads=WORKLOADS[:1], datasets={}) == KEY_WITHOUT_WORKLOADS
    assert key(settings=dict(plain, workload_rule="mean")) == KEY_WITHOUT_WORKLOADS
    assert key(settings=plain, candidates=[0, 2]) != KEY_WITHOUT_WORKLOADS


def test_inputs_key_needs_every_setting_it_covers():
    settings = dict(SETTINGS)
    del settings["rel_tol"]
    with pytest.raises(KeyError):
        key(settings=settings)


# --- whether to measure -------------------------------------------------------------------------

RECORDED = {"last_sweep": {"run_id": "r1", "inputs_sha256": "K", "winner": {"draft_len": 4}}}


@pytest.mark.parametrize("recorded, force, apply, want", [
    ({}, False, False, True),                                          # never swept
    ({}, True, False, True),
    ({"last_sweep": None}, False, False, True),
    (RECORDED, False, False, False),                                   # same inputs, nothing to apply
    (RECORDED, True, False, True),                                     # forced
    (dict(RECORDED, last_sweep=dict(RECORDED["last_sweep"], inputs_sha256="J")), False, False, True),
    (RECORDED, False, True, True),                                     # a winner never applied
    (dict(RECORDED, applied={"run_id": "r0"}), False, True, True),     # applied by an older sweep
    (dict(RECORDED, applied={"run_id": "r1"}), False, True, False),    # applied by this sweep
    (dict(RECORDED, last_sweep=dict(RECORDED["last_sweep"], winner=None)), False, True, False),  # nothing to apply
])
def test_sweep_needed(recorded, force, apply, want):
    assert sr.sweep_needed(recorded, "K", force=force, apply=apply) is want


def test_sweep_needed_reads_none_as_no_record():
    assert sr.sweep_needed(None, "K") is True


# --- the instance per draft length --------------------------------------------------------------

ORIGINAL = {"name": "main", "image": "img", "engine": "trtllm", "port": 8001,
            "speculative": {"method": "eagle3", "draft_model": "dm", "max_draft_len": 5, "draft_len_schedule": {1: 5}}}
SPEC = {"method": "eagle3", "draft_model": "dm", "max_draft_len": 3, "draft_len_schedule": {1: 3},
        "num_speculative_tokens_per_batch_size": [[1, 8, 3]], "extra": "x"}
SCHEDULE = {"max_draft_len": 4, "trtllm_draft_len_schedule": {1: 4, 8: 2},
            "vllm_num_speculative_tokens_per_batch_size": [[1, 7, 4], [8, 8, 2]]}


def test_candidate_zero_serves_the_running_instance_without_speculation():
    got = sr.candidate_instance(ORIGINAL, dict(ORIGINAL, speculative=SPEC), 0, schedule=SCHEDULE, apply_schedule=True)
    assert got == dict(ORIGINAL, speculative={"method": "none"})
    assert list(got) == list(ORIGINAL)


def test_candidate_takes_the_declared_settings_at_its_length_without_a_schedule():
    got = sr.candidate_instance(ORIGINAL, dict(ORIGINAL, speculative=SPEC), 4)
    assert got == dict(ORIGINAL, speculative={"method": "eagle3", "draft_model": "dm", "max_draft_len": 4, "extra": "x"})
    assert ORIGINAL["speculative"]["max_draft_len"] == 5 and SPEC["max_draft_len"] == 3


def test_winner_gets_the_engine_neutral_schedule_when_asked():
    declared = dict(ORIGINAL, speculative=SPEC)
    trt = sr.candidate_instance(ORIGINAL, declared, 4, schedule=SCHEDULE, apply_schedule=True)
    assert trt["speculative"] == {"method": "eagle3", "draft_model": "dm", "max_draft_len": 4, "extra": "x",
                                  "draft_len_schedule": {1: 4, 8: 2}}
    no_engine = dict((k, v) for k, v in ORIGINAL.items() if k != "engine")
    assert sr.candidate_instance(no_engine, declared, 4, schedule=SCHEDULE, apply_schedule=True)["speculative"][
        "draft_len_schedule"] == {1: 4, 8: 2}
    # vLLM too: spec_config renders it as num_speculative_tokens_per_batch_size up to max_batch_size (the
    # instance's speculative settings take no engine key)
    vllm = sr.candidate_instance(dict(ORIGINAL, engine="vllm"), declared, 4, schedule=SCHEDULE, apply_schedule=True)
    assert vllm["speculative"] == {"method": "eagle3", "draft_model": "dm", "max_draft_len": 4, "extra": "x",
                                   "draft_len_schedule": {1: 4, 8: 2}}
    # as a JSON round trip leaves it (string keys)
    sched = dict(SCHEDULE, trtllm_draft_len_schedule={"1": 4, "8": 2})
    assert sr.candidate_instance(ORIGINAL, declared, 4, schedule=sched, apply_schedule=True)["speculative"][
        "draft_len_schedule"] == {1: 4, 8: 2}


def test_winner_gets_no_schedule_when_not_asked_or_when_there_is_none():
    declared = dict(ORIGINAL, speculative=SPEC)
    want = {"method": "eagle3", "draft_model": "dm", "max_draft_len": 4, "extra": "x"}
    assert sr.candidate_instance(ORIGINAL, declared, 4, schedule=SCHEDULE, apply_schedule=False)["speculative"] == want
    none = dict(SCHEDULE, trtllm_draft_len_schedule=None)
    assert sr.candidate_instance(ORIGINAL, declared, 4, schedule=none, apply_schedule=True)["speculative"] == want


# --- the records --------------------------------------------------------------------------------

def test_unmeasured_records_one_per_workload_and_concurrency():
    got = sr.unmeasured_records([{"name": "code"}, {"name": "chat"}], [1, 8], 4, "rejected: diverged")
    assert got == [
        {"draft_len": 4, "concurrency": 1, "workload": "code", "runs": [], "error": "rejected: diverged"},
        {"draft_len": 4, "concurrency": 8, "workload": "code", "runs": [], "error": "rejected: diverged"},
        {"draft_len": 4, "concurrency": 1, "workload": "chat", "runs": [], "error": "rejected: diverged"},
        {"draft_len": 4, "concurrency": 8, "workload": "chat", "runs": [], "error": "rejected: diverged"},
    ]
    assert sr.unmeasured_records([], [1], 4, "x") == []
    assert sr.unmeasured_records([{"name": "code"}], [], 4, "x") == []


def test_unmeasured_records_cut_the_error():
    got = sr.unmeasured_records([{"name": "code"}], [1], 2, "word " * 80)
    assert got[0]["error"] == ("word " * 59)[:-1] + "..."
    assert sr.unmeasured_records([{"name": "code"}], [1], 2, None)[0]["error"] == "None"


def test_failure_text():
    assert sr.failure_text({"failed": True}) == "failed"
    assert sr.failure_text({"msg": ["a", "b"]}) == "['a', 'b']"
    assert sr.failure_text({"msg": None}) == "None"
    assert sr.failure_text({"msg": "y" * 400}) == "y" * 297 + "..."


def test_measured_records_take_the_loop_item_and_the_runs():
    results = [
        {"draft_sweep_run": [{"name": "code", "max_tokens": 1}, 1], "runs": [{"output_throughput": 10.5}],
         "ansible_loop_var": "draft_sweep_run", "changed": False},
        {"draft_sweep_run": [{"name": "chat"}, 8], "runs": [], "ansible_loop_var": "draft_sweep_run"},
    ]
    assert sr.measured_records(results, 3) == [
        {"draft_len": 3, "concurrency": 1, "workload": "code", "runs": [{"output_throughput": 10.5}]},
        {"draft_len": 3, "concurrency": 8, "workload": "chat", "runs": []},
    ]
    assert sr.measured_records([{"item": [{"name": "w"}, 2], "runs": [1]}], 1) == [
        {"draft_len": 1, "concurrency": 2, "workload": "w", "runs": [1]}]
    assert sr.measured_records([], 3) == []


def test_measured_records_refuse_a_result_without_runs_or_loop_item():
    with pytest.raises(sr.SweepRecordError, match="workload code at concurrency 1 has no runs"):
        sr.measured_records([{"item": [{"name": "code"}, 1], "skipped": True}], 3)
    with pytest.raises(sr.SweepRecordError, match="no .workload, concurrency. loop item"):
        sr.measured_records([{"runs": []}], 3)


def test_workload_winners():
    workloads = {"code": {"winner": {"draft_len": 4}}, "chat": {"winner": None}, "long": {"winner": {"draft_len": 0}},
                 "empty": {"winner": {}}, "none": {}}
    assert sr.workload_winners(workloads) == {"code": 4, "chat": None, "long": 0, "empty": None, "none": None}
    assert list(sr.workload_winners(workloads)) == ["code", "chat", "long", "empty", "none"]
    assert sr.workload_winners({}) == {}


# --- what a sweep was measured on --------------------------------------------------------------

SERVING = {"tiny-llama": {"name": "tiny-llama", "engine": "vllm", "engine_version": "0.32.0",
                          "image": "specdec-lab/vllm-cpu:0.32.0", "image_id": "sha256:aa", "model": "specdec-lab/tiny-llama",
                          "draft_model": "", "port": 8000}}


def test_measured_on_reads_the_serving_facts_and_the_hosts_groups():
    got = sr.measured_on(SERVING, "tiny-llama", ["spark-nodes", "all-gpus", "specdec_retune"])
    assert got == {"engine": "vllm", "engine_version": "0.32.0", "image": "specdec-lab/vllm-cpu:0.32.0",
                   "image_id": "sha256:aa", "model": "specdec-lab/tiny-llama", "draft_model": None,
                   "host_groups": ["all-gpus", "spark-nodes"]}
    # an instance the facts do not know (facts off): every key unknown
    assert sr.measured_on({}, "x") == dict((k, None) for k in sr.MEASURED_ON_KEYS) | {"host_groups": []}


def test_drift_names_what_changed_under_the_sweep():
    recorded = sr.measured_on(SERVING, "tiny-llama", ["spark-nodes"])
    now = dict(SERVING["tiny-llama"])
    assert sr.measured_on_drift(recorded, now) == []
    assert sr.measured_on_drift(recorded, dict(now, image_id="sha256:bb")) == ["image_id"]
    assert sr.measured_on_drift(recorded, dict(now, image="specdec-lab/vllm-cpu:0.33.0", image_id="sha256:bb",
                                               engine_version="0.33.0")) == ["engine_version", "image", "image_id"]
    assert sr.measured_on_drift(recorded, dict(now, model="other/model")) == ["model"]
    # unknown on either side is not a difference; no record is None (nothing to compare with)
    assert sr.measured_on_drift(recorded, dict(now, image_id="")) == []
    assert sr.measured_on_drift(None, now) is None
    assert sr.measured_on_drift({}, now) is None


def test_measured_on_refuses_what_is_not_the_serving_facts():
    with pytest.raises(sr.SweepRecordError):
        sr.measured_on(["tiny-llama"], "tiny-llama")


def swept(name, image_id="sha256:aa", groups=("b200-nodes",), stack=None, **serving):
    last = {"run_id": "r0", "measured_on": dict(sr.measured_on(SERVING, "tiny-llama", list(groups)), image_id=image_id)}
    inst = dict(SERVING["tiny-llama"], name=name, last_sweep=last, **serving)
    if stack:
        inst["stack"] = stack
    return inst


def test_the_canary_sweeps_again_what_changed_under_its_sweep():
    same = swept("a")
    upgraded = swept("b", image_id="sha256:old")
    never = dict(SERVING["tiny-llama"], name="c", last_sweep=None)
    old_record = dict(SERVING["tiny-llama"], name="d", last_sweep={"run_id": "r"})
    stacked = swept("e", image_id="sha256:old", stack={"group": "s", "role": "head"})
    assert sr.resweep_instances([same, upgraded, never, old_record, stacked]) == ["b"]
    assert sr.resweep_instances([]) == [] and sr.resweep_instances(None) == []


def test_a_host_adopts_the_canarys_new_sweep_for_what_it_serves_in_its_class():
    entry = {"last_sweep": {"run_id": "r1", "measured_on": {"host_groups": ["b200-nodes"]}}, "applied": {"max_draft_len": 4}}
    other = {"last_sweep": {"run_id": "r2", "measured_on": {"host_groups": ["spark-nodes"]}}, "applied": {"max_draft_len": 2}}
    canaries = {"b200-01": {"main": entry, "side": entry}, "spark-01": {"main": other},
                "b200-02": {"main": dict(entry, applied={"max_draft_len": 1})}}
    got = sr.adopted_sweeps(["b200-nodes"], ["main"], canaries)
    assert got == {"main": dict(entry, adopted_from="b200-01")}
    assert sr.adopted_sweeps(["spark-nodes"], ["main", "side"], canaries) == {"main": dict(other, adopted_from="spark-01")}
    # nothing re-tuned, nothing served in common, or no canary of the class
    assert sr.adopted_sweeps(["b200-nodes"], ["main"], {"b200-01": {}}) == {}
    assert sr.adopted_sweeps(["b200-nodes"], ["third"], canaries) == {}
    assert sr.adopted_sweeps(["gb200-nodes"], ["main"], canaries) == {}
    # the playbooks' run-time groups are not classes: a host in the rollout's changes is still a b200 host
    assert sr.adopted_sweeps(["b200-nodes", "specdec_rollout_changes"], ["main"], canaries) == {
        "main": dict(entry, adopted_from="b200-01")}
    with pytest.raises(sr.SweepRecordError):
        sr.adopted_sweeps(["b200-nodes"], ["main"], {"b200-01": ["main"]})
