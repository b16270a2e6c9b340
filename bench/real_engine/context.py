#!/usr/bin/env python3
"""The real engine (vLLM's CPU build) by input length: where n-gram speculation stops paying, in one run.

    python3 bench/real_engine/context.py [--ngram 2,4] [--lengths 32,256,768] [--repetitions 3]

Starts the engine on this machine as `inference_server` does (bench/real_engine/run.py's `start`), once without
speculation and once per n-gram draft length, and measures each at every input length with serve_bench's own runner:
synthetic prompts of that many tokens (`input_len`, fixed), greedy, concurrency 1, `--max-tokens` tokens a request,
each request tagged so that no repetition is served from the engine's prefix cache (`--prefix-cache`: untagged, as
the figures before 2026-12-06 were measured).
The figures go through the sweep's own code: each length is a workload (`prose-inLENGTH`), the selection is
`bench_select.select_workloads`, and the per-length view (baseline, best candidate, speed-up, the engine's acceptance
length, the length beyond which speculation stopped paying) is the draft_sweep report's
(`plugins/plugin_utils/_sweep_context.py`). Prints a Markdown table; raw figures go to
bench/real_engine/context.json. The prompt tokens the engine counted (`usage.prompt_tokens`) are printed beside the
target, since the synthetic prompts are counted in words.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as engine  # noqa: E402  (start, PORT, CONTAINER, the collection on sys.path)
from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import run_benchmark  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select_workloads  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_context import by_input_length  # noqa: E402


def measure(k, length, args):
    result = run_benchmark({
        "url": "http://127.0.0.1:%d" % engine.PORT, "path": "/v1/chat/completions", "model": "tiny-llama",
        "concurrency": 1, "num_requests": args.requests, "warmup_requests": 1, "repetitions": args.repetitions,
        "max_tokens": args.max_tokens, "temperature": 0.0, "ignore_eos": True, "prompts": [],
        "input_len": {"distribution": "fixed", "mean": length}, "seed": 0,
        "timeout": 300.0, "spec_metrics": "vllm" if k else "none", "metrics_poll_interval": 1.0,
        "prefix_cache": args.prefix_cache})
    # the prompt tokens the engine counted per request (usage.prompt_tokens, the chat template included)
    counted = [round(run["prompt_tokens"] / run["completed"], 1) for run in result["runs"] if run.get("completed")]
    return {"workload": "prose-in%d" % length, "draft_len": k, "concurrency": 1, "runs": result["runs"],
            "prompt_tokens": counted}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ngram", default="2,4")
    parser.add_argument("--lengths", default="32,256,768")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prefix-cache", action="store_true",
                        help="send each repetition's prompts untagged, so the engine's prefix cache may serve them "
                             "(by default every request starts with a tag of its own: no replays)")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",") if n]
    drafts = [0] + [int(k) for k in args.ngram.split(",") if k and int(k)]
    measurements, started = [], time.monotonic()
    try:
        for k in drafts:
            seconds = engine.start("ngram", k)
            for length in lengths:
                measurements.append(measure(k, length, args))
                runs = measurements[-1]["runs"]
                tps = sorted(r.get("output_throughput") or 0 for r in runs)[len(runs) // 2]
                print("draft length %d, %5d input tokens: start %5.1f s, %6.1f tok/s" % (k, length, seconds, tps),
                      flush=True)
    finally:
        subprocess.run(["docker", "rm", "-f", engine.CONTAINER], capture_output=True)
    selection = select_workloads([dict((key, m[key]) for key in ("workload", "draft_len", "concurrency", "runs"))
                                  for m in measurements], client_limited="count", max_rel_mad=1.0)
    axis = dict(("prose-in%d" % n, {"workload": "prose", "input_len": n}) for n in lengths)
    view = by_input_length(selection, axis)["workloads"]["prose"]["concurrency"][1]
    counted = dict((m["workload"], m["prompt_tokens"]) for m in measurements if not m["draft_len"])
    print("prompt tokens the engine counted per request: %s" % json.dumps(counted, sort_keys=True))
    print("\n| input tokens (target) | baseline tok/s | best draft length | tok/s | speed-up | acceptance length "
          "(engine) | paid |\n|---:|---:|---:|---:|---:|---:|---|")
    for r in view["lengths"]:
        print("| %d | %s | %s | %s | %s | %s | %s |" % (
            r["input_len"], r["baseline_median"], "-" if r["draft_len"] is None else r["draft_len"],
            "-" if r["median"] is None else r["median"], "-" if r["speedup"] is None else r["speedup"],
            "-" if r["acceptance_length"] is None else r["acceptance_length"], "yes" if r["paid"] else "no"))
    every = dict(((g["workload"], g["draft_len"]), g) for g in selection["groups"])
    print("\nevery candidate: " + "; ".join(
        "%s k=%d: %s tok/s, speed-up %s, acceptance %s (%s)" % (w, k, g["median"], g["speedup"], g["acceptance_length"],
                                                               g["status"]) for (w, k), g in sorted(every.items())))
    verdict = ("speculation stopped paying beyond %d input tokens" % view["stopped_paying_beyond"]
               if view["stopped_paying_beyond"] is not None else "speculation paid at no input length"
               if view["never_paid"] else "speculation paid at every input length measured")
    print("%s; %.0f s in all" % (verdict, time.monotonic() - started))
    (HERE / "context.json").write_text(json.dumps({
        "settings": vars(args), "image": engine.image_name(), "view": view, "groups": selection["groups"],
        "prompt_tokens_per_request": dict((m["workload"] + "/k=%d" % m["draft_len"], m["prompt_tokens"])
                                          for m in measurements),
    }, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
