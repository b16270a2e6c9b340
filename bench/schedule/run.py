#!/usr/bin/env python3
"""Load schedules against fixed draft lengths on the real engine (vLLM's CPU build), in one run.

    python3 bench/schedule/run.py [--workload code|prose] [--lens 0,1,2,4] [--levels 1,2,4,8,16]
                                  [--rates R,R,...] [--max-tokens 128] [--repetitions 3] [--rounds 2]

One workload per run: ``code`` (bench/real_engine/workloads.py's prompts of repeated code-like lines,
greedy, which n-gram drafts copy from) or ``prose`` (the built-in ``mixed`` prompts, sampled at
temperature 1.0, where few drafts are accepted). The engine container is started as
bench/real_engine/run.py starts it (`--entrypoint vllm`, `--ipc=host`, `--enforce-eager`, a 1 GiB KV
cache), with `--max-num-seqs` (default 16), once per configuration:

1. Round 1, the sweep. No speculation (length 0) and n-gram at each fixed length (``--lens``) are
   measured at every load level with serve_bench's runner (the module's own code): closed loop at each
   concurrency of ``--levels`` (``--requests-per-worker`` requests per worker and at least
   ``--min-requests``, ``--repetitions`` runs each, after ``--warmup-requests``), or, with ``--rates``,
   open loop at each request rate (Poisson arrivals, ``--rate-requests`` each, at most ``--max-num-seqs``
   in flight).
2. The selection is draft_sweep's own (bench_select.select_workloads with the role's parameters, flagged
   runs counted, ``--max-rel-mad`` as in the molecule scenario on the real engine): each level's winner,
   the schedule they make, and what a sweep with ``draft_sweep_apply_schedule`` serves
   (``schedule_plan``): the schedule, or the one length it reduces to.
3. A schedule is served as the role renders it (``num_speculative_tokens_per_batch_size`` over batch
   sizes 1 to ``--max-num-seqs``, ``num_speculative_tokens`` its length at batch size 1) and measured at
   every level; ``schedule_verdict`` keeps it or falls back to the best single length.
4. Round 2 measures every configuration again in the reverse order (the schedule first, on the engine
   already serving it), so drift over the run weighs on both rounds alike; the same selection and verdict
   over round 2 alone, and over both rounds pooled, say whether round 1's decision holds.

Per level it prints the best fixed length and its tok/s, the schedule's length and tok/s, and the ratios
schedule / best fixed and schedule / each fixed length (without a schedule: each fixed length / the
best), then the verdicts and a conclusion. The objective is output throughput in closed loop; in open
loop, where every configuration that keeps up delivers the offered rate, it is each request's own
speed (output tokens / end-to-end seconds, the median request), and a rate's level is the requests in
flight it made in round 1's first configuration (no speculation; Little's law), the batch size a schedule
is keyed by.

``--dry-run`` prints the plan (starts, requests, tokens) and measures nothing. Raw figures go to
bench/schedule/results.json (``--out``), one entry per workload (``code``, ``prose``, ``code-rates``...):
a run replaces its own and keeps the others.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "collections"))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# bench/real_engine/run.py (the image, the models) under the name bench/real_engine/workloads.py imports it by
engine = _load("run", REPO / "bench" / "real_engine" / "run.py")
workloads = _load("workloads", REPO / "bench" / "real_engine" / "workloads.py")

from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import PROMPT_SETS, run_benchmark  # noqa: E402
from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import median  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import expand_measurements, select_workloads  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_length, schedule_plan, schedule_verdict  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import _vllm_schedule  # noqa: E402

CONTAINER = "specdec-bench-schedule"
PORT = 18572
# name: (prompts, temperature)
WORKLOADS = {"code": (workloads.CODE, 0.0), "prose": (PROMPT_SETS["mixed"], 1.0)}
SCHED = "schedule"


def say(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def healthy(timeout=600.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % PORT, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        if not engine.sh(["docker", "ps", "-q", "-f", "name=^%s$" % CONTAINER]).strip():
            return False
        time.sleep(0.5)
    return False


def spec_config(k, schedule, max_num_seqs):
    """vLLM's speculative config for fixed n-gram length k (0: none), or for a schedule ({batch: k})
    rendered as inference_server renders draft_len_schedule (spec_config._vllm_schedule)."""
    if schedule:
        k = schedule_length(schedule, 1)
    if not k:
        return None
    sc: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    if schedule:
        sc["num_speculative_tokens_per_batch_size"] = _vllm_schedule(dict((int(b), int(v)) for b, v in schedule.items()),
                                                                     max_num_seqs)
    return sc


def remove():
    """Remove the engine container and wait until docker has let go of its name."""
    subprocess.run(["docker", "rm", "-f", CONTAINER], capture_output=True)
    for _ in range(30):
        if not engine.sh(["docker", "ps", "-aq", "-f", "name=^%s$" % CONTAINER]).strip():
            return
        time.sleep(1)


def start(sc, max_num_seqs):
    """Start the engine with speculative config ``sc`` (None: no speculation); seconds to /health 200, or
    raise RuntimeError with docker's error or the engine's last log lines."""
    args = ["serve", "/models/tiny-llama", "--served-model-name", "tiny-llama", "--host", "0.0.0.0",
            "--port", "8000", "--enforce-eager", "--max-num-seqs", str(max_num_seqs)]
    if sc:
        args += ["--speculative-config", json.dumps(sc)]
    argv = ["docker", "run", "-d", "--name", CONTAINER, "--ipc=host", "--ulimit", "memlock=8388608",
            "-p", "127.0.0.1:%d:8000" % PORT, "-e", "VLLM_CPU_KVCACHE_SPACE=1", "-e", "HF_HUB_OFFLINE=1",
            "-e", "VLLM_CPU_OMP_THREADS_BIND=auto", "-v", "%s:/models:ro" % engine.MODELS, "--entrypoint", "vllm",
            engine.image_name()] + args
    for attempt in range(3):  # docker may hold the name or the port for a moment after the last container
        remove()
        began = time.monotonic()
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode == 0:
            break
        say("docker run failed (%s), attempt %d of 3" % (run.stderr.strip().splitlines()[-1:] or run.returncode, attempt + 1))
        time.sleep(3)
    else:
        raise RuntimeError("docker run failed with %s: %s" % (json.dumps(sc), run.stderr.strip()))
    if not healthy():
        logs = subprocess.run(["docker", "logs", "--tail", "40", CONTAINER], capture_output=True, text=True)
        raise RuntimeError("the engine did not start with %s:\n%s" % (json.dumps(sc), logs.stdout + logs.stderr))
    return round(time.monotonic() - began, 1)


def level_cfg(args, level):
    """(concurrency, num_requests, warmup_requests, request_rate) of one load level."""
    if args.rate_list:
        return args.max_num_seqs, args.rate_requests, args.warmup_requests, level
    return level, max(args.min_requests, args.requests_per_worker * level), args.warmup_requests, None


def measure(args, label, k, level):
    """One configuration at one load level: serve_bench's result, reduced to what the run keeps."""
    prompts, temperature = WORKLOADS[args.workload]
    conc, n, warm, rate = level_cfg(args, level)
    result = run_benchmark({
        "url": "http://127.0.0.1:%d" % PORT, "path": "/v1/completions", "model": "tiny-llama",
        "concurrency": conc, "num_requests": n, "warmup_requests": warm, "repetitions": args.repetitions,
        "max_tokens": args.max_tokens, "temperature": temperature, "seed": 1, "ignore_eos": True,
        "prompts": prompts, "request_rate": rate, "timeout": 300.0,
        "spec_metrics": "vllm" if k else "none", "metrics_poll_interval": 1.0})
    runs = []
    for rec in expand_measurements([{"draft_len": k, "runs": result["runs"]}]):
        run = next(r for r in result["runs"] if r["repetition"] == rec["repetition"])
        e2e = run.get("e2e_ms") or {}
        in_flight = (e2e["mean"] * e2e["count"] / 1000.0 / run["duration_s"]
                     if e2e.get("mean") and run.get("duration_s") else None)
        per_req = run["output_tokens"] / run["completed"] if run.get("completed") else None
        es = rec.get("engine_stats") or {}
        runs.append({
            "repetition": rec["repetition"],
            "output_throughput": None if rec["output_throughput"] is None else round(rec["output_throughput"], 1),
            "request_tok_s": (round(per_req * 1000.0 / rec["e2e_ms_p50"], 2) if rate is not None and per_req
                              and rec.get("e2e_ms_p50") and rec["output_throughput"] is not None else None),
            "in_flight_mean": None if in_flight is None or rate is None else round(in_flight, 2),
            "achieved_request_rate": (run.get("load") or {}).get("achieved_request_rate"),
            "acceptance_length": None if rec["acceptance_length"] is None else round(rec["acceptance_length"], 3),
            "draft_tokens_per_draft": (round(es["num_draft_tokens"] / es["num_drafts"], 3)
                                       if es.get("num_drafts") and es.get("num_draft_tokens") is not None else None),
            "failed": rec["failed"], "error": rec["error"], "client_bottleneck": rec["client_bottleneck"]})
    vals = [r[args.objective] for r in runs if r[args.objective] is not None]
    acc = [r["acceptance_length"] for r in runs if r["acceptance_length"] is not None]
    dpd = [r["draft_tokens_per_draft"] for r in runs if r["draft_tokens_per_draft"] is not None]
    return {"config": label, "draft_len": k, "level": level, "concurrency": conc, "request_rate": rate,
            "requests": n, "median": median(vals), "acceptance": median(acc), "draft_tokens_per_draft": median(dpd),
            "flagged": sum(1 for r in runs if r["client_bottleneck"]), "runs": runs}


