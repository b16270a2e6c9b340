"""draft_select over several workloads, and runs the client may have limited."""

import pytest

from sweep_decisions import Refused, draft_select


def runs(workload, dl, value, conc=1, n=3, flagged=0):
    return [{"workload": workload, "concurrency": conc, "draft_len": dl, "repetition": i,
             "output_throughput": value, "client_bottleneck": i < flagged} for i in range(n)]


# code likes long drafts, prose short ones; draft length 2 is good for both, 4 only for code,
# 6 only for prose (scores are the medians: three equal runs have no spread)
CODE = {0: 50, 2: 70, 4: 100, 6: 50}
PROSE = {0: 50, 2: 70, 4: 60, 6: 100}


def sweep(code=CODE, prose=PROSE, **kw):
    m = []
    for dl, v in code.items():
        m += runs("code", dl, v, **kw)
    for dl, v in prose.items():
        m += runs("prose", dl, v, **kw)
    return m


def rating(res, dl):
    return next(r for r in res["rule"]["ratings"] if r["draft_len"] == dl)


def test_each_workload_has_its_winner_and_worst_case_picks_the_best_lowest_rating():
    res = draft_select(sweep())
    assert res["workloads"]["code"]["winner"]["draft_len"] == 4
    assert res["workloads"]["prose"]["winner"]["draft_len"] == 6
    # ratings: 2 -> (0.7, 0.7); 4 -> (1.0, 0.6); 6 -> (0.5, 1.0)
    assert rating(res, 4)["relative"] == {"code": 1.0, "prose": 0.6}
    assert rating(res, 2)["combined"] == pytest.approx(0.7)
    assert res["rule"]["name"] == "worst_case"
    assert res["winner"]["draft_len"] == 2
    # the scalar speed-up is the worst workload's; the rest is per workload
    assert res["winner"]["speedup"] == pytest.approx(1.4)
    assert res["winner"]["per_workload"]["code"]["median"] == 70
    assert {g["workload"] for g in res["groups"]} == {"code", "prose"}


def test_mean_picks_the_best_geometric_mean():
    res = draft_select(sweep(), rule="mean")
    assert rating(res, 4)["combined"] == pytest.approx(0.6 ** 0.5, abs=1e-4)
    assert res["winner"]["draft_len"] == 4 and res["rule"]["name"] == "mean"


@pytest.mark.parametrize("name,expected", [("code", 4), ("prose", 6)])
def test_a_named_workload_gives_its_winner(name, expected):
    res = draft_select(sweep(), rule="workload:" + name)
    assert res["winner"]["draft_len"] == expected
    assert res["rule"] == dict(res["rule"], name="workload", workload=name)


def test_one_workload_is_its_own_winner_whatever_the_rule():
    res = draft_select([m for m in sweep() if m["workload"] == "code"], rule="mean")
    assert res["winner"]["draft_len"] == 4 and res["rule"]["name"] == "single_workload"
    assert list(res["workloads"]) == ["code"]


def test_measurements_without_a_workload_are_one_workload_named_default():
    m = [dict(r, workload=None) for r in runs("x", 0, 50) + runs("x", 3, 80)]
    res = draft_select(m)
    assert res["winner"]["draft_len"] == 3 and list(res["workloads"]) == ["default"]


def test_a_length_not_eligible_in_every_workload_cannot_be_chosen():
    prose = dict(PROSE)
    del prose[2]                       # never measured on prose
    res = draft_select(sweep(prose=prose))
    assert rating(res, 2)["combined"] is None and rating(res, 2)["relative"]["prose"] is None
    assert res["winner"]["draft_len"] == 4     # (1.0, 0.6) beats 6's (0.5, 1.0)


def test_rule_errors_name_what_is_allowed():
    with pytest.raises(Refused, match="worst_case, mean or workload:NAME"):
        draft_select(sweep(), rule="workload:poetry")


def test_runs_the_client_may_have_limited_are_left_out():
    m = runs("w", 0, 50) + runs("w", 2, 90, n=4, flagged=1) + runs("w", 4, 200, flagged=1)
    res = draft_select(m)
    g4 = next(g for g in res["groups"] if g["draft_len"] == 4)
    assert g4["status"] == "client_bottleneck" and g4["runs"] == 2 and g4["flagged_runs"] == 1
    g2 = next(g for g in res["groups"] if g["draft_len"] == 2)
    assert g2["status"] == "ok" and g2["runs"] == 3 and g2["flagged_runs"] == 1
    assert res["winner"]["draft_len"] == 2
    assert any("client_bottleneck" in n for n in res["notes"])


