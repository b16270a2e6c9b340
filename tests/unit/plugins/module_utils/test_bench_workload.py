"""serve_bench workloads: arrival processes, length distributions, synthetic prompts, request files,
goodput, the open loop and the client's self-check (no timing is asserted: the machine is shared)."""

import json
import math
import os
import random
import re
import subprocess
import sys

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import bench_client, bench_runner, bench_workload as bw
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_dataset import (
    DatasetError, parse_dataset, read_dataset, sample)

from sse_engine import FakeEngine

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _mean(xs):
    return math.fsum(xs) / len(xs)


def _sd(xs):
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


# -- arrivals ---------------------------------------------------------------------------------


def test_poisson_arrivals_have_the_rate_and_the_dispersion_of_a_poisson_process():
    rate, n = 5.0, 20000
    t = bw.arrival_offsets(n, rate, "poisson", seed=7)
    assert t[0] == 0.0 and t == sorted(t) and len(t) == n
    gaps = [b - a for a, b in zip(t, t[1:])]
    # exponential gaps: mean 1/rate, coefficient of variation 1 (standard error ~0.7 % at this n)
    assert _mean(gaps) == pytest.approx(1 / rate, rel=0.03)
    assert _sd(gaps) / _mean(gaps) == pytest.approx(1.0, abs=0.05)
    # counts in 1-s windows: Poisson, so variance / mean (the index of dispersion) is 1
    counts = [0] * int(t[-1])
    for x in t:
        if int(x) < len(counts):
            counts[int(x)] += 1
    assert _mean(counts) == pytest.approx(rate, rel=0.03)
    assert _sd(counts) ** 2 / _mean(counts) == pytest.approx(1.0, abs=0.1)


def test_arrivals_are_reproducible_by_seed():
    a = bw.arrival_offsets(100, 3.0, "poisson", seed=1)
    assert a == bw.arrival_offsets(100, 3.0, "poisson", seed=1)
    assert a != bw.arrival_offsets(100, 3.0, "poisson", seed=2)


def test_constant_arrivals_are_evenly_spaced():
    t = bw.arrival_offsets(50, 4.0, "constant", seed=3)
    gaps = [b - a for a, b in zip(t, t[1:])]
    assert t[0] == 0.0 and gaps == pytest.approx([0.25] * 49)


@pytest.mark.parametrize("rate, process", [(0, "poisson"), (-1, "constant"), (1, "gamma")])
def test_arrivals_refuse_bad_settings(rate, process):
    with pytest.raises(bw.WorkloadError):
        bw.arrival_offsets(3, rate, process)


# -- lengths ----------------------------------------------------------------------------------


def test_fixed_uniform_and_normal_lengths():
    rng = random.Random(0)
    fixed = bw.check_length_spec({"distribution": "fixed", "mean": 128}, "input_len")
    assert bw.draw_lengths(fixed, 10, rng) == [128] * 10
    uni = bw.check_length_spec({"distribution": "uniform", "min": 10, "max": 20}, "input_len")
    xs = bw.draw_lengths(uni, 20000, rng)
    assert min(xs) == 10 and max(xs) == 20 and set(xs) == set(range(10, 21))
    assert _mean(xs) == pytest.approx(15, rel=0.01)
    assert _sd(xs) == pytest.approx(math.sqrt((11 ** 2 - 1) / 12.0), rel=0.03)  # discrete uniform
    norm = bw.check_length_spec({"distribution": "normal", "mean": 200, "sd": 30}, "output_len")
    ys = bw.draw_lengths(norm, 20000, rng)
    assert _mean(ys) == pytest.approx(200, rel=0.01) and _sd(ys) == pytest.approx(30, rel=0.03)
    clamped = bw.check_length_spec({"distribution": "normal", "mean": 50, "sd": 40, "min": 30, "max": 60},
                                   "output_len")
    zs = bw.draw_lengths(clamped, 5000, rng)
    assert min(zs) == 30 and max(zs) == 60


def test_lengths_are_reproducible_and_none_values_are_defaults():
    spec = bw.check_length_spec({"distribution": "normal", "mean": 100, "sd": 10, "min": None, "max": None},
                                "input_len")
    assert spec["min"] is None
    assert bw.draw_lengths(spec, 50, random.Random(4)) == bw.draw_lengths(spec, 50, random.Random(4))


