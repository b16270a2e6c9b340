# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Closed-loop streaming benchmark: warm-up, repetitions, metrics (stdlib only).

``concurrency`` worker threads each keep one HTTP/1.1 connection and send the
next request as soon as their previous one ends, until ``num_requests`` have
been sent; request ``i`` of a repetition uses ``prompts[i % len(prompts)]`` so
every repetition sends the same sequence, each request tagged with its repetition and index so that
none is served from the engine's prefix cache (unless ``prefix_cache`` allows it).

Metric definitions (the ones ``vllm bench serve`` uses):

- TTFT: request sent -> first chunk with generated text.
- TPOT: (last text chunk - first text chunk) / (output_tokens - 1), with
  ``output_tokens`` from the server's usage counts, because one chunk can carry
  several accepted tokens under speculative decoding.
- ITL: gap between consecutive text chunks (per chunk, not per token).
- E2E: request sent -> end of stream.
- output throughput: sum of output tokens / (last end - first start) of the phase.

The client-side acceptance-length estimate reads the stream the way the engine counts steps: an
engine streams one chunk per request and decoding step (TensorRT-LLM with ``stream_interval: 1``,
the default; vLLM), the first chunk carries the one token of the context step, and every later
chunk carries the tokens that step accepted plus one. So over a run's successful requests
``sum(output_tokens - 1) / sum(text_chunks - 1)`` is the mean number of tokens per decoding step,
the engine's acceptance length ``(accepted + drafts) / drafts``. A step that ``max_tokens`` or the
end of the text cuts short counts whole, so the estimate is a little low for short outputs; requests
without usage counts are left out (their token count is the chunk count).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
import time
from typing import Any

from ansible_collections.specdec.serve.plugins.module_utils.bench_sse import (
    Endpoint, build_chat_body, stream_chat)
from ansible_collections.specdec.serve.plugins.module_utils.bench_spec import (
    SpecScraper, http_get)
from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import (
    mad, median, summarize)
from ansible_collections.specdec.serve.plugins.module_utils.bench_client import ClientMonitor
from ansible_collections.specdec.serve.plugins.module_utils import bench_workload

# The prompt sets live with the other workload definitions (bench_workload); named here for the modules.
PROMPT_SETS = bench_workload.PROMPT_SETS

# The endpoint options of the modules that send requests (serve_bench, output_probe), documented once
# in the doc fragment specdec.serve.probes.endpoint; each module adds its own path.
ENDPOINT_ARGS = dict(
    url=dict(type="str", default="http://127.0.0.1:8000"),
    model=dict(type="str"),
    api_key=dict(type="str", no_log=True),
)
VACATION_PROMPT = bench_workload.VACATION_PROMPT

PERCENTILES = (50, 90, 99)


def discover_model(endpoint):
    """First model id from GET /v1/models."""
    status, body = http_get(endpoint.base_url + "/v1/models", _auth_only(endpoint.headers),
                            endpoint.timeout)
    if status != 200:
        raise IOError("GET /v1/models returned HTTP %s" % status)
    data = json.loads(body.decode("utf-8")).get("data") or []
    if not data:
        raise IOError("GET /v1/models listed no model")
    return data[0]["id"]


def _auth_only(headers):
    return dict((k, v) for k, v in headers.items() if k == "Authorization")


def run_phase(endpoint, bodies, num_requests, concurrency, clock=time.perf_counter, monitor=None):
    """Send ``num_requests`` requests with ``concurrency`` workers. Returns records.

    ``monitor`` (a bench_client.ClientMonitor) is told when each worker starts and ends.
    """
    records = [None] * num_requests
    lock = threading.Lock()
    counter = {"next": 0}

    def worker():
        token = monitor.thread_start() if monitor else None
        conn = None
        while True:
            with lock:
                i = counter["next"]
                if i >= num_requests:
                    break
                counter["next"] = i + 1
            rec, conn = stream_chat(endpoint, bodies[i % len(bodies)], conn=conn, clock=clock)
            rec["index"] = i
            records[i] = rec
        if conn is not None:
            conn.close()
        if monitor:
            monitor.thread_end(token)

    threads = [threading.Thread(target=worker, name="bench-%d" % n)
               for n in range(min(concurrency, num_requests))]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join()
    return records


