"""End-to-end tests of the SSE client and runner against a stdlib streaming server.

The server (tests/unit/sse_engine.py) sends several tokens per chunk on a fixed schedule, so the
true TTFT, TPOT and throughput are known and the client's figures can be checked:
exactly against a virtual clock that the server advances (independent of how fast the
machine is), and as bounds the real clock cannot break when the schedule is slept.
"""

import json
import re
import socket

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import bench_runner, bench_sse

from sse_engine import FakeEngine, VirtualClock


def _cfg(url, **kw):
    cfg = {"url": url, "model": None, "concurrency": 1, "num_requests": 4, "warmup_requests": 1,
           "repetitions": 1, "max_tokens": 64, "temperature": 0.0,
           "prompts": bench_runner.PROMPT_SETS["mixed"], "timeout": 10.0,
           "spec_metrics": "none"}
    cfg.update(kw)
    return cfg


def test_single_request_timing_matches_server_clock():
    # the engine's virtual clock: the client stamps each chunk with the time the engine sent it at
    clock = VirtualClock()
    clock.now = 100.0
    with FakeEngine(clock=clock) as eng:
        ep = bench_sse.Endpoint(eng.url)
        body = bench_sse.build_chat_body("fake-model", "hi", 30, 0.0)
        rec, conn = bench_sse.stream_chat(ep, body, clock=clock)
        assert conn is not None  # keep-alive connection handed back for reuse
        conn.close()
    assert rec["ok"], rec["error"]
    assert rec["output_tokens"] == 30 and rec["usage_reported"]
    assert rec["prompt_tokens"] == 17
    assert rec["text_chunks"] == 10  # role chunk and usage chunk carry no text
    assert rec["finish_reason"] == "length"
    # TTFT counts from the request to the first text chunk, not to the role chunk before it
    assert rec["start"] == 100.0 and rec["ttft"] == pytest.approx(eng.ttft)
    assert rec["chunk_times"] == pytest.approx([eng.ttft + j * eng.interval for j in range(10)])
    m = bench_runner.request_metrics(rec)
    assert m["tpot"] == pytest.approx(eng.true_tpot)
    assert m["tokens_per_chunk"] == pytest.approx(3.0)
    # per-chunk gaps are the chunk interval, i.e. 3x the per-token time
    assert m["itl"] == pytest.approx([eng.interval] * 9)
    assert rec["e2e"] == pytest.approx(eng.true_e2e)


def test_single_request_on_the_real_clock_is_never_faster_than_the_engine():
    # The engine sleeps until each chunk's scheduled time and the client starts its clock before
    # sending, so the real clock can only add to the schedule: lower bounds hold on any machine.
    with FakeEngine() as eng:
        rec, conn = bench_sse.stream_chat(bench_sse.Endpoint(eng.url),
                                          bench_sse.build_chat_body("fake-model", "hi", 30, 0.0))
        conn.close()
    assert rec["ok"], rec["error"]
    assert all(t >= eng.ttft + j * eng.interval - 1e-9 for j, t in enumerate(rec["chunk_times"])), rec["chunk_times"]
    assert rec["chunk_times"] == sorted(rec["chunk_times"]) and len(rec["chunk_times"]) == 10
    assert rec["ttft"] == rec["chunk_times"][0] and rec["e2e"] >= rec["chunk_times"][-1] >= eng.true_e2e - 1e-9
    m = bench_runner.request_metrics(rec)
    assert m["tpot"] == pytest.approx(rec["decode_time"] / 29) and m["tpot"] > 0


def test_request_body_asks_for_usage_and_stream():
    with FakeEngine(tokens=3) as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, num_requests=2, warmup_requests=0,
                                              max_tokens=7, temperature=0.7, ignore_eos=True,
                                              extra_body={"top_p": 0.9},
                                              prompts=bench_runner.PROMPT_SETS["vacation"]))
    req = eng.requests[0]
    assert req["stream"] is True and req["stream_options"] == {"include_usage": True}
    assert req["max_tokens"] == 7 and req["temperature"] == 0.7
    assert req["ignore_eos"] is True and req["top_p"] == 0.9
    assert req["model"] == "fake-model"  # discovered from /v1/models
    # the prompt, after the request's own tag (no prefix-cache replays)
    assert re.match(r"^\[[0-9a-f]{8}-c\d+-r0/\d\] Imagine you are planning a week-long vacation",
                    req["messages"][0]["content"]), req["messages"][0]["content"]
    assert res["model"] == "fake-model"


