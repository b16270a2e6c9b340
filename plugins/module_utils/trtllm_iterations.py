# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TensorRT-LLM's iteration stats folded into counters, and the collection's one definition of acceptance length.

``GET /metrics`` of ``trtllm-serve`` returns a JSON list of IterationStats, one per engine iteration.
Two readers fold them with :func:`fold`: the exporter on an engine host
(``roles/monitoring_exporter/files/specdec_exporter.py``, which runs this file installed beside it) and
``serve_bench`` (``bench_spec.TrtllmAccumulator``). So the live acceptance length the alert watches
and the one a draft-length sweep measured are the same quantity:

**acceptance length** = tokens decoded per generation step of a request
= sum(``avgNumDecodedTokensPerIter`` x ``numGenRequests``) / sum(``numGenRequests``)
(:func:`acceptance_length`). It is in ``inflightBatchingStats`` of every iteration, so it is defined
even when an iteration's ``specDecodingStats`` is null; where every generating request drafted, it is
``1 + numAcceptedTokens / numRequestsWithDraftTokens``. vLLM's counterpart is
``1 + accepted / drafts`` from its Prometheus counters (``bench_spec.vllm_delta``, the recording rule).

Standard library only, Python 3.8 and later.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Counters: name -> help. Values are floats.
COUNTERS = {
    "iterations": "Engine iterations read from /metrics.",
    "iterations_missed": "Iterations missing from the numbering (another reader or an overflowing queue).",
    "iteration_latency_seconds": "Sum of iterLatencyMS over the iterations, in seconds.",
    "generation_steps": "Generation-phase request steps (sum of numGenRequests).",
    "decoded_tokens": "Tokens decoded in generation steps (avgNumDecodedTokensPerIter x numGenRequests).",
    "context_requests": "Context (prefill) steps, one generated token each (sum of numContextRequests).",
    "generated_tokens": "Generated tokens: decoded_tokens plus context_requests.",
    "completed_requests": "Completed requests (sum of numCompletedRequests).",
    "spec_stats_iterations": "Iterations that carried specDecodingStats.",
    "draft_tokens": "Draft tokens proposed (specDecodingStats.numDraftTokens).",
    "accepted_draft_tokens": "Draft tokens accepted (specDecodingStats.numAcceptedTokens).",
    "requests_with_draft": "Request steps that carried a draft (specDecodingStats.numRequestsWithDraftTokens).",
}


def num(value, default=0.0):
    """A stat's number as a float (a boolean counts as 0 or 1); anything else is ``default``."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    return default


def counters():
    """Every counter at zero."""
    return dict.fromkeys(COUNTERS, 0.0)


def fold(c, stat):
    """Add one IterationStats mapping to the counters ``c`` (``iterations_missed`` is the reader's,
    which knows the numbering it has seen). Returns the iteration's ``avgNumDecodedTokensPerIter``
    when it had generation steps, else None."""
    c["iterations"] += 1
    c["iteration_latency_seconds"] += num(stat.get("iterLatencyMS")) / 1000.0
    c["completed_requests"] += num(stat.get("numCompletedRequests"))
    ifb = stat.get("inflightBatchingStats")
    ifb = ifb if isinstance(ifb, dict) else {}
    gen = num(ifb.get("numGenRequests"))
    ctx = num(ifb.get("numContextRequests"))
    per_iter = num(ifb.get("avgNumDecodedTokensPerIter"))
    c["generation_steps"] += gen
    c["decoded_tokens"] += per_iter * gen
    c["context_requests"] += ctx
    c["generated_tokens"] += per_iter * gen + ctx
    spec = stat.get("specDecodingStats")
    if isinstance(spec, dict):
        c["spec_stats_iterations"] += 1
        c["draft_tokens"] += num(spec.get("numDraftTokens"))
        c["accepted_draft_tokens"] += num(spec.get("numAcceptedTokens"))
        c["requests_with_draft"] += num(spec.get("numRequestsWithDraftTokens"))
    return per_iter if gen else None


def acceptance_length(c):
    """Tokens decoded per generation step of a request, or None before any generation step."""
    if c["generation_steps"] <= 0:
        return None
    return c["decoded_tokens"] / c["generation_steps"]


def acceptance_rate(c):
    """Accepted over proposed draft tokens, or None before any draft token."""
    if c["draft_tokens"] <= 0:
        return None
    return c["accepted_draft_tokens"] / c["draft_tokens"]