def error_summary(records, max_samples=5):
    """Count failed requests and keep up to ``max_samples`` distinct messages with counts."""
    counts: dict[str, int] = {}
    for r in records:
        if not r["ok"]:
            counts[r["error"]] = counts.get(r["error"], 0) + 1
    samples = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_samples]
    return {"count": sum(counts.values()),
            "samples": [{"message": m, "count": c} for m, c in samples]}


def request_metrics(rec):
    """Per-request derived metrics (seconds) for a successful record."""
    out = {"ttft": rec["ttft"], "e2e": rec["e2e"], "tpot": None, "itl": [],
           "tokens_per_chunk": None, "output_speed": None}
    n = rec["output_tokens"]
    if n > 1 and rec["decode_time"] is not None and rec["decode_time"] > 0:
        out["tpot"] = rec["decode_time"] / (n - 1)
        out["output_speed"] = (n - 1) / rec["decode_time"]
    times = rec["chunk_times"]
    out["itl"] = [b - a for a, b in zip(times, times[1:])]
    if rec["text_chunks"]:
        out["tokens_per_chunk"] = n / float(rec["text_chunks"])
    return out


def acceptance_estimate(records):
    """(tokens per decoding step, decoding steps counted) of the successful records that carry a
    usage count and at least two text chunks; (None, 0) when there are none."""
    tokens = steps = 0
    for r in records:
        if r["ok"] and r["usage_reported"] and r["text_chunks"] >= 2 and r["output_tokens"] >= 2:
            tokens += r["output_tokens"] - 1
            steps += r["text_chunks"] - 1
    if not steps:
        return None, 0
    return round(tokens / float(steps), 4), steps


def aggregate(records, percentiles=PERCENTILES):
    """Aggregate metrics of one phase (one repetition at one concurrency)."""
    ok = [r for r in records if r["ok"]]
    starts = [r["start"] for r in records if r["start"] is not None]
    ends = [r["end"] for r in records if r["end"] is not None]
    duration = (max(ends) - min(starts)) if starts and ends else 0.0
    per = [request_metrics(r) for r in ok]
    out_tokens = sum(r["output_tokens"] for r in ok)
    prompt_tokens = sum(r["prompt_tokens"] or 0 for r in ok)
    itl = [g for p in per for g in p["itl"]]
    estimate, steps = acceptance_estimate(ok)
    res = {
        "requests": len(records),
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "duration_s": round(duration, 6),
        "output_tokens": out_tokens,
        "prompt_tokens": prompt_tokens,
        "usage_missing": sum(1 for r in ok if not r["usage_reported"]),
        "output_throughput": round(out_tokens / duration, 4) if duration > 0 else None,
        "total_token_throughput": (round((out_tokens + prompt_tokens) / duration, 4)
                                   if duration > 0 else None),
        "request_throughput": round(len(ok) / duration, 6) if duration > 0 else None,
        "ttft_ms": summarize([p["ttft"] for p in per], percentiles, 1000.0),
        "tpot_ms": summarize([p["tpot"] for p in per], percentiles, 1000.0),
        "itl_ms": summarize(itl, percentiles, 1000.0),
        "e2e_ms": summarize([p["e2e"] for p in per], percentiles, 1000.0),
        "tokens_per_chunk": summarize([p["tokens_per_chunk"] for p in per], percentiles),
        "output_speed_per_request": summarize([p["output_speed"] for p in per], percentiles),
        "acceptance_length_estimate": estimate,
        "decoding_steps_counted": steps,
        "errors": error_summary(records),
    }
    return res


def compact_record(rec):
    m = request_metrics(rec) if rec["ok"] else {}

    def ms(v):
        return None if v is None else round(v * 1000.0, 4)

    return {"index": rec.get("index"), "ok": rec["ok"], "error": rec["error"],
            "output_tokens": rec["output_tokens"], "prompt_tokens": rec["prompt_tokens"],
            "usage_reported": rec["usage_reported"],
            "chunks": rec["text_chunks"], "ttft_ms": ms(m.get("ttft")),
            "tpot_ms": ms(m.get("tpot")), "e2e_ms": ms(rec["e2e"]),
            "finish_reason": rec["finish_reason"]}