def test_runner_aggregate_metrics_within_tolerance():
    with FakeEngine() as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, concurrency=4, num_requests=12,
                                              warmup_requests=2, repetitions=2))
    assert len(eng.requests) == 2 + 2 * 12
    assert res["warmup"]["completed"] == 2
    assert len(res["runs"]) == 2
    for run in res["runs"]:
        assert run["completed"] == 12 and run["failed"] == 0
        assert run["output_tokens"] == 12 * 30
        # the engine keeps its schedule or falls behind it, never ahead (timing checks that hold on any
        # machine; the exact figures are checked against the virtual clock above)
        assert run["ttft_ms"]["min"] >= eng.ttft * 1000 - 1e-3  # the figures are rounded to 4 decimals
        assert run["e2e_ms"]["min"] >= eng.true_e2e * 1000 - 1e-3
        assert run["ttft_ms"]["p50"] <= run["e2e_ms"]["p50"] and run["tpot_ms"]["p50"] > 0
        assert run["tokens_per_chunk"]["mean"] == pytest.approx(3.0)
        assert run["itl_ms"]["count"] == 12 * 9  # ten chunks per request: nine gaps
        # 12 requests at concurrency 4 = 3 waves of at least one request time each
        truth = 12 * 30 / (3 * eng.true_e2e)
        assert 0 < run["output_throughput"] <= truth * (1 + 1e-6)
        assert run["output_throughput"] == pytest.approx(12 * 30 / run["duration_s"], rel=1e-3)
        assert run["errors"]["count"] == 0
    assert res["summary"]["output_throughput"]["median"] is not None
    assert res["timing"]["measure_s"] >= res["runs"][0]["duration_s"]


def test_prompts_cycle_in_order_each_repetition():
    prompts = ["a", "b", "c"]
    with FakeEngine(tokens=2) as eng:
        bench_runner.run_benchmark(_cfg(eng.url, model="m", num_requests=4, warmup_requests=0,
                                        repetitions=2, prompts=prompts))
    # each request's prompt after its own tag: repetition and index, the prompt i mod 3
    sent = sorted(re.sub(r"^\[[0-9a-f]{8}-c\d+-(r\d/\d)\] ", r"\1 ", r["messages"][0]["content"])
                  for r in eng.requests)
    assert sent == sorted("r%d/%d %s" % (rep, i, "abca"[i]) for rep in (0, 1) for i in range(4))


def test_connections_are_reused_per_worker():
    with FakeEngine(tokens=2, ttft=0.0, interval=0.0) as eng:
        bench_runner.run_benchmark(_cfg(eng.url, model="m", concurrency=2, num_requests=10,
                                        warmup_requests=0))
    assert len(eng.requests) == 10
    assert len(eng.connections) <= 2


def test_missing_usage_falls_back_to_chunk_count_and_says_so():
    with FakeEngine(usage=False, tokens=9) as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, model="m", num_requests=2,
                                              warmup_requests=0))
    run = res["runs"][0]
    assert run["usage_missing"] == 2
    assert run["output_tokens"] == 2 * 3  # 3 chunks each, a lower bound of the 9 tokens


@pytest.mark.parametrize("mode,needle", [
    ("http500", "HTTP 500"),
    ("error_event", "engine fell over"),
    ("truncate", "without [DONE]"),
])
def test_errors_are_counted_with_samples(mode, needle):
    with FakeEngine(mode=mode, ttft=0.0, interval=0.0) as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, model="m", num_requests=3,
                                              warmup_requests=1))
    run = res["runs"][0]
    assert run["failed"] == 3 and run["completed"] == 0
    assert run["errors"]["count"] == 3
    assert needle in run["errors"]["samples"][0]["message"]
    assert run["errors"]["samples"][0]["count"] == 3
    assert res["warmup"]["failed"] == 1
    assert res["errors"]["count"] == 3
    assert run["output_throughput"] == 0.0


