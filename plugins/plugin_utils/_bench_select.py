# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pick the fastest draft length from repeated measurements (the parameters that are draft_sweep
settings take their defaults and checks from the role: plugin_utils/_role_spec.py, settings.py).

Measurements are grouped by (concurrency, draft_len); draft_len 0 is the
no-speculation baseline. For every group:

- at least ``min_runs`` successful runs, else status ``too_few_runs``;
- median and MAD of the objective (default ``output_throughput``);
- the median acceptance length the engine reported (``acceptance_length``) and the
  median client-side estimate serve_bench read from the stream
  (``acceptance_length_estimate``, tokens per decoding step), over the successful runs;
- relative MAD = MAD / median; above ``max_rel_mad`` the group is ``noisy``
  and cannot win (it is still reported);
- score = median - k * 1.4826 * MAD (a lower confidence bound that punishes
  spread);
- a draft length in ``excluded`` (the output-equivalence gate rejected it: its
  greedy output differs from the baseline's, could not be compared, or its
  usage counts disagree with the baseline's for the same output) is
  ``not_equivalent`` and never wins, whatever its throughput;
- a run serve_bench flagged because its own client may have limited it
  (``client.bottleneck``) is not a measurement of the engine: it is left out and
  counted in ``flagged_runs``; a group left with fewer than ``min_runs`` runs for
  that reason is ``client_bottleneck`` and cannot win. With ``client_limited``
  ``count`` such runs count like any other (still counted in ``flagged_runs``, with
  a note): for a client that shares its machine with other work and a sweep whose
  choice matters less than that it completes.

Per concurrency the winner is the *smallest* draft length whose score is
within ``rel_tol`` of the best score (shorter drafts cost less memory and
degrade more gracefully), and the speedup is its median over the baseline
median at the same concurrency.

Across several concurrency levels c1 < c2 < ... the per-level winners form a
per-batch-size schedule: level ci covers batch sizes ci .. c(i+1)-1 (the first
starts at 1, the last ends at ``max_batch``). It is emitted for TensorRT-LLM
``draft_len_schedule`` (``{batch: len}``, key 1 equal to ``max_draft_len``, all
values <= it; a larger winner at a higher level is clamped, with a note) and
for vLLM ``num_speculative_tokens_per_batch_size`` (``[[start, end, k], ...]``).

What such a sweep then serves, and whether it keeps it as measured, is plugin_utils/_sweep_schedule.py's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import (
    MAD_NORMAL, mad, median)
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_value

# The parameters that are the draft_sweep role's settings: their defaults, choices and bounds are the
# role's (its argument spec, plugin_utils/_settings.py POLICY), for the filter as for the role.
ROLE_PARAMS = (("min_runs", "draft_sweep_min_runs"), ("max_rel_mad", "draft_sweep_max_rel_mad"),
               ("k", "draft_sweep_mad_k"), ("rel_tol", "draft_sweep_rel_tol"),
               ("client_limited", "draft_sweep_client_limited"))
# The parameters of the selection alone, and what they are when not given.
OWN_PARAMS = (("objective", "output_throughput"), ("include_baseline", True), ("max_batch", None))


class SelectError(ValueError):
    """Invalid input to the selection."""


def _int(m, key, i):
    try:
        v = m[key]
    except (KeyError, TypeError):
        raise SelectError("measurement %d has no %r: %r" % (i, key, m))
    if isinstance(v, bool):
        raise SelectError("measurement %d: %s must be an integer, got %r" % (i, key, v))
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise SelectError("measurement %d: %s must be an integer, got %r" % (i, key, v))
    if iv != v and str(iv) != str(v):
        raise SelectError("measurement %d: %s must be an integer, got %r" % (i, key, v))
    return iv


def rounded(x, nd=4):
    return None if x is None else round(x, nd)


def _p50(run, key):
    v = run.get(key)
    return v.get("p50") if isinstance(v, dict) else None


# what a run's spec_decode (serve_bench) says about the engine's own statistics, kept per measurement
ENGINE_STATS_KEYS = ("metrics_url", "iterations", "iterations_with_draft", "iterations_without_spec_stats",
                     "num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_requests_with_draft_tokens",
                     "iter_latency_ms_mean", "active_requests_mean", "error")


