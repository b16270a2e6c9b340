# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workloads of serve_bench beside its closed loop (stdlib only).

- Arrival processes of the open loop: ``poisson`` (exponential gaps of mean ``1/rate``) or
  ``constant`` (gaps of exactly ``1/rate``), from a seeded ``random.Random``; the first request is
  sent at once. :func:`run_open_phase` sends requests at those times with at most ``cap`` in flight.
- Length distributions (``fixed``, ``uniform``, ``normal``) of synthetic input and output lengths.
- Synthetic prompts of about N tokens, without a tokenizer: N words drawn from a list of common short
  English words, each of which is one token (with its leading space) in the GPT (cl100k, o200k) and
  Llama 3 vocabularies. The engine's ``usage.prompt_tokens`` reports the real count, chat template
  included; serve_bench returns it beside the target.
- Request records (a user's prompts): ``{"prompt": str}`` or ``{"messages": [...]}``, optionally with
  ``max_tokens``; :func:`normalize_record` checks one, for the module and for the controller's reader.
- Goodput: the requests meeting every latency target (TTFT, TPOT), as a share and a rate.
- No prefix-cache replays: :func:`unique_bodies` starts every request of a run with a tag of its own, so
  a prompt the engine saw before (an earlier request, repetition, warm-up or load level) is not served
  from its prefix cache, unless the workload allows it (``prefix_cache``).

All randomness goes through ``random.Random(seed)`` so a seed gives the same workload every time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import math
import queue
import random
import threading
import time
from typing import Any

from ansible_collections.specdec.serve.plugins.module_utils.bench_sse import stream_chat
from ansible_collections.specdec.serve.plugins.module_utils.bench_stats import summarize

# The default prompt of the hand-run benchmark in the seeds (coder543/llm-speed-benchmark).
VACATION_PROMPT = (
    "Imagine you are planning a week-long vacation to a place you've never visited before. "
    "Describe the destination, including its main attractions and cultural highlights. "
    "What activities would you prioritize during your visit? Additionally, explain how you "
    "would prepare for the trip, including any specific items you would pack and any research "
    "you would conduct beforehand. Finally, discuss how you would balance relaxation and "
    "adventure during your vacation."
)

PROMPT_SETS = {
    "vacation": [VACATION_PROMPT],
    "mixed": [
        VACATION_PROMPT,
        "Solve the following problem step by step. If a train travels 180 km in 3 hours, and "
        "then slows down by 20% for the next 2 hours, what is the total distance traveled? Show "
        "all intermediate calculations and provide a final numeric answer.",
        "Explain the benefits of speculative decoding for large language model inference.",
        "Give me a two-sentence summary of Eagle3 speculative decoding.",
        "Write a Python function that returns the n-th Fibonacci number iteratively, with a "
        "docstring and two doctest examples.",
        "Summarise the causes and consequences of the French Revolution in five bullet points.",
        "Translate into French and then into German: 'The quick brown fox jumps over the lazy "
        "dog while the farmer watches from the barn.'",
        "List ten practical tips for writing clear technical documentation, one sentence each.",
    ],
}

ARRIVALS = ("poisson", "constant")
DISTRIBUTIONS = ("fixed", "uniform", "normal")

# Common English words that are each a single token with a leading space in cl100k, o200k and the
# Llama 3 tokenizer (and nearly all in SentencePiece Llama 2); a prompt of N of them is about N tokens.
WORDS = (
    "the of and to in is was for on that with as by at from his her they this had not are but one "
    "all were have when which there been more their if will time would so no what up out about into "
    "than them can only other new some could these two may first then do any like my now over such "
    "our man me even most made after also did many before must through back years where much your way "
    "well down should because each just those people how too little state good very make world still "
    "own see men work long get here between both life being under never day same another know while "
    "last might us great old year off come since against go came right used take three house use "
    "during without again place around however home small found thought went say part once general "
    "high upon school every does got left number course war until always away something fact though "
    "water less public put think almost hand enough far took head yet government system better set "
    "told nothing night end why called eyes find going look asked later point knew city next program "
    "business give group toward young days let room side social present given several order national "
    "second possible rather per face among form important often things looked early white case john "
    "become large big need four within felt along children saw best church ever least power development "
    "light thing seemed family interest want members others mind country area done turned although open "
    "god service problem certain kind different thus began door help means sense whole matter perhaps "
    "itself york times law human line above name example action company hands local show whether five "
    "history gave today either act feet across taken past quite anything seen having death experience "
    "body word half really week field money car words already information"
).split()


class WorkloadError(ValueError):
    """A workload setting or a request record that cannot be used."""


# -- arrivals ---------------------------------------------------------------------------------


def arrival_offsets(n, rate, process="poisson", seed=0):
    """Send times (seconds after the start) of ``n`` requests at ``rate`` requests/s.

    The first request is at 0; the gaps are exponential with mean ``1/rate`` (``poisson``) or exactly
    ``1/rate`` (``constant``). The same seed gives the same times.
    """
    if process not in ARRIVALS:
        raise WorkloadError("arrival must be one of %s, got %r" % (", ".join(ARRIVALS), process))
    rate = float(rate)
    if rate <= 0 or math.isnan(rate):
        raise WorkloadError("request_rate must be > 0, got %r" % (rate,))
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(int(n)):
        if i:
            t += rng.expovariate(rate) if process == "poisson" else 1.0 / rate
        out.append(t)
    return out


# -- length distributions -------------------------------------------------------------------------


def check_length_spec(spec, what):
    """Validate a length distribution; returns it with defaults filled in.

    ``fixed``: ``mean`` tokens. ``uniform``: integers from ``min`` to ``max`` inclusive. ``normal``:
    ``round(gauss(mean, sd))`` clamped to ``min`` (default 1) .. ``max`` (default unbounded).
    """
    if not isinstance(spec, dict):
        raise WorkloadError("%s must be a mapping, got %r" % (what, spec))
    spec = dict((k, v) for k, v in spec.items() if v is not None)
    dist = spec.get("distribution", "fixed")
    if dist not in DISTRIBUTIONS:
        raise WorkloadError("%s.distribution must be one of %s, got %r" % (what, ", ".join(DISTRIBUTIONS), dist))

    def num(key, cast=int, low=1):
        if key not in spec:
            return None
        value = spec[key]
        if isinstance(value, bool):
            raise WorkloadError("%s.%s must be a number, got %r" % (what, key, value))
        try:
            value = cast(value)
        except (TypeError, ValueError):
            raise WorkloadError("%s.%s must be a number, got %r" % (what, key, value))
        if value < low:
            raise WorkloadError("%s.%s must be >= %s, got %r" % (what, key, low, value))
        return value

    out = {"distribution": dist, "mean": num("mean"), "min": num("min"), "max": num("max"),
           "sd": num("sd", float, 0)}
    if dist in ("fixed", "normal") and out["mean"] is None:
        raise WorkloadError("%s: distribution %s needs mean" % (what, dist))
    if dist == "uniform" and (out["min"] is None or out["max"] is None):
        raise WorkloadError("%s: distribution uniform needs min and max" % what)
    if dist == "normal" and out["sd"] is None:
        raise WorkloadError("%s: distribution normal needs sd" % what)
    if out["min"] is not None and out["max"] is not None and out["min"] > out["max"]:
        raise WorkloadError("%s.min (%d) must be <= %s.max (%d)" % (what, out["min"], what, out["max"]))
    return out


def draw_lengths(spec, n, rng):
    """``n`` lengths (ints >= 1) from a checked distribution, drawn with ``rng``."""
    dist = spec["distribution"]
    if dist == "fixed":
        return [spec["mean"]] * n
    if dist == "uniform":
        return [rng.randint(spec["min"], spec["max"]) for dummy in range(n)]
    low = spec["min"] or 1
    high = spec["max"]
    out = []
    for dummy in range(n):
        v = max(low, int(round(rng.gauss(spec["mean"], spec["sd"]))))
        out.append(min(v, high) if high is not None else v)
    return out


def synthetic_prompt(n_tokens, rng):
    """About ``n_tokens`` tokens of words (see WORDS); distinct for each draw, so no prefix is shared."""
    return " ".join(rng.choice(WORDS) for dummy in range(int(n_tokens)))


# -- request records ------------------------------------------------------------------------------


def normalize_record(rec, where="record"):
    """Check one request record; returns ``{"prompt"|"messages", "max_tokens"?}``.

    ``where`` names it in errors (``file.jsonl line 7``).
    """
    if isinstance(rec, str):
        rec = {"prompt": rec}
    if not isinstance(rec, dict):
        raise WorkloadError("%s: expected an object with prompt or messages, got %s"
                            % (where, type(rec).__name__))
    has_prompt, has_messages = "prompt" in rec, "messages" in rec
    if has_prompt == has_messages:
        raise WorkloadError("%s: expected exactly one of prompt or messages, got keys %s"
                            % (where, ", ".join(sorted(rec)) or "none"))
    out: dict[str, Any] = {}
    if has_prompt:
        if not isinstance(rec["prompt"], str) or not rec["prompt"]:
            raise WorkloadError("%s: prompt must be a non-empty string" % where)
        out["prompt"] = rec["prompt"]
    else:
        msgs = rec["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise WorkloadError("%s: messages must be a non-empty list" % where)
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
                raise WorkloadError("%s: messages[%d] must be an object with role and content" % (where, i))
            if not isinstance(m["content"], (str, list)):
                raise WorkloadError("%s: messages[%d].content must be a string or a list of parts" % (where, i))
        out["messages"] = msgs
    mt = rec.get("max_tokens")
    if mt is not None:
        if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
            raise WorkloadError("%s: max_tokens must be an integer >= 1, got %r" % (where, mt))
        out["max_tokens"] = mt
    return out


def _tagged_content(content, tag):
    if isinstance(content, str):
        return tag + content
    if isinstance(content, list):
        return [{"type": "text", "text": tag}] + content
    raise WorkloadError("a message content must be a string or a list of parts, got %s" % type(content).__name__)


def tag_body(body, tag):
    """One request body (JSON bytes) whose prompt, or first message, starts with ``[tag] ``: its token
    sequence then shares no prefix-cache block with any request of another tag (engines hash a block
    with every block before it), beyond the few tokens a chat template puts before the first message."""
    data = json.loads(body.decode("utf-8"))
    text = "[%s] " % tag
    if "messages" in data:
        first = dict(data["messages"][0])
        first["content"] = _tagged_content(first.get("content"), text)
        data["messages"] = [first] + data["messages"][1:]
    elif isinstance(data.get("prompt"), str):
        data["prompt"] = text + data["prompt"]
    else:
        raise WorkloadError("a request body has neither messages nor a prompt string to tag")
    return json.dumps(data).encode("utf-8")


def bodies_digest(bodies):
    """Eight hex digits of the bodies: runs of other workloads get other tags."""
    return hashlib.sha256(b"\0".join(bodies)).hexdigest()[:8]


def unique_bodies(bodies, n, run_tag):
    """``n`` request bodies, request ``i`` being ``bodies[i % len(bodies)]`` tagged ``run_tag/i``
    (:func:`tag_body`). The tags are the same for the same run on every candidate, so candidates send the
    same number of prompt tokens, and differ between runs (warm-up, each repetition, each load level)."""
    return [tag_body(bodies[i % len(bodies)], "%s/%d" % (run_tag, i)) for i in range(n)]


def is_completions_path(path):
    """Whether ``path`` is the (legacy) completions endpoint, which takes ``prompt`` not messages."""
    p = (path or "").rstrip("/")
    return p.endswith("/completions") and not p.endswith("/chat/completions")


def build_body(model, record, max_tokens, temperature, completions=False, ignore_eos=False,
               top_p=None, extra=None):
    """The JSON body of one streaming request for a normalized record."""
    body = {"model": model}
    if completions:
        if "messages" in record:
            raise WorkloadError("a record with messages cannot be sent to the completions endpoint; "
                                "use the chat-completions path or prompt records")
        body["prompt"] = record["prompt"]
    elif "messages" in record:
        body["messages"] = record["messages"]
    else:
        body["messages"] = [{"role": "user", "content": record["prompt"]}]
    body.update({"max_tokens": max_tokens, "temperature": temperature, "stream": True,
                 "stream_options": {"include_usage": True}})
    if top_p is not None:
        body["top_p"] = top_p
    if ignore_eos:
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return json.dumps(body).encode("utf-8")


def build_workload(cfg, model, n_measure, n_warmup):
    """Bodies (measured, warm-up) and a description, for a config using the workload options.

    ``cfg`` keys: input_len, output_len (length distributions or None), records (normalized request
    records or None), prompts (strings), max_tokens, temperature, top_p, ignore_eos, extra_body, path,
    seed. Synthetic prompts are drawn per request (``n_measure`` measured, ``n_warmup`` warm-up, the
    warm-up ones from their own stream so they share nothing with the measured ones); other sources
    are cycled in order as the closed loop does. ``output_len`` sets each request's ``max_tokens``
    and ``ignore_eos``.
    """
    seed = int(cfg.get("seed") or 0)
    completions = is_completions_path(cfg.get("path"))
    input_len, output_len = cfg.get("input_len"), cfg.get("output_len")
    desc = {"source": "prompts", "seed": seed,
            "api": "completions" if completions else "chat"}

    def records_for(n, stream):
        if input_len:
            rng = random.Random("%d/input/%s" % (seed, stream))
            lens = draw_lengths(input_len, n, rng)
            return [{"prompt": synthetic_prompt(k, rng)} for k in lens], lens
        src = cfg.get("records") or [{"prompt": p} for p in cfg["prompts"]]
        return [src[i % len(src)] for i in range(n)], None

    out = {}
    for stream, n in (("measure", n_measure), ("warmup", n_warmup)):
        recs, in_lens = records_for(n, stream)
        if output_len:
            rng = random.Random("%d/output/%s" % (seed, stream))
            out_lens = draw_lengths(output_len, n, rng)
        else:
            out_lens = [r.get("max_tokens", cfg["max_tokens"]) for r in recs]
        bodies = [build_body(model, r, m, cfg["temperature"], completions,
                             bool(output_len) or cfg.get("ignore_eos", False), cfg.get("top_p"),
                             cfg.get("extra_body"))
                  for r, m in zip(recs, out_lens)]
        out[stream] = bodies
        if stream == "measure":
            if in_lens is not None:
                desc["source"] = "synthetic"
                desc["input_len"] = dict(input_len, drawn=summarize(in_lens, (50, 90, 99)))
            elif cfg.get("records"):
                desc["source"] = "dataset"
                desc["records"] = len(cfg["records"])
            if output_len:
                desc["output_len"] = dict(output_len, drawn=summarize(out_lens, (50, 90, 99)))
            desc["max_tokens_total"] = sum(out_lens)
    return out["measure"], out["warmup"], desc


# -- open loop ------------------------------------------------------------------------------------


def run_open_phase(endpoint, bodies, offsets, cap, clock=time.perf_counter, monitor=None,
                   sleep=time.sleep):
    """Send request ``i`` (body ``bodies[i % len]``) at ``offsets[i]`` seconds after the start, with
    at most ``cap`` in flight; a request due while ``cap`` are in flight waits for one to end.

    ``clock`` must be a real clock (the dispatcher sleeps on it). Returns (records, schedule), the
    schedule holding for each request its due time, the time the dispatcher could turn to it (its due
    time, or later when the request before waited for the cap), the time the dispatcher woke for it,
    the time a slot was free (the wake-up time when one was) and the send time, all relative to the
    start.
    """
    n = len(offsets)
    records: list[Any] = [None] * n
    sched: list[Any] = [None] * n
    slots = threading.Semaphore(cap)
    work: "queue.Queue[int | None]" = queue.Queue()

    def worker():
        token = monitor.thread_start() if monitor else None
        conn = None
        while True:
            item = work.get()
            if item is None:
                break
            i = item
            rec, conn = stream_chat(endpoint, bodies[i % len(bodies)], conn=conn, clock=clock)
            rec["index"] = i
            records[i] = rec
            slots.release()
        if conn is not None:
            conn.close()
        if monitor:
            monitor.thread_end(token)

    threads = [threading.Thread(target=worker, name="bench-open-%d" % k) for k in range(min(cap, n))]
    for t in threads:
        t.daemon = True
        t.start()
    token = monitor.thread_start() if monitor else None
    t0 = clock()
    prev_free = 0.0
    for i, off in enumerate(offsets):
        due = t0 + off
        while True:
            left = due - clock()
            if left <= 0:
                break
            sleep(left)
        woke = clock()
        free = woke
        if not slots.acquire(False):
            slots.acquire()
            free = clock()
        # ready: when the dispatcher could turn to this request (after a wait for the cap on the one before)
        sched[i] = {"due": off, "ready": max(off, prev_free), "woke": woke - t0, "free": free - t0}
        prev_free = free - t0
        work.put(i)
    for dummy in threads:
        work.put(None)
    for t in threads:
        t.join()
    if monitor:
        monitor.thread_end(token)
    for i, rec in enumerate(records):
        sched[i]["sent"] = (rec["start"] - t0) if rec["start"] is not None else None
    return records, sched


def schedule_summary(sched, rate, process, cap, seed, percentiles=(50, 90, 99)):
    """(send lags in ms, summary) of an open-loop phase: target and achieved rates, waits for the cap
    and scheduling lags.

    - ``cap_wait_ms``: how long the cap delayed a request (``cap`` in flight when it was due, or when
      the one before it was), for the requests it delayed; ``cap_waited`` counts them.
    - ``send_lag_ms``: the client's own delay of each request: ready -> the dispatcher woke, plus slot
      free -> sent (hand-off to a worker, its wake-up, the request written); a starved client
      stretches both.
    """
    lags, waits = [], []
    for s in sched:
        if s is None or s["sent"] is None:
            continue
        lags.append(max(0.0, s["woke"] - s["ready"]) + max(0.0, s["sent"] - s["free"]))
        wait = (s["ready"] - s["due"]) + max(0.0, s["free"] - s["woke"])
        if wait > 0:
            waits.append(wait)
    sent = sorted(s["sent"] for s in sched if s and s["sent"] is not None)
    achieved = None
    if len(sent) > 1 and sent[-1] > sent[0]:
        achieved = round((len(sent) - 1) / (sent[-1] - sent[0]), 6)
    load = {"mode": "open", "arrival": process, "request_rate": rate, "achieved_request_rate": achieved,
            "max_in_flight": cap, "seed": seed, "cap_waited": len(waits),
            "cap_wait_ms": summarize(waits, percentiles, 1000.0),
            "send_lag_ms": summarize(lags, percentiles, 1000.0)}
    return [v * 1000.0 for v in lags], load


# -- goodput --------------------------------------------------------------------------------------


def goodput(records, duration, ttft_ms=None, tpot_ms=None):
    """Requests meeting every target given: TTFT <= ``ttft_ms`` and TPOT <= ``tpot_ms``.

    Failed requests never meet them and count in the share's denominator; a request of one output
    token has no TPOT and meets the TPOT target (as ``vllm bench serve`` counts it). Returns None
    when no target is given.
    """
    if ttft_ms is None and tpot_ms is None:
        return None
    met = 0
    for r in records:
        if not r["ok"]:
            continue
        if ttft_ms is not None and (r["ttft"] is None or r["ttft"] * 1000.0 > ttft_ms):
            continue
        if tpot_ms is not None:
            n = r["output_tokens"]
            if n > 1 and r["decode_time"] is not None and r["decode_time"] / (n - 1) * 1000.0 > tpot_ms:
                continue
        met += 1
    total = len(records)
    return {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "requests": total, "met": met,
            "share": round(met / float(total), 6) if total else None,
            "request_rate": round(met / duration, 6) if duration and duration > 0 else None}
