# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Output-equivalence gate: does speculative decoding change what the engine generates greedily?

Speculative decoding must not change greedy output: the target model verifies every drafted
token, so a correct engine generates, at temperature 0, the same tokens with a draft length k as
without speculation. Engines have shipped bugs that break this. The sweep therefore sends a fixed
probe (C(specdec.serve.output_probe)) to the baseline (no speculation) and to every candidate, and
this module compares them.

Per prompt the comparison works on token pieces when both probes carry them (chat ``logprobs``),
otherwise on characters; ``unit`` says which. It reports the first divergent position (0-based,
in that unit), the length of the common prefix and a short excerpt of both outputs from a little
before that position.

Tolerance (``min_prefix``):

- ``None`` (the default): the outputs must be identical (same units, same length).
- ``N``: the first ``N`` tokens must match (all of them when an output is shorter than ``N``);
  after that the texts may differ. On GPUs the verify step of speculation (k+1 tokens at once) runs
  other kernels and batch shapes than one-token decoding, so bf16/fp8 numerics can flip a near-tie
  argmax, after which a correct engine's texts legitimately diverge. In character mode the token
  count of the common prefix is estimated from the baseline's characters per token, and the result
  says so (``estimated``).

A candidate's verdict: ``passed`` (every prompt within the tolerance), ``diverged`` (at least one
prompt beyond it), ``unverified`` (no usable baseline or candidate output: the gate fails closed),
``miscounted`` (see below), ``not_checked`` (the gate is off). Only ``passed`` and ``not_checked``
candidates are eligible.

Counts: the sweep ranks candidates on the server's ``usage.completion_tokens``, which engines have been seen
to inflate under speculation. Where a candidate's output is identical to the baseline's, both generated the
same tokens, so their usage counts must agree; a candidate whose count differs from the baseline's by more
than ``COUNT_SLACK`` tokens on any such prompt is ``miscounted``: the report names the prompt and both counts,
and the candidate is not ranked (its tokens per second would be wrong). Re-tokenizing the text is no check
(a tokenizer does not give back the generated tokens), so only identical outputs are compared.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

EXCERPT_BEFORE = {"token": 4, "character": 24}
EXCERPT_AFTER = {"token": 12, "character": 60}
ELIGIBLE = ("passed", "not_checked")
# tokens per request by which a candidate's usage count may differ from the baseline's for identical output
COUNT_SLACK = 1


class EquivalenceError(ValueError):
    """Invalid input to the comparison."""


def _sequence(output, unit):
    if unit == "token":
        return list(output["tokens"])
    return output["text"] or ""


def first_divergence(a, b):
    """Index of the first position where a and b differ, or None when they are equal.

    A sequence that is a strict prefix of the other diverges at its end.
    """
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def excerpt(seq, at, unit):
    """A short text of seq from a little before position `at`, with ... where it is cut."""
    start = max(0, at - EXCERPT_BEFORE[unit])
    end = at + EXCERPT_AFTER[unit]
    piece = seq[start:end]
    text = "".join(piece) if unit == "token" else piece
    return ("..." if start > 0 else "") + text + ("..." if end < len(seq) else "")


def _usable(output):
    return isinstance(output, dict) and not output.get("error") and isinstance(output.get("text"), str)


def _count(output):
    count = output.get("completion_tokens")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def count_gap(row):
    """How far a prompt's candidate usage count is from the baseline's, for identical outputs (None: not
    compared)."""
    if row.get("baseline_count") is None or row.get("candidate_count") is None:
        return None
    return row["candidate_count"] - row["baseline_count"]


def compare_output(base, cand, min_prefix=None):
    """Compare one prompt's candidate output with the baseline's. Returns a dict."""
    if min_prefix is not None and (isinstance(min_prefix, bool) or int(min_prefix) < 1):
        raise EquivalenceError("min_prefix must be null or an integer >= 1, got %r" % (min_prefix,))
    row = {"index": (base or {}).get("index", (cand or {}).get("index")), "unit": None,
           "identical": False, "passed": False, "first_divergence": None, "matched_prefix": None,
           "required_prefix": None, "estimated": False, "baseline_length": None,
           "candidate_length": None, "baseline_excerpt": None, "candidate_excerpt": None, "error": None,
           "baseline_count": None, "candidate_count": None}
    if not _usable(base):
        row["error"] = "no baseline output: %s" % ((base or {}).get("error") or "missing")
        return row
    if not _usable(cand):
        row["error"] = "no candidate output: %s" % ((cand or {}).get("error") or "missing")
        return row
    unit = "token" if base.get("tokens") is not None and cand.get("tokens") is not None else "character"
    a, b = _sequence(base, unit), _sequence(cand, unit)
    at = first_divergence(a, b)
    matched = min(len(a), len(b)) if at is None else at
    row.update({"unit": unit, "identical": at is None, "first_divergence": at,
                "matched_prefix": matched, "baseline_length": len(a), "candidate_length": len(b)})
    if at is not None:
        row["baseline_excerpt"] = excerpt(a, at, unit)
        row["candidate_excerpt"] = excerpt(b, at, unit)
    else:
        # the same output: the usage counts of both must agree (see Counts above)
        row["baseline_count"] = _count(base)
        row["candidate_count"] = _count(cand)
    if min_prefix is None:
        row["passed"] = at is None
        return row
    # tokens that must match: min_prefix, or the whole of an output shorter than that
    if unit == "token":
        matched_tokens, total = matched, max(len(a), len(b))
    else:
        count = base.get("completion_tokens")
        per_char = (float(count) / len(a)) if count and len(a) else 0.25
        matched_tokens = int(matched * per_char)
        total = int(round(max(len(a), len(b)) * per_char))
        row["estimated"] = True
        if at is None:
            matched_tokens = total
    required = min(int(min_prefix), total)
    row["required_prefix"] = required
    row["passed"] = at is None or matched_tokens >= required
    return row