def engine_stats(spec):
    """The engine's own figures of one run (TensorRT-LLM iteration stats or vLLM counters) and where
    they were read (metrics_url), or None when serve_bench read none (spec_metrics none)."""
    if not isinstance(spec, dict) or spec.get("engine") not in ("trtllm", "vllm"):
        return None
    out = dict((k, spec[k]) for k in ENGINE_STATS_KEYS if k in spec)
    out["engine"] = spec["engine"]
    return out


def expand_measurements(items):
    """Flatten items that carry serve_bench ``runs`` into one record per run.

    An item ``{"draft_len": k, "runs": [...], ...}`` (the registered result of
    serve_bench plus the draft length) becomes one record per run with the
    run's concurrency, repetition, throughputs, p50 latencies, errors and
    acceptance length, and ``engine_stats`` (``engine_stats()``: the engine's iteration or counter
    figures and where they were read); a run with any failed request gets a null
    ``output_throughput`` (a failed run). Other keys of the item are copied.
    An item with empty ``runs`` (a candidate that did not start) becomes one
    failed record. Items without ``runs`` are passed through unchanged.
    """
    out = []
    for item in items:
        if not isinstance(item, dict) or "runs" not in item:
            out.append(item)
            continue
        extra = dict((k, v) for k, v in item.items() if k != "runs")
        if not item["runs"]:
            rec = dict(extra)
            rec.setdefault("output_throughput", None)
            out.append(rec)
            continue
        for run in item["runs"]:
            spec = run.get("spec_decode") or {}
            errors = run.get("errors") or {}
            samples = errors.get("samples") or []
            rec = dict(extra)
            rec.update({
                "concurrency": run.get("concurrency", item.get("concurrency")),
                "repetition": run.get("repetition"),
                "output_throughput": (run.get("output_throughput")
                                      if not run.get("failed") else None),
                "total_token_throughput": run.get("total_token_throughput"),
                "request_throughput": run.get("request_throughput"),
                "ttft_ms_p50": _p50(run, "ttft_ms"),
                "tpot_ms_p50": _p50(run, "tpot_ms"),
                "itl_ms_p50": _p50(run, "itl_ms"),
                "e2e_ms_p50": _p50(run, "e2e_ms"),
                "tokens_per_chunk_mean": (run.get("tokens_per_chunk") or {}).get("mean"),
                "acceptance_length": spec.get("acceptance_length"),
                "acceptance_rate": spec.get("acceptance_rate"),
                "acceptance_length_estimate": run.get("acceptance_length_estimate"),
                "completed": run.get("completed"),
                "failed": run.get("failed"),
                "error": samples[0]["message"] if samples else None,
                "duration_s": run.get("duration_s"),
                "client_bottleneck": bool((run.get("client") or {}).get("bottleneck")),
                "engine_stats": engine_stats(spec),
            })
            out.append(rec)
    return out


def group_measurements(measurements, objective, count_flagged=False):
    groups: dict[tuple[int, int], dict[str, Any]] = {}
    for i, m in enumerate(measurements):
        if not isinstance(m, dict):
            raise SelectError("measurement %d must be a dict, got %r" % (i, m))
        dl = _int(m, "draft_len", i)
        conc = _int(m, "concurrency", i)
        if dl < 0:
            raise SelectError("measurement %d: draft_len must be >= 0, got %d" % (i, dl))
        if conc < 1:
            raise SelectError("measurement %d: concurrency must be >= 1, got %d" % (i, conc))
        g = groups.setdefault((conc, dl), {"values": [], "failed": 0, "flagged": 0, "acceptance": [],
                                           "estimate": [], "ttft": [], "tpot": []})
        # the engine's acceptance counts what the engine accepted, whatever the client's pace: a run the
        # client may have limited still measures it (its throughput does not count)
        if m.get("acceptance_length") is not None:
            g["acceptance"].append(float(m["acceptance_length"]))
        if m.get("client_bottleneck") and m.get(objective) is not None:
            g["flagged"] += 1
            if not count_flagged:
                continue
        for key, dest in (("ttft_ms_p50", "ttft"), ("tpot_ms_p50", "tpot")):
            if m.get(key) is not None and m.get(objective) is not None:
                g[dest].append(float(m[key]))
        v = m.get(objective)
        if v is None:
            g["failed"] += 1
        else:
            g["values"].append(float(v))
        if m.get("acceptance_length_estimate") is not None and v is not None:
            g["estimate"].append(float(m["acceptance_length_estimate"]))
    return groups


