#!/usr/bin/env python3
"""Monitoring benchmarks (figures in bench/monitoring/HISTORY.md).

    python3 bench/monitoring/bench.py cpu [--rates 1000,5000] [--seconds 30]
    python3 bench/monitoring/bench.py alert --bin DIR [--cycles 3]
    python3 bench/monitoring/bench.py wedge --bin DIR [--cycles 3]

`cpu`: the exporter's CPU per 1,000 engine iterations per second. A stand-in engine in a separate
process serves TensorRT-LLM's /metrics at a fixed iteration rate (each read returns the iterations
made since the last one, emulator-shaped, drained on read); the exporter runs as it does on a host
(its own process, its configuration file), polled every second and scraped every 2 s as Prometheus
would. The figure is the exporter process's CPU seconds (user + system, /proc) per wall second,
divided by the rate in thousands.

`alert`: the time from an acceptance drop to SpeculationStoppedPaying in Alertmanager, against the
bound the rules promise (the lab scenario's settings). Runs the engine emulator (in process), the
exporter, Prometheus and Alertmanager (Debian's binaries: --bin is the directory holding
`prometheus` and `prometheus-alertmanager`, e.g. /usr/bin, or the usr/bin of
`apt-get download prometheus prometheus-alertmanager` unpacked with `dpkg -x`), all on 127.0.0.1,
sends requests, lowers acceptance (SPECDEC_EMU_ACCEPTANCE_FILE), and measures fire and resolve times.

`wedge`: the time from an engine's wedge (SPECDEC_EMU_WEDGE_FILE: /health stays 200, requests are accepted,
no token comes out) under load to SpecdecEngineWedged in Alertmanager, against wedged_bound(); the same
parts as `alert`, a fresh engine per cycle (a wedge lasts until a restart).
"""

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import Process

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
EXPORTER = os.path.join(REPO, "roles", "monitoring_exporter", "files", "specdec_exporter.py")
sys.path.insert(0, os.path.join(REPO, "lab", "emulator"))

sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as M  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R  # noqa: E402

LAB = {"scrape_interval": "2s", "evaluation_interval": "2s", "acceptance_window": "20s", "acceptance_for": "20s",
       "acceptance_margin": 0.2, "engine_down_for": "10s", "engine_wedged_for": "20s", "kv_cache_for": "10s", "queue_for": "10s",
       "exporter_poll_interval": 0.5, "exporter_probe_interval": 2.0, "exporter_probe_deadline": 5.0,
       "alertmanager_group_wait": "1s", "alertmanager_group_interval": "5s"}


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


# --------------------------------------------------------------------------- cpu

def stat_like(i):
    spec = {"numDraftTokens": 12, "numAcceptedTokens": 9, "numRequestsWithDraftTokens": 4, "acceptanceLength": 3.25,
            "iterLatencyMS": 14.2, "draftOverhead": 0.0}
    return {"timestamp": "11-24-2026 07:00:00", "iter": i, "iterLatencyMS": 14.2, "newActiveRequestsQueueLatencyMS": 0.0,
            "numNewActiveRequests": 0, "numActiveRequests": 4, "numQueuedRequests": 0, "numCompletedRequests": 0,
            "maxNumActiveRequests": 64, "maxBatchSizeStatic": 64, "maxBatchSizeTunerRecommended": 0,
            "maxBatchSizeRuntime": 64, "maxNumTokensStatic": 8192, "maxNumTokensTunerRecommended": 0,
            "maxNumTokensRuntime": 8192, "gpuMemUsage": 0, "cpuMemUsage": 0, "pinnedMemUsage": 0,
            "kvCacheStats": {"maxNumBlocks": 65536, "freeNumBlocks": 65000, "usedNumBlocks": 536, "tokensPerBlock": 32,
                             "allocTotalBlocks": 536, "allocNewBlocks": 0, "reusedBlocks": 0, "missedBlocks": 0,
                             "cacheHitRate": 0.0},
            "staticBatchingStats": None,
            "inflightBatchingStats": {"numScheduledRequests": 4, "numContextRequests": 0, "numGenRequests": 4,
                                      "numPausedRequests": 0, "numCtxTokens": 0, "microBatchId": 0,
                                      "avgNumDecodedTokensPerIter": 3.25},
            "specDecodingStats": spec}