def dumps(data):
    """JSON with one line per measurement (its runs inline), per table row and per level of a verdict, so the
    file stays readable and small; the per-run figures in RUN_OPTIONAL are left out where they are None."""
    lines: list[str] = []

    def mark(node):
        if isinstance(node, dict):
            if any(k in node for k in ("runs", "fixed_over_best", "within_noise")):  # a measurement, a table row, a verdict's level
                lines.append(json.dumps(node, sort_keys=True, separators=(",", ":"),
                                        default=str))
                return "\x00%d\x00" % (len(lines) - 1)
            return dict((k, mark(v)) for k, v in node.items())
        if isinstance(node, list):
            return [mark(v) for v in node]
        return node

    def prune(node):
        if isinstance(node, dict):
            return dict((k, prune(v)) for k, v in node.items() if v is not None or k not in RUN_OPTIONAL)
        if isinstance(node, list):
            return [prune(v) for v in node]
        return node

    text = json.dumps(mark(prune(data)), indent=1, sort_keys=True)
    for i, line in enumerate(lines):
        text = text.replace('"\\u0000%d\\u0000"' % i, line, 1)
    return text + "\n"


# per-run fields left out of results.json where they are None (open-loop or speculative figures)
RUN_OPTIONAL = ("request_tok_s", "achieved_request_rate", "acceptance_length", "draft_tokens_per_draft", "error",
                "in_flight_mean")


