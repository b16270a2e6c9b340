# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Speculative-decoding statistics scraped from the engine (stdlib only).

TensorRT-LLM: ``GET /metrics`` returns a JSON list of iteration stats and the
queue is drained on read, so a run is observed by draining once before it and
polling during it. Each iteration may carry ``specDecodingStats`` with
``numDraftTokens``, ``numAcceptedTokens``, ``numRequestsWithDraftTokens``,
``acceptanceLength``, ``iterLatencyMS`` and ``draftOverhead``. The aggregate
acceptance length is the collection's one definition (``trtllm_iterations``, the code
the monitoring exporter folds the same stats with): tokens decoded per generation step,
``avgNumDecodedTokensPerIter`` weighted by ``numGenRequests`` over the whole run, reported
when the engine speculated (some iteration carried a draft).

vLLM: Prometheus counters ``vllm:spec_decode_num_drafts_total``,
``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total`` and
``..._num_accepted_tokens_per_pos_total{position=i}``, read before and after
(summed over every other label, as ``vllm bench serve`` does). Acceptance length
is ``1 + accepted/drafts``; the per-position rate is ``per_pos[i]/drafts``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import threading
import time
from typing import Any

from ansible.module_utils.urls import open_url
from ansible_collections.specdec.serve.plugins.module_utils import trtllm_iterations

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"

_SAMPLE_RE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>.*)\})?'
    r'\s+(?P<value>[-+0-9.eEinfaINFA]+)(?:\s+-?\d+)?\s*$'
)
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """Parse Prometheus text exposition into a list of (name, labels, value)."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            continue
        labels = {}
        if m.group("labels"):
            for k, v in _LABEL_RE.findall(m.group("labels")):
                labels[k] = v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        samples.append((m.group("name"), labels, value))
    return samples


def vllm_counters(text):
    """Sum the vLLM spec-decode counters over all label sets except position."""
    out: dict[str, Any] = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "per_pos": {}, "present": False}
    for name, labels, value in parse_prometheus(text):
        if name == VLLM_DRAFTS:
            out["drafts"] += value
            out["present"] = True
        elif name == VLLM_DRAFT_TOKENS:
            out["draft_tokens"] += value
            out["present"] = True
        elif name == VLLM_ACCEPTED:
            out["accepted"] += value
            out["present"] = True
        elif name == VLLM_PER_POS:
            try:
                pos = int(labels.get("position", ""))
            except ValueError:
                continue
            out["per_pos"][pos] = out["per_pos"].get(pos, 0.0) + value
            out["present"] = True
    return out


def vllm_delta(before, after):
    """Spec-decode statistics for the interval between two counter snapshots."""
    drafts = after["drafts"] - before["drafts"]
    draft_tokens = after["draft_tokens"] - before["draft_tokens"]
    accepted = after["accepted"] - before["accepted"]
    positions = sorted(set(before["per_pos"]) | set(after["per_pos"]))
    per_pos = [after["per_pos"].get(p, 0.0) - before["per_pos"].get(p, 0.0) for p in positions]
    res = {
        "engine": "vllm",
        "available": bool(after.get("present")),
        "num_drafts": int(round(drafts)),
        "num_draft_tokens": int(round(draft_tokens)),
        "num_accepted_tokens": int(round(accepted)),
        "acceptance_length": None,
        "acceptance_rate": None,
        "draft_tokens_per_draft": None,
        "per_position_acceptance_rate": [],
    }
    if drafts > 0:
        res["acceptance_length"] = round(1.0 + accepted / drafts, 4)
        res["draft_tokens_per_draft"] = round(draft_tokens / drafts, 4)
        res["per_position_acceptance_rate"] = [round(v / drafts, 4) for v in per_pos]
    if draft_tokens > 0:
        res["acceptance_rate"] = round(accepted / draft_tokens, 4)
    return res


def parse_trtllm_metrics(body):
    """Decode a TRT-LLM ``/metrics`` body into a list of iteration-stat dicts."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    body = body.strip()
    if not body:
        return []
    data = json.loads(body)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError("TRT-LLM /metrics is not a JSON list")
    out = []
    for item in data:
        if isinstance(item, str):
            item = json.loads(item)
        if isinstance(item, dict):
            out.append(item)
    return out


