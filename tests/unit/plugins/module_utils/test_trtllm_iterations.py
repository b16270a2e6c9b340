"""trtllm_iterations: the one definition of TensorRT-LLM acceptance length, which the exporter's
counters (and so the recording rule the alert reads) and serve_bench's measurement (and so a sweep's
expectation) share."""

import importlib.util
import random
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import bench_spec, trtllm_iterations as T
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as monitoring_rules

EXPORTER = Path(__file__).resolve().parents[4] / "roles" / "monitoring_exporter" / "files" / "specdec_exporter.py"


def _exporter():
    spec = importlib.util.spec_from_file_location("specdec_exporter_under_test", EXPORTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stats(seed, n=200):
    """Iterations as TensorRT-LLM reports them: some generating requests draft, some do not, some
    iterations carry no specDecodingStats at all."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        gen = rng.randint(0, 4)
        drafted = rng.randint(0, gen)
        accepted = sum(rng.randint(0, 3) for _ in range(drafted))
        spec = None
        if rng.random() > 0.2:
            spec = {"numDraftTokens": 3 * drafted, "numAcceptedTokens": accepted,
                    "numRequestsWithDraftTokens": drafted, "draftOverhead": 0.1}
        out.append({"iter": i, "iterLatencyMS": 10.0, "numActiveRequests": gen,
                    "inflightBatchingStats": {"numGenRequests": gen, "numContextRequests": 0,
                                              "avgNumDecodedTokensPerIter": (gen + accepted) / gen if gen else 0.0},
                    "specDecodingStats": spec})
    return out


def test_decoded_tokens_per_generation_step():
    c = T.counters()
    assert T.acceptance_length(c) is None and T.acceptance_rate(c) is None
    T.fold(c, {"inflightBatchingStats": {"numGenRequests": 2, "avgNumDecodedTokensPerIter": 3.0},
               "specDecodingStats": {"numDraftTokens": 6, "numAcceptedTokens": 4, "numRequestsWithDraftTokens": 2}})
    T.fold(c, {"inflightBatchingStats": {"numGenRequests": 1, "avgNumDecodedTokensPerIter": 1.0},
               "specDecodingStats": None})
    assert T.acceptance_length(c) == pytest.approx(7 / 3.0)
    assert T.acceptance_rate(c) == pytest.approx(4 / 6.0)
    assert c["iterations"] == 2 and c["spec_stats_iterations"] == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_exporter_and_serve_bench_measure_the_same_acceptance_length(seed):
    stats = _stats(seed)
    exporter = _exporter().InstanceStats()
    exporter.ingest(stats)
    live = exporter.counters["decoded_tokens"] / exporter.counters["generation_steps"]
    acc = bench_spec.TrtllmAccumulator()
    acc.add(stats)
    measured = acc.result()["acceptance_length"]
    assert measured == pytest.approx(live, abs=1e-4)
    # where some generating request did not draft, the drafted steps alone would say more
    drafted = exporter.counters["requests_with_draft"]
    assert (drafted + exporter.counters["accepted_draft_tokens"]) / drafted > live


def test_the_recording_rule_reads_the_same_counters():
    rules = monitoring_rules.rules({})
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]
             if r.get("record") == "specdec:acceptance_length:rate"]
    trtllm = [e for e in exprs if "specdec_engine_" in e]
    assert len(trtllm) == 1
    numerator, denominator = trtllm[0].split(" / ")
    assert "specdec_engine_decoded_tokens_total" in numerator
    assert "specdec_engine_generation_steps_total" in denominator
