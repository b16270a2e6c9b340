"""draft_select: robust choice of the draft length, schedules, errors."""

import re

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select
from sweep_decisions import Refused, draft_select


def runs(conc, dl, values, acc=None):
    return [{"concurrency": conc, "draft_len": dl, "repetition": i, "output_throughput": v,
             "acceptance_length": acc} for i, v in enumerate(values)]


def by_conc(res, conc):
    return next(e for e in res["by_concurrency"] if e["concurrency"] == conc)


def group(res, conc, dl):
    return next(g for g in res["groups"] if g["concurrency"] == conc and g["draft_len"] == dl)


def test_clear_winner_and_speedup():
    m = (runs(1, 0, [100, 101, 99]) + runs(1, 1, [140, 141, 139]) +
         runs(1, 3, [180, 181, 179], acc=2.6) + runs(1, 5, [160, 161, 159]))
    res = draft_select(m)
    assert res["winner"]["draft_len"] == 3
    assert res["winner"]["speedup"] == pytest.approx(1.8)
    g = group(res, 1, 3)
    assert g["median"] == 180 and g["mad"] == 1
    assert g["score"] == pytest.approx(180 - 1.4826)
    assert g["acceptance_length"] == 2.6
    assert res["schedule"]["max_draft_len"] == 3
    assert res["schedule"]["trtllm_draft_len_schedule"] is None  # one level: no schedule


def test_tie_rule_picks_smallest_length_within_one_percent():
    m = (runs(1, 0, [100] * 3) + runs(1, 3, [199.0] * 3) + runs(1, 4, [200.0] * 3)
         + runs(1, 5, [197.5] * 3))
    res = draft_select(m)
    e = by_conc(res, 1)
    assert e["best_draft_len"] == 4
    assert e["within_tolerance"] == [3, 4]  # 197.5 is 1.25% below: out
    assert e["draft_len"] == 3
    # tighter tolerance: 199 is 0.5% below 200, 197.5 is 1.25% below
    res = draft_select(m, rel_tol=0.004)
    assert by_conc(res, 1)["draft_len"] == 4


def test_noisy_group_is_rejected_even_with_highest_median():
    m = (runs(1, 0, [100] * 3) + runs(1, 2, [150, 151, 149])
         + runs(1, 6, [120, 230, 260]))  # median 230, MAD 30 -> rel 0.13
    res = draft_select(m)
    assert group(res, 1, 6)["status"] == "noisy"
    assert by_conc(res, 1)["draft_len"] == 2
    assert 6 in by_conc(res, 1)["rejected"]
    # with a looser threshold the noisy group is allowed back, but its score is penalised
    res = draft_select(m, max_rel_mad=0.2)
    assert group(res, 1, 6)["score"] == pytest.approx(230 - 1.4826 * 30)
    assert by_conc(res, 1)["draft_len"] == 6


def test_spread_penalty_k_changes_the_choice():
    m = runs(1, 2, [150, 150, 150]) + runs(1, 3, [140, 154, 156])  # med 154, MAD 2
    assert draft_select(m, k=0.0)["winner"]["draft_len"] == 3
    assert draft_select(m, k=3.0)["winner"]["draft_len"] == 2


def test_too_few_runs_and_failed_runs_count_against_min_runs():
    m = runs(1, 2, [150, 151, 149]) + runs(1, 4, [300, 301]) + runs(1, 5, [400, None, 401])
    res = draft_select(m)
    assert group(res, 1, 4)["status"] == "too_few_runs"
    assert group(res, 1, 5)["status"] == "too_few_runs"
    assert group(res, 1, 5)["failed_runs"] == 1
    assert res["winner"]["draft_len"] == 2
    assert any("no baseline" in n for n in res["notes"])
    assert res["winner"]["speedup"] is None
    assert draft_select(m, min_runs=2)["winner"]["draft_len"] == 5


def test_baseline_can_win_unless_excluded():
    m = runs(1, 0, [200] * 3) + runs(1, 2, [150] * 3)
    res = draft_select(m)
    assert res["winner"]["draft_len"] == 0
    assert res["schedule"]["max_draft_len"] == 0
    assert draft_select(m, include_baseline=False)["winner"]["draft_len"] == 2


def test_schedule_across_concurrency_levels():
    m = []
    for conc, best in ((1, 5), (4, 3), (16, 1), (32, 1)):
        m += runs(conc, 0, [100] * 3)
        for dl in (1, 3, 5):
            m += runs(conc, dl, [200 if dl == best else 150] * 3)
    res = draft_select(m, max_batch=64)
    assert [e["draft_len"] for e in res["by_concurrency"]] == [5, 3, 1, 1]
    s = res["schedule"]
    assert s["max_draft_len"] == 5
    assert s["trtllm_draft_len_schedule"] == {1: 5, 4: 3, 16: 1}
    assert s["vllm_num_speculative_tokens_per_batch_size"] == [[1, 3, 5], [4, 15, 3], [16, 64, 1]]
    assert all(v <= 5 for v in s["trtllm_draft_len_schedule"].values())


def test_schedule_clamps_values_above_the_batch_one_length_and_allows_zero():
    m = (runs(1, 2, [200] * 3) + runs(1, 4, [150] * 3)
         + runs(8, 2, [150] * 3) + runs(8, 4, [200] * 3)
         + runs(32, 0, [300] * 3) + runs(32, 2, [200] * 3))
    res = draft_select(m)
    s = res["schedule"]
    assert s["trtllm_draft_len_schedule"] == {1: 2, 32: 0}
    assert s["vllm_num_speculative_tokens_per_batch_size"] == [[1, 31, 2], [32, 32, 0]]
    assert any("clamped" in n for n in res["notes"])


