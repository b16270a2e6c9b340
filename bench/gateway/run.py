#!/usr/bin/env python3
"""The front door's cost: TTFT and output tokens/s through the gateway against direct to the engine.

    python3 bench/gateway/run.py [--haproxy PATH] [--rounds 3] [--max-tokens 64]

One run, on this machine's loopback: the engine emulator (lab/emulator, trtllm-serve stand-in) on
127.0.0.1, and HAProxy configured exactly as the gateway role configures it (the gateway_plan filter's
plan rendered through roles/gateway/templates/haproxy.cfg.j2: TLS with a certificate of a throw-away
CA made by lab/gateway_tls.py, an API key checked by its sha256 digest, routing by the body's model
field, leastconn, health checks). The client is serve_bench's runner (module_utils/bench_runner),
streaming chat completions. For each concurrency (1 and 16) the two paths alternate, `--rounds`
times each, so a drift of the machine's load hits both alike; the table gives the pooled TTFT
p50/p99 and the median of the rounds' output tokens/s, and the ratios.

--haproxy: the binary to run (default: `haproxy` on PATH, else /usr/sbin/haproxy). Use the
distribution's package (on Debian bookworm, haproxy 2.6): what the role installs.
--cpus / --gateway-cpus: CPU lists (as taskset takes them) for the engine and the client, and for
HAProxy. `--cpus 0 --gateway-cpus 1` gives the gateway a core of its own, as on a gateway host of
its own; without them all three share every core, and the gateway's work competes with the engine's.
Raw figures go to bench/gateway/results.json.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))

import jinja2  # noqa: E402

from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import run_benchmark  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import gateway_plan  # noqa: E402

MODEL = "gpt-oss-120b"
INSTANCE = {"name": MODEL, "profile": "trtllm-gpt-oss-120b-eagle3-b200",
            "image": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc0", "port": 0}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, limit_s=60, context=None):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                if resp.status in (200, 401):
                    return
        except OSError as exc:
            if getattr(exc, "code", None) == 401:
                return
        time.sleep(0.2)
    raise SystemExit("bench: %s did not answer in %ds" % (url, limit_s))


def start_engine(work, port):
    model = work / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    env = dict(os.environ, SPECDEC_EMU_LOAD_DELAY_S="0")
    proc = subprocess.Popen([sys.executable, str(REPO / "lab" / "emulator" / "bin" / "trtllm-serve"), str(model),
                             "--host", "127.0.0.1", "--port", str(port), "--backend", "pytorch"],
                            stdout=open(work / "engine.log", "w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    wait_http("http://127.0.0.1:%d/health" % port)
    return proc


def start_gateway(work, haproxy, engine_port, port, stats_port, key, cpus=None):
    tls = work / "tls"
    subprocess.run([sys.executable, str(REPO / "lab" / "gateway_tls.py"), "--out", str(tls), "--ip", "127.0.0.1"],
                   check=True, capture_output=True)
    plan = gateway_plan({"engine": {"address": "127.0.0.1", "instances": [dict(INSTANCE, port=engine_port)]}},
                        {"port": port, "stats_port": stats_port, "check_interval_ms": 1000}, [key])
    conf = work / "gateway"
    (conf / "errors").mkdir(parents=True)
    for name, text in plan["files"].items():
        (conf / name).write_text(text)
    (conf / "api-keys.map").write_text(plan["keys_map"])
    (conf / "gateway.pem").write_text((tls / "server.crt").read_text() + (tls / "server.key").read_text())
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "gateway" / "templates")),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    cfg = env.get_template("haproxy.cfg.j2").render(gateway_cfg_plan=plan, gateway_cfg_dir=str(conf),
                                                    gateway_cfg_socket=str(conf / "admin.sock"))
    # on this machine: no chroot, no user switch, logs to nowhere (the role's host runs it as a service)
    cfg = cfg.replace("    chroot /var/lib/haproxy\n", "").replace("    user haproxy\n", "")
    cfg = cfg.replace("    group haproxy\n", "").replace("    log /dev/log local0\n", "")
    (conf / "haproxy.cfg").write_text(cfg)
    subprocess.run([haproxy, "-c", "-q", "-f", str(conf / "haproxy.cfg")], check=True)
    pin = ["taskset", "-c", cpus] if cpus else []
    proc = subprocess.Popen(pin + [haproxy, "-db", "-f", str(conf / "haproxy.cfg")], stdout=open(work / "gateway.log", "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    os.environ["SSL_CERT_FILE"] = str(tls / "ca.crt")  # serve_bench's https client verifies against the lab CA
    import ssl
    wait_http("https://127.0.0.1:%d/v1/models" % port, context=ssl.create_default_context(cafile=str(tls / "ca.crt")))
    # the gateway's health check must see the engine UP before it routes
    time.sleep(2.5)
    return proc


def bench(url, key, concurrency, requests, max_tokens, rate=None, seed=0):
    cfg = {"url": url, "model": MODEL, "api_key": key, "path": "/v1/chat/completions", "concurrency": concurrency,
           "num_requests": requests, "warmup_requests": concurrency, "repetitions": 1, "max_tokens": max_tokens,
           "temperature": 0.0, "ignore_eos": True, "prompts": ["Describe a week-long vacation in detail."],
           "timeout": 120.0, "spec_metrics": "off", "include_requests": True}
    if rate:
        # open loop: Poisson arrivals, at most `concurrency` in flight
        cfg.update(request_rate=rate, arrival="poisson", seed=seed)
    return run_benchmark(cfg)


def cpu_list(text):
    """taskset's CPU list ("0", "0,2", "0-3") as a set."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def pct(values, q):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--haproxy", default=shutil.which("haproxy") or "/usr/sbin/haproxy")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--requests-per-stream", type=int, default=8)
    p.add_argument("--cpus", help="CPUs of the engine and the client (this process and the engine it starts)")
    p.add_argument("--gateway-cpus", help="CPUs of HAProxy")
    p.add_argument("--open-loop-rate", type=float, default=0.0,
                   help="requests/s of Poisson arrivals at concurrency 16 (capped at 16 in flight) instead of "
                        "the closed loop, whose sends follow the engine's iteration clock")
    args = p.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, cpu_list(args.cpus))
    version = subprocess.run([args.haproxy, "-v"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    work = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    key = "sk-bench-0123456789abcdef"
    engine_port, gw_port, stats_port = free_port(), free_port(), free_port()
    procs = []
    results = {"haproxy": version, "max_tokens": args.max_tokens, "rounds": args.rounds, "cpus": args.cpus,
               "gateway_cpus": args.gateway_cpus, "open_loop_rate": args.open_loop_rate or None, "by_concurrency": {}}
    try:
        procs.append(start_engine(work, engine_port))
        procs.append(start_gateway(work, args.haproxy, engine_port, gw_port, stats_port, key, args.gateway_cpus))
        paths = {"direct": "http://127.0.0.1:%d" % engine_port, "gateway": "https://127.0.0.1:%d" % gw_port}
        for conc in (1, 16):
            acc = {"direct": {"ttft": [], "thr": [], "failed": 0}, "gateway": {"ttft": [], "thr": [], "failed": 0}}
            for rnd in range(args.rounds):
                for name in (("direct", "gateway") if rnd % 2 == 0 else ("gateway", "direct")):
                    out = bench(paths[name], key if name == "gateway" else None, conc,
                                conc * args.requests_per_stream, args.max_tokens,
                                rate=args.open_loop_rate if conc > 1 else None, seed=rnd)
                    run = out["runs"][0]
                    acc[name]["ttft"] += [r["ttft_ms"] for r in run["request_records"] if r.get("ttft_ms") is not None]
                    acc[name]["thr"].append(run["output_throughput"])
                    acc[name]["failed"] += out["summary"]["failed"]
                    print("c=%d round %d %-7s tok/s %.1f TTFT p50 %.2f ms failed %d" % (
                        conc, rnd, name, run["output_throughput"], run["ttft_ms"]["p50"], out["summary"]["failed"]),
                        flush=True)
            row = {}
            for name, a in acc.items():
                thr = sorted(a["thr"])
                row[name] = {"ttft_p50_ms": pct(a["ttft"], 50), "ttft_p99_ms": pct(a["ttft"], 99),
                             "output_tok_s_median": thr[len(thr) // 2], "output_tok_s_rounds": a["thr"],
                             "requests": len(a["ttft"]), "failed": a["failed"]}
            row["added_ttft_p50_ms"] = row["gateway"]["ttft_p50_ms"] - row["direct"]["ttft_p50_ms"]
            row["throughput_ratio"] = row["gateway"]["output_tok_s_median"] / row["direct"]["output_tok_s_median"]
            results["by_concurrency"][str(conc)] = row
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(work, ignore_errors=True)
    (REPO / "bench" / "gateway" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n%s, %d rounds per path, %d output tokens per request\n" % (version, args.rounds, args.max_tokens))
    print("| concurrency | path | TTFT p50 (ms) | TTFT p99 (ms) | output tok/s (median) | failed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for conc, row in results["by_concurrency"].items():
        for name in ("direct", "gateway"):
            r = row[name]
            print("| %s | %s | %.2f | %.2f | %.1f | %d |" % (conc, name, r["ttft_p50_ms"], r["ttft_p99_ms"],
                                                           r["output_tok_s_median"], r["failed"]))
        print("| %s | gateway - direct | %+.2f | | x%.3f | |" % (conc, row["added_ttft_p50_ms"],
                                                                  row["throughput_ratio"]))


if __name__ == "__main__":
    main()
