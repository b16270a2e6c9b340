#!/usr/bin/env python3
"""Does the best n-gram draft length of the real engine depend on the workload? One run.

    python3 bench/real_engine/workloads.py [--ngram 0,1,2,4,6] [--repetitions 3]

The real engine (vLLM's CPU build, started as bench/real_engine/run.py starts it) serves n-gram
speculative decoding at each draft length; at each, serve_bench's runner (the module's code) measures
two workloads, concurrency 1, greedy, fixed-length requests:

- ``code``: prompts that repeat code-like lines, which an n-gram proposer can copy from, greedy;
- ``chat``: the built-in ``mixed`` prompt set (questions in free prose), sampled at temperature 1.0,
  as chat is often served.

(Greedy prose is no different workload for this engine: the tiny model's greedy output repeats
itself whatever the prompt, and n-gram acceptance follows the output, not the prompt: 1.97 and 2.83
tokens per step on the ``mixed`` prompts against 1.95 and 2.78 on the code prompts at draft lengths 1
and 2. Sampling is what makes its output, and so its acceptance, differ.)

The selection is draft_sweep's own (bench_select.select_workloads): each workload's winner, and the
draft length the ``worst_case`` and ``mean`` rules choose for both. The configurations are measured
in two rounds; round 2 says independently which length was fastest per workload. Raw figures go to
bench/real_engine/workloads.json.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as engine  # noqa: E402  (bench/real_engine/run.py: starts the engine container)

from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import PROMPT_SETS, run_benchmark  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select_workloads  # noqa: E402

CODE = [
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\ndef ",
    "import os\nimport sys\nimport re\nimport json\nimport time\nimport math\nimport os\nimport sys\nimport ",
    "for i in range(10):\n    print(i)\nfor j in range(10):\n    print(j)\nfor k in range(10):\n    print(",
    "x = self.x\ny = self.y\nz = self.z\nw = self.w\nv = self.v\nu = self.u\nt = self.",
]
# name: (prompts, temperature)
WORKLOADS = {"code": (CODE, 0.0), "chat": (PROMPT_SETS["mixed"], 1.0)}


def measure(k, workload, repetitions, requests, max_tokens):
    result = run_benchmark({
        "url": "http://127.0.0.1:%d" % engine.PORT, "path": "/v1/completions", "model": "tiny-llama",
        "concurrency": 1, "num_requests": requests, "warmup_requests": 1, "repetitions": repetitions,
        "max_tokens": max_tokens, "temperature": WORKLOADS[workload][1], "seed": 1, "ignore_eos": True,
        "prompts": WORKLOADS[workload][0],
        "timeout": 120.0, "spec_metrics": "vllm" if k else "none", "metrics_poll_interval": 1.0})
    return {"draft_len": k, "workload": workload, "concurrency": 1, "runs": result["runs"],
            "tok_s": result["summary"]["output_throughput"]["median"],
            "acceptance": result["summary"]["acceptance_length"]["median"],
            "flagged": sum(1 for r in result["runs"] if r["client"]["bottleneck"])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ngram", default="0,1,2,4,6")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    engine.sh([sys.executable, str(engine.REPO / "lab" / "lab.py"), "real-engine"])
    lens = [int(k) for k in args.ngram.split(",") if k]
    rounds = [[], []]
    try:
        for rnd in (0, 1):
            for k in lens:
                engine.start("ngram", k)
                for name in WORKLOADS:
                    m = measure(k, name, args.repetitions, args.requests, args.max_tokens)
                    rounds[rnd].append(m)
                    print("round %d ngram-%d %-5s %6.1f tok/s acceptance %s flagged %d" % (
                        rnd + 1, k, name, m["tok_s"], m["acceptance"], m["flagged"]), flush=True)
    finally:
        subprocess.run(["docker", "rm", "-f", engine.CONTAINER], capture_output=True)
    items = [dict((key, m[key]) for key in ("draft_len", "workload", "concurrency", "runs")) for m in rounds[0]]
    picks = dict((rule, select_workloads(items, rule=rule)) for rule in ("worst_case", "mean"))
    sel = picks["worst_case"]
    own = dict((n, w["winner"]["draft_len"] if w["winner"] else None) for n, w in sel["workloads"].items())
    fastest2 = dict((n, max((m for m in rounds[1] if m["workload"] == n), key=lambda m: m["tok_s"])["draft_len"])
                    for n in WORKLOADS)
    print("\n| draft length | " + " | ".join("%s tok/s r1 / r2 | %s acceptance" % (n, n) for n in WORKLOADS) + " |")
    print("|---:|" + "---:|---:|" * len(WORKLOADS))
    for k in lens:
        cells = []
        for n in WORKLOADS:
            a, b = [next(m for m in r if m["draft_len"] == k and m["workload"] == n) for r in rounds]
            cells.append("%.1f / %.1f | %s" % (a["tok_s"], b["tok_s"], "-" if b["acceptance"] is None
                                               else "%.2f" % b["acceptance"]))
        print("| %d | %s |" % (k, " | ".join(cells)))
    print("each workload's winner (round 1, the sweep's rule): %s; round 2's fastest: %s" % (own, fastest2))
    for rule, res in picks.items():
        print("rule %s chooses draft length %s for both" % (rule, res["winner"]["draft_len"] if res["winner"] else None))
    out = {"settings": vars(args), "winners_round1": own, "fastest_round2": fastest2,
           "rule_choice": dict((r, p["winner"]["draft_len"] if p["winner"] else None) for r, p in picks.items()),
           "ratings": sel["rule"]["ratings"],
           "rounds": [[dict((k, v) for k, v in m.items() if k != "runs") for m in r] for r in rounds],
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (Path(__file__).parent / "workloads.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