def records(meas, keys, workload, draft_len=None):
    """bench_select measurements (one per run) of measure()'s results, each at its level's key."""
    out = []
    for m in meas:
        for r in m["runs"]:
            rec = dict(r, workload=workload, concurrency=keys[m["level"]],
                       draft_len=m["draft_len"] if draft_len is None else draft_len)
            out.append(rec)
    return out


def level_keys(args, first):
    """The integer each level is selected and scheduled under: its concurrency, or for a request rate the
    requests in flight it made in ``first`` (round 1's first configuration, no speculation by default),
    rounded, kept increasing and within max_num_seqs."""
    if not args.rate_list:
        return dict((c, c) for c in args.level_list)
    keys, prev = {}, 0
    for rate in args.level_list:
        m = next(x for x in first if x["level"] == rate)
        flight = median([r["in_flight_mean"] for r in m["runs"] if r["in_flight_mean"] is not None]) or 1.0
        key = min(max(int(round(flight)), prev + 1, 1), args.max_num_seqs)
        if key <= prev:
            raise SystemExit("request rates %s make fewer distinct in-flight levels than rates; use fewer rates"
                             % args.rates)
        keys[rate], prev = key, key
    return keys


def select(args, recs):
    return select_workloads(recs, rule="worst_case", min_runs=args.min_runs, max_rel_mad=args.max_rel_mad,
                            k=args.mad_k, rel_tol=args.rel_tol, client_limited="count",
                            objective=args.objective)