def test_level_without_eligible_group_inherits_previous():
    m = runs(1, 3, [200] * 3) + runs(4, 3, [100, 200, 300]) + runs(8, 1, [200] * 3)
    res = draft_select(m)
    assert by_conc(res, 4)["draft_len"] is None
    assert res["schedule"]["vllm_num_speculative_tokens_per_batch_size"] == [[1, 7, 3], [8, 8, 1]]


def test_other_objective():
    m = [{"concurrency": 1, "draft_len": d, "tps": v} for d, v in ((1, 10), (1, 10), (1, 10),
                                                                     (2, 20), (2, 20), (2, 20))]
    assert select(m, objective="tps")["winner"]["draft_len"] == 2


@pytest.mark.parametrize("bad,needle", [
    ("not a list", "must be a list"),
    ([{"concurrency": 1, "output_throughput": 1}], "has no 'draft_len'"),
    ([{"concurrency": 1, "draft_len": -1, "output_throughput": 1}], "draft_len must be >= 0"),
    ([{"concurrency": 0, "draft_len": 1, "output_throughput": 1}], "concurrency must be >= 1"),
    ([{"concurrency": 1, "draft_len": 2.5, "output_throughput": 1}], "must be an integer"),
    ([5], "must be a dict"),
])
def test_bad_input_names_the_problem(bad, needle):
    with pytest.raises(Refused, match="draft_select: .*" + needle.replace("'", ".")):
        draft_select(bad)


def test_bad_parameters():
    # the bounds are the draft_sweep settings' (plugin_utils/_settings.py POLICY), in the settings' one wording
    with pytest.raises(Refused, match=re.escape("min_runs (draft_sweep_min_runs): 0 must be from 1 to 100")):
        draft_select([], min_runs=0)
    with pytest.raises(Refused, match=re.escape("rel_tol (draft_sweep_rel_tol): -0.1 must be from 0.0 to 1.0")):
        draft_select([], rel_tol=-0.1)


def test_left_out_parameters_are_the_draft_sweep_defaults():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    params = draft_select([])["params"]
    for param, var in (("min_runs", "draft_sweep_min_runs"), ("max_rel_mad", "draft_sweep_max_rel_mad"),
                       ("k", "draft_sweep_mad_k"), ("rel_tol", "draft_sweep_rel_tol"),
                       ("client_limited", "draft_sweep_client_limited")):
        assert params[param] == role_spec.default(var), param


def test_empty_input_has_no_winner():
    res = draft_select([])
    assert res["winner"] is None and res["schedule"]["max_draft_len"] is None


def test_serve_bench_results_are_expanded_into_runs():
    def run(rep, thr, failed=0, acc=3.1):
        return {"repetition": rep, "concurrency": 2, "output_throughput": thr, "failed": failed,
                "completed": 8 - failed, "ttft_ms": {"p50": 12.0}, "tpot_ms": {"p50": 3.0},
                "errors": {"count": failed, "samples": ([{"message": "HTTP 500: x", "count": 1}]
                                                         if failed else [])},
                "spec_decode": {"acceptance_length": acc}}

    items = [{"draft_len": 0, "runs": [run(i, 100.0, acc=None) for i in range(3)]},
             {"draft_len": 3, "label": "k3", "runs": [run(0, 150.0), run(1, 151.0),
                                                      run(2, 400.0, failed=1)]},
             {"draft_len": 4, "concurrency": 2, "error": "engine did not start", "runs": []},
             {"draft_len": 2, "concurrency": 2, "output_throughput": 120.0}]
    res = draft_select(items, min_runs=2)
    recs = res["measurements"]
    assert len(recs) == 8  # 6 runs, the failed start, the plain record
    failed = [r for r in recs if r["draft_len"] == 3 and r["repetition"] == 2][0]
    assert failed["output_throughput"] is None and failed["error"] == "HTTP 500: x"
    assert failed["label"] == "k3" and failed["ttft_ms_p50"] == 12.0
    g3 = group(res, 2, 3)
    assert g3["runs"] == 2 and g3["failed_runs"] == 1 and g3["acceptance_length"] == 3.1
    assert group(res, 2, 4)["failed_runs"] == 1 and group(res, 2, 4)["status"] == "too_few_runs"
    assert res["winner"]["draft_len"] == 3
    assert res["winner"]["speedup"] == pytest.approx(1.505)


def test_each_measurement_keeps_the_engine_figures_and_where_they_were_read():
    trt = {"engine": "trtllm", "available": False, "iterations": 52, "iterations_with_draft": 0,
           "iterations_without_spec_stats": 52, "num_draft_tokens": 0, "num_accepted_tokens": 0,
           "num_requests_with_draft_tokens": 0, "acceptance_length": None, "iter_latency_ms_mean": 9.5,
           "active_requests_mean": 1.0, "metrics_url": "http://127.0.0.1:9470/engine/a/metrics?reader=draft_sweep"}
    items = [{"draft_len": 0, "runs": [{"repetition": 0, "concurrency": 1, "output_throughput": 90.0,
                                        "spec_decode": {"engine": "none", "available": False}}]},
             {"draft_len": 3, "runs": [{"repetition": 0, "concurrency": 1, "output_throughput": 150.0,
                                        "spec_decode": trt}]}]
    recs = draft_select(items, min_runs=1)["measurements"]
    assert recs[0]["engine_stats"] is None
    stats = recs[1]["engine_stats"]
    assert stats == dict((k, v) for k, v in trt.items() if k not in ("available", "acceptance_length"))
    assert stats["metrics_url"].endswith("?reader=draft_sweep")