class TrtllmAccumulator:
    """Aggregates TRT-LLM iteration stats over a run, folded as the exporter folds them
    (``trtllm_iterations``: one definition of acceptance length)."""

    def __init__(self):
        self.counters = trtllm_iterations.counters()
        self.spec_iterations = 0
        self.null_spec = 0
        self.overhead_sum = 0.0
        self.active_sum = 0
        self.seen = set()

    def add(self, stats):
        for it in stats:
            key = (it.get("iter"), it.get("timestamp"))
            if key != (None, None):
                if key in self.seen:
                    continue
                self.seen.add(key)
            trtllm_iterations.fold(self.counters, it)
            self.active_sum += int(it.get("numActiveRequests") or 0)
            spec = it.get("specDecodingStats")
            if not isinstance(spec, dict):
                self.null_spec += 1
                continue
            if int(spec.get("numRequestsWithDraftTokens") or 0) <= 0:
                continue
            self.spec_iterations += 1
            self.overhead_sum += float(spec.get("draftOverhead") or 0.0)

    def result(self):
        c = self.counters
        iterations = int(c["iterations"])
        res = {
            "engine": "trtllm",
            "available": self.spec_iterations > 0,
            "iterations": iterations,
            "iterations_with_draft": self.spec_iterations,
            "iterations_without_spec_stats": self.null_spec,
            "num_draft_tokens": int(c["draft_tokens"]),
            "num_accepted_tokens": int(c["accepted_draft_tokens"]),
            "num_requests_with_draft_tokens": int(c["requests_with_draft"]),
            "acceptance_length": None,
            "acceptance_rate": None,
            "draft_overhead_mean": None,
            "iter_latency_ms_mean": None,
            "active_requests_mean": None,
        }
        length = trtllm_iterations.acceptance_length(c)
        if self.spec_iterations and length is not None:
            res["acceptance_length"] = round(length, 4)
        rate = trtllm_iterations.acceptance_rate(c)
        if rate is not None:
            res["acceptance_rate"] = round(rate, 4)
        if self.spec_iterations:
            res["draft_overhead_mean"] = round(self.overhead_sum / self.spec_iterations, 4)
        if iterations:
            res["iter_latency_ms_mean"] = round(c["iteration_latency_seconds"] * 1000.0 / iterations, 4)
            res["active_requests_mean"] = round(self.active_sum / float(iterations), 4)
        return res


def http_get(url, headers=None, timeout=10.0):
    """GET ``url``; returns (status, body bytes)."""
    resp = open_url(url, headers=headers or {}, timeout=timeout, use_proxy=False)
    try:
        return resp.status, resp.read()
    finally:
        resp.close()


def detect_engine(text):
    """Guess the engine from a /metrics body: 'trtllm', 'vllm' or None."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            parse_trtllm_metrics(stripped)
            return "trtllm"
        except ValueError:
            return None
    if "vllm:" in text:
        return "vllm"
    return None


class SpecScraper:
    """Observe speculative-decoding statistics around a measured phase.

    ``engine`` is 'trtllm', 'vllm', 'auto' or 'none'. Call ``start()`` right
    before the phase and ``stop()`` right after; ``stop()`` returns a dict.
    Scrape failures never raise: they are reported under ``error``.
    """

    def __init__(self, engine, metrics_url, headers=None, poll_interval=1.0, timeout=10.0,
                 getter=http_get):
        self.engine = engine
        self.url = metrics_url
        self.headers = headers or {}
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.get = getter
        self.error = None
        self._before = None
        self._acc = None
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def _fetch(self):
        status, body = self.get(self.url, self.headers, self.timeout)
        if status != 200:
            raise IOError("GET %s returned HTTP %s" % (self.url, status))
        return body.decode("utf-8", "replace")

    def _poll(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                stats = parse_trtllm_metrics(self._fetch())
                with self._lock:
                    if self._acc is None:
                        raise AssertionError("no accumulator: start() sets it before it starts this thread")
                    self._acc.add(stats)
            except Exception as exc:  # keep polling; report the last failure
                self.error = "poll: %s" % (exc,)
            rest = self.poll_interval - (time.monotonic() - t0)
            if rest > 0:
                self._stop.wait(rest)

    def start(self):
        if self.engine == "none":
            return
        try:
            text = self._fetch()
        except Exception as exc:
            self.error = "scrape before the run failed: %s" % (exc,)
            self.engine = "none"
            return
        if self.engine == "auto":
            self.engine = detect_engine(text) or "none"
            if self.engine == "none":
                self.error = "could not recognise the /metrics format at %s" % self.url
                return
        if self.engine == "vllm":
            self._before = vllm_counters(text)
        elif self.engine == "trtllm":
            # the body just read is drained: it held warm-up iterations only
            self._acc = TrtllmAccumulator()
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll, name="trtllm-metrics")
            self._thread.daemon = True
            self._thread.start()

    def stop(self):
        if self.engine == "vllm" and self._before is not None:
            try:
                res = vllm_delta(self._before, vllm_counters(self._fetch()))
            except Exception as exc:
                res = {"engine": "vllm", "available": False,
                       "error": "scrape after the run failed: %s" % (exc,)}
            res["metrics_url"] = self.url
            return res
        if self.engine == "trtllm" and self._acc is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(self.timeout + self.poll_interval + 1)
            try:
                final = parse_trtllm_metrics(self._fetch())
                with self._lock:
                    self._acc.add(final)
            except Exception as exc:
                self.error = "final drain failed: %s" % (exc,)
            res = self._acc.result()
            # where the statistics were read: the engine itself, or the exporter that reads it
            res["metrics_url"] = self.url
            if self.error:
                res["error"] = self.error
            return res
        res = {"engine": "none", "available": False}
        if self.error:
            res["error"] = self.error
        return res
