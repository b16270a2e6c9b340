"""specdec-exporter (roles/monitoring_exporter/files/specdec_exporter.py): folding TensorRT-LLM iteration
stats into Prometheus counters, the sweep expectation from the draft_sweep fact, the text format,
and the exporter as the single reader of an emulated engine's /metrics."""

import importlib.util
import io
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from specdec_emulator import server, trtllm_cli  # lab/emulator, put on sys.path by conftest

EXPORTER = Path(__file__).resolve().parents[3] / "roles" / "monitoring_exporter" / "files" / "specdec_exporter.py"
_spec = importlib.util.spec_from_file_location("specdec_exporter", EXPORTER)
X = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(X)


def stat(it, gen=1, ctx=0, per_iter=1.0, spec=None, queued=0, active=1, used=10, most=100, lat=10.0, done=0):
    return {
        "iter": it, "iterLatencyMS": lat, "numActiveRequests": active, "numQueuedRequests": queued,
        "numCompletedRequests": done,
        "kvCacheStats": {"maxNumBlocks": most, "usedNumBlocks": used, "freeNumBlocks": most - used},
        "inflightBatchingStats": {"numGenRequests": gen, "numContextRequests": ctx,
                                  "avgNumDecodedTokensPerIter": per_iter},
        "specDecodingStats": spec,
    }


