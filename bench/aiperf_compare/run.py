#!/usr/bin/env python3
"""serve_bench against NVIDIA's aiperf on the same real engine, load and lengths, in one run.

    bench/aiperf_compare/run.sh [--rate 2] [--arrival constant] [--requests 40] [--input-tokens 96]
                                [--output-tokens 64] [--rounds 2]

run.sh installs aiperf (pinned, from PyPI) into bench/aiperf_compare/.venv and runs this script with
the collection's own virtualenv. The script

- starts the real engine (vLLM's CPU build, lab/vllm-cpu, no speculation) with bench/real_engine's
  `start`, under its own container name and port;
- runs serve_bench the way a playbook does (`ansible localhost -m specdec.serve.serve_bench`, the
  repository's ansible.cfg and collection path, JSON callback) and aiperf (`aiperf profile`) against it,
  alternating A B A B ... for `--rounds` rounds so that drift hits both tools alike;
- uses one workload for both: the completions API (no chat template), open loop at `--rate` requests/s
  (`--arrival constant` by default, so both tools send on the same schedule; `poisson` draws each
  tool's own schedule from its own generator), at most `--cap` in flight, `--requests` measured
  requests after `--warmup` unmeasured ones, fixed input and output lengths, `ignore_eos` and greedy,
  so every request generates exactly `--output-tokens` tokens;
- aiperf makes its prompts with the model's tokenizer (lab/.cache/models/tiny-llama, offline) at
  exactly `--input-tokens` tokens; serve_bench makes them of words without a tokenizer, so the number
  of words is calibrated once against the engine's own /tokenize on serve_bench's prompts;
- token counts: serve_bench takes them from the server's usage; aiperf tokenizes the output text
  itself unless told `--use-server-token-count`, which is the default here (`--aiperf-tokens client`
  for aiperf's own default).

Prints serve_bench/aiperf ratios of request throughput, output tokens/s, TTFT p50/p99, TPOT p50/p99
(aiperf's "inter_token_latency" is vLLM's TPOT) and E2E p50, per round and pooled over rounds
(median of the rounds), and writes everything to bench/aiperf_compare/results.json. aiperf divides
its throughputs by its profiling phase's window; the ratios use its `benchmark_duration` (first send
to last response), serve_bench's definition, and keep aiperf's own figures as `*_reported`. Each
round also records both tools' achieved send rate and their own evidence of a starved client
(serve_bench's `client`, aiperf's event-loop stall warnings). The definitions side by side, and
the figures: bench/aiperf_compare/HISTORY.md.
"""

import argparse
import importlib.util
import json
import os
import platform
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AIPERF = HERE / ".venv" / "bin" / "aiperf"
ANSIBLE = REPO / ".venv" / "bin" / "ansible"
TOKENIZER = REPO / "lab" / ".cache" / "models" / "tiny-llama"
MODEL = "tiny-llama"

# bench/real_engine/run.py starts the engine exactly as inference_server does: reuse it, under a name
# and port of our own so the two benches never remove each other's container.
_spec = importlib.util.spec_from_file_location("real_engine_run", REPO / "bench" / "real_engine" / "run.py")
real_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_engine)
real_engine.CONTAINER = "specdec-bench-aiperf-compare"
real_engine.PORT = 18573
URL = "http://127.0.0.1:%d" % real_engine.PORT

from ansible_collections.specdec.serve.plugins.module_utils import bench_workload  # noqa: E402

METRICS = ("request_throughput", "output_throughput", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99",
           "e2e_p50")


def post(path, body):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def words_for(tokens, seed):
    """Words serve_bench needs for about ``tokens`` prompt tokens: its prompts, counted by the engine."""
    rng = random.Random(seed)
    words = counted = 0
    for dummy in range(8):
        prompt = bench_workload.synthetic_prompt(tokens, rng)
        counted += post("/tokenize", {"model": MODEL, "prompt": prompt})["count"]
        words += tokens
    return max(1, int(round(tokens * words / float(counted)))), counted / float(words)


def cpu_load():
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


