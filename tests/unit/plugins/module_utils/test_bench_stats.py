"""Statistics and metric parsers used by serve_bench."""

import json
import math

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import bench_spec, bench_stats


def test_percentile_linear_interpolation_matches_numpy_default():
    data = [15, 20, 35, 40, 50]
    assert bench_stats.percentile(data, 0) == 15
    assert bench_stats.percentile(data, 100) == 50
    assert bench_stats.percentile(data, 50) == 35
    assert bench_stats.percentile(data, 40) == pytest.approx(29.0)  # numpy: 29.0
    assert bench_stats.percentile(data, 90) == pytest.approx(46.0)
    assert bench_stats.percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert bench_stats.percentile([], 50) is None
    assert bench_stats.percentile([7], 99) == 7
    with pytest.raises(ValueError):
        bench_stats.percentile([1, 2], 101)


def test_median_mad_ignore_none_and_nan():
    assert bench_stats.median([3, None, 1, float("nan"), 2]) == 2
    assert bench_stats.mad([1, 1, 2, 2, 4, 6, 9]) == 1
    assert bench_stats.mad([]) is None


def test_summarize_scales_and_names_percentiles():
    s = bench_stats.summarize([0.010, 0.020, 0.030], scale=1000.0)
    assert s["count"] == 3
    assert s["mean"] == pytest.approx(20.0)
    assert s["p50"] == pytest.approx(20.0)
    assert s["p99"] == pytest.approx(29.8)
    assert s["std"] == pytest.approx(10.0)
    assert s["min"] == 10.0 and s["max"] == 30.0
    empty = bench_stats.summarize([])
    assert empty["count"] == 0 and empty["p90"] is None