def _schedule(levels, max_batch, notes):
    """levels: sorted [(concurrency, draft_len or None)] -> (max_len, trtllm, vllm)."""
    known = [(c, d) for c, d in levels if d is not None]
    if not known:
        return None, None, None
    max_len = known[0][1]
    if max_len == 0:
        notes.append("no speculation wins at the lowest concurrency; no schedule emitted")
        return 0, None, None
    ranges: list[list[Any]] = []
    prev = None
    for idx, (c, d) in enumerate(known):
        if d > max_len:
            notes.append("concurrency %d: winner %d clamped to max_draft_len %d (a schedule may "
                         "not exceed the length at batch size 1)" % (c, d, max_len))
            d = max_len
        start = 1 if idx == 0 else c
        if prev is not None and prev[2] == d:
            continue
        if ranges:
            ranges[-1][1] = start - 1
        ranges.append([start, None, d])
        prev = ranges[-1]
    last = max(level[0] for level in levels)
    end = max_batch if max_batch is not None else last
    if end < ranges[-1][0]:
        end = ranges[-1][0]
    ranges[-1][1] = end
    trt = dict((r[0], r[2]) for r in ranges)
    return max_len, trt, [list(r) for r in ranges]


def _schedule_entry(levels, max_len, trt, vllm):
    """The result's schedule: the per-batch-size schedules only with several concurrency levels."""
    multi = len(levels) > 1
    return {"max_draft_len": max_len,
            "trtllm_draft_len_schedule": trt if multi else None,
            "vllm_num_speculative_tokens_per_batch_size": vllm if multi else None}