def parse(text):
    """{(name, frozenset(labels)): value} of a text exposition, checking HELP/TYPE precede samples."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        assert name in typed, name
        labels = frozenset(tuple(p.split("=", 1)) for p in rest.rstrip("}").replace('"', "").split(",") if p)
        out[(name, labels)] = float(value)
    return out


def test_ingest_counts_decoded_tokens_without_spec_stats():
    s = X.InstanceStats()
    s.ingest([stat(0, gen=0, ctx=2, per_iter=0.0), stat(1, gen=2, per_iter=3.5), stat(2, gen=2, per_iter=2.5)])
    c = s.counters
    assert c["iterations"] == 3
    assert c["generation_steps"] == 4
    assert c["decoded_tokens"] == 12.0
    assert c["context_requests"] == 2
    assert c["generated_tokens"] == 14.0
    assert c["spec_stats_iterations"] == 0 and c["draft_tokens"] == 0
    assert c["decoded_tokens"] / c["generation_steps"] == 3.0  # the acceptance length rule's ratio
    assert s.gauges["decoded_tokens_per_iteration"] == 2.5
    assert c["iteration_latency_seconds"] == pytest.approx(0.03)


def test_ingest_spec_stats_kv_and_queue():
    s = X.InstanceStats()
    spec = {"numDraftTokens": 8, "numAcceptedTokens": 5, "numRequestsWithDraftTokens": 2, "acceptanceLength": 3.5}
    s.ingest([stat(0, gen=2, per_iter=3.5, spec=spec, queued=3, active=2, used=90, most=100, done=1)])
    assert s.counters["draft_tokens"] == 8
    assert s.counters["accepted_draft_tokens"] == 5
    assert s.counters["requests_with_draft"] == 2
    assert s.counters["completed_requests"] == 1
    assert s.gauges["queued_requests"] == 3
    assert s.gauges["kv_cache_usage_ratio"] == 0.9
    # an empty read: the engine is idle, nothing running or queued any more
    s.ingest([])
    assert s.gauges["queued_requests"] == 0 and s.gauges["active_requests"] == 0
    assert s.gauges["kv_cache_usage_ratio"] == 0.9


def test_gaps_in_the_numbering_count_as_missed_and_a_restart_does_not():
    s = X.InstanceStats()
    s.ingest([stat(0), stat(1), stat(5)])
    assert s.counters["iterations_missed"] == 3
    s.ingest([stat(0), stat(1)])  # the engine restarted
    assert s.counters["iterations_missed"] == 3


def test_ingest_refuses_what_is_not_a_list():
    with pytest.raises(ValueError):
        X.InstanceStats().ingest({"iter": 1})


def test_history_is_bounded_and_read_by_sequence():
    s = X.InstanceStats(history=3)
    s.ingest([stat(i) for i in range(5)])
    seq, first, stats = s.since(0)
    assert (seq, first) == (5, 3)
    assert [x["iter"] for x in stats] == [2, 3, 4]
    assert [x["iter"] for x in s.since(4)[2]] == [4]
    assert s.since(5)[2] == []


FACT = {
    "gpt-oss-120b": {
        "last_sweep": {
            "winner": {"draft_len": 3},
            "by_concurrency": [
                {"concurrency": 4, "draft_len": 3, "median": 800.0, "speedup": 1.6,
                 "acceptance_length": 3.6, "acceptance_length_estimate": 3.5},
                {"concurrency": 1, "draft_len": 3, "median": 300.0, "speedup": 2.1,
                 "acceptance_length": None, "acceptance_length_estimate": 3.8},
            ],
        },
        "applied": {"max_draft_len": 3},
    },
    "other": {"last_sweep": {"winner": {"draft_len": 0}, "by_concurrency": [
        {"concurrency": 1, "draft_len": 0, "median": 100.0, "acceptance_length": None,
         "acceptance_length_estimate": 1.0}]}, "applied": {"max_draft_len": 0}},
}


def test_sweep_expectation_at_the_applied_length_and_lowest_concurrency():
    e = X.sweep_expectation(FACT, "gpt-oss-120b")
    assert e["applied_draft_len"] == 3
    assert e["expected_acceptance_length"] == 3.8  # concurrency 1, the client-side estimate
    assert {r["concurrency"]: r["acceptance_length"] for r in e["by_concurrency"]} == {4: 3.6, 1: 3.8}


def test_sweep_expectation_without_speculation_or_sweep():
    e = X.sweep_expectation(FACT, "other")
    assert e["applied_draft_len"] == 0 and e["expected_acceptance_length"] is None
    assert X.sweep_expectation(FACT, "absent") is None
    assert X.sweep_expectation(None, "x") is None
    # not applied: the sweep's winner
    fact = {"a": {"last_sweep": dict(FACT["gpt-oss-120b"]["last_sweep"])}}
    assert X.sweep_expectation(fact, "a")["applied_draft_len"] == 3


def test_render_is_prometheus_text():
    instances = [{"name": "gpt-oss-120b", "engine": "trtllm", "url": "u"}, {"name": "v", "engine": "vllm", "url": "u"}]
    s = X.InstanceStats()
    s.ingest([stat(0, gen=2, per_iter=3.0)])
    text = X.render(instances, {"gpt-oss-120b": s}, {"gpt-oss-120b": True, "v": False},
                    {"gpt-oss-120b": True, "v": False}, {"v": 2},
                    {"gpt-oss-120b": X.sweep_expectation(FACT, "gpt-oss-120b"), "v": None})
    m = parse(text)
    trt = frozenset({("engine_instance", "gpt-oss-120b"), ("engine", "trtllm")})
    vl = frozenset({("engine_instance", "v"), ("engine", "vllm")})
    assert m[("specdec_engine_decoded_tokens_total", trt)] == 6
    assert m[("specdec_engine_up", trt)] == 1 and m[("specdec_engine_up", vl)] == 0
    assert m[("specdec_exporter_read_errors_total", vl)] == 2
    assert m[("specdec_sweep_expected_acceptance_length", trt)] == 3.8
    assert m[("specdec_sweep_applied_draft_len", trt)] == 3
    assert m[("specdec_sweep_acceptance_length", trt | {("concurrency", "4"), ("draft_len", "3")})] == 3.6
    assert m[("specdec_sweep_output_tokens_per_second", trt | {("concurrency", "1"), ("draft_len", "3")})] == 300
    assert not any(name.startswith("specdec_engine_iterations") for name, labels in m if labels == vl)


def test_label_values_are_escaped():
    assert X._labels([("a", 'x"y\\z\n')]) == '{a="x\\"y\\\\z\\n"}'


@pytest.mark.parametrize("cfg,word", [
    ({"instances": [{"name": "a", "url": "u", "engine": "tgi"}]}, "engine"),
    ({"instances": [{"name": "a", "url": "u", "engine": "vllm"}, {"name": "a", "url": "v", "engine": "vllm"}]}, "unique"),
    ({"instances": [{"url": "u", "engine": "vllm"}]}, "name"),
    ({"poll_interval": 0}, "poll_interval"),
    ({"port": "80"}, "port"),
    ({"bogus": 1}, "bogus"),
])
def test_config_errors_name_the_key(cfg, word):
    with pytest.raises(X.ConfigError, match=word):
        X.load_config(cfg)


def test_check_flag(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"instances": [{"name": "a", "url": "http://127.0.0.1:1", "engine": "vllm"}]}))
    assert X.main(["--config", str(path), "--check"]) == 0
    path.write_text(json.dumps({"instances": "x"}))
    assert X.main(["--config", str(path), "--check"]) == 2


def _emulator(tmp_path, env):
    target, draft = tmp_path / "target", tmp_path / "draft"
    for d in (target, draft):
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    extra = {"enable_iter_perf_stats": True,
             "speculative_config": {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": str(draft)}}
    (tmp_path / "extra.yml").write_text(json.dumps(extra))
    cfg, code = trtllm_cli.configure(
        [str(target), "--host", "127.0.0.1", "--port", "0", "--max_batch_size", "4",
         "--extra_llm_api_options", str(tmp_path / "extra.yml")],
        env=dict(env, SPECDEC_EMU_VERSION="1.2.0rc6"), out=io.StringIO())
    assert cfg is not None, code
    return server.ThreadedServer(cfg)


def _complete(url, max_tokens):
    body = json.dumps({"prompt": "hello", "max_tokens": max_tokens, "ignore_eos": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)["usage"]["completion_tokens"]


def test_exporter_reads_the_emulator_and_serves_metrics_and_iterations(tmp_path):
    env = {"SPECDEC_EMU_ACCEPTANCE": "1,1,1", "SPECDEC_EMU_TARGET_STEP_MS": "2",
           "SPECDEC_EMU_ONE_MODEL_SPEC_STATS": "on"}
    fact = tmp_path / "sweep.fact"
    fact.write_text(json.dumps(FACT))
    with _emulator(tmp_path, env) as srv:
        cfg = X.load_config({"port": 1, "poll_interval": 0.05, "fact_file": str(fact),
                             "instances": [{"name": "gpt-oss-120b", "engine": "trtllm", "url": srv.base_url}]})
        exporter = X.Exporter(cfg)
        exporter.start()
        try:
            tokens = sum(_complete(srv.base_url, 41) for _ in range(3))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with exporter.lock:
                    if exporter.stats["gpt-oss-120b"].counters["generated_tokens"] >= tokens:
                        break
                time.sleep(0.05)
            m = parse(exporter.metrics_text())
            it = exporter.iterations("gpt-oss-120b", 0)
        finally:
            exporter.stop()
    lab = frozenset({("engine_instance", "gpt-oss-120b"), ("engine", "trtllm")})
    assert m[("specdec_engine_generated_tokens_total", lab)] == tokens == 123
    # every draft of up to 3 tokens accepted: 4 tokens per generation step
    assert m[("specdec_engine_decoded_tokens_total", lab)] / m[("specdec_engine_generation_steps_total", lab)] == 4.0
    assert m[("specdec_engine_accepted_draft_tokens_total", lab)] == m[("specdec_engine_draft_tokens_total", lab)]
    assert m[("specdec_engine_iterations_missed_total", lab)] == 0
    assert m[("specdec_engine_ready", lab)] == 1 and m[("specdec_engine_up", lab)] == 1
    assert m[("specdec_sweep_expected_acceptance_length", lab)] == 3.8
    assert it["seq"] == m[("specdec_engine_iterations_total", lab)] == len(it["stats"])
    assert exporter.iterations("nope", 0) is None


def test_the_progress_probe_tells_a_wedged_engine_from_an_idle_one(tmp_path):
    """One completion token within probe_deadline: 1 while the engine generates (idle or not), 0 once it is wedged
    (its /health still 200, its iteration stats as empty as an idle engine's); none for an engine that wants a key."""
    wedge = tmp_path / "wedge"
    env = {"SPECDEC_EMU_ACCEPTANCE": "1,1,1", "SPECDEC_EMU_TARGET_STEP_MS": "2", "SPECDEC_EMU_WEDGE_FILE": str(wedge)}
    with _emulator(tmp_path, env) as srv:
        cfg = X.load_config({"port": 1, "probe_interval": 0.2, "probe_deadline": 1.0,
                             "instances": [{"name": "gpt-oss-120b", "engine": "trtllm", "url": srv.base_url}]})
        posts = []

        def opener(request, timeout=None):
            if getattr(request, "method", None) == "POST":
                posts.append(request.full_url)
            return urllib.request.urlopen(request, timeout=timeout)
        exporter = X.Exporter(cfg, opener=opener)
        inst = cfg["instances"][0]
        lab = frozenset({("engine_instance", "gpt-oss-120b"), ("engine", "trtllm")})
        exporter.probe_progress(inst)
        m = parse(exporter.metrics_text())
        assert m[("specdec_engine_progress", lab)] == 1 and m[("specdec_engine_progress_probe_seconds", lab)] < 1.0
        assert len(posts) == 1
        # an engine that generated since the last judgement made progress: it is sent nothing
        _complete(srv.base_url, 8)
        exporter.poll_once(inst)
        exporter.probe_progress(inst)
        assert exporter.progress["gpt-oss-120b"] == (True, None) and len(posts) == 1
        assert ("specdec_engine_progress_probe_seconds", lab) not in parse(exporter.metrics_text())
        wedge.write_text("")
        exporter.probe_progress(inst)  # nothing generated since: asked, and no token comes
        assert len(posts) == 2
        exporter.poll_once(inst)
        m = parse(exporter.metrics_text())
        assert m[("specdec_engine_progress", lab)] == 0 and m[("specdec_engine_progress_probe_seconds", lab)] >= 1.0
        assert m[("specdec_engine_ready", lab)] == 1 and m[("specdec_engine_active_requests", lab)] == 0
    # the probes run on their own thread, beside the polls, only when probe_interval is set
    assert X.load_config({})["probe_interval"] == 0
    with pytest.raises(X.ConfigError, match="probe_interval"):
        X.load_config({"probe_interval": -1})


def test_an_engine_that_wants_a_key_is_not_judged_by_the_probe(tmp_path):
    from specdec_emulator import vllm_cli
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    out = io.StringIO()
    cfg, code = vllm_cli.configure([str(model), "--host", "127.0.0.1", "--port", "0", "--api-key", "k"],
                                   env={"SPECDEC_EMU_VERSION": "0.11.0"}, out=out)
    assert cfg is not None, (code, out.getvalue())
    with server.ThreadedServer(cfg) as srv:
        inst = {"name": "keyed", "engine": "vllm", "url": srv.base_url}
        exporter = X.Exporter(X.load_config({"port": 1, "instances": [inst]}))
        exporter.probe_progress(inst)
        assert exporter.progress["keyed"] is None
        assert "specdec_engine_progress{" not in exporter.metrics_text()


def test_down_engine_counts_errors():
    cfg = X.load_config({"timeout": 0.5, "instances": [{"name": "a", "engine": "trtllm", "url": "http://127.0.0.1:9"}]})
    exporter = X.Exporter(cfg)
    exporter.poll_once(cfg["instances"][0])
    m = parse(exporter.metrics_text())
    lab = frozenset({("engine_instance", "a"), ("engine", "trtllm")})
    assert m[("specdec_engine_up", lab)] == 0 and m[("specdec_engine_ready", lab)] == 0
    assert m[("specdec_exporter_read_errors_total", lab)] == 2


def _serve(exporter):
    import threading
    httpd = X.ThreadingHTTPServer(("127.0.0.1", 0), X.make_handler(exporter))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, "http://127.0.0.1:%d" % httpd.server_address[1]


def test_serve_bench_through_the_exporter_reports_what_it_reports_alone(tmp_path):
    """serve_bench's engine statistics read through the exporter (metrics_url, drained per reader)
    equal those it reads from the engine alone, while the exporter keeps polling the engine."""
    from ansible_collections.specdec.serve.plugins.module_utils import bench_runner

    env = {"SPECDEC_EMU_ACCEPTANCE": "1,1,1", "SPECDEC_EMU_TARGET_STEP_MS": "2",
           "SPECDEC_EMU_ONE_MODEL_SPEC_STATS": "on"}

    def bench(url, metrics_url=None):
        cfg = {"url": url, "model": None, "concurrency": 1, "num_requests": 4, "warmup_requests": 1,
               "repetitions": 2, "max_tokens": 41, "temperature": 0.0, "ignore_eos": True,
               "prompts": bench_runner.PROMPT_SETS["vacation"], "timeout": 30.0,
               "spec_metrics": "trtllm", "metrics_poll_interval": 0.1, "metrics_url": metrics_url}
        return [run["spec_decode"] for run in bench_runner.run_benchmark(cfg)["runs"]]

    with _emulator(tmp_path, env) as srv:
        alone = bench(srv.base_url)
        cfg = X.load_config({"port": 1, "poll_interval": 0.05, "fact_file": str(tmp_path / "none"),
                             "instances": [{"name": "gpt-oss-120b", "engine": "trtllm", "url": srv.base_url}]})
        exporter = X.Exporter(cfg)
        exporter.start()
        httpd, url = _serve(exporter)
        try:
            through = bench(srv.base_url, url + "/engine/gpt-oss-120b/metrics?reader=serve_bench")
            with exporter.lock:
                missed = exporter.stats["gpt-oss-120b"].counters["iterations_missed"]
        finally:
            httpd.shutdown()
            exporter.stop()
    keys = ("num_accepted_tokens", "num_draft_tokens", "num_requests_with_draft_tokens", "acceptance_length",
            "acceptance_rate", "iterations_with_draft")
    # 4 requests of 41 tokens: a context step and 10 steps of 4 tokens each (3 drafts, all accepted)
    assert [dict((k, r[k]) for k in keys) for r in alone] == [dict((k, r[k]) for k in keys) for r in through] == [
        {"num_accepted_tokens": 120, "num_draft_tokens": 120, "num_requests_with_draft_tokens": 40,
         "acceptance_length": 4.0, "acceptance_rate": 1.0, "iterations_with_draft": 40}] * 2
    assert missed == 0
    # every iteration, not only the drafting ones: 4 requests of a context step and 10 generation steps
    keys = ("iterations", "iterations_without_spec_stats", "iter_latency_ms_mean", "active_requests_mean")
    assert [dict((k, r[k]) for k in keys) for r in alone] == [dict((k, r[k]) for k in keys) for r in through]
    assert [r["iterations"] for r in through] == [44, 44]
    assert through[0]["metrics_url"].endswith("/engine/gpt-oss-120b/metrics?reader=serve_bench")


def test_readers_are_drained_separately(tmp_path):
    cfg = X.load_config({"instances": [{"name": "a", "engine": "trtllm", "url": "http://127.0.0.1:9"}], "timeout": 0.2})
    exporter = X.Exporter(cfg)
    exporter.stats["a"].ingest([stat(0), stat(1)])
    httpd, url = _serve(exporter)
    try:
        def get(path):
            with urllib.request.urlopen(url + path, timeout=10) as resp:
                return json.load(resp)
        assert [s["iter"] for s in get("/engine/a/metrics?reader=x")] == [0, 1]
        assert get("/engine/a/metrics?reader=x") == []
        assert [s["iter"] for s in get("/engine/a/metrics?reader=y")] == [0, 1]
        assert get("/iterations?instance=a&after=1")["stats"][0]["iter"] == 1
        with pytest.raises(urllib.error.HTTPError):
            get("/engine/b/metrics")
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    finally:
        httpd.shutdown()


class CountingEngine(object):
    """An opener standing for one TensorRT-LLM engine: counts its /metrics reads, drains what it holds."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()
        self.metrics_reads = 0
        self.pending = []

    def __call__(self, url, timeout=None):
        body = b"ok"
        if url.endswith("/metrics"):
            with self.lock:
                self.metrics_reads += 1
                body, self.pending = json.dumps(self.pending).encode(), []

        class Resp(object):
            status = 200

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def read(self):
                return body
        return Resp()


def test_requests_to_the_exporter_never_read_the_engine():
    """A burst of every kind of request reads the engine not once: they are served from what the
    exporter's own polls left (here none runs, so nothing may read the engine at all)."""
    engine = CountingEngine()
    cfg = X.load_config({"instances": [{"name": "a", "engine": "trtllm", "url": "http://engine"}]})
    exporter = X.Exporter(cfg, opener=engine)
    exporter.stats["a"].ingest([stat(0), stat(1)])
    httpd, url = _serve(exporter)
    try:
        for i in range(50):
            for path in ("/engine/a/metrics?reader=r%d" % (i % 3), "/metrics", "/iterations?instance=a&after=0", "/health"):
                with urllib.request.urlopen(url + path, timeout=10) as resp:
                    assert resp.status == 200
    finally:
        httpd.shutdown()
    assert engine.metrics_reads == 0


def test_a_drain_waits_for_the_next_scheduled_read_and_no_request_adds_one():
    """With the poller running, a drain returns the iterations the engine held when it asked (the
    poller's next read brings them), and a burst of drains adds no read to the poller's own."""
    import threading
    engine = CountingEngine()
    cfg = X.load_config({"poll_interval": 0.2, "instances": [{"name": "a", "engine": "trtllm", "url": "http://engine"}]})
    exporter = X.Exporter(cfg, opener=engine)
    exporter.start()
    try:
        with engine.lock:
            engine.pending = [stat(0), stat(1), stat(2)]
        assert [s["iter"] for s in exporter.drain_for("a", "bench")] == [0, 1, 2]
        # a burst of concurrent drains: each waits for the next scheduled read, none reads the engine
        with exporter.lock:
            begun = exporter.reads_begun["a"]
        before = engine.metrics_reads
        out = []
        threads = [threading.Thread(target=lambda: out.append(exporter.drain_for("a", "burst"))) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        with exporter.lock:
            scheduled = exporter.reads_begun["a"] - begun
    finally:
        exporter.stop()
    assert len(out) == 50
    # every read of the engine during the burst is one the poller began on its schedule
    assert engine.metrics_reads - before <= scheduled + 1 and scheduled < 50
