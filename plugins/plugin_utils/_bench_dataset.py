# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a user's request file for serve_bench on the controller (the bench_dataset lookup).

Two layouts, each as JSON Lines (one JSON value a line; blank lines skipped) or as one JSON array:

- request records: ``{"prompt": "..."}`` (a completions prompt) or ``{"messages": [{"role", "content"},
  ...]}`` (a chat conversation), optionally with ``"max_tokens"``;
- ShareGPT conversations: ``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", ...},
  ...]}``. The first human turn is the prompt (as ``vllm bench serve`` takes it); the reply after it is
  the reference output, whose length (about four characters a token, no tokenizer) becomes the record's
  ``max_tokens`` with ``reference_max_tokens``. Conversations without a human turn with text are skipped.

Every error names the file and the line (for an array, the line where the element starts). With ``num``
the records are a sample of that many drawn by ``random.Random(seed)``, the same for the same seed and
file; without, all of them in file order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import random

from ansible_collections.specdec.serve.plugins.module_utils.bench_workload import (
    WorkloadError, normalize_record)

FORMATS = ("auto", "jsonl", "sharegpt")
_USER = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


class DatasetError(ValueError):
    """A request file that cannot be read; the message names the file and the line."""


def _values(text, name):
    """(line, JSON value) of each JSON Lines line, or of each element of a top-level JSON array."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        dec = json.JSONDecoder()
        idx = len(text) - len(stripped) + 1
        line, counted = 1, 0
        out = []
        while True:
            while idx < len(text) and text[idx] in " \t\r\n,":
                idx += 1
            if idx >= len(text):
                raise DatasetError("%s: the JSON array is not closed" % name)
            if text[idx] == "]":
                break
            line += text.count("\n", counted, idx)
            counted = idx
            try:
                value, idx = dec.raw_decode(text, idx)
            except ValueError as exc:
                raise DatasetError("%s line %d: not JSON: %s" % (name, getattr(exc, "lineno", line), exc))
            out.append((line, value))
        return out
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append((n, json.loads(raw)))
        except ValueError as exc:
            colno = getattr(exc, "colno", 0)
            where = " at column %d" % colno if colno else ""
            raise DatasetError("%s line %d: not JSON: %s%s" % (name, n, getattr(exc, "msg", exc), where))
    return out


def sharegpt_record(value, where, reference_max_tokens=False):
    """The request record of one ShareGPT conversation, or None when it has no human turn with text."""
    conv = value.get("conversations")
    if not isinstance(conv, list):
        raise DatasetError("%s: conversations must be a list of turns" % where)
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict) or not isinstance(turn.get("from"), str) \
                or not isinstance(turn.get("value"), str):
            raise DatasetError("%s: conversations[%d] must be an object with from and value (strings)"
                               % (where, i))
    for i, turn in enumerate(conv):
        if turn["from"].lower() in _USER and turn["value"].strip():
            rec = {"prompt": turn["value"]}
            if reference_max_tokens:
                reply = next((t["value"] for t in conv[i + 1:] if t["from"].lower() in _ASSISTANT), None)
                if reply:
                    rec["max_tokens"] = max(1, int(math.ceil(len(reply) / 4.0)))
            return rec
    return None


def parse_dataset(text, name="dataset", fmt="auto", reference_max_tokens=False):
    """Every usable request record of a file's text, normalized (see bench_workload.normalize_record)."""
    if fmt not in FORMATS:
        raise DatasetError("format must be one of %s, got %r" % (", ".join(FORMATS), fmt))
    records = []
    for line, value in _values(text, name):
        where = "%s line %d" % (name, line)
        if not isinstance(value, dict):
            raise DatasetError("%s: expected a JSON object, got %s" % (where, type(value).__name__))
        if "conversations" in value and fmt != "jsonl":
            rec = sharegpt_record(value, where, reference_max_tokens)
            if rec is not None:
                records.append(rec)
            continue
        if fmt == "sharegpt":
            raise DatasetError("%s: a ShareGPT record needs conversations, got keys %s"
                               % (where, ", ".join(sorted(value)) or "none"))
        try:
            records.append(normalize_record(value, where))
        except WorkloadError as exc:
            raise DatasetError(str(exc))
    if not records:
        raise DatasetError("%s: no usable request record" % name)
    return records


def sample(records, num=None, seed=0, name="dataset"):
    """``num`` records drawn without replacement by ``random.Random(seed)``, or all in order."""
    if num is None:
        return list(records)
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise DatasetError("num must be an integer >= 1, got %r" % (num,))
    if num > len(records):
        raise DatasetError("%s: num is %d but the file has %d usable records" % (name, num, len(records)))
    return random.Random(seed).sample(records, num)


def read_dataset(path, fmt="auto", num=None, seed=0, reference_max_tokens=False):
    """Read, check and sample a request file (see the module docstring)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except (IOError, OSError) as exc:
        raise DatasetError("cannot read %s: %s" % (path, exc))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DatasetError("%s line %d: not UTF-8 (%s)" % (path, line, exc.reason))
    return sample(parse_dataset(text, path, fmt, reference_max_tokens), num, seed, path)