def shown(argv, artifacts=None):
    """The command line as recorded: paths relative to the repository, aiperf's scratch dir named."""
    text = shlex.join(argv).replace(str(REPO) + "/", "")
    return text.replace(str(artifacts), "ARTIFACT_DIR") if artifacts is not None else text


def niced(args, argv):
    return ["nice", "-n", str(args.nice)] + argv if args.nice else argv


def run_serve_bench(args, words):
    module_args = {
        "url": URL, "path": "/v1/completions", "model": MODEL,
        "request_rate": args.rate, "arrival": args.arrival, "seed": args.seed, "concurrency": args.cap,
        "num_requests": args.requests, "warmup_requests": args.warmup, "repetitions": 1,
        "input_len": {"distribution": "fixed", "mean": words},
        "output_len": {"distribution": "fixed", "mean": args.output_tokens},
        "ignore_eos": True, "temperature": 0.0, "spec_metrics": "none", "timeout": 120.0,
        "percentiles": [50, 90, 99],
        # the synthetic prompts differ per request already; untagged, they are the same prompt tokens aiperf sends
        "prefix_cache": True,
    }
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    # the controller's own interpreter: discovery on this machine may find a pyenv shim
    argv = [str(ANSIBLE), "localhost", "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter={{ ansible_playbook_python }}",
            "-m", "specdec.serve.serve_bench", "-a", json.dumps(module_args)]
    proc = subprocess.run(niced(args, argv), cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=args.run_timeout)
    try:
        doc = json.loads(proc.stdout[proc.stdout.index("{"):])
        res = doc["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise SystemExit("serve_bench gave no result (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                                         proc.stderr[-3000:]))
    if res.get("failed"):
        raise SystemExit("serve_bench failed: %s" % res.get("msg"))
    run = res["runs"][0]
    return {
        "command": shown(argv),
        "requests": run["requests"], "completed": run["completed"], "failed": run["failed"],
        "duration_s": run["duration_s"],
        "request_throughput": run["request_throughput"], "output_throughput": run["output_throughput"],
        "ttft_p50": run["ttft_ms"]["p50"], "ttft_p99": run["ttft_ms"]["p99"],
        "tpot_p50": run["tpot_ms"]["p50"], "tpot_p99": run["tpot_ms"]["p99"],
        "e2e_p50": run["e2e_ms"]["p50"],
        "output_tokens_per_request": run["output_tokens"] / float(max(1, run["completed"])),
        "prompt_tokens_per_request": run["prompt_tokens"] / float(max(1, run["completed"])),
        "achieved_request_rate": run.get("load", {}).get("achieved_request_rate"),
        "cap_waited": run.get("load", {}).get("cap_waited"),
        "client_bottleneck": res.get("client_bottleneck"), "client": run["client"],
        "itl_p50": run["itl_ms"]["p50"],
    }


def _stat(metrics, tag, key):
    entry = metrics.get(tag)
    if entry is None:
        return None
    return entry.get(key)


