"""sweep_schedule_plan and sweep_schedule_verdict: what a sweep over several load levels serves, and
whether the served schedule is kept, decided from the sweep's and the re-measurement's own numbers."""

import pytest

from sweep_decisions import Refused, draft_select, sweep_schedule_plan, sweep_schedule_verdict
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_length


def runs(workload, conc, dl, value, n=3, spread=0.0):
    # n runs around value: value*(1-spread), value, value*(1+spread), ...
    vals = [value * (1 + spread * ((i % 3) - 1)) for i in range(n)]
    return [{"workload": workload, "concurrency": conc, "draft_len": dl, "repetition": i,
             "output_throughput": v} for i, v in enumerate(vals)]


def sweep(table, workloads=("code",), spread=0.0):
    """table: {concurrency: {draft_len: tok/s}} for every workload alike."""
    out = []
    for w in workloads:
        for conc, row in table.items():
            for dl, v in row.items():
                out += runs(w, conc, dl, v, spread=spread)
    return out


def served(table, workloads=("code",), spread=0.0):
    """The re-measurement: serve_bench results as the role registers them (one per workload and level)."""
    out = []
    for w in workloads:
        for conc, v in table.items():
            out += runs(w, conc, 4, v, spread=spread)
    return out


# at low load draft 4 is best, at high load draft 1; 2 is the best single length over the levels
FLIPS = {1: {0: 100, 1: 150, 2: 190, 4: 250}, 4: {0: 300, 1: 420, 2: 440, 4: 400},
         8: {0: 500, 1: 700, 2: 600, 4: 450}}
# draft 4 wins everywhere
STEADY = {1: {0: 100, 1: 150, 4: 250}, 8: {0: 500, 1: 600, 4: 800}}


def test_schedule_length_looks_up_the_band_of_a_batch_size():
    sched = {1: 4, 4: 2, 8: 1}
    assert [schedule_length(sched, c) for c in (1, 3, 4, 7, 8, 64)] == [4, 4, 2, 2, 1, 1]
    assert schedule_length({"1": 3, "6": 0}, 6) == 0


def test_levels_that_disagree_make_a_schedule_plan():
    res = draft_select(sweep(FLIPS))
    plan = sweep_schedule_plan(res)
    assert plan["mode"] == "schedule"
    assert plan["draft_len"] == 4
    assert plan["schedule"]["trtllm_draft_len_schedule"] == {1: 4, 4: 2, 8: 1}
    assert "4 from batch 1, 2 from batch 4, 1 from batch 8" in plan["reason"]


def test_levels_that_agree_reduce_to_one_length():
    plan = sweep_schedule_plan(draft_select(sweep(STEADY)))
    assert plan == {"mode": "single", "draft_len": 4, "schedule": None, "verify": True,
                    "reason": "every load level (concurrency 1, 8) chose draft length 4: the schedule reduces to it"}


def test_without_apply_schedule_the_lowest_levels_winner_is_served_unverified():
    res = draft_select(sweep(FLIPS))
    plan = sweep_schedule_plan(res, False)
    assert plan["verify"] is False and plan["schedule"] is None
    assert plan["draft_len"] == res["winner"]["draft_len"] == 4
    assert "apply_schedule is off" in plan["reason"]
    assert sweep_schedule_plan(res, True)["verify"] is True


def test_one_level_serves_its_winner():
    plan = sweep_schedule_plan(draft_select(sweep({1: FLIPS[1]})))
    assert (plan["mode"], plan["draft_len"], plan["verify"]) == ("single", 4, False)


def test_no_speculation_at_the_lowest_level_serves_the_best_single_length():
    # no schedule can start with "off" (key 1 must equal max_draft_len): the best length over the levels
    table = {1: {0: 200, 1: 150, 2: 150}, 8: {0: 500, 1: 900, 2: 700}}
    res = draft_select(sweep(table))
    assert res["schedule"]["trtllm_draft_len_schedule"] is None
    plan = sweep_schedule_plan(res)
    # ratings: 0 -> (1.0, 0.556) gm 0.745; 1 -> (0.75, 1.0) gm 0.866; 2 -> (0.75, 0.778) gm 0.764
    assert (plan["mode"], plan["draft_len"]) == ("single", 1)
    assert "0 at concurrency 1, 1 at concurrency 8" in plan["reason"]


def test_a_schedule_as_good_as_the_best_at_every_level_is_kept():
    res = draft_select(sweep(FLIPS))
    plan = sweep_schedule_plan(res)
    verdict = sweep_schedule_verdict(res, served({1: 248, 4: 438, 8: 697}), plan)
    assert verdict["keep"] is True and verdict["serve_schedule"] is True
    assert verdict["served_draft_len"] == 4
    assert [lv["served_draft_len"] for lv in verdict["levels"]] == [4, 2, 1]
    assert [lv["best_fixed_draft_len"] for lv in verdict["levels"]] == [4, 2, 1]
    assert all(lv["within_noise"] for lv in verdict["levels"])
    # the best single length over the levels is 2: (0.76 x 1.0 x 0.857) ** (1/3)
    assert verdict["range"]["best_single_draft_len"] == 2
    fixed = dict((f["draft_len"], f["rating"]) for f in verdict["range"]["fixed"])
    assert fixed[2] == pytest.approx((190 / 250 * 440 / 440 * 600 / 700) ** (1 / 3), abs=1e-4)
    assert verdict["range"]["served"] > max(fixed.values())
    assert verdict["reason"].startswith("kept: ")