def run_benchmark(cfg, clock=time.perf_counter):
    """Run warm-up and ``repetitions`` measured phases; return a JSON-serialisable dict.

    ``cfg`` keys: url, model (None: discover), api_key, path, concurrency,
    num_requests, warmup_requests, repetitions, max_tokens, temperature,
    ignore_eos, extra_body, prompts, timeout, spec_metrics, metrics_url,
    metrics_poll_interval, percentiles, include_requests, stream_interval (chunks per that many
    engine steps; above 1 the client-side acceptance estimate is not made), prefix_cache (true: send the
    bodies as they are, so a repeated prompt may be served from the engine's prefix cache; otherwise every
    request starts with a tag of its own, bench_workload.unique_bodies).

    Workload keys (bench_workload; each absent or None keeps the closed loop over ``prompts``):
    request_rate and arrival (open loop, ``concurrency`` the most requests in flight; the dispatcher
    sleeps, so ``clock`` must be a real clock), seed, input_len, output_len, records, top_p,
    goodput_ttft_ms, goodput_tpot_ms.
    """
    t_begin = clock()
    endpoint = Endpoint(cfg["url"], cfg.get("path") or "/v1/chat/completions",
                        cfg.get("timeout", 300.0), cfg.get("api_key"))
    model = cfg.get("model") or discover_model(endpoint)
    prompts = cfg["prompts"]
    concurrency = int(cfg["concurrency"])
    percentiles = tuple(cfg.get("percentiles") or PERCENTILES)
    workload = None
    if any(cfg.get(k) is not None for k in ("input_len", "output_len", "records", "top_p")) or \
            bench_workload.is_completions_path(cfg.get("path")):
        bodies, warm_bodies, workload = bench_workload.build_workload(
            cfg, model, int(cfg["num_requests"]), int(cfg.get("warmup_requests", 0)))
    else:
        bodies = [build_chat_body(model, p, cfg["max_tokens"], cfg["temperature"],
                                  cfg.get("ignore_eos", False), cfg.get("extra_body"))
                  for p in prompts]
        warm_bodies = bodies
    rate = cfg.get("request_rate")
    offsets = None
    if rate is not None:
        offsets = bench_workload.arrival_offsets(int(cfg["num_requests"]), rate,
                                                 cfg.get("arrival") or "poisson", int(cfg.get("seed") or 0))
    targets = (cfg.get("goodput_ttft_ms"), cfg.get("goodput_tpot_ms"))
    monitor = ClientMonitor()
    # every request of every run starts with its own tag (built before the run, outside its timing), so none
    # is served from the engine's prefix cache, unless the workload allows it
    fresh = not cfg.get("prefix_cache")
    digest = bench_workload.bodies_digest(bodies)

    def sent(phase_bodies, n, phase):
        if not fresh:
            return phase_bodies
        return bench_workload.unique_bodies(phase_bodies, n, "%s-c%d-%s" % (digest, concurrency, phase))

    warm: dict[str, Any] = {"requests": int(cfg.get("warmup_requests", 0)), "completed": 0, "failed": 0,
                            "duration_s": 0.0, "errors": {"count": 0, "samples": []}}
    t0 = clock()
    if warm["requests"] > 0:
        recs = run_phase(endpoint, sent(warm_bodies, warm["requests"], "w"), warm["requests"], concurrency, clock)
        warm["completed"] = sum(1 for r in recs if r["ok"])
        warm["failed"] = warm["requests"] - warm["completed"]
        warm["errors"] = error_summary(recs)
    warmup_s = clock() - t0
    warm["duration_s"] = round(warmup_s, 6)

    metrics_url = cfg.get("metrics_url") or endpoint.base_url + "/metrics"
    runs = []
    all_records = []
    t_measure = clock()
    for rep in range(int(cfg.get("repetitions", 1))):
        run_bodies = sent(bodies, int(cfg["num_requests"]), "r%d" % rep)
        scraper = SpecScraper(cfg.get("spec_metrics", "auto"), metrics_url,
                              _auth_only(endpoint.headers),
                              cfg.get("metrics_poll_interval", 1.0))
        scraper.start()
        monitor.begin()
        lags = load = None
        if offsets is None:
            recs = run_phase(endpoint, run_bodies, int(cfg["num_requests"]), concurrency, clock, monitor)
        else:
            recs, sched = bench_workload.run_open_phase(endpoint, run_bodies, offsets, concurrency, clock,
                                                        monitor)
            lags, load = bench_workload.schedule_summary(
                sched, float(rate), cfg.get("arrival") or "poisson", concurrency,
                int(cfg.get("seed") or 0), percentiles)
        client = monitor.end(recs, lags)
        spec = scraper.stop()
        run: dict[str, Any] = {"repetition": rep, "concurrency": concurrency}
        run.update(aggregate(recs, percentiles))
        if load is not None:
            run["load"] = load
        good = bench_workload.goodput(recs, run["duration_s"], *targets)
        if good is not None:
            run["goodput"] = good
        run["client"] = client
        if int(cfg.get("stream_interval") or 1) > 1:
            run["acceptance_length_estimate"] = None
        run["spec_decode"] = spec
        if cfg.get("include_requests"):
            run["request_records"] = [compact_record(r) for r in recs]
        runs.append(run)
        all_records.extend(recs)
    measure_s = clock() - t_measure

    thr = [r["output_throughput"] for r in runs if r["output_throughput"] is not None]
    acc = [r["spec_decode"].get("acceptance_length") for r in runs
           if r["spec_decode"].get("acceptance_length") is not None]
    est = [r["acceptance_length_estimate"] for r in runs if r["acceptance_length_estimate"] is not None]
    pooled = aggregate(all_records, percentiles) if all_records else {}
    summary = {
        "output_throughput": {
            "values": thr,
            "median": median(thr),
            "mad": mad(thr),
            "min": min(thr) if thr else None,
            "max": max(thr) if thr else None,
        },
        "acceptance_length": {"values": acc, "median": median(acc)},
        "acceptance_length_estimate": {"values": est, "median": median(est)},
        "ttft_ms": pooled.get("ttft_ms"),
        "tpot_ms": pooled.get("tpot_ms"),
        "itl_ms": pooled.get("itl_ms"),
        "e2e_ms": pooled.get("e2e_ms"),
        "tokens_per_chunk": pooled.get("tokens_per_chunk"),
        "requests": pooled.get("requests", 0),
        "completed": pooled.get("completed", 0),
        "failed": pooled.get("failed", 0),
    }
    goods = [r["goodput"] for r in runs if "goodput" in r]
    if goods:
        met, total = sum(g["met"] for g in goods), sum(g["requests"] for g in goods)
        rates = [g["request_rate"] for g in goods if g["request_rate"] is not None]
        summary["goodput"] = {"ttft_ms": targets[0], "tpot_ms": targets[1], "met": met, "requests": total,
                              "share": round(met / float(total), 6) if total else None,
                              "request_rate": {"values": rates, "median": median(rates)}}
    flagged = [r for r in runs if r["client"]["bottleneck"]]
    flags = ["client_bottleneck: repetition %d: %s" % (r["repetition"], "; ".join(r["client"]["reasons"]))
             for r in flagged]
    extra = {"client_bottleneck": bool(flagged), "flags": flags, "prefix_cache": not fresh}
    if workload is not None:
        extra["workload"] = workload
    if offsets is not None:
        extra["load"] = {"mode": "open", "arrival": cfg.get("arrival") or "poisson",
                         "request_rate": float(rate), "max_in_flight": concurrency,
                         "seed": int(cfg.get("seed") or 0)}
    result = {
        "model": model,
        "url": endpoint.base_url,
        "concurrency": concurrency,
        "spec_engine": runs[0]["spec_decode"].get("engine") if runs else None,
        "warmup": warm,
        "runs": runs,
        "summary": summary,
        "errors": error_summary(all_records),
        "timing": {"warmup_s": round(warmup_s, 6), "measure_s": round(measure_s, 6),
                   "total_s": round(clock() - t_begin, 6)},
    }
    result.update(extra)
    return result