def table(args, meas, keys, served, plan):
    """Per level: the fastest fixed length and its median, the served configuration and the ratios."""
    rows = []
    trt = (plan.get("schedule") or {}).get("trtllm_draft_len_schedule")
    for level in args.level_list:
        fixed = dict((m["draft_len"], m["median"]) for m in meas if m["level"] == level and m["median"])
        best = max(fixed, key=lambda d: (fixed[d], -d)) if fixed else None
        row: dict[str, Any] = {"level": level, "key": keys[level], "best_fixed": best,
                               "best_fixed_value": round(fixed[best], 2) if best is not None else None,
                               "fixed": dict((d, round(v, 2)) for d, v in sorted(fixed.items())),
                               "fixed_over_best": dict((d, round(v / fixed[best], 3)) for d, v in sorted(fixed.items()))}
        s = next((m for m in served if m["level"] == level), None)
        if s is not None and s["median"]:
            row.update({"schedule_len": schedule_length(trt, keys[level]) if trt else plan["draft_len"],
                        "schedule_value": round(s["median"], 2),
                        "schedule_acceptance": s["acceptance"],
                        "schedule_over_best": round(s["median"] / fixed[best], 3) if best is not None else None,
                        "schedule_over": dict((d, round(s["median"] / v, 3)) for d, v in sorted(fixed.items()))})
        rows.append(row)
    return rows


def print_table(args, title, rows, has_schedule):
    unit = "tok/s" if args.objective == "output_throughput" else "tok/s per request"
    lens = sorted(set(d for r in rows for d in r["fixed"]))
    lvl = "rate (in flight)" if args.rate_list else "concurrency"
    print("\n%s (%s)" % (title, unit))
    if has_schedule:
        print("| %s | best fixed | its %s | schedule length | schedule %s | schedule / best fixed | %s |" % (
            lvl, unit, unit, " | ".join("schedule / %d" % d for d in lens)))
        print("|---:|---:|---:|---:|---:|---:|" + "---:|" * len(lens))
    else:
        print("| %s | best fixed | its %s | %s |" % (lvl, unit, " | ".join("%d / best" % d for d in lens)))
        print("|---:|---:|---:|" + "---:|" * len(lens))
    for r in rows:
        name = ("%g/s (%d)" % (r["level"], r["key"])) if args.rate_list else str(r["level"])
        head = "| %s | %s | %s |" % (name, r["best_fixed"], "-" if r["best_fixed_value"] is None else "%.1f" % r["best_fixed_value"])
        if has_schedule:
            if "schedule_value" not in r:
                print(head + " - | - | - |" + " - |" * len(lens))
                continue
            print(head + " %d | %.1f | %.3f | %s |" % (r["schedule_len"], r["schedule_value"], r["schedule_over_best"], " | ".join(
                "%.3f" % r["schedule_over"][d] if d in r["schedule_over"] else "-" for d in lens)))
        else:
            print(head + " %s |" % " | ".join("%.3f" % r["fixed_over_best"][d] if d in r["fixed_over_best"] else "-"
                                              for d in lens))


def winners(sel):
    return [(e["concurrency"], e["draft_len"]) for e in sel["by_concurrency"]]


def verdict_brief(v):
    return {"keep": v["keep"], "served_draft_len": v["served_draft_len"], "reason": v["reason"],
            "range": v["range"], "levels": [dict((k, lv[k]) for k in (
                "concurrency", "best_fixed_draft_len", "best_fixed_rating", "served_draft_len", "served_rating",
                "tolerance", "within_noise")) for lv in v["levels"]]}