def select(measurements, objective=None, min_runs=None, max_rel_mad=None, k=None,
           rel_tol=None, include_baseline=None, max_batch=None, excluded=None, client_limited=None):
    """Return the selection report (a JSON-serialisable dict).

    A parameter left out (None) is, for those of ROLE_PARAMS, the default of the draft_sweep setting;
    a given one is typed and checked as that setting is (SelectError names the parameter)."""
    given = {"objective": objective, "min_runs": min_runs, "max_rel_mad": max_rel_mad, "k": k, "rel_tol": rel_tol,
             "include_baseline": include_baseline, "max_batch": max_batch, "client_limited": client_limited}
    p: dict[str, Any] = dict(OWN_PARAMS)
    p.update((key, role_spec.default(var)) for key, var in ROLE_PARAMS)
    p.update((key, val) for key, val in given.items() if val is not None)
    p = dict((key, p[key]) for key in ("objective", "min_runs", "max_rel_mad", "k", "rel_tol", "include_baseline",
                                       "max_batch", "client_limited"))
    if isinstance(excluded, (str, bytes, dict)) or (excluded is not None and not hasattr(excluded, "__iter__")):
        raise SelectError("excluded must be a list of draft lengths, got %r" % (excluded,))
    p["excluded"] = sorted(set(_int({"draft_len": d}, "draft_len", i) for i, d in enumerate(excluded or [])))
    if isinstance(measurements, (str, bytes, dict)) or not hasattr(measurements, "__iter__"):
        raise SelectError("measurements must be a list, got %s" % type(measurements).__name__)
    for key, var in ROLE_PARAMS:
        if given[key] is not None:
            try:
                p[key] = check_value(var, given[key], label="%s (%s)" % (key, var))
            except SettingsError as exc:
                raise SelectError(str(exc))

    measurements = expand_measurements(list(measurements))
    count_flagged = p["client_limited"] == "count"
    groups = group_measurements(measurements, p["objective"], count_flagged)
    notes = []
    rows = []
    for (conc, dl) in sorted(groups):
        g = groups[(conc, dl)]
        vals = g["values"]
        med = median(vals)
        md = mad(vals)
        row = {"concurrency": conc, "draft_len": dl, "runs": len(vals), "failed_runs": g["failed"],
               "flagged_runs": g["flagged"],
               "values": [rounded(v) for v in vals], "median": rounded(med), "mad": rounded(md),
               "rel_mad": None, "score": None, "status": "ok",
               "acceptance_length": rounded(median(g["acceptance"])),
               "acceptance_length_estimate": rounded(median(g["estimate"])), "speedup": None,
               "ttft_ms_p50": rounded(median(g["ttft"])), "tpot_ms_p50": rounded(median(g["tpot"]))}
        if med is not None and med > 0:
            row["rel_mad"] = rounded(md / med, 6)
            row["score"] = rounded(med - float(p["k"]) * MAD_NORMAL * md)
        if g["flagged"]:
            notes.append("concurrency %d, draft length %d: %d run(s) %s, the client may have limited "
                         "them (client_bottleneck)" % (conc, dl, g["flagged"],
                                                       "counted (client_limited=count)" if count_flagged
                                                       else "left out"))
        if dl in p["excluded"]:
            row["status"] = "not_equivalent"
        elif len(vals) < int(p["min_runs"]):
            row["status"] = "client_bottleneck" if g["flagged"] else "too_few_runs"
        elif med is None or med <= 0:
            row["status"] = "no_throughput"
        elif md / med > float(p["max_rel_mad"]):
            row["status"] = "noisy"
        rows.append(row)

    levels = []
    by_conc = []
    for conc in sorted(set(r["concurrency"] for r in rows)):
        grp = [r for r in rows if r["concurrency"] == conc]
        base = next((r for r in grp if r["draft_len"] == 0), None)
        base_med = base["median"] if base else None
        for r in grp:
            if base_med and r["median"] is not None:
                r["speedup"] = rounded(r["median"] / base_med)
        eligible = [r for r in grp if r["status"] == "ok"
                    and (p["include_baseline"] or r["draft_len"] > 0)]
        entry = {"concurrency": conc, "draft_len": None, "score": None, "median": None,
                 "best_score": None, "best_draft_len": None, "within_tolerance": [],
                 "baseline_median": base_med,
                 "baseline_status": base["status"] if base else "missing",
                 "speedup": None, "acceptance_length": None, "acceptance_length_estimate": None,
                 "rejected": [r["draft_len"] for r in grp if r["status"] != "ok"]}
        if base is None:
            notes.append("concurrency %d: no baseline (draft_len 0) measured; no speedup" % conc)
        elif base["status"] != "ok":
            notes.append("concurrency %d: baseline is %s; speedup is indicative"
                         % (conc, base["status"]))
        if not eligible:
            notes.append("concurrency %d: no candidate passed the checks" % conc)
            levels.append((conc, None))
            by_conc.append(entry)
            continue
        best = max(eligible, key=lambda r: (r["score"], -r["draft_len"]))
        floor = best["score"] - abs(best["score"]) * float(p["rel_tol"])
        within = sorted(r["draft_len"] for r in eligible if r["score"] >= floor)
        chosen = next(r for r in eligible if r["draft_len"] == within[0])
        entry.update({"draft_len": chosen["draft_len"], "score": chosen["score"],
                      "median": chosen["median"], "best_score": best["score"],
                      "best_draft_len": best["draft_len"], "within_tolerance": within,
                      "speedup": chosen["speedup"], "acceptance_length": chosen["acceptance_length"],
                      "acceptance_length_estimate": chosen["acceptance_length_estimate"]})
        levels.append((conc, chosen["draft_len"]))
        by_conc.append(entry)

    max_len, trt, vllm = _schedule(levels, p["max_batch"], notes)
    first = next((e for e in by_conc if e["draft_len"] is not None), None)
    winner = None
    if first is not None:
        winner = {"draft_len": first["draft_len"], "concurrency": first["concurrency"],
                  "median": first["median"], "speedup": first["speedup"],
                  "acceptance_length": first["acceptance_length"],
                  "acceptance_length_estimate": first["acceptance_length_estimate"]}
    return {
        "params": p,
        "groups": rows,
        "by_concurrency": by_conc,
        "winner": winner,
        "schedule": _schedule_entry(levels, max_len, trt, vllm),
        "notes": notes,
        "measurements": measurements,
    }


