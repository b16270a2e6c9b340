"""The running emulator: OpenAI conformance (official client), metric formats, start-up and faults."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulator_fixtures"))
import emu_helpers as H  # noqa: E402

openai = pytest.importorskip("openai")

SPEC_YAML = """enable_iter_perf_stats: true
speculative_config:
  decoding_type: {dt}
  max_draft_len: 3
  speculative_model_dir: {draft}
kv_cache_config:
  enable_block_reuse: false
"""


def get(url, headers=None, timeout=5):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture
def models(tmp_path):
    return {"target": H.make_model(tmp_path, "gpt-oss-120b", "gpt_oss"),
            "llama": H.make_model(tmp_path, "Llama-3.3-70B-Instruct-FP4"),
            "draft": H.make_model(tmp_path, "draft", profile={"acceptance": [0.601, 0.286, 0.128]}),
            "tik": H.make_tiktoken(tmp_path), "tmp": tmp_path}


@pytest.fixture
def trt(models):
    path = H.write_yaml(models["tmp"], SPEC_YAML.format(dt="DraftTarget", draft=models["draft"]))
    env = H.base_env(TIKTOKEN_ENCODINGS_BASE=models["tik"], SPECDEC_EMU_VERSION="1.2.0rc6")
    srv = H.start("trtllm", [models["target"], "--host", "127.0.0.1", "--port", "0",
                             "--extra_llm_api_options", path], env)
    yield srv
    assert srv.stop() == 0


def client(srv, key="None"):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key=key, max_retries=0, timeout=10)


def test_openai_client_chat_stream_and_usage(trt):
    c = client(trt)
    assert [m.id for m in c.models.list().data] == ["gpt-oss-120b"]
    chunks = list(c.chat.completions.create(model="gpt-oss-120b", messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=40, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text_chunks = [ch for ch in chunks if ch.choices and ch.choices[0].delta.content]
    text = "".join(ch.choices[0].delta.content for ch in text_chunks)
    assert len(text.split()) == 40
    assert len(text_chunks) < 40, "speculation must put several tokens in some chunks"
    finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finals == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 40
    assert chunks[-1].usage.total_tokens == chunks[-1].usage.prompt_tokens + 40


def test_openai_client_completions(trt):
    c = client(trt)
    r = c.completions.create(model="gpt-oss-120b", prompt="Explain the benefits of speculative decoding:",
                             max_tokens=25)
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 25 and len(r.choices[0].text.split()) == 25
    stream = list(c.completions.create(model="gpt-oss-120b", prompt="x", max_tokens=12, stream=True))
    assert sum(len(s.choices[0].text.split()) for s in stream if s.choices) == 12
    r = c.chat.completions.create(model="gpt-oss-120b", messages=[{"role": "user", "content": "hello"}],
                                  max_tokens=5)
    assert r.choices[0].message.role == "assistant" and r.usage.completion_tokens == 5


def test_trtllm_health_version_and_iteration_metrics(trt):
    assert get(trt.base_url + "/health")[:2] == (200, "")
    assert get(trt.base_url + "/health_generate")[:2] == (200, "Generation health check OK")
    assert json.loads(get(trt.base_url + "/version")[1]) == {"version": "1.2.0rc6"}
    get(trt.base_url + "/metrics")  # drain the health_generate iteration
    client(trt).completions.create(model="gpt-oss-120b", prompt="x", max_tokens=30)
    status, body, _ = get(trt.base_url + "/metrics")
    stats = json.loads(body)
    assert status == 200 and isinstance(stats, list) and len(stats) >= 2
    for key in ("timestamp", "iter", "iterLatencyMS", "numActiveRequests", "kvCacheStats",
                "inflightBatchingStats", "specDecodingStats"):
        assert key in stats[0]
    spec = [s["specDecodingStats"] for s in stats if s["specDecodingStats"]["numRequestsWithDraftTokens"]]
    assert spec and all(s["numDraftTokens"] == 3 for s in spec)
    acc = sum(s["numAcceptedTokens"] for s in spec)
    assert sum(s["acceptanceLength"] for s in spec) == pytest.approx(len(spec) + acc)
    assert spec[0]["draftOverhead"] > 0  # two-model DraftTarget
    assert json.loads(get(trt.base_url + "/metrics")[1]) == []  # drained on read


def test_trtllm_metrics_empty_without_iter_perf_stats_and_one_model_null(models):
    env = H.base_env(SPECDEC_EMU_VERSION="1.2.0rc6", TIKTOKEN_ENCODINGS_BASE=models["tik"])
    with H.start("trtllm", [models["llama"], "--port", "0"], env) as srv:
        client(srv).completions.create(model="m", prompt="x", max_tokens=3)
        assert json.loads(get(srv.base_url + "/metrics")[1]) == []
    path = H.write_yaml(models["tmp"], SPEC_YAML.format(dt="Eagle", draft=models["draft"]))
    with H.start("trtllm", [models["llama"], "--port", "0", "--extra_llm_api_options", path], env) as srv:
        client(srv).completions.create(model="m", prompt="x", max_tokens=3)
        stats = json.loads(get(srv.base_url + "/metrics")[1])
        assert stats and all(s["specDecodingStats"] is None for s in stats)


def test_vllm_prometheus_counters_and_api_key(models):
    spec = json.dumps({"model": models["draft"], "num_speculative_tokens": 3, "method": "eagle3"})
    argv = [models["target"], "--host", "127.0.0.1", "--port", "0", "--api-key", "sekret",
            "--served-model-name", "gpt-oss", "--speculative-config", spec]
    with H.start("vllm", argv, H.base_env(TIKTOKEN_ENCODINGS_BASE=models["tik"])) as srv:
        with pytest.raises(openai.AuthenticationError):
            client(srv, "wrong").models.list()
        assert get(srv.base_url + "/health")[0] == 200  # not behind the key
        c = client(srv, "sekret")
        assert [m.id for m in c.models.list().data] == ["gpt-oss"]
        with pytest.raises(openai.NotFoundError):
            c.completions.create(model="other", prompt="x", max_tokens=2)
        for _ in range(3):
            c.chat.completions.create(model="gpt-oss", messages=[{"role": "user", "content": "x"}], max_tokens=60)
        status, body, headers = get(srv.base_url + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    values = {}
    for line in body.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP ", "# TYPE "))
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    lab = 'engine="0",model_name="gpt-oss"'
    drafts = values["vllm:spec_decode_num_drafts_total{%s}" % lab]
    draft_tokens = values["vllm:spec_decode_num_draft_tokens_total{%s}" % lab]
    accepted = values["vllm:spec_decode_num_accepted_tokens_total{%s}" % lab]
    per_pos = [values['vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position="%d"}' % (lab, i)]
               for i in range(3)]
    assert drafts > 0 and draft_tokens == 3 * drafts
    assert sum(per_pos) == accepted and per_pos[0] >= per_pos[1] >= per_pos[2]
    assert values["vllm:generation_tokens_total{%s}" % lab] == 180
    # prometheus_client names a counter family NAME_total and gives its _created samples a gauge family
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in body
    assert "# TYPE vllm:spec_decode_num_drafts_created gauge" in body


def test_harmony_encodings_required_for_gpt_oss(models):
    cfg, code, err = H.configure("trtllm", [models["target"], "--port", "0"], H.base_env())
    assert code is None
    srv = H.server.ThreadedServer(cfg).start()
    assert srv.stop() == 1 and srv.port is None
    cfg, _, _ = H.configure("trtllm", [models["target"], "--port", "0"],
                            H.base_env(TIKTOKEN_ENCODINGS_BASE=str(models["tmp"])))
    assert H.server.ThreadedServer(cfg).start().stop() == 1


def test_oom_when_kv_fraction_exceeds_device(models):
    path = H.write_yaml(models["tmp"], "kv_cache_config:\n  free_gpu_memory_fraction: 0.97\n")
    cfg, code, _ = H.configure("trtllm", [models["llama"], "--port", "0", "--extra_llm_api_options", path],
                               H.base_env(SPECDEC_EMU_MAX_MEMORY_FRACTION="0.95"))
    assert code is None and cfg.memory_fraction == 0.97
    assert H.server.ThreadedServer(cfg).start().stop() == 1
    cfg, _, _ = H.configure("vllm", [models["llama"], "--port", "0", "--gpu-memory-utilization", "0.98"],
                            H.base_env())
    assert H.server.ThreadedServer(cfg).start().stop() == 1
    # the seeds' own values fit the default emulated device
    cfg, _, _ = H.configure("vllm", [models["llama"], "--port", "0", "--gpu-memory-utilization", "0.97"],
                            H.base_env())
    srv = H.server.ThreadedServer(cfg).start()
    assert srv.port is not None and srv.stop() == 0


def test_fault_dead_after_and_hang_after(models):
    env = H.base_env(SPECDEC_EMU_FAULT="dead_after:1")
    with H.start("trtllm", [models["llama"], "--port", "0"], env) as srv:
        client(srv).completions.create(model="m", prompt="x", max_tokens=2)
        assert get(srv.base_url + "/health")[0] == 200  # the engine's zombie behaviour before PR #12718
        assert get(srv.base_url + "/health_generate")[0] == 500
        with pytest.raises(openai.InternalServerError):
            client(srv).completions.create(model="m", prompt="x", max_tokens=2)
    with H.start("vllm", [models["llama"], "--port", "0"], env) as srv:
        client(srv).completions.create(model=models["llama"], prompt="x", max_tokens=2)
        assert get(srv.base_url + "/health")[0] == 503
    with H.start("trtllm", [models["llama"], "--port", "0"], H.base_env(SPECDEC_EMU_FAULT="hang_after:1")) as srv:
        client(srv).completions.create(model="m", prompt="x", max_tokens=2)
        with pytest.raises(openai.APITimeoutError):
            openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=0.5).completions.create(
                model="m", prompt="x", max_tokens=2)


def _metric(text, name):
    rows = [line.split()[-1] for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]
    return sum(float(v) for v in rows)


def test_wedge_file_stops_tokens_while_health_and_requests_still_answer(models, tmp_path):
    """SPECDEC_EMU_WEDGE_FILE: once the file exists, no token comes out again (a stack that wedges under load);
    /health stays 200, requests are accepted and counted as running, and removing the file does not heal it."""
    wedge = tmp_path / "wedge"
    with H.start("vllm", [models["llama"], "--port", "0"], H.base_env(SPECDEC_EMU_WEDGE_FILE=str(wedge))) as srv:
        client(srv).completions.create(model=models["llama"], prompt="x", max_tokens=4)
        before = _metric(get(srv.base_url + "/metrics")[1], "vllm:generation_tokens_total")
        assert before >= 4
        wedge.write_text("")
        slow = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0, timeout=1.0)
        with pytest.raises(openai.APITimeoutError):
            slow.completions.create(model=models["llama"], prompt="x", max_tokens=4)
        wedge.unlink()
        assert get(srv.base_url + "/health")[0] == 200
        metrics = get(srv.base_url + "/metrics")[1]
        assert _metric(metrics, "vllm:generation_tokens_total") == before
        assert _metric(metrics, "vllm:num_requests_running") >= 1  # the timed-out request's stream is still held
        with pytest.raises(openai.APITimeoutError):
            slow.completions.create(model=models["llama"], prompt="y", max_tokens=4)


def test_fault_crash_after_n_requests(models):
    cfg, _, _ = H.configure("trtllm", [models["llama"], "--port", "0"], H.base_env(SPECDEC_EMU_FAULT="crash_after:2"))
    srv = H.server.ThreadedServer(cfg).start()
    c = client(srv)
    c.completions.create(model="m", prompt="x", max_tokens=2)
    c.completions.create(model="m", prompt="x", max_tokens=2)
    assert srv._done.wait(60), "the emulator did not stop after the second request"
    assert srv.exit_code == 1


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_process_load_delay_refuses_then_serves_and_sigterm_is_prompt(models):
    port = _free_port()
    env = dict(os.environ, SPECDEC_EMU_LOAD_DELAY_S="1.5", SPECDEC_EMU_TARGET_STEP_MS="2")
    proc = subprocess.Popen([sys.executable, os.path.join(H.EMULATOR, "bin", "trtllm-serve"), models["llama"],
                             "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.7)
        with pytest.raises(urllib.error.URLError) as exc:
            get("http://127.0.0.1:%d/health" % port, timeout=1)
        assert isinstance(exc.value.reason, ConnectionRefusedError)
        deadline = time.time() + 60  # a wait, not a bound: the start-up is slower on a loaded machine
        status = None
        while time.time() < deadline:
            try:
                status = get("http://127.0.0.1:%d/health" % port, timeout=1)[0]
                break
            except urllib.error.URLError:
                time.sleep(0.1)
        assert status == 200
        proc.terminate()
        # SIGTERM is handled (exit status 0, not -15) by a graceful shutdown; the wait is generous
        assert proc.wait(60) == 0
        err = proc.stderr.read().decode()
        assert "Shutting down" in err and err.rstrip().endswith("Finished server process [%d]" % proc.pid)
        assert "Uvicorn running on http://127.0.0.1:%d" % port in err
        assert '"GET /health HTTP/1.1" 200 OK' in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_process_bad_yaml_exit_code_and_unknown_option(models):
    path = H.write_yaml(models["tmp"], "speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n")
    env = dict(os.environ, SPECDEC_EMU_VERSION="1.2.1")
    exe = os.path.join(H.EMULATOR, "bin", "trtllm-serve")
    r = subprocess.run([sys.executable, exe, models["llama"], "--extra_llm_api_options", path], env=env,
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and r.stderr.rstrip().endswith("ValueError: Invalid decoding type: Eagle3")
    r = subprocess.run([sys.executable, exe, "serve", models["llama"], "--foo"], env=env, capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 2 and "Error: No such option: --foo" in r.stderr
    r = subprocess.run([sys.executable, os.path.join(H.EMULATOR, "bin", "vllm"), "serve", models["llama"], "--foo"],
                       env=env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "unrecognized arguments: --foo" in r.stderr


def test_client_disconnect_frees_the_batch_slot(models):
    import http.client
    with H.start("vllm", [models["llama"], "--port", "0", "--max-num-seqs", "1"], H.base_env()) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        conn.request("POST", "/v1/completions", body=json.dumps({"model": models["llama"], "prompt": "x",
                                                                  "max_tokens": 100000, "stream": True}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.readline().startswith(b"data: ")
        conn.close()
        deadline = time.time() + 60  # a wait, not a bound
        running = None
        while time.time() < deadline:
            body = get(srv.base_url + "/metrics")[1]
            running = [ln for ln in body.splitlines() if ln.startswith("vllm:num_requests_running{")][0]
            if running.endswith(" 0.0"):
                break
            time.sleep(0.05)
        assert running.endswith(" 0.0")
        # the single batch slot is free again
        r = client(srv).completions.create(model=models["llama"], prompt="x", max_tokens=3)
        assert r.usage.completion_tokens == 3