def candidate_verdict(baseline, probe, draft_len, min_prefix=None, enabled=True, error=None):
    """The gate's verdict on one candidate: its probe result against the baseline's.

    ``baseline`` and ``probe`` are C(output_probe) results (``outputs`` per prompt) or None;
    ``error`` is why the candidate could not be probed (it failed to start), if so.
    """
    verdict = {"draft_len": int(draft_len), "verdict": "not_checked", "eligible": True,
               "unit": None, "prompts": 0, "identical": 0, "within_tolerance": 0, "diverged": 0, "miscounted": 0,
               "min_prefix": min_prefix, "reason": None, "per_prompt": []}
    if not enabled:
        verdict["reason"] = "the output-equivalence gate is off (draft_sweep_equivalence=false)"
        return verdict
    if int(draft_len) == 0:
        verdict.update({"verdict": "reference", "reason": "the baseline (no speculation) is the reference"})
        return verdict
    base_out = (baseline or {}).get("outputs") or []
    cand_out = (probe or {}).get("outputs") or []
    if error or not cand_out:
        verdict.update({"verdict": "unverified", "eligible": False,
                        "reason": "the candidate could not be probed: %s" % (error or "no probe output")})
        return verdict
    if not base_out or not any(_usable(o) for o in base_out):
        verdict.update({"verdict": "unverified", "eligible": False,
                        "reason": "no baseline output to compare with (the baseline did not start or answer)"})
        return verdict
    by_index = dict((o.get("index"), o) for o in cand_out if isinstance(o, dict))
    rows = [compare_output(b, by_index.get(b.get("index")), min_prefix) for b in base_out]
    verdict["per_prompt"] = rows
    verdict["prompts"] = len(rows)
    verdict["identical"] = sum(1 for r in rows if r["identical"])
    verdict["within_tolerance"] = sum(1 for r in rows if r["passed"])
    verdict["diverged"] = sum(1 for r in rows if r["unit"] is not None and not r["passed"])
    units = sorted(set(r["unit"] for r in rows if r["unit"]))
    verdict["unit"] = units[0] if len(units) == 1 else ("mixed" if units else None)
    errors = [r for r in rows if r["error"]]
    miscounted = [r for r in rows if count_gap(r) is not None and abs(count_gap(r)) > COUNT_SLACK]
    verdict["miscounted"] = len(miscounted)
    if verdict["diverged"]:
        first = next(r for r in rows if r["unit"] is not None and not r["passed"])
        verdict.update({"verdict": "diverged", "eligible": False,
                        "reason": "prompt %s: first divergent %s at index %s (%s)" % (
                            first["index"], first["unit"], first["first_divergence"],
                            "identical output required" if min_prefix is None
                            else "%s leading tokens required" % first["required_prefix"])})
    elif errors:
        verdict.update({"verdict": "unverified", "eligible": False,
                        "reason": "prompt %s: %s" % (errors[0]["index"], errors[0]["error"])})
    elif miscounted:
        first = miscounted[0]
        verdict.update({"verdict": "miscounted", "eligible": False,
                        "reason": "prompt %s: the same output as the baseline, but the server counted %d completion "
                                  "tokens for it against the baseline's %d (more than %d apart), so its usage "
                                  "counts cannot be ranked on" % (first["index"], first["candidate_count"],
                                                                  first["baseline_count"], COUNT_SLACK)})
    else:
        verdict["verdict"] = "passed"
    return verdict


def summarize(verdicts, enabled=True, min_prefix=None, baseline=None, baseline_measured=True,
              prompts=None, max_tokens=None):
    """The report's ``equivalence`` section from every candidate's verdict."""
    cands = [v for v in verdicts if v["verdict"] != "reference"]
    passed = [v["draft_len"] for v in cands if v["verdict"] == "passed"]
    rejected = [v["draft_len"] for v in cands if not v["eligible"]]
    if not enabled:
        status = "off"
    elif rejected:
        status = "rejected"
    elif cands and len(passed) == len(cands):
        status = "passed"
    else:
        status = "not_run"
    outputs = (baseline or {}).get("outputs") or []
    return {
        "enabled": bool(enabled),
        "status": status,
        "tolerance": {
            "min_prefix": min_prefix,
            "meaning": ("identical output (every token)" if min_prefix is None else
                        "the first %d tokens must match (all of a shorter output)" % min_prefix),
        },
        "probe": {"prompts": prompts, "max_tokens": max_tokens, "temperature": 0.0},
        "baseline": {
            "draft_len": 0,
            "measured": bool(baseline_measured),
            "probed": bool(outputs),
            "unit": (baseline or {}).get("unit"),
            "errors": sum(1 for o in outputs if not _usable(o)),
        },
        "passed": passed,
        "rejected": rejected,
        "candidates": cands,
    }