# --------------------------------------------------------------------------- several workloads

WORKLOAD_RULES = ("worst_case", "mean")


def _rule(rule, names):
    """('worst_case'|'mean'|'workload', name or None), or SelectError."""
    if rule in WORKLOAD_RULES:
        return rule, None
    if isinstance(rule, str) and rule.startswith("workload:") and rule[len("workload:"):] in names:
        return "workload", rule[len("workload:"):]
    raise SelectError("rule must be one of %s or workload:NAME with NAME one of the workloads %s, got %r"
                      % (", ".join(WORKLOAD_RULES), names, rule))


def combine(rule, relatives):
    if rule == "worst_case":
        return min(relatives)
    prod = 1.0
    for r in relatives:
        prod *= r
    return prod ** (1.0 / len(relatives))  # the geometric mean of ratios


def _lowest(per_workload, key):
    """The lowest of the workloads' ``key`` (None where no workload has one)."""
    values = [v[key] for v in per_workload.values() if v.get(key) is not None]
    return min(values) if values else None


def select_workloads(measurements, rule=None, **kwargs):
    """Select per workload, then one draft length for all of them by ``rule``.

    Measurements carry ``workload`` (a name; missing means ``default``). Each workload gets its own
    :func:`select` (``workloads[name]``). One workload: its selection is the result. Several: per
    concurrency, every draft length that is ``ok`` in every workload is rated by its score relative to
    that workload's best score (1.0 = that workload's optimum), and the ratings are combined by
    ``rule``: ``worst_case`` takes the lowest (the best worst case), ``mean`` the geometric mean;
    ``workload:NAME`` takes NAME's winner. The chosen length is the smallest whose combined rating is
    within ``rel_tol`` of the best, as within one workload. The per-concurrency choices make the
    winner and the schedule as in :func:`select`. The result is :func:`select`'s shape with the
    pooled ``groups`` and ``measurements``, plus ``workloads`` and ``rule``.
    """
    if isinstance(measurements, (str, bytes, dict)) or not hasattr(measurements, "__iter__"):
        raise SelectError("measurements must be a list, got %s" % type(measurements).__name__)
    if rule is None:
        rule = role_spec.default("draft_sweep_workload_rule")
    items = list(measurements)
    names = []
    for m in items:
        name = (m.get("workload") if isinstance(m, dict) else None) or "default"
        if name not in names:
            names.append(name)
    if not names:
        names = ["default"]
    kind, chosen_name = _rule(rule, names)
    per = {}
    for name in names:
        mine = [m for m in items if ((m.get("workload") if isinstance(m, dict) else None) or "default") == name]
        per[name] = select(mine, **kwargs)
    summary = dict((name, {"winner": per[name]["winner"], "by_concurrency": per[name]["by_concurrency"],
                           "notes": per[name]["notes"]}) for name in names)
    if len(names) == 1 or kind == "workload":
        out = dict(per[chosen_name or names[0]])
        out["workloads"] = summary
        out["rule"] = {"name": "workload" if kind == "workload" else "single_workload",
                       "workload": chosen_name or names[0],
                       "text": ("the winner of workload %s" % (chosen_name or names[0]))
                       if kind == "workload" else "one workload: its winner",
                       "ratings": []}
        return out

    first = per[names[0]]
    p = first["params"]
    notes = []
    by_conc, levels, ratings = [], [], []
    concs = sorted(set(e["concurrency"] for name in names for e in per[name]["by_concurrency"]))
    for conc in concs:
        rows = dict((name, dict((r["draft_len"], r) for r in per[name]["groups"] if r["concurrency"] == conc))
                    for name in names)
        best: dict[str, Any] = {}
        for name in names:
            ok = [r for r in rows[name].values() if r["status"] == "ok"
                  and (p["include_baseline"] or r["draft_len"] > 0)]
            best[name] = max(r["score"] for r in ok) if ok else None
        lens = sorted(set(d for name in names for d in rows[name]))
        rated = []
        for d in lens:
            rel = {}
            for name in names:
                r = rows[name].get(d)
                usable = (r is not None and r["status"] == "ok" and best[name] and best[name] > 0
                          and (p["include_baseline"] or d > 0))
                rel[name] = r["score"] / best[name] if usable and r is not None else None
            complete = all(v is not None for v in rel.values())
            # a length not eligible in every workload is rated where it is, and cannot be chosen
            entry = {"concurrency": conc, "draft_len": d,
                     "relative": dict((k, rounded(v)) for k, v in rel.items()),
                     "combined": rounded(combine(kind, list(rel.values()))) if complete else None}
            ratings.append(entry)
            if complete:
                rated.append(entry)
        entry = {"concurrency": conc, "draft_len": None, "combined": None, "best_combined": None,
                 "best_draft_len": None, "within_tolerance": [], "speedup": None, "median": None,
                 "acceptance_length": None, "acceptance_length_estimate": None, "per_workload": {},
                 "rejected": [e["draft_len"] for e in ratings if e["concurrency"] == conc and e["combined"] is None]}
        if not rated:
            notes.append("concurrency %d: no draft length passed the checks in every workload" % conc)
            levels.append((conc, None))
            by_conc.append(entry)
            continue
        top = max(e["combined"] for e in rated)
        floor = top - abs(top) * float(p["rel_tol"])
        within = sorted(e["draft_len"] for e in rated if e["combined"] >= floor)
        pick = within[0]
        per_workload = dict((n, dict((k, rows[n][pick][k]) for k in (
            "median", "speedup", "acceptance_length", "acceptance_length_estimate"))) for n in names)
        speedups = [v["speedup"] for v in per_workload.values() if v["speedup"] is not None]
        # the scalar figures are the worst workload's: its speed-up, and the lowest acceptance length
        # measured (engine and client estimate), which live traffic of any mix of the workloads should
        # reach (the monitoring role's expectation); the rest is per workload
        entry.update({"draft_len": pick, "combined": next(e["combined"] for e in rated if e["draft_len"] == pick),
                      "best_combined": top, "within_tolerance": within,
                      "best_draft_len": max(rated, key=lambda e: (e["combined"], -e["draft_len"]))["draft_len"],
                      "speedup": min(speedups) if len(speedups) == len(names) else None,
                      "acceptance_length": _lowest(per_workload, "acceptance_length"),
                      "acceptance_length_estimate": _lowest(per_workload, "acceptance_length_estimate"),
                      "per_workload": per_workload})
        levels.append((conc, pick))
        by_conc.append(entry)

    max_len, trt, vllm = _schedule(levels, p["max_batch"], notes)
    first_pick = next((e for e in by_conc if e["draft_len"] is not None), None)
    winner = None
    if first_pick is not None:
        d, conc = first_pick["draft_len"], first_pick["concurrency"]
        winner = {"draft_len": d, "concurrency": conc, "combined": first_pick["combined"],
                  "median": None, "speedup": first_pick["speedup"], "acceptance_length": first_pick["acceptance_length"],
                  "acceptance_length_estimate": first_pick["acceptance_length_estimate"],
                  "per_workload": first_pick["per_workload"]}
    return {
        "params": p,
        "groups": [dict(r, workload=name) for name in names for r in per[name]["groups"]],
        "by_concurrency": by_conc,
        "winner": winner,
        "schedule": _schedule_entry(levels, max_len, trt, vllm),
        "notes": notes + ["%s: %s" % (name, n) for name in names for n in per[name]["notes"]],
        "measurements": [m for name in names for m in per[name]["measurements"]],
        "workloads": summary,
        "rule": {"name": kind, "workload": None,
                 "text": ("the best worst case: the draft length whose lowest score relative to each "
                          "workload's best is highest") if kind == "worst_case" else
                         ("the best geometric mean of each workload's score relative to its best"),
                 "ratings": ratings},
    }