def test_connection_refused_is_an_error_not_a_crash():
    with FakeEngine() as eng:
        url = eng.url
    res = bench_runner.run_benchmark(_cfg(url, model="m", num_requests=2, warmup_requests=0,
                                          timeout=2.0))
    assert res["runs"][0]["failed"] == 2
    assert "Error" in res["runs"][0]["errors"]["samples"][0]["message"]


def test_trtllm_metrics_scraped_and_drained_around_the_run():
    batches = [
        # drained by the scrape before the measured phase (warm-up iterations)
        [{"iter": 1, "iterLatencyMS": 5, "numActiveRequests": 1,
          "specDecodingStats": {"numDraftTokens": 99, "numAcceptedTokens": 99,
                                "numRequestsWithDraftTokens": 1}}],
    ]
    run_iters = [{"iter": 10 + i, "iterLatencyMS": 10.0, "numActiveRequests": 2,
                  "inflightBatchingStats": {"numGenRequests": 2, "avgNumDecodedTokensPerIter": 3.5},
                  "specDecodingStats": {"numDraftTokens": 8, "numAcceptedTokens": 5,
                                        "numRequestsWithDraftTokens": 2,
                                        "acceptanceLength": 3.5, "draftOverhead": 0.2}}
                 for i in range(4)]
    batches.append(run_iters[:2])
    batches.append(run_iters[2:])

    def body():
        return json.dumps(batches.pop(0) if batches else [])

    with FakeEngine(tokens=6, metrics_body=body) as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, model="m", num_requests=2,
                                              warmup_requests=0, spec_metrics="auto",
                                              metrics_poll_interval=0.01))
    spec = res["runs"][0]["spec_decode"]
    assert spec["engine"] == "trtllm" and spec["available"]
    assert spec["num_draft_tokens"] == 32 and spec["num_accepted_tokens"] == 20
    assert spec["acceptance_length"] == pytest.approx((20 + 8) / 8.0)
    assert spec["acceptance_rate"] == pytest.approx(20 / 32.0)
    assert res["spec_engine"] == "trtllm"


def test_vllm_counters_scraped_before_and_after():
    state = {"n": 0}

    def body():
        state["n"] += 1
        k = state["n"] - 1  # 0 before, 1 after
        return (
            "# TYPE vllm:spec_decode_num_drafts_total counter\n"
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} %d\n'
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} %d\n'
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} %d\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} %d\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} %d\n'
        ) % (100 + 10 * k, 200 + 20 * k, 50 + 12 * k, 40 + 8 * k, 10 + 4 * k)

    with FakeEngine(tokens=6, metrics_body=body, metrics_type="text/plain") as eng:
        res = bench_runner.run_benchmark(_cfg(eng.url, model="m", num_requests=2,
                                              warmup_requests=0, spec_metrics="vllm"))
    spec = res["runs"][0]["spec_decode"]
    assert spec["engine"] == "vllm"
    assert spec["num_drafts"] == 10
    assert spec["acceptance_length"] == pytest.approx(1 + 12 / 10.0)
    assert spec["acceptance_rate"] == pytest.approx(12 / 20.0)
    assert spec["per_position_acceptance_rate"] == [0.8, 0.4]


def test_a_kept_alive_connection_the_server_closed_is_replaced_and_the_request_sent_once():
    """An open loop's slot can sit idle past the server's keep-alive timeout; its next request must
    not fail for that: it never reached the server, so it goes out again on a fresh connection."""
    with FakeEngine(tokens=6) as eng:
        ep = bench_sse.Endpoint(eng.url)
        body = bench_sse.build_chat_body("fake-model", "hi", 6, 0.0)
        first, conn = bench_sse.stream_chat(ep, body)
        assert first["ok"] and conn is not None
        conn.sock.shutdown(socket.SHUT_WR)  # the connection is gone: sending on it fails
        again, fresh = bench_sse.stream_chat(ep, body, conn=conn)
        assert again["ok"], again["error"]
        assert fresh is not None and fresh is not conn
        fresh.close()
        assert len(eng.requests) == 2  # sent once each
        # a request the server answered with an error is the request's, not a stale connection's
        eng.mode = "http500"
        failed, none = bench_sse.stream_chat(ep, body, conn=bench_sse.Endpoint(eng.url).connect())
        assert failed["error"].startswith("HTTP 500") and none is None and len(eng.requests) == 3