@pytest.mark.parametrize("spec, text", [
    ({"distribution": "fixed"}, "needs mean"),
    ({"distribution": "uniform", "min": 3}, "needs min and max"),
    ({"distribution": "normal", "mean": 3}, "needs sd"),
    ({"distribution": "uniform", "min": 9, "max": 3}, "must be <="),
    ({"distribution": "fixed", "mean": 0}, "must be >= 1"),
    ({"distribution": "zipf", "mean": 3}, "distribution must be one of"),
])
def test_bad_length_specs_are_refused(spec, text):
    with pytest.raises(bw.WorkloadError, match=text):
        bw.check_length_spec(spec, "input_len")


def test_synthetic_prompts_have_the_word_count_and_differ():
    rng = random.Random(5)
    a, b = bw.synthetic_prompt(300, rng), bw.synthetic_prompt(300, rng)
    assert len(a.split()) == 300 and a != b
    assert set(a.split()) <= set(bw.WORDS)
    assert bw.synthetic_prompt(40, random.Random(1)) == bw.synthetic_prompt(40, random.Random(1))


def _cfg(**kw):
    cfg = {"prompts": ["p"], "max_tokens": 32, "temperature": 0.0, "path": "/v1/chat/completions",
           "seed": 0}
    cfg.update(kw)
    return cfg


def test_workload_bodies_carry_the_drawn_lengths_and_ignore_eos():
    out_spec = bw.check_length_spec({"distribution": "uniform", "min": 5, "max": 50}, "output_len")
    in_spec = bw.check_length_spec({"distribution": "fixed", "mean": 64}, "input_len")
    bodies, warm, desc = bw.build_workload(_cfg(input_len=in_spec, output_len=out_spec, top_p=0.9, seed=3),
                                           "m", 40, 4)
    reqs = [json.loads(b) for b in bodies]
    assert len(reqs) == 40 and len(warm) == 4
    assert all(r["ignore_eos"] is True and 5 <= r["max_tokens"] <= 50 and r["top_p"] == 0.9 for r in reqs)
    assert all(len(r["messages"][0]["content"].split()) == 64 for r in reqs)
    assert len(set(r["messages"][0]["content"] for r in reqs)) == 40
    assert not set(json.loads(b)["messages"][0]["content"] for b in warm) & \
        set(r["messages"][0]["content"] for r in reqs)
    assert desc["source"] == "synthetic" and desc["max_tokens_total"] == sum(r["max_tokens"] for r in reqs)
    assert desc["input_len"]["drawn"]["mean"] == 64
    again, dummy, dummy2 = bw.build_workload(_cfg(input_len=in_spec, output_len=out_spec, top_p=0.9, seed=3),
                                             "m", 40, 4)
    assert again == bodies


def test_records_and_the_completions_api():
    recs = [{"prompt": "a"}, {"messages": [{"role": "user", "content": "b"}], "max_tokens": 7}]
    bodies, dummy, desc = bw.build_workload(_cfg(records=recs), "m", 3, 0)
    reqs = [json.loads(b) for b in bodies]
    assert reqs[0]["messages"] == [{"role": "user", "content": "a"}] and reqs[0]["max_tokens"] == 32
    assert reqs[1]["messages"][0]["content"] == "b" and reqs[1]["max_tokens"] == 7
    assert reqs[2] == reqs[0] and "ignore_eos" not in reqs[0] and desc["source"] == "dataset"
    bodies, dummy, desc = bw.build_workload(_cfg(records=[{"prompt": "a"}], path="/v1/completions"), "m", 1, 0)
    assert json.loads(bodies[0])["prompt"] == "a" and desc["api"] == "completions"
    with pytest.raises(bw.WorkloadError, match="completions endpoint"):
        bw.build_workload(_cfg(records=recs, path="/v1/completions"), "m", 2, 0)