def conclusion(args, sels, plan, fastest, verdicts, rows2):
    """The run's finding in words, from the sweep's picks (round 1) and the fastest per level in each round."""
    picks = winners(sels["round1"])
    lens = set(d for _c, d in picks)

    def at(level, pick):  # a selection's level is its key (requests in flight for a rate); a table's, the rate
        if not args.rate_list:
            return "concurrency %s" % level
        return ("%s in flight" % level) if pick else ("%g requests/s" % level)

    per = "; ".join("round %d: %s" % (i + 1, ", ".join("%s at %s" % (d, at(c, False)) for c, d in f))
                    for i, f in enumerate(fastest))
    per += "".join("; the rule over %s: %s" % (name.replace("round2", "round 2 alone"), ", ".join(
        "%s at %s" % (d, at(c, True)) for c, d in winners(sel))) for name, sel in sels.items() if name != "round1")
    if len(lens) == 1 and None not in lens:
        worst: dict[int, float] = {}
        for r in rows2:
            for d, v in r["fixed_over_best"].items():
                worst[d] = min(worst.get(d, 9.0), v)
        return ("no load range on this hardware and model where the best fixed length differs: the sweep's rule "
                "picked draft length %s at every level (round 1); fastest per level, %s. Lowest ratio of each fixed "
                "length to the level's best over the levels (last round): %s" % (
                    picks[0][1], per, ", ".join("%d: %.3f" % kv for kv in sorted(worst.items()))))
    text = "the sweep's rule picked %s (round 1); fastest per level, %s. " % (
        ", ".join("%s at %s" % (d, at(c, True)) for c, d in picks), per)
    if plan["mode"] != "schedule":
        return text + "No schedule serves that: %s" % plan["reason"]
    served = spec_config(None, plan["schedule"]["trtllm_draft_len_schedule"], args.max_num_seqs)
    return text + "Served num_speculative_tokens_per_batch_size %s; verdict, %s" % (
        json.dumps(served["num_speculative_tokens_per_batch_size"]),
        "; ".join("%s: %s" % (name.replace("round", "round "), v["reason"]) for name, v in verdicts.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="code")
    parser.add_argument("--lens", default="0,1,2,4", help="n-gram draft lengths, 0 = no speculation")
    parser.add_argument("--levels", default="1,2,4,8,16", help="concurrency levels (closed loop)")
    parser.add_argument("--rates", default="", help="request rates per second (open loop) instead of --levels")
    parser.add_argument("--rate-requests", type=int, default=24, help="requests per repetition at each rate")
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests-per-worker", type=int, default=4)
    parser.add_argument("--min-requests", type=int, default=8, help="requests per repetition at least, at any level")
    parser.add_argument("--warmup-requests", type=int, default=2, help="warm-up requests at each level")
    parser.add_argument("--rounds", type=int, choices=(1, 2), default=2)
    # draft_sweep's parameters: the role's defaults, with flagged runs counted and the spread allowed as in
    # the molecule scenario on the real engine (molecule/real_engine: this machine's two cores are shared)
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument("--max-rel-mad", type=float, default=1.0)
    parser.add_argument("--mad-k", type=float, default=1.0)
    parser.add_argument("--rel-tol", type=float, default=0.01)
    parser.add_argument("--out", default=str(HERE / "results.json"))
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    args.rate_list = [float(r) for r in args.rates.split(",") if r]
    args.level_list = args.rate_list or [int(c) for c in args.levels.split(",") if c]
    args.len_list = sorted(set(int(k) for k in args.lens.split(",") if k))
    args.objective = "request_tok_s" if args.rate_list else "output_throughput"
    if args.level_list != sorted(set(args.level_list)):
        raise SystemExit("--levels/--rates must be increasing")
    if not args.rate_list and max(args.level_list) > args.max_num_seqs:
        raise SystemExit("a concurrency level above --max-num-seqs %d measures the engine's queue" % args.max_num_seqs)
    if args.repetitions < args.min_runs:
        raise SystemExit("--repetitions %d is below --min-runs %d: no group could win" % (args.repetitions, args.min_runs))
    settings = dict((k, v) for k, v in vars(args).items() if k not in ("rate_list", "level_list", "len_list", "dry_run", "out"))
    cfgs = [level_cfg(args, lv) for lv in args.level_list]
    per_cfg = sum(n * args.repetitions + w for _c, n, w, _r in cfgs)
    starts = len(args.len_list) * args.rounds + (1 if len(args.level_list) > 1 else 0)
    say("%s workload, lengths %s, %s %s, %d requests of %d tokens per configuration per round, at most %d engine starts"
        % (args.workload, args.len_list, "request rates" if args.rate_list else "concurrency", args.level_list,
           per_cfg, args.max_tokens, starts))
    if args.dry_run:
        for (c, n, w, r), lv in zip(cfgs, args.level_list):
            say("level %s: concurrency %d, %d requests x %d repetitions, %d warm-up%s" % (
                lv, c, n, args.repetitions, w, "" if r is None else ", %g requests/s" % r))
        return
    began = time.monotonic()
    load_before = os.getloadavg()
    engine.sh([sys.executable, str(REPO / "lab" / "lab.py"), "real-engine"])
    rounds: list[list[dict[str, Any]]] = [[], []]
    served: list[list[dict[str, Any]]] = [[], []]
    startup: dict[str, list[float]] = {}
    running = None  # the configuration the container serves now
    plan: dict[str, Any] = {"mode": "single", "draft_len": None, "schedule": None, "reason": "not decided"}
    keys: dict[Any, int] = {}
    sel1: dict[str, Any] = {}
    sched_error = None

    def serve(label, sc):
        nonlocal running
        if running == label:
            say("%s: the engine already serves it (no restart)" % label)
            return
        seconds = start(sc, args.max_num_seqs)
        startup.setdefault(label, []).append(seconds)
        running = label
        say("%s: started in %.1f s (%s)" % (label, seconds, json.dumps(sc)))

    def run_config(rnd, label, k, dest):
        for level in args.level_list:
            m = measure(args, label, k, level)
            dest.append(m)
            say("round %d %-9s %s %-5s %8.1f %s  acceptance %s  draft tokens per draft %s  flagged %d/%d" % (
                rnd + 1, label, "rate" if args.rate_list else "c", level, m["median"] or 0.0,
                "tok/s" if not args.rate_list else "tok/s/req", "-" if m["acceptance"] is None else "%.2f" % m["acceptance"],
                "-" if m["draft_tokens_per_draft"] is None else "%.2f" % m["draft_tokens_per_draft"], m["flagged"], len(m["runs"])))

    def fixed(rnd, order):
        for k in order:
            label = "ngram-%d" % k if k else "none"
            serve(label, spec_config(k, None, args.max_num_seqs))
            run_config(rnd, label, k, rounds[rnd])

    def served_config(rnd):
        nonlocal sched_error
        if plan["mode"] != "schedule" or sched_error:
            return
        trt = plan["schedule"]["trtllm_draft_len_schedule"]
        try:
            serve(SCHED, spec_config(None, trt, args.max_num_seqs))
        except RuntimeError as exc:
            sched_error = str(exc)
            say("the schedule could not be served: %s" % sched_error)
            return
        run_config(rnd, SCHED, schedule_length(trt, 1), served[rnd])

    try:
        fixed(0, args.len_list)
        keys = level_keys(args, rounds[0][:len(args.level_list)])
        sel1 = select(args, records(rounds[0], keys, args.workload))
        plan = schedule_plan(sel1)
        say("round 1: the sweep's rule picks %s; %s" % (winners(sel1), plan["reason"]))
        served_config(0)
        if args.rounds == 2:
            served_config(1)
            order = list(reversed(args.len_list))
            fixed(1, order)
    finally:
        remove()

    def srv(rnd):
        return records(served[rnd], keys, args.workload, draft_len=0)

    verdicts: dict[str, Any] = {}
    sels = {"round1": sel1}
    verdicts["round1"] = schedule_verdict(sel1, srv(0), plan)
    if args.rounds == 2:
        sels["round2"] = select(args, records(rounds[1], keys, args.workload))
        verdicts["round2"] = schedule_verdict(sels["round2"], srv(1), plan)
        sels["pooled"] = select(args, records(rounds[0] + rounds[1], keys, args.workload))
        verdicts["pooled"] = schedule_verdict(sels["pooled"], srv(0) + srv(1), plan)
    has_schedule = plan["mode"] == "schedule" and not sched_error
    tables = []
    for rnd in range(args.rounds):
        rows = table(args, rounds[rnd], keys, served[rnd] if has_schedule else [], plan)
        tables.append(rows)
        print_table(args, "Round %d: %s" % (rnd + 1, args.workload), rows, has_schedule)
    fastest = [[(r["level"], r["best_fixed"]) for r in rows] for rows in tables]
    print("\nthe sweep's rule, round 1 (per level: %s): %s" % ("request rate -> in flight" if args.rate_list else "concurrency",
                                                              winners(sel1)))
    if args.rate_list:
        print("levels: %s" % ", ".join("%g/s -> %d in flight" % kv for kv in keys.items()))
    plans = dict((name, schedule_plan(sel)) for name, sel in sels.items())
    for name, sel in sels.items():
        print("%s: winners %s, vLLM schedule %s; it alone would serve %s" % (
            name, winners(sel), sel["schedule"]["vllm_num_speculative_tokens_per_batch_size"],
            "the schedule" if plans[name]["mode"] == "schedule" else "draft length %s" % plans[name]["draft_len"]))
    print("plan (round 1, what the sweep serves): %s (%s)" % (plan["mode"], plan["reason"]))
    if plan["mode"] == "schedule":
        print("served: num_speculative_tokens_per_batch_size %s" % json.dumps(
            spec_config(None, plan["schedule"]["trtllm_draft_len_schedule"], args.max_num_seqs)["num_speculative_tokens_per_batch_size"]))
    if sched_error:
        print("the engine refused the schedule: %s" % sched_error.splitlines()[0])
    for name, v in verdicts.items():
        if plan["mode"] == "schedule":
            print("verdict (%s): %s" % (name, v["reason"]))
        print("  %s over the levels (geometric mean of the ratings): schedule %s; fixed %s; best single length %s" % (
            name,
            v["range"]["served"], ", ".join("%d: %s" % (f["draft_len"], f["rating"]) for f in v["range"]["fixed"]),
            v["range"]["best_single_draft_len"]))
    text = conclusion(args, sels, plan, fastest, verdicts, tables[-1])
    wall = round(time.monotonic() - began)
    print("\nconclusion: %s" % text)
    print("wall time %d s (%.1f min); load average before %.2f, after %.2f" % (wall, wall / 60.0, load_before[0],
                                                                               os.getloadavg()[0]))
    out = {"command": " ".join(["bash bench/schedule/run.sh"] + sys.argv[1:]),
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "image": engine.image_name(),
           "settings": settings, "level_keys": dict((str(k), v) for k, v in keys.items()),
           "startup_s": startup, "plan": plan, "plans": plans, "schedule_error": sched_error,
           "served_vllm_schedule": (spec_config(None, plan["schedule"]["trtllm_draft_len_schedule"], args.max_num_seqs)
                                    if plan["mode"] == "schedule" else None),
           # the groups' medians and spreads follow from "rounds" (bench_select); the notes on flagged runs from "flagged"
           "selection": dict((name, {"winners": winners(s), "schedule": s["schedule"],
                                     "notes": [n for n in s["notes"] if "client_bottleneck" not in n]})
                             for name, s in sels.items()),
           "verdicts": dict((name, verdict_brief(v)) for name, v in verdicts.items()),
           "tables": tables, "conclusion": text, "wall_s": wall,
           "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
           "rounds": [rounds[r] + served[r] for r in range(args.rounds)]}
    # one entry per workload (and load kind): a run replaces its own and keeps the others
    name = args.workload + ("-rates" if args.rate_list else "")
    try:
        kept = json.loads(Path(args.out).read_text())
    except (OSError, ValueError):
        kept = {}
    kept = dict((k, v) for k, v in kept.items() if isinstance(v, dict) and "command" in v) if isinstance(kept, dict) else {}
    kept[name] = out
    Path(args.out).write_text(dumps(kept))
    say("raw figures in %s" % os.path.relpath(args.out, REPO))


if __name__ == "__main__":
    main()