def test_a_schedule_that_loses_at_one_level_falls_back_to_the_best_single_length():
    res = draft_select(sweep(FLIPS))
    verdict = sweep_schedule_verdict(res, served({1: 248, 4: 438, 8: 480}), sweep_schedule_plan(res))
    assert verdict["keep"] is False and verdict["serve_schedule"] is False
    assert verdict["served_draft_len"] == verdict["fallback_draft_len"] == 2
    low = verdict["levels"][2]
    assert low["concurrency"] == 8 and low["within_noise"] is False
    assert low["served_rating"] == pytest.approx(480 / 700, abs=1e-4)
    assert verdict["reason"].startswith("fell back to draft length 2: at concurrency 8 the schedule (draft length 1)")


def test_noise_widens_the_tolerance():
    # the same 10 % shortfall at concurrency 8: outside rel_tol with no spread, inside with a wide one
    res = draft_select(sweep(FLIPS, spread=0.0))
    tight = sweep_schedule_verdict(res, served({1: 250, 4: 440, 8: 630}), sweep_schedule_plan(res))
    assert tight["levels"][2]["within_noise"] is False
    assert tight["levels"][2]["tolerance"] == pytest.approx(0.01)
    res = draft_select(sweep(FLIPS, spread=0.08), max_rel_mad=0.5)
    wide = sweep_schedule_verdict(res, served({1: 250, 4: 440, 8: 630}, spread=0.08), sweep_schedule_plan(res))
    assert wide["levels"][2]["tolerance"] > 0.1
    assert wide["levels"][2]["within_noise"] is True


def test_within_noise_everywhere_but_not_better_over_the_range_falls_back():
    # the levels' winners differ by a hair: the schedule cannot beat the best single length over them
    table = {1: {0: 100, 2: 200, 4: 201}, 8: {0: 500, 2: 800, 4: 700}}
    res = draft_select(sweep(table, spread=0.05), rel_tol=0.001)
    plan = sweep_schedule_plan(res)
    assert plan["mode"] == "schedule"
    # 3 % below the best at each level, within the 7 % the spread allows
    verdict = sweep_schedule_verdict(res, served({1: 195, 8: 780}, spread=0.05), plan)
    assert all(lv["within_noise"] for lv in verdict["levels"])
    assert verdict["keep"] is False and verdict["served_draft_len"] == 2
    assert "not above the best single length 2" in verdict["reason"]


def test_a_level_not_measured_as_served_falls_back():
    res = draft_select(sweep(FLIPS))
    verdict = sweep_schedule_verdict(res, served({1: 250, 4: 440}), sweep_schedule_plan(res))
    assert verdict["keep"] is False
    assert "not measured at concurrency 8" in verdict["reason"]


def test_several_workloads_rate_by_the_rule():
    # worst case over code and chat: both alike here, so the verdict matches the single-workload one
    res = draft_select(sweep(FLIPS, workloads=("code", "chat")))
    plan = sweep_schedule_plan(res)
    good = sweep_schedule_verdict(res, served({1: 250, 4: 440, 8: 700}, workloads=("code", "chat")), plan)
    assert good["keep"] is True
    # chat alone loses at concurrency 4: the worst case sees it
    m = served({1: 250, 4: 440, 8: 700}, workloads=("code",)) + served({1: 250, 4: 300, 8: 700}, workloads=("chat",))
    bad = sweep_schedule_verdict(res, m, plan)
    assert bad["keep"] is False
    assert bad["levels"][1]["served"]["chat"]["median"] == 300
    assert bad["levels"][1]["served_rating"] == pytest.approx(300 / 440, abs=1e-4)


def test_a_single_plan_is_kept_and_reported():
    res = draft_select(sweep(STEADY))
    verdict = sweep_schedule_verdict(res, served({1: 240, 8: 790}), sweep_schedule_plan(res))
    assert verdict["keep"] is True and verdict["serve_schedule"] is False
    assert verdict["served_draft_len"] == 4
    assert [lv["served_rating"] for lv in verdict["levels"]] == [pytest.approx(0.96), pytest.approx(0.9875)]


def test_a_failed_served_run_does_not_count():
    res = draft_select(sweep(FLIPS))
    m = served({1: 250, 4: 440, 8: 700})
    for r in m:
        if r["concurrency"] == 8:
            r["output_throughput"] = None
    verdict = sweep_schedule_verdict(res, m, sweep_schedule_plan(res))
    assert verdict["levels"][2]["served"]["code"]["failed_runs"] == 3
    assert verdict["keep"] is False


@pytest.mark.parametrize("plan", [None, {}, {"mode": "sometimes"}, "schedule"])
def test_a_bad_plan_is_named(plan):
    res = draft_select(sweep(FLIPS))
    with pytest.raises(Refused, match="sweep_schedule_verdict: plan must be"):
        sweep_schedule_verdict(res, [], plan)


def test_a_bad_result_is_an_error():
    with pytest.raises(Refused, match="sweep_schedule_plan"):
        sweep_schedule_plan({"schedule": {"trtllm_draft_len_schedule": None}})