@pytest.mark.parametrize("rec, text", [
    ({"prompt": ""}, "non-empty string"),
    ({"prompt": "a", "messages": []}, "exactly one of"),
    ({"messages": [{"content": "x"}]}, r"messages\[0\]"),
    ({"prompt": "a", "max_tokens": 0}, "max_tokens"),
    (["x"], "expected an object"),
])
def test_bad_records_are_refused(rec, text):
    with pytest.raises(bw.WorkloadError, match=text):
        bw.normalize_record(rec, "dataset[2]")


# -- request files ------------------------------------------------------------------------------


def test_jsonl_records(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"prompt": "hello"}\n\n{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}\n')
    assert read_dataset(str(f)) == [{"prompt": "hello"},
                                    {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}]


SHAREGPT = [
    {"id": "a", "conversations": [{"from": "human", "value": "What is 2+2?"}, {"from": "gpt", "value": "x" * 40}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "no question"}]},
    {"id": "c", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "Hi"},
                                  {"from": "gpt", "value": "Hello!"}]},
]


def test_sharegpt_array_and_jsonl(tmp_path):
    arr = tmp_path / "s.json"
    arr.write_text(json.dumps(SHAREGPT, indent=2))
    recs = read_dataset(str(arr), "sharegpt", reference_max_tokens=True)
    assert recs == [{"prompt": "What is 2+2?", "max_tokens": 10}, {"prompt": "Hi", "max_tokens": 2}]
    lines = tmp_path / "s.jsonl"
    lines.write_text("\n".join(json.dumps(c) for c in SHAREGPT))
    assert read_dataset(str(lines)) == [{"prompt": "What is 2+2?"}, {"prompt": "Hi"}]


@pytest.mark.parametrize("text, fmt, where", [
    ('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"\n', "auto", "line 3: not JSON"),
    ('{"prompt": "a"}\n\n{"text": "b"}\n', "auto", "line 3: expected exactly one of prompt or messages"),
    ('{"prompt": "a"}\n["b"]\n', "auto", "line 2: expected a JSON object"),
    ('{"prompt": "a"}\n', "sharegpt", "line 1: a ShareGPT record needs conversations"),
    ('{"conversations": [{"from": "human", "value": "a"}]}\n{"conversations": [{"from": "human"}]}\n',
     "auto", "line 2: conversations[0] must be an object with from and value"),
    ('{"conversations": {"from": "human"}}\n', "auto", "line 1: conversations must be a list"),
    ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}', "jsonl", "line 1: max_tokens"),
])
def test_malformed_files_name_the_line(tmp_path, text, fmt, where):
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    with pytest.raises(DatasetError) as exc:
        read_dataset(str(f), fmt)
    assert str(f) in str(exc.value) and where in str(exc.value), str(exc.value)


def test_malformed_array_element_names_the_line_it_starts_on(tmp_path):
    data = json.dumps(SHAREGPT[:1], indent=2)[:-1].rstrip() + ',\n  {"conversations": 5}\n]'
    f = tmp_path / "bad.json"
    f.write_text(data)
    line = data.splitlines().index('  {"conversations": 5}') + 1
    with pytest.raises(DatasetError, match="bad.json line %d: conversations must be a list" % line):
        read_dataset(str(f))
    f.write_text('[\n  {"prompt": "a"},\n  {"prompt": }\n]\n')
    with pytest.raises(DatasetError, match="line 3: not JSON"):
        read_dataset(str(f))


