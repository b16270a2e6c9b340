# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Streaming chat-completions client with per-chunk timing (stdlib only).

One call of :func:`stream_chat` sends one OpenAI-compatible streaming request
and returns a record of what arrived and when (``time.perf_counter`` seconds):

- ``ttft``: request sent -> first chunk carrying generated text
  (``delta.content``, ``delta.reasoning_content``/``reasoning`` or ``tool_calls``; ``text`` of a
  completions chunk);
  role-only and usage-only chunks do not count.
- ``chunk_times``: arrival of every text-carrying chunk, relative to the start.
  One chunk may carry several tokens (speculative decoding accepts several per
  step), so per-chunk gaps (ITL) are not per-token times.
- ``output_tokens``: ``usage.completion_tokens`` from the final usage chunk
  (requested with ``stream_options.include_usage``). If the server sends no
  usage, the number of text chunks is used and ``usage_reported`` is False.
- ``e2e``: request sent -> end of the stream (``[DONE]`` or end of body).

Anything other than a complete stream (HTTP status, socket error, timeout, an
``error`` object in the stream, no ``[DONE]``, no generated text) makes
``ok`` False with a one-line ``error``; nothing is dropped silently.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client as httplib
import json
import socket
import time
from urllib.parse import urlsplit

_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


class Endpoint:
    """Where to send requests, parsed once from a base URL."""

    def __init__(self, base_url, path="/v1/chat/completions", timeout=300.0, api_key=None):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError("url must start with http:// or https://, got %r" % (base_url,))
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        prefix = parts.path.rstrip("/")
        self.path = prefix + path
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self.headers["Authorization"] = "Bearer %s" % api_key

    def connect(self):
        cls = httplib.HTTPSConnection if self.scheme == "https" else httplib.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)


def build_chat_body(model, prompt, max_tokens, temperature, ignore_eos=False, extra=None):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return json.dumps(body).encode("utf-8")


def _new_record():
    return {
        "ok": False,
        "error": None,
        "status": None,
        "ttft": None,
        "e2e": None,
        "decode_time": None,
        "chunk_times": [],
        "chunks": 0,
        "text_chunks": 0,
        "output_tokens": 0,
        "prompt_tokens": None,
        "usage_reported": False,
        "finish_reason": None,
        "text_chars": 0,
        "start": None,
        "end": None,
    }


def _chunk_has_text(obj, rec):
    """Return True if a chat.completion.chunk carries generated text."""
    has = False
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") or {}
        for key in _TEXT_KEYS:
            val = delta.get(key)
            if val:
                rec["text_chars"] += len(val)
                has = True
        if delta.get("tool_calls"):
            has = True
        text = choice.get("text")  # a completions (not chat) chunk
        if text and isinstance(text, str):
            rec["text_chars"] += len(text)
            has = True
        if choice.get("finish_reason"):
            rec["finish_reason"] = choice["finish_reason"]
    return has


def _handle_event(payload, now, rec, state):
    """Process one SSE data payload. Returns True at ``[DONE]``."""
    if payload == b"[DONE]":
        return True
    try:
        obj = json.loads(payload)
    except ValueError:
        state["error"] = "invalid JSON in stream: %r" % payload[:120]
        return True
    if not isinstance(obj, dict):
        state["error"] = "unexpected stream event: %r" % payload[:120]
        return True
    if "error" in obj or obj.get("object") == "error":
        err = obj.get("error", obj)
        msg = err.get("message") if isinstance(err, dict) else err
        state["error"] = "error event in stream: %s" % (str(msg)[:200],)
        return True
    rec["chunks"] += 1
    if _chunk_has_text(obj, rec):
        rec["text_chunks"] += 1
        rec["chunk_times"].append(now - rec["start"])
    usage = obj.get("usage")
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        rec["output_tokens"] = int(usage["completion_tokens"])
        if usage.get("prompt_tokens") is not None:
            rec["prompt_tokens"] = int(usage["prompt_tokens"])
        rec["usage_reported"] = True
    return False


def _consume(resp, rec, clock):
    """Read the SSE body, timestamping each event at the read that completed it."""
    state: "dict[str, str | None]" = {"error": None}
    buf = b""
    data: list[bytes] = []
    done = False
    read = getattr(resp, "read1", None) or resp.read
    while True:
        piece = read(65536)
        now = clock()
        if not piece:
            break
        if done:
            continue  # drain the rest of the body so the connection can be reused
        if b"\r" in piece:
            piece = piece.replace(b"\r\n", b"\n")
        buf += piece
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                    if _handle_event(payload, now, rec, state):
                        done = True
                        break
                continue
            if line.startswith(b"data:"):
                data.append(line[5:].strip())
            # comments (":") and other fields (event:, id:, retry:) are ignored
        buf = buf[start:]
        if done:
            rec["end"] = now
    if not done:
        if data:  # final event without a trailing blank line
            _handle_event(b"\n".join(data), clock(), rec, state)
        rec["end"] = clock()
        if state["error"] is None:
            state["error"] = "stream ended without [DONE]"
    return state["error"]


def stream_chat(endpoint, body, conn=None, clock=time.perf_counter):
    """Send one streaming request. Returns (record, connection to reuse or None).

    A kept-alive connection the server has closed while it sat idle (its keep-alive timeout; an open
    loop's slot can wait seconds between requests) fails before the request gets any response: the
    request never reached the server, so it is sent once more on a fresh connection, as HTTP clients
    with connection pools do. Any other failure is the request's.
    """
    if conn is not None:
        rec, kept, stale = _stream(endpoint, body, conn, clock)
        if not stale:
            return rec, kept
    rec, kept, dummy = _stream(endpoint, body, endpoint.connect(), clock)
    return rec, kept


def _stream(endpoint, body, conn, clock):
    """(record, connection to reuse or None, whether it failed as a stale connection does)."""
    rec = _new_record()
    rec["start"] = clock()
    try:
        conn.request("POST", endpoint.path, body=body, headers=endpoint.headers)
        resp = conn.getresponse()
        rec["status"] = resp.status
        if resp.status != 200:
            text = resp.read()[:300].decode("utf-8", "replace").replace("\n", " ")
            rec["end"] = clock()
            rec["error"] = "HTTP %s: %s" % (resp.status, text)
            conn.close()
            return rec, None, False
        err = _consume(resp, rec, clock)
        reusable = not resp.will_close and err is None
    except (socket.timeout, OSError, httplib.HTTPException) as exc:
        rec["end"] = clock()
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        conn.close()
        # the connection was closed under the request (reset, broken pipe, closed without a status line)
        stale = rec["status"] is None and isinstance(exc, (ConnectionError, httplib.BadStatusLine))
        return rec, None, stale
    rec["e2e"] = rec["end"] - rec["start"]
    if err is None and not rec["chunk_times"]:
        err = "no generated text in the stream"
    if err is not None:
        rec["error"] = err
        conn.close()
        return rec, None, False
    if not rec["usage_reported"]:
        rec["output_tokens"] = rec["text_chunks"]
    rec["ttft"] = rec["chunk_times"][0]
    rec["decode_time"] = rec["chunk_times"][-1] - rec["chunk_times"][0]
    rec["ok"] = True
    if not reusable:
        conn.close()
        return rec, None, False
    return rec, conn, False