def run_aiperf(args, artifacts):
    if artifacts.exists():
        shutil.rmtree(artifacts)
    argv = [str(AIPERF), "profile", "--model", MODEL, "--url", URL, "--endpoint-type", "completions",
            "--streaming", "--tokenizer", str(TOKENIZER),
            "--isl", str(args.input_tokens), "--isl-stddev", "0",
            "--osl", str(args.output_tokens), "--osl-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--extra-inputs", "temperature:0",
            "--request-rate", str(args.rate), "--arrival-pattern", args.arrival, "--concurrency", str(args.cap),
            "--request-count", str(args.requests), "--warmup-request-count", str(args.warmup),
            "--random-seed", str(args.seed), "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
            "--no-auto-plot", "--artifact-dir", str(artifacts)]
    if args.aiperf_tokens == "server":
        argv.append("--use-server-token-count")
    # A local tokenizer directory is read without the network. aiperf 0.13.0 under HF_HUB_OFFLINE=1 looks
    # for it in the hub cache only and fails, so the variable is left out.
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    proc = subprocess.run(niced(args, argv), cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=args.run_timeout)
    found = sorted(artifacts.rglob("profile_export_aiperf.json"))
    if proc.returncode != 0 or not found:
        raise SystemExit("aiperf failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    doc = json.loads(found[0].read_text())
    metrics = doc.get("metrics", doc)

    def get(tag, key):
        value = _stat(metrics, tag, key)
        return None if value is None else float(value)

    units = {tag: _stat(metrics, tag, "unit") for tag in ("time_to_first_token", "inter_token_latency",
                                                         "request_latency", "benchmark_duration")}
    if units != {"time_to_first_token": "ms", "inter_token_latency": "ms", "request_latency": "ms",
                 "benchmark_duration": "sec"}:
        raise SystemExit("aiperf reported other units than expected: %s" % units)
    requests = get("request_count", "avg")
    duration = get("benchmark_duration", "avg")  # first request sent -> last content chunk, seconds
    starts = []
    for path in artifacts.rglob("profile_export.jsonl"):
        for line in path.read_text().splitlines():
            meta = json.loads(line).get("metadata", {}) if line.strip() else {}
            if meta.get("benchmark_phase") == "profiling" and meta.get("request_start_ns"):
                starts.append(meta["request_start_ns"])
    starts.sort()
    achieved = ((len(starts) - 1) / ((starts[-1] - starts[0]) / 1e9)) if len(starts) > 1 else None
    log = "\n".join(f.read_text(errors="replace") for f in artifacts.rglob("aiperf.log"))
    stalls = [float(v) for v in re.findall(r"taking too long to run\. Overhead: ([\d.]+)ms", log)]
    return {
        "command": shown(argv, artifacts),
        "requests": args.requests, "completed": requests,
        "failed": get("error_request_count", "avg") or 0,
        "duration_s": duration,
        # the same definition as serve_bench's (see run.py's docstring and bench/aiperf_compare/HISTORY.md)
        "request_throughput": requests / duration,
        "output_throughput": get("total_osl", "avg") / duration,
        # aiperf's own figures divide by the profiling phase's window (phase start -> phase end)
        "request_throughput_reported": get("request_throughput", "avg"),
        "output_throughput_reported": get("output_token_throughput", "avg"),
        "ttft_p50": get("time_to_first_token", "p50"), "ttft_p99": get("time_to_first_token", "p99"),
        "tpot_p50": get("inter_token_latency", "p50"), "tpot_p99": get("inter_token_latency", "p99"),
        "e2e_p50": get("request_latency", "p50"),
        "output_tokens_per_request": get("output_sequence_length", "avg"),
        "prompt_tokens_per_request": get("input_sequence_length", "avg"),
        "achieved_request_rate": round(achieved, 6) if achieved else None,
        "client": {"inter_chunk_latency_p50_ms": get("inter_chunk_latency", "p50"),
                   "reads_per_request_p50": get("http_req_chunks_received", "p50"),
                   "event_loop_stalls": len(stalls), "event_loop_stall_max_ms": max(stalls) if stalls else None},
    }


def ratios(a, b):
    return {m: (round(a[m] / b[m], 4) if a.get(m) and b.get(m) else None) for m in METRICS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--arrival", choices=["constant", "poisson"], default="constant")
    # serve_bench's open loop keeps one keep-alive connection per slot; a slot idle longer than the
    # server's keep-alive timeout (uvicorn: 5 s) finds its connection closed and the request fails
    # (RemoteDisconnected). At 2 req/s, 4 slots are each busy every ~2 s; 32 were not (bench/aiperf_compare/HISTORY.md).
    parser.add_argument("--cap", type=int, default=4, help="most requests in flight (both tools)")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--input-tokens", type=int, default=96)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--aiperf-tokens", choices=["server", "client"], default="server")
    parser.add_argument("--nice", type=int, default=0,
                        help="run both clients at this niceness (negative: ahead of other work on the machine)")
    parser.add_argument("--run-timeout", type=int, default=300)
    parser.add_argument("--keep-engine", action="store_true", help="leave the engine container running")
    args = parser.parse_args()
    version = subprocess.run([str(AIPERF), "--version"], capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, str(REPO / "lab" / "lab.py"), "real-engine"], check=True, capture_output=True)
    startup = real_engine.start("ngram", 0)
    print("engine up in %.0f s at %s" % (startup, URL), flush=True)
    rounds = []
    try:
        words, per_word = words_for(args.input_tokens, args.seed)
        print("serve_bench: %d words for %d prompt tokens (%.2f tokens/word by the engine's /tokenize)"
              % (words, args.input_tokens, per_word), flush=True)
        with tempfile.TemporaryDirectory(prefix="aiperf-") as tmp:
            for rnd in range(args.rounds):
                order = ("serve_bench", "aiperf") if rnd % 2 == 0 else ("aiperf", "serve_bench")
                got = {}
                for tool in order:
                    load = cpu_load()
                    began = time.monotonic()
                    got[tool] = run_serve_bench(args, words) if tool == "serve_bench" else \
                        run_aiperf(args, Path(tmp) / ("r%d" % rnd))
                    got[tool]["wall_s"] = round(time.monotonic() - began, 1)
                    got[tool]["loadavg_before"] = load
                    client = got[tool]["client"]
                    print("round %d %-11s %5.2f req/s %7.1f tok/s  TTFT p50 %6.1f p99 %6.1f ms  "
                          "TPOT p50 %5.2f p99 %5.2f ms  (%d/%d ok, load %.1f; %s)" % (
                              rnd + 1, tool, got[tool]["request_throughput"], got[tool]["output_throughput"],
                              got[tool]["ttft_p50"], got[tool]["ttft_p99"], got[tool]["tpot_p50"],
                              got[tool]["tpot_p99"], got[tool]["completed"], args.requests, load,
                              ("chunk burst share %s, flagged %s" % (client.get("chunk_burst_share"),
                                                                    got[tool]["client_bottleneck"]))
                              if tool == "serve_bench" else
                              ("event-loop stalls %d (max %s ms), reads/request p50 %s" % (
                                  client["event_loop_stalls"], client["event_loop_stall_max_ms"],
                                  client["reads_per_request_p50"]))), flush=True)
                    print("        sent at %.3f req/s (first to last send)%s" % (
                        got[tool]["achieved_request_rate"] or 0.0,
                        ", %d sends waited for the cap" % got[tool]["cap_waited"] if tool == "serve_bench" else ""),
                        flush=True)
                rounds.append({"round": rnd + 1, "order": list(order), "serve_bench": got["serve_bench"],
                               "aiperf": got["aiperf"], "ratio": ratios(got["serve_bench"], got["aiperf"])})
    finally:
        if not args.keep_engine:
            subprocess.run(["docker", "rm", "-f", real_engine.CONTAINER], capture_output=True)

    pooled = {m: statistics.median([r["ratio"][m] for r in rounds if r["ratio"][m] is not None] or [0.0])
              for m in METRICS}
    spread = {tool: {m: [r[tool][m] for r in rounds] for m in METRICS} for tool in ("serve_bench", "aiperf")}
    print("\n| metric | serve_bench (rounds) | aiperf (rounds) | serve_bench/aiperf per round | median |")
    print("|---|---|---|---|---|")
    for m in METRICS:
        print("| %s | %s | %s | %s | %.3f |" % (
            m, " / ".join("%.2f" % v for v in spread["serve_bench"][m]),
            " / ".join("%.2f" % v for v in spread["aiperf"][m]),
            " / ".join("%.3f" % r["ratio"][m] for r in rounds), pooled[m]))
    reported = [r["aiperf"]["request_throughput_reported"] for r in rounds]
    print("aiperf's own request throughput (over its phase window): %s req/s"
          % " / ".join("%.3f" % v for v in reported))
    flagged = [r["round"] for r in rounds if r["serve_bench"]["client_bottleneck"]]
    print("serve_bench client_bottleneck flagged in rounds: %s" % (flagged or "none"))
    out = {"aiperf_version": version, "engine": real_engine.image_name(), "engine_startup_s": round(startup, 1),
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
           "settings": vars(args), "serve_bench_words": words, "tokens_per_word": round(per_word, 3),
           "rounds": rounds, "ratio_median": pooled, "serve_bench_flagged_rounds": flagged}
    (HERE / "results.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