def test_stdev():
    assert bench_stats.stdev([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(math.sqrt(32 / 7.0))
    assert bench_stats.stdev([3]) == 0.0


PROM = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 120.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 35.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 15.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 35.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 17.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 8.0
vllm:num_requests_running{engine="0",model_name="m \\"quoted\\""} 1.0
vllm:spec_decode_num_drafts_created 1.7e9
"""


def test_parse_prometheus_labels_and_values():
    samples = bench_spec.parse_prometheus(PROM)
    names = [s[0] for s in samples]
    assert "vllm:num_requests_running" in names
    running = next(s for s in samples if s[0] == "vllm:num_requests_running")
    assert running[1]["model_name"] == 'm "quoted"'
    created = next(s for s in samples if s[0] == "vllm:spec_decode_num_drafts_created")
    assert created[2] == 1.7e9


def test_vllm_counters_sum_over_engines_and_delta():
    after = bench_spec.vllm_counters(PROM)
    assert after["drafts"] == 150 and after["accepted"] == 180
    assert after["per_pos"] == {0: 105.0, 1: 52.0, 2: 23.0}
    before = bench_spec.vllm_counters("")
    assert before["present"] is False
    d = bench_spec.vllm_delta(before, after)
    assert d["num_drafts"] == 150 and d["num_draft_tokens"] == 450
    assert d["acceptance_length"] == pytest.approx(1 + 180 / 150.0)
    assert d["acceptance_rate"] == pytest.approx(0.4)
    assert d["draft_tokens_per_draft"] == 3.0
    assert d["per_position_acceptance_rate"] == [0.7, pytest.approx(0.3467), pytest.approx(0.1533)]
    # the mean acceptance length equals 1 + the sum of per-position rates
    assert d["acceptance_length"] == pytest.approx(1 + sum(d["per_position_acceptance_rate"]),
                                                   abs=1e-3)


def test_vllm_delta_without_drafts():
    c = bench_spec.vllm_counters(PROM)
    d = bench_spec.vllm_delta(c, c)
    assert d["available"] and d["num_drafts"] == 0 and d["acceptance_length"] is None


def test_trtllm_metrics_aggregate_over_iterations():
    body = json.dumps([
        # a generation step without a draft (specDecodingStats null) decodes one token
        {"iter": 1, "iterLatencyMS": 10.0, "numActiveRequests": 1, "specDecodingStats": None,
         "inflightBatchingStats": {"numGenRequests": 1, "avgNumDecodedTokensPerIter": 1.0}},
        {"iter": 2, "iterLatencyMS": 12.0, "numActiveRequests": 2,
         "inflightBatchingStats": {"numGenRequests": 2, "avgNumDecodedTokensPerIter": 4.0},
         "specDecodingStats": {"numDraftTokens": 10, "numAcceptedTokens": 6,
                               "numRequestsWithDraftTokens": 2, "acceptanceLength": 4.0,
                               "draftOverhead": 0.25}},
        # serialised strings are accepted too
        json.dumps({"iter": 3, "iterLatencyMS": 14.0, "numActiveRequests": 2,
                    "inflightBatchingStats": {"numGenRequests": 2, "avgNumDecodedTokensPerIter": 2.0},
                    "specDecodingStats": {"numDraftTokens": 10, "numAcceptedTokens": 2,
                                          "numRequestsWithDraftTokens": 2,
                                          "acceptanceLength": 2.0, "draftOverhead": 0.15}}),
        {"iter": 4, "iterLatencyMS": 8.0, "numActiveRequests": 0,
         "specDecodingStats": {"numDraftTokens": 0, "numAcceptedTokens": 0,
                               "numRequestsWithDraftTokens": 0}},
    ])
    acc = bench_spec.TrtllmAccumulator()
    stats = bench_spec.parse_trtllm_metrics(body)
    acc.add(stats)
    acc.add(stats[:2])  # a re-read iteration is not counted twice
    r = acc.result()
    assert r["iterations"] == 4 and r["iterations_with_draft"] == 2
    assert r["iterations_without_spec_stats"] == 1
    assert r["num_draft_tokens"] == 20 and r["num_accepted_tokens"] == 8
    # tokens decoded per generation step (trtllm_iterations): (1 + 4 x 2 + 2 x 2) / (1 + 2 + 2), the
    # step without a draft included; over the drafted steps alone it would be (8 + 4) / 4
    assert r["acceptance_length"] == pytest.approx(13 / 5.0)
    assert r["acceptance_rate"] == pytest.approx(0.4)
    assert r["draft_overhead_mean"] == pytest.approx(0.2)
    assert r["iter_latency_ms_mean"] == pytest.approx(11.0)


def test_trtllm_without_spec_stats_is_unavailable():
    acc = bench_spec.TrtllmAccumulator()
    acc.add(bench_spec.parse_trtllm_metrics(b'[{"iter": 1, "specDecodingStats": null}]'))
    assert acc.result()["available"] is False
    assert acc.result()["acceptance_length"] is None
    assert bench_spec.parse_trtllm_metrics(b"") == []
    with pytest.raises(ValueError):
        bench_spec.parse_trtllm_metrics(b'"text"')


@pytest.mark.parametrize("text,engine", [
    ("[]", "trtllm"),
    ('[{"iter": 1}]', "trtllm"),
    (PROM, "vllm"),
    ("# nothing\nfoo 1\n", None),
    ("[not json", None),
])
def test_detect_engine(text, engine):
    assert bench_spec.detect_engine(text) == engine


def test_scraper_reports_unreachable_metrics_instead_of_raising():
    def getter(url, headers, timeout):
        raise OSError("connection refused")

    s = bench_spec.SpecScraper("auto", "http://127.0.0.1:9/metrics", getter=getter)
    s.start()
    r = s.stop()
    assert r["available"] is False and "connection refused" in r["error"]


def test_scraper_names_where_it_read_the_engine():
    bodies = [b'[{"iter": 0, "specDecodingStats": null}]',
              b'[{"iter": 1, "specDecodingStats": null}, {"iter": 2, "specDecodingStats": null}]']
    seen = []

    def getter(url, headers, timeout):
        seen.append(url)
        return 200, bodies.pop(0) if bodies else b"[]"

    url = "http://127.0.0.1:9470/engine/a/metrics?reader=draft_sweep"
    s = bench_spec.SpecScraper("trtllm", url, poll_interval=0.01, getter=getter)
    s.start()
    r = s.stop()
    # the first read (before the run) is drained and not counted
    assert r["metrics_url"] == url and set(seen) == {url}
    assert r["iterations"] == 2 and r["iterations_without_spec_stats"] == 2
    none = bench_spec.SpecScraper("none", url, getter=getter).stop()
    assert "metrics_url" not in none