def test_with_client_limited_count_the_flagged_runs_count_and_are_still_reported():
    # the same runs as above: counted, draft length 4 is eligible again and wins
    m = runs("w", 0, 50) + runs("w", 2, 90, n=4, flagged=1) + runs("w", 4, 200, flagged=1)
    res = draft_select(m, client_limited="count")
    g4 = next(g for g in res["groups"] if g["draft_len"] == 4)
    assert g4["status"] == "ok" and g4["runs"] == 3 and g4["flagged_runs"] == 1
    assert res["winner"]["draft_len"] == 4
    assert any("counted (client_limited=count)" in n for n in res["notes"])
    assert res["params"]["client_limited"] == "count"
    # a group whose every run was flagged is measured as any other
    res = draft_select(runs("w", 0, 50, flagged=3) + runs("w", 2, 90, flagged=3), client_limited="count")
    assert [(g["status"], g["runs"], g["flagged_runs"]) for g in res["groups"]] == [("ok", 3, 3), ("ok", 3, 3)]
    assert res["winner"]["draft_len"] == 2


@pytest.mark.parametrize("bad", ["Count", "include", "", 1])
def test_client_limited_takes_only_exclude_or_count(bad):
    # the choices are draft_sweep_client_limited's (its argument spec), in the settings' one wording
    with pytest.raises(Refused) as exc:
        draft_select(runs("w", 0, 50), client_limited=bad)
    assert "client_limited (draft_sweep_client_limited): %r is not one of exclude, count" % (str(bad),) in str(exc.value)


def test_serve_bench_runs_carry_the_client_verdict_into_the_selection():
    item = {"draft_len": 1, "concurrency": 1, "workload": "w", "runs": [
        {"concurrency": 1, "repetition": i, "output_throughput": 100.0, "failed": 0,
         "client": {"bottleneck": i == 0}} for i in range(3)]}
    res = draft_select([item], min_runs=2)
    g = res["groups"][0]
    assert g["runs"] == 2 and g["flagged_runs"] == 1 and g["status"] == "ok"
    assert [m["client_bottleneck"] for m in res["measurements"]] == [True, False, False]


def test_the_scalar_acceptance_is_the_lowest_workloads_which_monitoring_expects():
    # the engine accepts more on code than on prose at every length: the expectation a mix of both
    # must reach is prose's (the monitoring role's alert compares live acceptance with it)
    m = sweep()
    for r in m:
        if r["draft_len"]:
            r["acceptance_length"] = 1 + r["draft_len"] * (0.8 if r["workload"] == "code" else 0.3)
            r["acceptance_length_estimate"] = r["acceptance_length"] - 0.1
    res = draft_select(m)
    win = res["winner"]
    assert win["draft_len"] == 2
    assert win["per_workload"]["code"]["acceptance_length"] == pytest.approx(2.6)
    assert win["acceptance_length"] == pytest.approx(1.6) == win["per_workload"]["prose"]["acceptance_length"]
    assert win["acceptance_length_estimate"] == pytest.approx(1.5)
    (level,) = res["by_concurrency"]
    assert level["acceptance_length"] == win["acceptance_length"]
    # without engine figures (no speculation chosen, or none reported) there is none
    res = draft_select(sweep())
    assert res["winner"]["acceptance_length"] is None and res["by_concurrency"][0]["acceptance_length"] is None


def test_a_client_limited_run_still_reports_the_engines_acceptance():
    # the client's pace cannot change what the engine accepted: its counters count, its throughput does not
    m = runs("w", 0, 50) + runs("w", 2, 90, flagged=3)
    for r, acc in zip(m[3:], (1.4, 1.6, 1.5)):
        r["acceptance_length"] = acc
        r["acceptance_length_estimate"] = acc
    g2 = next(g for g in draft_select(m)["groups"] if g["draft_len"] == 2)
    assert g2["status"] == "client_bottleneck" and g2["runs"] == 0 and g2["flagged_runs"] == 3
    assert g2["acceptance_length"] == pytest.approx(1.5)
    assert g2["acceptance_length_estimate"] is None and g2["median"] is None