def test_empty_unreadable_and_non_utf8_files(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_text("\n\n")
    with pytest.raises(DatasetError, match="no usable request record"):
        read_dataset(str(f))
    with pytest.raises(DatasetError, match="cannot read"):
        read_dataset(str(tmp_path / "missing.jsonl"))
    f.write_bytes(b'{"prompt": "a"}\n{"prompt": "\xff"}\n')
    with pytest.raises(DatasetError, match="line 2: not UTF-8"):
        read_dataset(str(f))


def test_samples_are_reproducible_by_seed():
    recs = parse_dataset("\n".join(json.dumps({"prompt": "p%d" % i}) for i in range(100)))
    a = sample(recs, 10, seed=1)
    assert a == sample(recs, 10, seed=1) and a != sample(recs, 10, seed=2)
    assert len(set(r["prompt"] for r in a)) == 10
    assert sample(recs) == recs
    with pytest.raises(DatasetError, match="num is 101 but the file has 100"):
        sample(recs, 101)


def _adhoc(tmp_path, expr):
    """``ansible localhost -m debug -a msg=EXPR`` from tmp_path, as a playbook templates it."""
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="true")
    proc = subprocess.run([sys.executable, "-m", "ansible.cli.adhoc", "localhost", "-c", "local", "-m", "debug",
                           "-a", "msg={{ %s }}" % expr], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=120)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_lookup_reads_on_the_controller_and_names_the_line(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"}\n')
    res = _adhoc(tmp_path, "lookup('specdec.serve.bench_dataset', 'r.jsonl', num=2, seed=0)")
    assert res["msg"] == sample(parse_dataset(f.read_text()), 2, 0)
    f.write_text('{"prompt": "a"}\nnot json\n')
    res = _adhoc(tmp_path, "lookup('specdec.serve.bench_dataset', 'r.jsonl')")
    assert res["failed"] and "r.jsonl line 2: not JSON" in res["msg"], res["msg"]


# -- goodput ------------------------------------------------------------------------------------


def _rec(ok=True, ttft=0.1, tokens=11, decode=1.0):
    return {"ok": ok, "ttft": ttft if ok else None, "output_tokens": tokens,
            "decode_time": decode if ok else None}


def test_goodput_counts_requests_meeting_every_target():
    recs = [_rec(ttft=0.1, decode=0.5),          # TTFT 100 ms, TPOT 50 ms
            _rec(ttft=0.3, decode=0.5),          # TTFT too long
            _rec(ttft=0.1, decode=2.0),          # TPOT 200 ms, too long
            _rec(ttft=0.05, tokens=1, decode=0.0),  # one token: no TPOT, meets it
            _rec(ok=False)]                      # failed: never meets
    g = bw.goodput(recs, 2.0, ttft_ms=200, tpot_ms=100)
    assert (g["met"], g["requests"], g["share"], g["request_rate"]) == (2, 5, 0.4, 1.0)
    assert bw.goodput(recs, 2.0, ttft_ms=200)["met"] == 3
    assert bw.goodput(recs, 4.0, tpot_ms=100)["met"] == 3 and bw.goodput(recs, 4.0, tpot_ms=100)["request_rate"] == 0.75
    assert bw.goodput(recs, 2.0) is None
    assert bw.goodput([], 0.0, ttft_ms=1) == {"ttft_ms": 1, "tpot_ms": None, "requests": 0, "met": 0,
                                              "share": None, "request_rate": None}


def test_schedule_summary_splits_cap_waits_from_the_clients_lag():
    sched = [{"due": 0.0, "ready": 0.0, "woke": 0.001, "free": 0.001, "sent": 0.0015},  # lag 1 + 0.5 ms
             {"due": 0.1, "ready": 0.1, "woke": 0.1, "free": 0.3, "sent": 0.3},        # 200 ms for the cap
             # due while the dispatcher waited for the cap on the request before: 100 ms for the cap,
             # then its own lag, 5 ms to wake and 10 ms to send
             {"due": 0.2, "ready": 0.3, "woke": 0.305, "free": 0.305, "sent": 0.315}]
    lags, load = bw.schedule_summary(sched, 10.0, "poisson", 2, 0)
    assert lags == pytest.approx([1.5, 0.0, 15.0])
    assert load["cap_waited"] == 2 and load["cap_wait_ms"]["max"] == pytest.approx(200.0)
    assert load["cap_wait_ms"]["min"] == pytest.approx(100.0)
    assert load["achieved_request_rate"] == pytest.approx(2 / (0.315 - 0.0015), rel=1e-4)


# -- the client's self-check --------------------------------------------------------------------


def _chunks(times):
    return {"ok": True, "chunk_times": times}


def test_assess_flags_each_sign_past_its_threshold():
    calm = [_chunks([0.01 * i for i in range(30)])]
    ok = bench_client.assess(10.0, 0.5, 10 ** 8, 10 ** 6, 1000, 4, calm)
    assert ok["bottleneck"] is False and ok["run_queue_wait_per_slice_ms"] == pytest.approx(0.001)
    slow = bench_client.assess(10.0, 0.5, 10 ** 8, 5 * 10 ** 9, 1000, 4, calm)
    assert slow["bottleneck"] and slow["reasons"][0].startswith("run_queue_wait")
    bursty = [_chunks([0.01 * (i // 5) for i in range(30)])]   # chunks come five at a time
    b = bench_client.assess(10.0, 0.5, None, None, None, 0, bursty)
    assert b["chunk_burst_share"] == pytest.approx(24 / 29.0, rel=1e-3) and b["reasons"][0].startswith("chunk_bursts")
    assert b["server_bursts"] is False
    assert bench_client.assess(1.0, 0.95, None, None, None, 0, calm)["reasons"][0].startswith("cpu_saturated")
    lag = bench_client.assess(10.0, 0.5, None, None, None, 0, calm, [1.0] * 8 + [30.0] * 2)
    assert lag["send_lag_p90_ms"] == pytest.approx(30.0) and lag["reasons"][0].startswith("send_lag")
    assert not bench_client.assess(10.0, 0.5, None, None, None, 0, calm, [1.0] * 10)["bottleneck"]


def test_chunk_bursts_flag_the_client_only_when_its_own_evidence_corroborates_them():
    bursty = [_chunks([0.01 * (i // 5) for i in range(30)])]
    # the client had a CPU whenever it woke (1 us per timeslice) and used 5 % of one: the server
    # wrote the chunks together; reported, not flagged
    server = bench_client.assess(10.0, 0.5, 10 ** 8, 10 ** 6, 1000, 4, bursty)
    assert server["bottleneck"] is False and server["server_bursts"] is True and server["reasons"] == []
    # waiting 1.2 ms per timeslice (under run_queue_wait's own 2 ms, over half of it) corroborates
    waited = bench_client.assess(10.0, 0.5, 10 ** 8, 12 * 10 ** 8, 1000, 4, bursty)
    assert waited["bottleneck"] and waited["reasons"][0].startswith("chunk_bursts")
    assert waited["server_bursts"] is False
    # so does a client busy for 5 of the 10 seconds (under cpu_saturated's 0.9, over half of it)
    busy = bench_client.assess(10.0, 5.0, 10 ** 8, 10 ** 6, 1000, 4, bursty)
    assert busy["bottleneck"] and busy["reasons"] == [busy["reasons"][0]] and busy["reasons"][0].startswith("chunk_bursts")


# -- the runner ---------------------------------------------------------------------------------


def _run_cfg(url, **kw):
    cfg = {"url": url, "model": None, "concurrency": 4, "num_requests": 12, "warmup_requests": 1,
           "repetitions": 2, "max_tokens": 20, "temperature": 0.0, "prompts": ["hi"], "timeout": 30.0,
           "spec_metrics": "none"}
    cfg.update(kw)
    return cfg


def test_open_loop_sends_every_request_with_a_seeded_schedule_under_the_cap():
    with FakeEngine(ttft=0.01, interval=0.005, per_chunk=2, tokens=20) as eng:
        res = bench_runner.run_benchmark(_run_cfg(eng.url, request_rate=50.0, arrival="poisson", seed=4,
                                                  goodput_ttft_ms=10000.0, goodput_tpot_ms=10000.0))
    assert len(eng.requests) == 1 + 2 * 12
    assert res["load"] == {"mode": "open", "arrival": "poisson", "request_rate": 50.0, "max_in_flight": 4,
                           "seed": 4}
    for run in res["runs"]:
        assert run["completed"] == 12 and run["load"]["send_lag_ms"]["count"] == 12
        assert run["goodput"]["met"] == 12 and run["goodput"]["share"] == 1.0
        assert set(run["client"]) >= {"cpu_per_wall", "run_queue_wait_per_slice_ms", "chunk_burst_share",
                                      "send_lag_p90_ms", "bottleneck", "reasons"}
    assert res["summary"]["goodput"]["share"] == 1.0 and len(res["summary"]["goodput"]["request_rate"]["values"]) == 2
    assert isinstance(res["client_bottleneck"], bool) and isinstance(res["flags"], list)


def test_default_closed_loop_sends_the_same_bodies_and_keys_as_before():
    with FakeEngine(ttft=0.01, interval=0.002, per_chunk=2, tokens=10) as eng:
        res = bench_runner.run_benchmark(_run_cfg(eng.url, repetitions=1, num_requests=1, warmup_requests=0,
                                                  prefix_cache=True))
    assert eng.requests[0] == {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}],
                               "max_tokens": 20, "temperature": 0.0, "stream": True,
                               "stream_options": {"include_usage": True}}
    assert "workload" not in res and "load" not in res and "goodput" not in res["summary"]
    assert "load" not in res["runs"][0] and "goodput" not in res["runs"][0]
    assert set(res) == {"model", "url", "concurrency", "spec_engine", "warmup", "runs", "summary", "errors",
                        "timing", "client_bottleneck", "flags", "prefix_cache"}
    assert res["prefix_cache"] is True


def _contents(requests):
    return [r["messages"][0]["content"] for r in requests]


def test_every_request_of_every_run_starts_with_its_own_tag_so_none_is_a_prefix_cache_replay():
    cfg = dict(concurrency=2, num_requests=6, warmup_requests=2, repetitions=2, prompts=["hi", "ho"])
    with FakeEngine(ttft=0.005, interval=0.001, per_chunk=2, tokens=4) as eng:
        res = bench_runner.run_benchmark(_run_cfg(eng.url, **cfg))
    sent = _contents(eng.requests)
    assert len(sent) == 2 + 2 * 6 and len(set(sent)) == len(sent) and res["prefix_cache"] is False
    tag = bw.bodies_digest([bw.build_body("fake-model", {"prompt": p}, 20, 0.0) for p in ("hi", "ho")])
    expected = set("[%s-c2-%s/%d] %s" % (tag, run, i, "hi" if i % 2 == 0 else "ho")
                   for run, n in (("w", 2), ("r0", 6), ("r1", 6)) for i in range(n))
    assert set(sent) == expected
    # the same run sends the same tags on every candidate: the same prompt tokens
    with FakeEngine(ttft=0.005, interval=0.001, per_chunk=2, tokens=4) as again:
        bench_runner.run_benchmark(_run_cfg(again.url, **cfg))
    assert set(_contents(again.requests)) == expected
    # another load level or another workload: other tags
    with FakeEngine(ttft=0.005, interval=0.001, per_chunk=2, tokens=4) as other:
        bench_runner.run_benchmark(_run_cfg(other.url, **dict(cfg, concurrency=3)))
    assert not set(_contents(other.requests)) & expected
    # allowed by the workload: the prompts as they are, repeated
    with FakeEngine(ttft=0.005, interval=0.001, per_chunk=2, tokens=4) as cached:
        bench_runner.run_benchmark(_run_cfg(cached.url, prefix_cache=True, **cfg))
    assert sorted(set(_contents(cached.requests))) == ["hi", "ho"]


def test_synthetic_prompts_are_tagged_too_and_the_open_loop_sends_the_tagged_bodies():
    with FakeEngine(ttft=0.005, interval=0.001, per_chunk=2, tokens=4) as eng:
        bench_runner.run_benchmark(_run_cfg(eng.url, input_len=bw.check_length_spec({"distribution": "fixed", "mean": 8}, "input_len"), request_rate=200.0,
                                            arrival="constant", num_requests=4, repetitions=2, warmup_requests=0))
    sent = _contents(eng.requests)
    assert len(sent) == 8 and len(set(sent)) == 8
    assert all(re.match(r"^\[[0-9a-f]{8}-c4-r[01]/[0-3]\] (\S+ ){7}\S+$", c) for c in sent), sent


def test_a_tag_goes_before_the_prompt_or_the_first_message_whatever_its_form():
    parts = bw.build_body("m", {"messages": [{"role": "system", "content": [{"type": "text", "text": "be brief"}]},
                                             {"role": "user", "content": "hi"}]}, 5, 0.0)
    got = json.loads(bw.tag_body(parts, "t/1"))
    assert got["messages"] == [{"role": "system", "content": [{"type": "text", "text": "[t/1] "},
                                                               {"type": "text", "text": "be brief"}]},
                               {"role": "user", "content": "hi"}]
    prompt = bw.build_body("m", {"prompt": "once upon"}, 5, 0.0, completions=True)
    assert json.loads(bw.tag_body(prompt, "t/2"))["prompt"] == "[t/2] once upon"
    with pytest.raises(bw.WorkloadError, match="neither messages nor a prompt string"):
        bw.tag_body(json.dumps({"prompt": [1, 2, 3]}).encode(), "t/3")
    assert bw.unique_bodies([prompt], 3, "x") == [bw.tag_body(prompt, "x/%d" % i) for i in range(3)]


# -- the module ---------------------------------------------------------------------------------


def test_module_refuses_bad_workload_settings(tmp_path):
    from test_serve_bench import run_module
    url = "http://127.0.0.1:9"  # nothing is sent: every case fails before the first request
    res = run_module(tmp_path, {"url": url, "model": "m", "dataset": [{"prompt": "a"}, {"text": "b"}]})
    assert res["failed"] and "dataset[1]: expected exactly one of prompt or messages" in res["msg"]
    res = run_module(tmp_path, {"url": url, "model": "m", "prompts": ["a"], "input_len": {"mean": 5}})
    assert res["failed"] and "mutually exclusive" in res["msg"]
    res = run_module(tmp_path, {"url": url, "model": "m", "output_len": {"distribution": "uniform", "min": 5}})
    assert res["failed"] and "output_len: distribution uniform needs min and max" in res["msg"]
    for key, value in (("request_rate", 0), ("top_p", 1.5), ("goodput_tpot_ms", -1)):
        res = run_module(tmp_path, {"url": url, "model": "m", key: value})
        assert res["failed"] and key in res["msg"], res["msg"]


def test_module_sends_dataset_records_and_top_p_and_reports_goodput(tmp_path):
    from test_serve_bench import run_module
    dataset = [{"prompt": "a"}, {"messages": [{"role": "system", "content": "s"},
                                              {"role": "user", "content": "b"}], "max_tokens": 5}]
    with FakeEngine(ttft=0.01, interval=0.002, per_chunk=1, tokens=10) as eng:
        res = run_module(tmp_path, {"url": eng.url, "num_requests": 4, "warmup_requests": 0,
                                    "spec_metrics": "none", "dataset": dataset, "top_p": 0.8,
                                    "goodput_ttft_ms": 60000, "request_rate": 100, "concurrency": 2,
                                    "prefix_cache": True})
    assert not res.get("failed"), res.get("msg")
    assert [r.get("messages") for r in eng.requests] == [[{"role": "user", "content": "a"}],
                                                         dataset[1]["messages"]] * 2
    assert [r["max_tokens"] for r in eng.requests] == [256, 5, 256, 5]
    assert all(r["top_p"] == 0.8 for r in eng.requests) and res["sampling"]["top_p"] == 0.8
    assert res["workload"]["source"] == "dataset" and res["load"]["request_rate"] == 100
    assert res["summary"]["goodput"]["met"] == 4 and res["runs"][0]["goodput"]["share"] == 1.0


def test_synthetic_lengths_on_the_completions_api_of_the_emulator(tmp_path):
    from test_serve_bench_emulator import start_emulator
    srv, dummy = start_emulator(tmp_path, 0, {"SPECDEC_EMU_TARGET_STEP_MS": "1",
                                              "SPECDEC_EMU_PREFILL_MS_PER_TOKEN": "0.01"})
    with srv:
        res = bench_runner.run_benchmark(_run_cfg(
            srv.base_url, path="/v1/completions", repetitions=1, num_requests=6, seed=3,
            input_len=bw.check_length_spec({"distribution": "uniform", "min": 20, "max": 60}, "input_len"),
            output_len=bw.check_length_spec({"distribution": "normal", "mean": 30, "sd": 10}, "output_len")))
    run = res["runs"][0]
    assert run["completed"] == 6 and res["workload"]["api"] == "completions"
    # ignore_eos with max_tokens: every request generates exactly its drawn length
    assert run["output_tokens"] == res["workload"]["max_tokens_total"]
    assert res["workload"]["input_len"]["drawn"]["count"] == 6
