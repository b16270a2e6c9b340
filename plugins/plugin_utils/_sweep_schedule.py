# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A schedule, proven as served: what a sweep over several load levels serves first, and whether it keeps it
once measured as served, from the selection plugin_utils/_bench_select.py made (its ``select_workloads`` result).

* :func:`schedule_plan`: the per-level winners' schedule when they differ, else one draft length (the one
  every level chose, or the best single length over the levels), and whether it is then measured as served.
* :func:`schedule_verdict`: keep the served schedule only if it is within noise of the best fixed length at
  every level and beats every single length over them; otherwise fall back to the best single length.
* :func:`schedule_length`: the draft length a TensorRT-LLM-style schedule serves at a concurrency.
* :func:`rate_served` and :func:`beats_fixed`: a configuration measured as served, rated against the fixed
  lengths, and the rule that keeps it (a schedule here, an engine's own mode in plugin_utils/_sweep_modes.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import MAD_NORMAL, mad, median
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import (
    WORKLOAD_RULES, SelectError, combine, rounded, expand_measurements, group_measurements)


def schedule_length(schedule, concurrency):
    """The draft length a TensorRT-LLM-style schedule (``{batch size: length}``, each length applying from
    its batch size up) serves at ``concurrency`` requests in flight."""
    keys = sorted(int(k) for k in schedule)
    start = max([k for k in keys if k <= concurrency] or keys[:1])
    return int(schedule[start] if start in schedule else schedule[str(start)])


def _workload_names(result):
    names = list((result.get("workloads") or {}).keys()) or ["default"]
    rule = result.get("rule") or {}
    if rule.get("name") == "workload":
        return names, [rule["workload"]], "worst_case"
    kind = rule.get("name") if rule.get("name") in WORKLOAD_RULES else "worst_case"
    return names, names, kind


def _medians(rows, names):
    """{(workload, concurrency): {draft_len: row}} of the rows that may win (status ok)."""
    out: dict[tuple[str, int], dict[int, Any]] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("median") is None:
            continue
        name = r.get("workload") or names[0]
        out.setdefault((name, r["concurrency"]), {})[r["draft_len"]] = r
    return out


def _served_groups(served, names, objective, count_flagged):
    """The re-measurement of the served configuration: {(workload, concurrency): row}."""
    out = {}
    for name in names:
        mine = [dict(m, draft_len=0) for m in expand_measurements(list(served or []))
                if isinstance(m, dict) and ((m.get("workload") or names[0]) == name)]
        for (conc, _dl), g in group_measurements(mine, objective, count_flagged).items():
            vals = g["values"]
            med = median(vals)
            out[(name, conc)] = {"median": rounded(med), "mad": rounded(mad(vals)), "runs": len(vals),
                                 "failed_runs": g["failed"],
                                 "rel_mad": rounded(mad(vals) / med, 6) if med else None}
    return out


def _geomean(values):
    prod = 1.0
    for v in values:
        prod *= v
    return prod ** (1.0 / len(values)) if values else None


def _ratings(result):
    """Per concurrency level, every fixed length's rating (its median relative to each counted
    workload's best median at that level, combined by the sweep's workload rule: 1.0 = the best at
    every workload), and the best single length over all levels (the highest geometric mean of its
    ratings; the smallest within rel_tol of it)."""
    names, counted, kind = _workload_names(result)
    rows = _medians(result.get("groups") or [], names)
    p = result["params"]
    concs = sorted(set(e["concurrency"] for e in result.get("by_concurrency") or []))
    levels = []
    for conc in concs:
        best = dict((w, max(r["median"] for r in rows[(w, conc)].values())) for w in counted if rows.get((w, conc)))
        lens = sorted(set(d for w in counted for d in rows.get((w, conc), {})))
        rated = {}
        for d in lens:
            rel = [rows[(w, conc)][d]["median"] / best[w] for w in counted
                   if best.get(w) and d in rows.get((w, conc), {})]
            if len(rel) == len(counted):
                rated[d] = combine(kind, rel)
        levels.append({"concurrency": conc, "best": best, "ratings": rated})
    complete = [d for d in sorted(set(d for lv in levels for d in lv["ratings"]))
                if all(d in lv["ratings"] for lv in levels)]
    over_range = dict((d, _geomean([lv["ratings"][d] for lv in levels])) for d in complete)
    single = None
    if over_range:
        top = max(over_range.values())
        single = min(d for d, v in over_range.items() if v >= top - abs(top) * float(p["rel_tol"]))
    return {"names": names, "counted": counted, "kind": kind, "rows": rows, "levels": levels,
            "over_range": over_range, "best_single": single}


def schedule_plan(result, apply_schedule=True):
    """What a sweep serves first: ``{"mode", "draft_len", "schedule", "reason", "verify"}``; ``verify`` says
    whether it is then measured as served (:func:`schedule_verdict`): with `apply_schedule` over several levels.
    Without `apply_schedule`, or over one level, the winner (of the lowest level) is served, unverified.

    ``schedule`` when the per-level winners make a schedule of at least two lengths (it is served,
    with ``draft_len`` its length at batch size 1); otherwise ``single``: one draft length, the one
    every level chose, or else the best single length over the levels (no schedule can say what the
    levels chose when no speculation wins at the lowest)."""
    sched = result.get("schedule") or {}
    trt = sched.get("trtllm_draft_len_schedule")
    concs = [e["concurrency"] for e in result.get("by_concurrency") or []]
    winner = (result.get("winner") or {}).get("draft_len")
    if not concs:
        raise ValueError("the selection has no load levels (by_concurrency)")
    if not apply_schedule or not concs[1:]:
        return {"mode": "single", "draft_len": winner, "schedule": None, "verify": False,
                "reason": "one load level: its winner is served" if not concs[1:] else
                "draft_sweep_apply_schedule is off: the lowest load level's winner is served"}
    if trt and len(set(trt.values())) > 1:
        return {"mode": "schedule", "draft_len": sched["max_draft_len"], "schedule": sched, "verify": True,
                "reason": "the best draft length differs between the load levels: the schedule %s is served "
                          "and measured as served" % _schedule_text(trt)}
    single = _ratings(result)["best_single"]
    if trt:
        length = next(iter(trt.values()))
        why = "every load level (concurrency %s) chose draft length %d: the schedule reduces to it" % (
            ", ".join(str(c) for c in concs), length)
    elif single is not None:
        length = single
        why = ("no schedule can serve what the levels chose (%s); the best single length over them, %d, "
               "is served" % (", ".join("%d at concurrency %s" % (e["draft_len"], e["concurrency"])
                                        for e in result["by_concurrency"] if e["draft_len"] is not None),
                              single))
    else:
        length = winner
        why = "no single length was rated over the levels: the lowest level's winner is served"
    return {"mode": "single", "draft_len": length, "schedule": None, "reason": why, "verify": True}


def _schedule_text(trt):
    return ", ".join("%d from batch %s" % (trt[k], k) for k in sorted(trt, key=int))


def rate_served(result, served, served_len=None):
    """A configuration measured as served (serve_bench results, one per workload and concurrency level, as the
    candidates were measured), rated against the sweep's fixed lengths: ``{"levels", "served_range", "best_range",
    "best_single", "fixed_range", "missing", "within_all"}``.

    Per level, every fixed length measured (the baseline is length 0) is rated against the best at that level
    (see ``_ratings``), and so is the served configuration; it is within noise at a level when its rating is at
    least the best fixed length's less k x 1.4826 x the relative MAD of either (at least rel_tol). Over the levels
    each is rated by the geometric mean of its ratings. ``served_len`` (a concurrency -> draft length callable)
    names the length the configuration serves at each level in ``levels``."""
    p = result["params"]
    rt = _ratings(result)
    got = _served_groups(served, rt["names"], p["objective"], p["client_limited"] == "count")
    levels, within_all, served_ratings, missing = [], True, [], []
    for lv in rt["levels"]:
        conc = lv["concurrency"]
        ratings = lv["ratings"]
        best_len = max(ratings, key=lambda d: (ratings[d], -d)) if ratings else None
        rel, noise = [], [float(p["rel_tol"])]
        for w in rt["counted"]:
            s = got.get((w, conc))
            if not s or not s["median"] or not lv["best"].get(w):
                continue
            rel.append(s["median"] / lv["best"][w])
            for r in (s, rt["rows"][(w, conc)].get(best_len) if best_len is not None else None):
                if r and r.get("rel_mad") is not None:
                    noise.append(float(p["k"]) * MAD_NORMAL * float(r["rel_mad"]))
        rating = combine(rt["kind"], rel) if len(rel) == len(rt["counted"]) else None
        tol = max(noise)
        within = (rating is not None and best_len is not None and rating >= ratings[best_len] * (1 - tol))
        if rating is None:
            missing.append(conc)
        else:
            served_ratings.append(rating)
        within_all = within_all and within
        levels.append({
            "concurrency": conc, "best_fixed_draft_len": best_len,
            "best_fixed_rating": rounded(ratings[best_len]) if best_len is not None else None,
            "served_draft_len": served_len(conc) if served_len else None,
            "served_rating": rounded(rating), "tolerance": rounded(tol), "within_noise": within,
            "served": dict((w, got.get((w, conc))) for w in rt["names"]),
            "fixed": [{"draft_len": d, "rating": rounded(v)} for d, v in sorted(ratings.items())]})
    return {"levels": levels, "within_all": within_all, "missing": missing,
            "served_range": _geomean(served_ratings) if not missing else None,
            "best_range": max(rt["over_range"].values()) if rt["over_range"] else None,
            "fixed_range": [{"draft_len": d, "rating": rounded(v)} for d, v in sorted(rt["over_range"].items())],
            "best_single": rt["best_single"]}


def beats_fixed(rated, what):
    """(keep, why) for a configuration rated by :func:`rate_served`: kept only if it is within noise of the best
    fixed length at every level and, over the levels, rated above the best single length. ``what`` names it."""
    single, best_range, served_range = rated["best_single"], rated["best_range"], rated["served_range"]
    if rated["missing"]:
        return False, ("%s was not measured at concurrency %s"
                       % (what, ", ".join(str(c) for c in rated["missing"])))
    if not rated["within_all"]:
        worst = [lv for lv in rated["levels"] if not lv["within_noise"]]
        return False, "; ".join(
            "at concurrency %d %s%s rated %s against %s for the best fixed length %s (noise %s)"
            % (lv["concurrency"], what,
               " (draft length %d)" % lv["served_draft_len"] if lv["served_draft_len"] is not None else "",
               _g(lv["served_rating"]), _g(lv["best_fixed_rating"]), lv["best_fixed_draft_len"], _g(lv["tolerance"]))
            for lv in worst)
    if best_range is not None and served_range is not None and served_range <= best_range:
        return False, ("over the levels %s rated %s, not above the best single length %s (%s)"
                       % (what, _g(served_range), single, _g(best_range)))
    return True, ("%s is within noise of the best fixed length at every level and over them rated %s against %s "
                  "for the best single length %s" % (what, _g(served_range), _g(best_range), single))


def schedule_verdict(result, served, plan):
    """Keep the served configuration, or fall back to the best single length: the decision, from the
    sweep's own numbers and the re-measurement of what was served (:func:`rate_served`).

    A schedule is kept only if, at every level, its rating is within noise of the best fixed length's, and over
    all the levels it beats every single fixed length (:func:`beats_fixed`). Otherwise the best single length over
    the levels is served. A plan of one length (``mode`` single) is that length: it is re-measured and reported,
    and kept."""
    if not isinstance(plan, dict) or plan.get("mode") not in ("schedule", "single"):
        raise SelectError("plan must be schedule_plan's result, got %r" % (plan,))
    trt = (plan.get("schedule") or {}).get("trtllm_draft_len_schedule")
    rated = rate_served(result, served, (lambda conc: schedule_length(trt, conc)) if trt
                        else (lambda conc: plan["draft_len"]))
    single = rated["best_single"]
    out = {"mode": plan["mode"], "planned_draft_len": plan["draft_len"], "planned_schedule": trt,
           "levels": rated["levels"],
           "range": {"served": rounded(rated["served_range"]), "fixed": rated["fixed_range"],
                     "best_single_draft_len": single},
           "fallback_draft_len": single}
    if plan["mode"] == "single":
        out.update({"keep": True, "serve_schedule": False, "served_draft_len": plan["draft_len"],
                    "reason": plan["reason"]})
        return out
    keep, why = beats_fixed(rated, "the schedule")
    if not keep and single is None:
        why += "; no single length was measured at every level, so the schedule stays"
        keep = True
    out.update({"keep": keep, "serve_schedule": keep,
                "served_draft_len": plan["draft_len"] if keep else single,
                "reason": ("kept: " if keep else "fell back to draft length %s: " % single) + why})
    return out


def _g(x):
    return "-" if x is None else ("%.3f" % x)
