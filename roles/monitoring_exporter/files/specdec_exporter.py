#!/usr/bin/env python
# -*- coding: utf-8 -*-
# (the systemd unit runs it with /usr/bin/python3)
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""specdec-exporter: the single reader of each TensorRT-LLM engine's /metrics, in Prometheus terms.

TensorRT-LLM's ``GET /metrics`` is a JSON list of iteration stats that is drained on read, so only
one process may read it. This exporter is that reader on an engine host: it polls every TensorRT-LLM
instance on its own schedule (``poll_interval``; no request to the exporter ever reads an engine),
folds each iteration into counters and gauges, keeps the last iterations for other readers
(``GET /engine/<instance>/metrics?reader=<id>``: the engine's own JSON list, drained per reader, which
``serve_bench`` reads through ``metrics_url`` instead of draining the engine), and serves
Prometheus text on ``GET /metrics``. For every instance (vLLM too, which Prometheus scrapes
directly) it probes ``/health`` and publishes what the last applied draft-length sweep measured
(the host's local fact written by the draft_sweep role), so alert rules can compare live acceptance
with it.

Progress: every ``probe_interval`` seconds (0: never) it judges whether every instance makes progress
(``specdec_engine_progress``). An engine that generated tokens since the last judgement did (its iteration
stats for TensorRT-LLM, ``vllm:generation_tokens_total`` for vLLM), and is sent nothing; only one that
generated nothing is asked for one completion token (``POST /v1/completions``, ``max_tokens`` 1, the model
``/v1/models`` names), which must come within ``probe_deadline`` seconds. So a busy engine, a benchmark's
among them, never sees a probe, and an idle one sees one per interval. A wedged engine answers ``/health``
and accepts requests but generates nothing; TensorRT-LLM's iteration stats of an idle and of a wedged engine
are the same empty list, so only a request tells them apart. An instance that requires an API key answers
the probe 401 and is not judged (no sample).

Standard library only. The iteration stats are folded by ``trtllm_iterations`` (the collection's
plugins/module_utils/trtllm_iterations.py, installed beside this script), the same code serve_bench
folds them with, so the live acceptance length and a sweep's are one quantity. Configuration: a JSON
file (``--config``), see ``load_config``.
"""

import argparse
import json
import math
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    # installed beside this script by the monitoring role
    import trtllm_iterations
except ImportError:  # run from the collection's source tree
    from ansible_collections.specdec.serve.plugins.module_utils import trtllm_iterations

DEFAULTS = {
    "listen": "127.0.0.1",
    "port": 9470,
    "poll_interval": 1.0,
    "timeout": 5.0,
    "history": 20000,
    "fact_file": "/etc/ansible/facts.d/specdec_sweep.fact",
    "probe_interval": 0,
    "probe_deadline": 30.0,
    "instances": [],
}

# Counters (trtllm_iterations.COUNTERS: name -> help), one value per instance; gauges: name -> help.
GAUGES = {
    "active_requests": "Active requests in the last iteration (numActiveRequests).",
    "queued_requests": "Queued requests in the last iteration (numQueuedRequests).",
    "kv_cache_used_blocks": "KV cache blocks in use in the last iteration.",
    "kv_cache_max_blocks": "KV cache blocks in all.",
    "kv_cache_usage_ratio": "Used over maximum KV cache blocks in the last iteration.",
    "decoded_tokens_per_iteration": "avgNumDecodedTokensPerIter of the last generating iteration.",
}


MAX_READERS = 64


class ConfigError(ValueError):
    pass


def load_config(data):
    """Validate a configuration mapping; return it with defaults filled in."""
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a mapping")
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError("unknown configuration keys: %s" % ", ".join(unknown))
    cfg = dict(DEFAULTS)
    cfg.update(data)
    for key in ("poll_interval", "timeout", "probe_deadline"):
        if not isinstance(cfg[key], (int, float)) or isinstance(cfg[key], bool) or cfg[key] <= 0:
            raise ConfigError("%s must be a number above 0, got %r" % (key, cfg[key]))
    if not isinstance(cfg["probe_interval"], (int, float)) or isinstance(cfg["probe_interval"], bool) \
            or cfg["probe_interval"] < 0:
        raise ConfigError("probe_interval must be a number of seconds (0: no progress probe), got %r"
                          % (cfg["probe_interval"],))
    for key in ("port", "history"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise ConfigError("%s must be a positive integer, got %r" % (key, cfg[key]))
    names = set()
    for index, inst in enumerate(cfg["instances"]):
        if not isinstance(inst, dict) or not inst.get("name") or not inst.get("url"):
            raise ConfigError("instances[%d] needs a name and a url, got %r" % (index, inst))
        if inst.get("engine") not in ("trtllm", "vllm"):
            raise ConfigError("instances[%d].engine must be trtllm or vllm, got %r" % (index, inst.get("engine")))
        if inst["name"] in names:
            raise ConfigError("instances[%d].name %r is not unique" % (index, inst["name"]))
        names.add(inst["name"])
    return cfg


class InstanceStats(object):
    """Counters and gauges of one TensorRT-LLM instance, folded from its iteration stats."""

    def __init__(self, history=20000):
        self.counters = trtllm_iterations.counters()
        self.gauges = dict.fromkeys(GAUGES, 0.0)
        self.last_iter = None
        self.history = []  # (seq, stat), oldest first
        self.history_max = history
        self.seq = 0

    def ingest(self, stats):
        """Fold a list of IterationStats (one /metrics read) into the counters."""
        if not isinstance(stats, list):
            raise ValueError("/metrics did not return a JSON list")
        c, g = self.counters, self.gauges
        if not stats:
            # drained and nothing new: the engine is idle (or stalled), nothing is running
            g["active_requests"] = g["queued_requests"] = 0.0
            return 0
        for stat in stats:
            if not isinstance(stat, dict):
                continue
            it = stat.get("iter")
            if isinstance(it, int) and not isinstance(it, bool):
                if self.last_iter is not None and it > self.last_iter + 1:
                    c["iterations_missed"] += it - self.last_iter - 1
                self.last_iter = it  # lower than before: the engine restarted
            per_iter = trtllm_iterations.fold(c, stat)
            if per_iter is not None:
                g["decoded_tokens_per_iteration"] = per_iter
            g["active_requests"] = trtllm_iterations.num(stat.get("numActiveRequests"))
            g["queued_requests"] = trtllm_iterations.num(stat.get("numQueuedRequests"))
            kv = stat.get("kvCacheStats") or {}
            used, most = (trtllm_iterations.num(kv.get("usedNumBlocks")),
                          trtllm_iterations.num(kv.get("maxNumBlocks")))
            g["kv_cache_used_blocks"] = used
            g["kv_cache_max_blocks"] = most
            g["kv_cache_usage_ratio"] = used / most if most > 0 else 0.0
            self.seq += 1
            self.history.append((self.seq, stat))
        if len(self.history) > self.history_max:
            del self.history[:len(self.history) - self.history_max]
        return len(stats)

    def since(self, after):
        """Iterations read after sequence number `after`: (last seq, first kept seq, stats)."""
        first = self.history[0][0] if self.history else self.seq + 1
        return self.seq, first, [stat for seq, stat in self.history if seq > after]


def sweep_expectation(fact, instance):
    """What the last sweep of `instance` measured, from the draft_sweep local fact (a mapping).

    Returns {applied_draft_len, expected_acceptance_length, by_concurrency: [...]} or None when the
    fact says nothing about the instance. The expectation is the acceptance length measured at the
    applied draft length (the engine's figure, else the client-side estimate), at the lowest
    concurrency where that length was measured; with no applied sweep, the sweep's winner."""
    entry = (fact or {}).get(instance) if isinstance(fact, dict) else None
    if not isinstance(entry, dict):
        return None
    last = entry.get("last_sweep") or {}
    applied = entry.get("applied") or {}
    draft_len = applied.get("max_draft_len")
    if draft_len in (None, ""):
        draft_len = (last.get("winner") or {}).get("draft_len")
    try:
        draft_len = int(draft_len) if draft_len not in (None, "") else None
    except (TypeError, ValueError):
        draft_len = None
    rows = []
    for row in last.get("by_concurrency") or []:
        if not isinstance(row, dict):
            continue
        acc = row.get("acceptance_length")
        if not isinstance(acc, (int, float)) or isinstance(acc, bool):
            acc = row.get("acceptance_length_estimate")
        rows.append({
            "concurrency": row.get("concurrency"),
            "draft_len": row.get("draft_len"),
            "acceptance_length": acc if isinstance(acc, (int, float)) and not isinstance(acc, bool) else None,
            "output_tokens_per_second": row.get("median") if isinstance(row.get("median"), (int, float)) else None,
        })
    expected = None
    matching = sorted((r for r in rows if r["draft_len"] == draft_len and r["acceptance_length"] is not None),
                      key=lambda r: (r["concurrency"] if isinstance(r["concurrency"], int) else 1 << 30))
    if matching and draft_len:
        expected = float(matching[0]["acceptance_length"])
    return {"applied_draft_len": draft_len, "expected_acceptance_length": expected, "by_concurrency": rows}


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels):
    return "{" + ",".join('%s="%s"' % (k, _escape(v)) for k, v in labels) + "}"


def _fmt(value):
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return "%d" % value
    return repr(float(value))


def render(instances, stats, up, ready, errors, expectations, progress=None):
    """Prometheus text exposition of everything the exporter knows.

    instances: config instances; stats: name -> InstanceStats (TensorRT-LLM only); up/ready:
    name -> bool or None; errors: name -> count; expectations: name -> sweep_expectation(); progress:
    name -> (ok, seconds) of the last progress probe, or None where it could not judge."""
    progress = progress or {}
    out = []

    def family(name, kind, help_text, samples):
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            out.append("%s%s %s" % (name, _labels(labels), _fmt(value)))

    base = [(i["name"], [("engine_instance", i["name"]), ("engine", i["engine"])]) for i in instances]
    trt = [(n, lab) for n, lab in base if n in stats]
    family("specdec_engine_up", "gauge", "1 when the last /metrics read (TensorRT-LLM) or /health probe (vLLM) answered.",
           [(lab, 1 if up.get(n) else 0) for n, lab in base if up.get(n) is not None])
    family("specdec_engine_ready", "gauge", "1 when the engine's /health answered 200.",
           [(lab, 1 if ready.get(n) else 0) for n, lab in base if ready.get(n) is not None])
    family("specdec_exporter_read_errors_total", "counter", "Failed reads of the engine (/metrics or /health).",
           [(lab, errors.get(n, 0)) for n, lab in base])
    judged = [(lab, progress[n]) for n, lab in base if progress.get(n) is not None]
    family("specdec_engine_progress", "gauge",
           "1 when the engine generated tokens since the last judgement or answered a one-token probe within "
           "probe_deadline, else 0.", [(lab, 1 if ok else 0) for lab, (ok, _seconds) in judged])
    family("specdec_engine_progress_probe_seconds", "gauge", "How long the last progress probe took (its deadline "
           "when it timed out).", [(lab, seconds) for lab, (_ok, seconds) in judged if seconds is not None])
    for key, help_text in trtllm_iterations.COUNTERS.items():
        family("specdec_engine_%s_total" % key, "counter", help_text, [(lab, stats[n].counters[key]) for n, lab in trt])
    for key, help_text in GAUGES.items():
        family("specdec_engine_%s" % key, "gauge", help_text, [(lab, stats[n].gauges[key]) for n, lab in trt])
    exp = [(n, lab, expectations.get(n)) for n, lab in base if expectations.get(n)]
    family("specdec_sweep_applied_draft_len", "gauge", "Draft length the last applied sweep chose (0: no speculation).",
           [(lab, e["applied_draft_len"]) for n, lab, e in exp if e["applied_draft_len"] is not None])
    family("specdec_sweep_expected_acceptance_length", "gauge",
           "Acceptance length (tokens per step) the last sweep measured at the applied draft length.",
           [(lab, e["expected_acceptance_length"]) for n, lab, e in exp if e["expected_acceptance_length"] is not None])
    rows = [(lab, r) for n, lab, e in exp for r in e["by_concurrency"] if r["concurrency"] is not None]
    family("specdec_sweep_acceptance_length", "gauge", "Acceptance length the last sweep measured, per concurrency.",
           [(lab + [("concurrency", r["concurrency"]), ("draft_len", r["draft_len"])], r["acceptance_length"])
            for lab, r in rows if r["acceptance_length"] is not None])
    family("specdec_sweep_output_tokens_per_second", "gauge",
           "Median output tokens/s the last sweep measured for its winner, per concurrency.",
           [(lab + [("concurrency", r["concurrency"]), ("draft_len", r["draft_len"])], r["output_tokens_per_second"])
            for lab, r in rows if r["output_tokens_per_second"] is not None])
    return "\n".join(out) + "\n"


class Exporter(object):
    """Pollers (one thread per instance) and the shared state the HTTP server renders."""

    def __init__(self, cfg, opener=None):
        self.cfg = cfg
        self.lock = threading.Lock()
        self.stats = {i["name"]: InstanceStats(cfg["history"]) for i in cfg["instances"] if i["engine"] == "trtllm"}
        self.up, self.ready, self.errors = {}, {}, {}
        self.progress = {}  # name -> (ok, seconds of the probe or None when none was needed); None: not judged
        self.progress_mark = {}  # name -> tokens the engine had generated at the last judgement
        self.expectations = {}
        self._fact_stamp = None
        self.read_locks = dict((name, threading.Lock()) for name in self.stats)
        # reads of each engine begun and ended (by the pollers only): a drain waits for a read that
        # began after it arrived, and never reads the engine itself
        self.refreshed = threading.Condition(self.lock)
        self.reads_begun = dict.fromkeys(self.stats, 0)
        self.reads_done = dict.fromkeys(self.stats, 0)
        self.readers = {}  # (instance, reader) -> last sequence number it was given
        self.stop_event = threading.Event()
        self.opener = opener or urllib.request.urlopen
        self.threads = []

    def _get(self, url):
        with self.opener(url, timeout=self.cfg["timeout"]) as resp:
            return resp.status if hasattr(resp, "status") else resp.getcode(), resp.read()

    def read_engine(self, inst):
        """Drain one TensorRT-LLM instance's /metrics into its stats (one read at a time per instance,
        so iterations are folded in the engine's order)."""
        name, base = inst["name"], inst["url"].rstrip("/")
        with self.read_locks[name]:
            with self.lock:
                self.reads_begun[name] += 1
                number = self.reads_begun[name]
            try:
                status, body = self._get(base + "/metrics")
                data = json.loads(body.decode("utf-8") or "[]")
                with self.lock:
                    self.stats[name].ingest(data)
                    self.up[name] = True
            except (OSError, ValueError, urllib.error.URLError):
                with self.lock:
                    self.up[name] = False
                    self.errors[name] = self.errors.get(name, 0) + 1
            finally:
                with self.lock:
                    self.reads_done[name] = number
                    self.refreshed.notify_all()

    def poll_once(self, inst):
        """Read one instance: /metrics (TensorRT-LLM) and /health."""
        name, base = inst["name"], inst["url"].rstrip("/")
        if name in self.stats:
            self.read_engine(inst)
        try:
            status, body = self._get(base + "/health")
            ok = status == 200
        except urllib.error.HTTPError:
            ok = False
        except (OSError, ValueError, urllib.error.URLError):
            ok = False
            with self.lock:
                self.errors[name] = self.errors.get(name, 0) + 1
        with self.lock:
            self.ready[name] = ok
            if name not in self.stats:
                self.up[name] = ok

    def generated_tokens(self, inst):
        """Tokens the engine has generated (TensorRT-LLM: folded from its iteration stats by the poller; vLLM:
        its own counter), or None when it cannot be read."""
        name, base = inst["name"], inst["url"].rstrip("/")
        if name in self.stats:
            with self.lock:
                return self.stats[name].counters["generated_tokens"]
        try:
            _status, body = self._get(base + "/metrics")
        except (OSError, ValueError, urllib.error.URLError):
            return None
        total = None
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("vllm:generation_tokens_total"):
                try:
                    total = (total or 0.0) + float(line.rsplit(None, 1)[-1])
                except ValueError:
                    continue
        return total

    def probe_progress(self, inst):
        """Judge whether one instance makes progress: (True, None) when it generated tokens since the last
        judgement; else ask it for one completion token within probe_deadline and record (ok, seconds); None when
        the engine does not let the exporter ask (401/403: an API key) or is not ready (then /health says it)."""
        name, base = inst["name"], inst["url"].rstrip("/")
        before = self.generated_tokens(inst)
        mark = self.progress_mark.get(name)
        self.progress_mark[name] = before
        if before is not None and mark is not None and before > mark:
            with self.lock:
                self.progress[name] = (True, None)
            return
        deadline = float(self.cfg["probe_deadline"])
        verdict = None
        try:
            _status, body = self._get(base + "/v1/models")
            model = json.loads(body.decode("utf-8"))["data"][0]["id"]
            request = urllib.request.Request(
                base + "/v1/completions", method="POST", headers={"Content-Type": "application/json"},
                data=json.dumps({"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}).encode())
            started = time.monotonic()
            try:
                with self.opener(request, timeout=deadline) as resp:
                    answer = json.loads(resp.read().decode("utf-8"))
                if not answer.get("choices"):
                    raise ValueError("an answer without a choice")
                verdict = (True, round(time.monotonic() - started, 3))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                if isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403):
                    verdict = None
                else:
                    verdict = (False, round(max(deadline, time.monotonic() - started), 3))
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            verdict = None  # no model list: the engine is down or not ready, which /health reports
        with self.lock:
            self.progress[name] = verdict

    def _probe_loop(self, inst):
        interval = float(self.cfg["probe_interval"])
        while not self.stop_event.wait(interval):
            self.probe_progress(inst)

    def read_fact(self):
        """Re-read the sweep fact when it changed."""
        path = self.cfg["fact_file"]
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._fact_stamp:
            return
        fact = {}
        if stamp is not None:
            try:
                with open(path) as fh:
                    fact = json.load(fh)
            except (OSError, ValueError):
                fact = {}
        exp = {i["name"]: sweep_expectation(fact, i["name"]) for i in self.cfg["instances"]}
        with self.lock:
            self.expectations = exp
            self._fact_stamp = stamp

    def metrics_text(self):
        self.read_fact()
        with self.lock:
            return render(self.cfg["instances"], self.stats, self.up, self.ready, self.errors, self.expectations,
                          self.progress)

    def iterations(self, name, after):
        with self.lock:
            if name not in self.stats:
                return None
            seq, first, stats = self.stats[name].since(after)
            return {"instance": name, "seq": seq, "first_seq": first, "stats": stats}

    def drain_for(self, name, reader):
        """The iterations `reader` has not been given yet, as the engine's own /metrics would return
        them (a JSON list, drained for this reader only). A request never reads the engine: it waits
        for the poller's next read (one that begins after it arrived, at most a poll interval and a
        read's timeout away), so the list ends with what the engine had when it asked, and a burst of
        requests costs the engine nothing. None for an unknown instance."""
        inst = next((i for i in self.cfg["instances"] if i["name"] == name and name in self.stats), None)
        if inst is None:
            return None
        with self.lock:
            if self.threads and not self.stop_event.is_set():
                wanted = self.reads_begun[name] + 1
                self.refreshed.wait_for(lambda: self.reads_done[name] >= wanted or self.stop_event.is_set(),
                                        timeout=self.cfg["poll_interval"] + self.cfg["timeout"] + 1)
            after = self.readers.get((name, reader), 0)
            seq, first, stats = self.stats[name].since(after)
            self.readers[(name, reader)] = seq
            if len(self.readers) > MAX_READERS:  # forget the oldest cursor
                self.readers.pop(next(iter(self.readers)))
            return stats

    def _loop(self, inst):
        while not self.stop_event.is_set():
            started = time.monotonic()
            self.poll_once(inst)
            self.stop_event.wait(max(0.0, self.cfg["poll_interval"] - (time.monotonic() - started)))

    def start(self):
        for inst in self.cfg["instances"]:
            t = threading.Thread(target=self._loop, args=(inst,), name="poll-" + inst["name"], daemon=True)
            t.start()
            self.threads.append(t)
            if self.cfg["probe_interval"] > 0:
                # its own thread: a probe of a wedged engine waits its deadline without delaying the polls
                t = threading.Thread(target=self._probe_loop, args=(inst,), name="probe-" + inst["name"], daemon=True)
                t.start()
                self.threads.append(t)

    def stop(self):
        self.stop_event.set()
        with self.lock:
            self.refreshed.notify_all()
        for t in self.threads:
            t.join(timeout=self.cfg["timeout"] + self.cfg["poll_interval"] + 1)
        # a probe thread still waiting on a wedged engine is a daemon: it ends with the process


def make_handler(exporter):
    class Handler(BaseHTTPRequestHandler):
        server_version = "specdec-exporter"

        def log_message(self, fmt, *args):  # quiet: one line per scrape is noise in the journal
            pass

        def _send(self, code, body, ctype):
            data = body.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/metrics":
                self._send(200, exporter.metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
            elif url.path == "/iterations":
                query = urllib.parse.parse_qs(url.query)
                try:
                    after = int(query.get("after", ["0"])[0])
                except ValueError:
                    self._send(400, json.dumps({"error": "after must be an integer"}), "application/json")
                    return
                result = exporter.iterations(query.get("instance", [""])[0], after)
                if result is None:
                    self._send(404, json.dumps({"error": "no TensorRT-LLM instance of that name"}), "application/json")
                else:
                    self._send(200, json.dumps(result), "application/json")
            elif url.path.startswith("/engine/") and url.path.endswith("/metrics"):
                name = urllib.parse.unquote(url.path[len("/engine/"):-len("/metrics")])
                reader = urllib.parse.parse_qs(url.query).get("reader", ["default"])[0]
                stats = exporter.drain_for(name, reader)
                if stats is None:
                    self._send(404, json.dumps({"error": "no TensorRT-LLM instance of that name"}), "application/json")
                else:
                    self._send(200, json.dumps(stats), "application/json")
            elif url.path in ("/", "/health"):
                self._send(200, "specdec-exporter\n", "text/plain")
            else:
                self._send(404, "not found\n", "text/plain")

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--config", required=True, help="JSON configuration file")
    parser.add_argument("--check", action="store_true", help="validate the configuration and exit")
    args = parser.parse_args(argv)
    try:
        with open(args.config) as fh:
            cfg = load_config(json.load(fh))
    except (OSError, ValueError) as exc:
        print("specdec-exporter: %s: %s" % (args.config, exc), file=sys.stderr)
        return 2
    if args.check:
        print("specdec-exporter: %s: %d instance(s), OK" % (args.config, len(cfg["instances"])))
        return 0
    exporter = Exporter(cfg)
    server = ThreadingHTTPServer((cfg["listen"], cfg["port"]), make_handler(exporter))
    server.daemon_threads = True
    exporter.start()
    print("specdec-exporter: %d instance(s), listening on %s:%d" % (len(cfg["instances"]), cfg["listen"], cfg["port"]),
          file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        exporter.stop()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