def fake_engine(port, rate):
    state = {"next": 0, "t0": time.monotonic()}
    lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path == "/metrics":
                with lock:
                    upto = int((time.monotonic() - state["t0"]) * rate)
                    body = json.dumps([stat_like(i) for i in range(state["next"], upto)]).encode()
                    state["next"] = upto
            else:
                body = b""
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Quiet(ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # the exporter hanging up at the end
            pass

    Quiet(("127.0.0.1", port), H).serve_forever()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmd_cpu(args):
    results = []
    for rate in [int(r) for r in args.rates.split(",")]:
        eport, xport = free_port(), free_port()
        engine = Process(target=fake_engine, args=(eport, rate), daemon=True)
        engine.start()
        work = tempfile.mkdtemp()
        cfg = os.path.join(work, "exporter.json")
        with open(cfg, "w") as fh:
            json.dump({"port": xport, "listen": "127.0.0.1", "poll_interval": 1.0, "fact_file": os.path.join(work, "none"),
                       "instances": [{"name": "bench", "engine": "trtllm", "url": "http://127.0.0.1:%d" % eport}]}, fh)
        exp = subprocess.Popen([sys.executable, EXPORTER, "--config", cfg], stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)  # first reads; the warm-up is not counted
            c0, t0 = cpu_seconds(exp.pid), time.monotonic()
            scrapes = 0
            while time.monotonic() - t0 < args.seconds:
                text = get("http://127.0.0.1:%d/metrics" % xport).decode()
                scrapes += 1
                time.sleep(2)
            c1, t1 = cpu_seconds(exp.pid), time.monotonic()
            iters = [line for line in text.splitlines() if line.startswith("specdec_engine_iterations_total")]
        finally:
            exp.terminate()
            exp.wait(10)
            engine.terminate()
            shutil.rmtree(work, ignore_errors=True)
        share = (c1 - c0) / (t1 - t0)
        row = {"iterations_per_s": rate, "cpu_share_of_one_core": round(share, 4),
               "cpu_per_1000_iterations_per_s": round(share / (rate / 1000.0), 4),
               "seconds": round(t1 - t0, 1), "scrapes": scrapes, "iterations_counted": iters[-1].split()[-1] if iters else None}
        print(json.dumps(row))
        results.append(row)
    return results


# --------------------------------------------------------------------------- alert

def cmd_alert(args):
    import yaml
    from specdec_emulator import server, trtllm_cli

    s = M.check(LAB)
    bound = R.alert_bound(s)
    work = tempfile.mkdtemp()
    procs = []
    try:
        target, draft = os.path.join(work, "target"), os.path.join(work, "draft")
        for d in (target, draft):
            os.makedirs(d)
            with open(os.path.join(d, "config.json"), "w") as fh:
                json.dump({"model_type": "llama", "max_position_embeddings": 8192}, fh)
        with open(os.path.join(work, "extra.yml"), "w") as fh:
            json.dump({"enable_iter_perf_stats": True, "speculative_config": {
                "decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": draft}}, fh)
        acc_file = os.path.join(work, "acceptance")
        wedge_file = os.path.join(work, "wedge")
        env = {"SPECDEC_EMU_ACCEPTANCE": "1,1,1,0", "SPECDEC_EMU_TARGET_STEP_MS": "8",
               "SPECDEC_EMU_ACCEPTANCE_FILE": acc_file, "SPECDEC_EMU_VERSION": "1.2.0rc6",
               "SPECDEC_EMU_WEDGE_FILE": wedge_file}
        cfg, code = trtllm_cli.configure([target, "--host", "127.0.0.1", "--port", "0", "--max_batch_size", "4",
                                          "--extra_llm_api_options", os.path.join(work, "extra.yml")],
                                         env=env, out=io.StringIO())
        srv = server.ThreadedServer(cfg).start()
        fact = os.path.join(work, "sweep.fact")
        with open(fact, "w") as fh:
            json.dump({"bench": {"last_sweep": {"winner": {"draft_len": 3}, "by_concurrency": [
                {"concurrency": 1, "draft_len": 3, "median": 400.0, "acceptance_length": None,
                 "acceptance_length_estimate": 4.0}]}, "applied": {"max_draft_len": 3}}}, fh)
        xport, pport, aport = free_port(), free_port(), free_port()
        xcfg = M.exporter_config([{"name": "bench", "engine": "trtllm", "port": srv.port}],
                                 {"port": xport, "poll_interval": s["exporter_poll_interval"],
                                  "probe_interval": s["exporter_probe_interval"],
                                  "probe_deadline": s["exporter_probe_deadline"]}, "127.0.0.1")
        xcfg.update(listen="127.0.0.1", fact_file=fact)
        with open(os.path.join(work, "exporter.json"), "w") as fh:
            json.dump(xcfg, fh)
        procs.append(subprocess.Popen([sys.executable, EXPORTER, "--config", os.path.join(work, "exporter.json")]))
        settings = dict(s, prometheus_port=pport, alertmanager_port=aport, exporter_port=xport)
        prom = M.scrape_config({"bench-host": {"ansible_host": "127.0.0.1", "inference_server_instances": []}},
                               {"spark-nodes": ["bench-host"]}, "bench-mon", settings)
        rules_path = os.path.join(work, "rules.yml")
        prom["rule_files"] = [rules_path]
        with open(rules_path, "w") as fh:
            yaml.safe_dump(R.rules(settings), fh)
        with open(os.path.join(work, "prometheus.yml"), "w") as fh:
            yaml.safe_dump(prom, fh)
        with open(os.path.join(work, "alertmanager.yml"), "w") as fh:
            yaml.safe_dump(M.alertmanager_config(settings), fh)
        am = [os.path.join(args.bin, "prometheus-alertmanager"), "--config.file=" + os.path.join(work, "alertmanager.yml"),
              "--storage.path=" + os.path.join(work, "am"), "--web.listen-address=127.0.0.1:%d" % aport,
              "--cluster.listen-address="]
        tmpl = "/usr/share/prometheus/alertmanager/default.tmpl"
        unpacked = os.path.join(args.bin, "..", "share", "prometheus")
        if not os.path.exists(tmpl) and os.path.isdir(unpacked):
            # Debian's binary reads its default template from /usr/share: give it the unpacked one in a
            # private mount namespace (nothing changes on this machine)
            am = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs /usr/share && mkdir /usr/share/prometheus && '
                  'mount --bind "$0" /usr/share/prometheus && exec "$@"', os.path.abspath(unpacked)] + am
        procs.append(subprocess.Popen(am, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([os.path.join(args.bin, "prometheus"),
                                       "--config.file=" + os.path.join(work, "prometheus.yml"),
                                       "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
                                       "--web.listen-address=127.0.0.1:%d" % pport], stderr=subprocess.DEVNULL))
        prom_url, am_url = "http://127.0.0.1:%d" % pport, "http://127.0.0.1:%d" % aport

        def query(q):
            out = json.loads(get(prom_url + "/api/v1/query?" + urllib.parse.urlencode({"query": q})))
            return out["data"]["result"]

        def firing(name="SpeculationStoppedPaying"):
            try:
                return [a for a in json.loads(get(am_url + "/api/v2/alerts"))
                        if a["labels"].get("alertname") == name]
            except OSError:
                return []

        stop = threading.Event()

        def load():
            body = json.dumps({"prompt": "bench", "max_tokens": 48}).encode()
            while not stop.is_set():
                req = urllib.request.Request(srv.base_url + "/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=30).read()
                except OSError:
                    time.sleep(0.5)

        threads = [threading.Thread(target=load, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        rows = []
        if args.cmd == "wedge":
            wb = R.wedged_bound(s)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # tokens flowing and seen by Prometheus
                try:
                    live = query('specdec:generated_tokens:rate{engine_instance="bench"}')
                except OSError:
                    live = []
                if live and float(live[0]["value"][1]) > 0:
                    break
                time.sleep(0.5)
            else:
                raise SystemExit("Prometheus never saw the engine generate")
            with open(wedge_file, "w"):
                pass
            t0 = time.monotonic()
            while not firing("SpecdecEngineWedged"):
                if time.monotonic() - t0 > 3 * wb["fire_s"]:
                    diag = dict((q, query(q)) for q in ('specdec:generated_tokens:rate', 'specdec:running_requests',
                                                        'specdec:queued_requests', 'ALERTS'))
                    raise SystemExit("no wedge alert within %.0f s: %s" % (3 * wb["fire_s"], json.dumps(diag)))
                time.sleep(0.2)
            row = {"cycle": args.cycle, "fired_after_s": round(time.monotonic() - t0, 1), "fire_bound_s": wb["fire_s"],
                   "health_status_while_wedged": urllib.request.urlopen(srv.base_url + "/health", timeout=10).status}
            print(json.dumps(row))
            stop.set()
            srv.stop()
            return [row]
        for cycle in range(args.cycles):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    live = query('specdec:acceptance_length:rate{engine_instance="bench"}')
                except OSError:
                    live = []
                if live and float(live[0]["value"][1]) > 3.9 and not firing():
                    break
                time.sleep(0.5)
            else:
                raise SystemExit("live acceptance never settled at 4 (or the alert never cleared)")
            with open(acc_file + ".tmp", "w") as fh:
                fh.write("0.3,0.1\n")
            os.rename(acc_file + ".tmp", acc_file)
            t0 = time.monotonic()
            while not firing():
                if time.monotonic() - t0 > 3 * bound["fire_s"]:
                    diag = dict((q, query(q)) for q in ('specdec:acceptance_length:rate', 'specdec:acceptance_length:expected',
                                                        'specdec:decoding_steps:rate', 'ALERTS'))
                    try:
                        diag["alertmanager"] = json.loads(get(am_url + "/api/v2/status")).get("cluster")
                    except OSError as exc:
                        diag["alertmanager"] = str(exc)
                    raise SystemExit("no alert within %.0f s: %s" % (3 * bound["fire_s"], json.dumps(diag)))
                time.sleep(0.2)
            fired = time.monotonic() - t0
            os.remove(acc_file)
            t1 = time.monotonic()
            while firing():
                if time.monotonic() - t1 > 3 * bound["resolve_s"]:
                    raise SystemExit("not resolved within %.0f s" % (3 * bound["resolve_s"]))
                time.sleep(0.2)
            resolved = time.monotonic() - t1
            row = {"cycle": cycle, "fired_after_s": round(fired, 1), "fire_bound_s": bound["fire_s"],
                   "resolved_after_s": round(resolved, 1), "resolve_bound_s": bound["resolve_s"]}
            print(json.dumps(row))
            rows.append(row)
        stop.set()
        srv.stop()
        return rows
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--rates", default="1000,5000")
    c.add_argument("--seconds", type=float, default=30)
    for name in ("alert", "wedge"):
        a = sub.add_parser(name)
        a.add_argument("--bin", required=True, help="directory with prometheus and prometheus-alertmanager")
        a.add_argument("--cycles", type=int, default=3)
    args = ap.parse_args()
    if args.cmd == "cpu":
        cmd_cpu(args)
    elif args.cmd == "alert":
        cmd_alert(args)
    else:
        for cycle in range(args.cycles):  # a wedge lasts until a restart: every cycle starts the parts anew
            args.cycle = cycle
            cmd_alert(args)


if __name__ == "__main__":
    main()
