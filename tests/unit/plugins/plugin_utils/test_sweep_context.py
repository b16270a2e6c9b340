"""Context length as an axis of the sweep: each workload of synthetic prompts measured once per input length
(plugin_utils/_sweep_workloads.py), chosen between like any workloads, and the report's view per length
(plugin_utils/_sweep_context.py): where speculation paid, and the length beyond which it stopped paying."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_workloads as sw
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.draft_sweep import PlanRefusal, plan
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_context import ContextError, by_input_length
from sweep_decisions import entry, settings

DEFAULTS = {"prompt_set": "mixed", "max_tokens": 32, "temperature": 0.0, "ignore_eos": True}


def test_a_workload_of_synthetic_prompts_is_measured_once_per_length_and_one_with_its_own_prompts_as_it_is():
    out = sw.resolve([{"name": "chat", "temperature": 1.0}, {"name": "code", "prompts": ["def f(): "]}], DEFAULTS,
                     lengths=[512, 32, 32])
    assert [w["name"] for w in out["workloads"]] == ["chat-in32", "chat-in512", "code"]
    assert out["axis"] == {"chat-in32": {"workload": "chat", "input_len": 32},
                           "chat-in512": {"workload": "chat", "input_len": 512}}
    assert out["kept"] == ["code"]
    long = out["workloads"][1]
    assert long["input_len"]["distribution"] == "fixed" and long["input_len"]["mean"] == 512
    assert long["temperature"] == 1.0 and long["prompts"] is None  # the rest of the workload is its own
    # no lengths: nothing changes
    plain = sw.resolve([{"name": "chat"}], DEFAULTS)
    assert [w["name"] for w in plain["workloads"]] == ["chat"] and plain["axis"] == {} and plain["kept"] == []


def test_lengths_that_measure_nothing_a_clash_or_a_rule_naming_the_expanded_workload_are_refused():
    with pytest.raises(sw.WorkloadsError, match="draft_sweep_input_lengths: .* measures no workload"):
        sw.resolve([{"name": "code", "prompts": ["x"]}], DEFAULTS, lengths=[32])
    with pytest.raises(sw.WorkloadsError, match="chat-in32 clash"):
        sw.resolve([{"name": "chat"}, {"name": "chat-in32", "prompts": ["x"]}], DEFAULTS, lengths=[32])
    with pytest.raises(sw.WorkloadsError, match=r"names no workload.*\(chat is measured as chat-in32, chat-in64\)"):
        sw.resolve([{"name": "chat"}], DEFAULTS, rule="workload:chat", lengths=[32, 64])
    assert sw.resolve([{"name": "chat"}], DEFAULTS, rule="workload:chat-in64", lengths=[32, 64])["rule"]


def test_the_plan_carries_the_axis_and_warns_of_a_workload_measured_as_it_is():
    warnings = []
    out = plan(settings(instance='gpt-oss-120b', input_lengths=[64, 1024],
                        workloads=[{'name': 'prose'}, {'name': 'code', 'prompts': ['import os; ']}]), warnings.append)
    assert [w['name'] for w in out['workloads']] == ['prose-in64', 'prose-in1024', 'code']
    assert out['input_axis']['prose-in1024'] == {'workload': 'prose', 'input_len': 1024}
    assert warnings == ['draft_sweep_input_lengths: the workloads code have prompts of their own and are measured '
                        'as they are, not at each input length']
    with pytest.raises(SettingsError, match='draft_sweep_input_lengths: 0: must be from 1 to 1048576'):
        settings(instance='gpt-oss-120b', input_lengths=[0])
    assert plan(settings(instance='gpt-oss-120b'))['input_axis'] == {}


def _runs(tps, accept=None):
    return [{"output_throughput": v, "completed": 8, "failed": 0, "spec_decode": {"acceptance_length": accept}}
            for v in tps]


def _measurements(figures):
    """figures: {(workload, draft_len): (tok/s, acceptance)} at concurrency 1, three runs each."""
    return [{"workload": w, "draft_len": d, "concurrency": 1,
             "runs": _runs([tps * 0.99, tps, tps * 1.01], accept if d else None)}
            for (w, d), (tps, accept) in figures.items()]


AXIS = {"chat-in32": {"workload": "chat", "input_len": 32}, "chat-in512": {"workload": "chat", "input_len": 512},
        "chat-in4096": {"workload": "chat", "input_len": 4096}}


def test_the_report_names_the_length_beyond_which_speculation_stopped_paying():
    selection = select_workloads(_measurements({
        ("chat-in32", 0): (100, None), ("chat-in32", 2): (150, 2.4), ("chat-in32", 4): (140, 3.0),
        ("chat-in512", 0): (90, None), ("chat-in512", 2): (99, 1.6), ("chat-in512", 4): (95, 1.7),
        ("chat-in4096", 0): (60, None), ("chat-in4096", 2): (50, 1.0), ("chat-in4096", 4): (45, 1.0)}))
    level = by_input_length(selection, AXIS)["workloads"]["chat"]["concurrency"][1]
    assert [(r["input_len"], r["draft_len"], r["paid"]) for r in level["lengths"]] == [
        (32, 2, True), (512, 2, True), (4096, 2, False)]
    assert level["lengths"][0]["speedup"] == pytest.approx(1.5) and level["lengths"][0]["acceptance_length"] == 2.4
    assert level["lengths"][2]["baseline_median"] == pytest.approx(60)
    assert level["stopped_paying_beyond"] == 512 and level["never_paid"] is False


def test_paid_everywhere_never_paid_and_a_rejected_candidate_are_told_apart():
    paying = select_workloads(_measurements({
        ("chat-in32", 0): (100, None), ("chat-in32", 2): (150, 2.4),
        ("chat-in512", 0): (100, None), ("chat-in512", 2): (120, 2.0),
        ("chat-in4096", 0): (100, None), ("chat-in4096", 2): (110, 1.5)}))
    level = by_input_length(paying, AXIS)["workloads"]["chat"]["concurrency"][1]
    assert level["stopped_paying_beyond"] is None and level["never_paid"] is False
    # draft length 2 paid at every length, but the gate rejected it: it is no candidate, and nothing else paid
    rejected = select_workloads(_measurements({
        ("chat-in32", 0): (100, None), ("chat-in32", 2): (150, 2.4), ("chat-in32", 4): (90, 2.0),
        ("chat-in512", 0): (100, None), ("chat-in512", 2): (120, 2.0), ("chat-in512", 4): (80, 1.5),
        ("chat-in4096", 0): (100, None), ("chat-in4096", 2): (110, 1.5), ("chat-in4096", 4): (70, 1.0)}),
        excluded=[2])
    level = by_input_length(rejected, AXIS)["workloads"]["chat"]["concurrency"][1]
    assert [r["draft_len"] for r in level["lengths"]] == [4, 4, 4]
    assert level["never_paid"] is True and level["stopped_paying_beyond"] is None


def test_no_axis_no_view_and_a_bad_selection_is_refused_through_the_report_entry():
    assert by_input_length({"groups": []}, {}) == {"workloads": {}}
    with pytest.raises(ContextError):
        by_input_length({"groups": "nope"}, AXIS)
    with pytest.raises(PlanRefusal, match="draft_sweep report"):
        entry('report', result={"groups": "nope"}, input_axis=AXIS)
