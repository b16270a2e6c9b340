# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Greedy output probe: what an endpoint generates for fixed prompts at temperature 0 (stdlib only).

Each prompt is sent once, one request at a time (batch size 1, the most deterministic shape an
engine runs), as a non-streaming chat completion with ``temperature: 0`` and ``logprobs: true``.
Both TensorRT-LLM (``trtllm-serve``) and vLLM answer ``logprobs: true`` on chat completions with
one ``choices[0].logprobs.content[]`` entry per generated token, whose ``token`` is the token's
text; those pieces are the probe's tokens. When the engine returns no such list, or refuses the
request with ``logprobs`` (some versions or speculative modes do), the request is sent again without
it and only the text is kept: the comparison then works on characters.

A record per prompt: ``index``, ``text`` (reasoning text, if any, then the content), ``tokens`` (the
list of token pieces, or null), ``completion_tokens`` (the usage count), ``finish_reason``,
``logprobs`` (whether token pieces were returned) and ``error`` (null, or one line).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket

from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import discover_model
from ansible_collections.specdec.serve.plugins.module_utils.bench_sse import (
    Endpoint, httplib)

_TEXT_KEYS = ("reasoning_content", "reasoning", "content")


def build_body(model, prompt, max_tokens, logprobs=True):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": False,
    }
    if logprobs:
        body["logprobs"] = True
    return body


def post_json(endpoint, body):
    """(status, parsed JSON or None, error text or None) of one non-streaming POST."""
    conn = endpoint.connect()
    headers = dict(endpoint.headers, Accept="application/json")
    try:
        conn.request("POST", endpoint.path, body=json.dumps(body).encode("utf-8"), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
    except (socket.timeout, OSError, httplib.HTTPException) as exc:
        return None, None, "%s: %s" % (type(exc).__name__, exc)
    finally:
        conn.close()
    if resp.status != 200:
        return resp.status, None, "HTTP %s: %s" % (
            resp.status, raw[:300].decode("utf-8", "replace").replace("\n", " "))
    try:
        return resp.status, json.loads(raw.decode("utf-8")), None
    except ValueError:
        return resp.status, None, "invalid JSON in the response: %r" % raw[:120]


def parse_choice(obj):
    """(text, tokens or None, finish_reason, completion_tokens) of a chat completion."""
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ValueError("the response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    text = "".join(message.get(k) or "" for k in _TEXT_KEYS if isinstance(message.get(k), str))
    tokens = None
    lp = choice.get("logprobs")
    if isinstance(lp, dict) and isinstance(lp.get("content"), list) and lp["content"]:
        pieces = [c.get("token") if isinstance(c, dict) else None for c in lp["content"]]
        if all(isinstance(t, str) for t in pieces):
            tokens = pieces
    usage = obj.get("usage") or {}
    return text, tokens, choice.get("finish_reason"), usage.get("completion_tokens")


def probe_one(endpoint, model, index, prompt, max_tokens, logprobs=True):
    rec = {"index": index, "text": None, "tokens": None, "completion_tokens": None,
           "finish_reason": None, "logprobs": False, "error": None}
    status, obj, err = post_json(endpoint, build_body(model, prompt, max_tokens, logprobs))
    if err is not None and logprobs and status is not None and 400 <= status < 500:
        # the engine refuses logprobs here: ask again for the text alone
        status, obj, err = post_json(endpoint, build_body(model, prompt, max_tokens, False))
    if err is not None:
        rec["error"] = err
        return rec
    try:
        text, tokens, finish, count = parse_choice(obj)
    except ValueError as exc:
        rec["error"] = str(exc)
        return rec
    rec.update({"text": text, "tokens": tokens, "finish_reason": finish, "completion_tokens": count,
                "logprobs": tokens is not None})
    return rec


def run_probe(cfg):
    """Send every prompt of ``cfg['prompts']`` once, in order. Returns the result dict."""
    endpoint = Endpoint(cfg["url"], cfg.get("path") or "/v1/chat/completions",
                        timeout=float(cfg.get("timeout") or 300), api_key=cfg.get("api_key"))
    model = cfg.get("model") or discover_model(endpoint)
    outputs = [probe_one(endpoint, model, i, prompt, int(cfg["max_tokens"]),
                         logprobs=cfg.get("logprobs", True))
               for i, prompt in enumerate(cfg["prompts"])]
    failed = [o for o in outputs if o["error"]]
    return {"model": model, "url": cfg["url"], "max_tokens": int(cfg["max_tokens"]),
            "temperature": 0.0, "outputs": outputs,
            "unit": "token" if outputs and all(o["tokens"] is not None for o in outputs) else "character",
            "failed_prompts": len(failed)}
