"""output_probe module and the emulator's greedy output: the same with and without speculation,
different where the SPECDEC_EMU_CORRUPT_SPEC_OUTPUT fault injection says so."""

import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import ansible_collections.specdec.serve as collection
from ansible_collections.specdec.serve.plugins.module_utils import bench_probe
from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import PROMPT_SETS
from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import candidate_verdict

from specdec_emulator import server, trtllm_cli, vllm_cli  # lab/emulator, put on sys.path by conftest

COLLECTION_DIR = list(collection.__path__)[0]
MODULE = os.path.join(COLLECTION_DIR, "plugins", "modules", "output_probe.py")
ROOT = os.path.abspath(os.path.join(COLLECTION_DIR, "..", "..", ".."))
FAST = {"SPECDEC_EMU_TARGET_STEP_MS": "1", "SPECDEC_EMU_PREFILL_MS_PER_TOKEN": "0.001"}


def run_module(tmp_path, args, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in sys.path if p]))
    proc = subprocess.run([sys.executable, MODULE, str(f)], capture_output=True, text=True, timeout=120, env=env)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module output is not JSON: %s %s" % (proc.stdout, proc.stderr))


def trtllm(tmp_path, draft_len, **env):
    target, draft = tmp_path / "target", tmp_path / "draft"
    for d in (target, draft):
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    extra = {}
    if draft_len:
        extra["speculative_config"] = {"decoding_type": "Eagle", "max_draft_len": draft_len,
                                       "speculative_model_dir": str(draft)}
    cfg_file = tmp_path / ("extra-%d.yml" % draft_len)
    cfg_file.write_text(json.dumps(extra))
    cfg, code = trtllm_cli.configure(
        [str(target), "--host", "127.0.0.1", "--port", "0", "--max_batch_size", "8",
         "--extra_llm_api_options", str(cfg_file)],
        env=dict(FAST, SPECDEC_EMU_VERSION="1.2.0rc6", **env), out=io.StringIO())
    assert cfg is not None, code
    return server.ThreadedServer(cfg)


def vllm(tmp_path, draft_len, **env):
    target = tmp_path / "vtarget"
    target.mkdir(exist_ok=True)
    (target / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    argv = [str(target), "--host", "127.0.0.1", "--port", "0"]
    if draft_len:
        argv += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": draft_len,
                                                     "prompt_lookup_max": 4})]
    cfg, code = vllm_cli.configure(argv, env=dict(FAST, SPECDEC_EMU_VERSION="0.11.0", **env), out=io.StringIO())
    assert cfg is not None, code
    return server.ThreadedServer(cfg)


def probe(url, **kw):
    cfg = {"url": url, "prompts": PROMPT_SETS["mixed"][:3], "max_tokens": 24, "timeout": 30}
    cfg.update(kw)
    return bench_probe.run_probe(cfg)


def test_greedy_output_is_the_same_with_and_without_speculation(tmp_path):
    results = {}
    for k in (0, 1, 3, 6):
        with trtllm(tmp_path, k) as srv:
            results[k] = probe(srv.base_url)
    for k, res in results.items():
        assert res["failed_prompts"] == 0 and res["unit"] == "token", (k, res)
        assert [len(o["tokens"]) for o in res["outputs"]] == [24, 24, 24]
        assert all("".join(o["tokens"]) == o["text"] for o in res["outputs"])
        assert res["outputs"] == results[0]["outputs"], k
        assert candidate_verdict(results[0], res, k)["verdict"] == ("reference" if k == 0 else "passed")
    # different prompts, different texts
    texts = [o["text"] for o in results[0]["outputs"]]
    assert len(set(texts)) == 3


def test_greedy_output_does_not_depend_on_earlier_requests_or_the_engine(tmp_path):
    with trtllm(tmp_path, 3) as srv:
        first = probe(srv.base_url)
        probe(srv.base_url, prompts=["something else"])
        again = probe(srv.base_url)
    with vllm(tmp_path, 4) as srv:
        other = probe(srv.base_url)
    assert first["outputs"] == again["outputs"] == other["outputs"]


def test_the_fault_injection_corrupts_from_the_token_named_only_when_speculating(tmp_path):
    with trtllm(tmp_path, 0, SPECDEC_EMU_CORRUPT_SPEC_OUTPUT="5") as srv:
        base = probe(srv.base_url)
    with trtllm(tmp_path, 3, SPECDEC_EMU_CORRUPT_SPEC_OUTPUT="5") as srv:
        bad = probe(srv.base_url)
    v = candidate_verdict(base, bad, 3)
    assert v["verdict"] == "diverged" and v["diverged"] == 3
    assert [r["first_divergence"] for r in v["per_prompt"]] == [5, 5, 5]
    assert v["per_prompt"][0]["baseline_excerpt"] != v["per_prompt"][0]["candidate_excerpt"]
    assert candidate_verdict(base, bad, 3, min_prefix=5)["verdict"] == "passed"
    assert candidate_verdict(base, bad, 3, min_prefix=6)["verdict"] == "diverged"
    # limited to some draft lengths: the others are correct
    with trtllm(tmp_path, 2, SPECDEC_EMU_CORRUPT_SPEC_OUTPUT="5", SPECDEC_EMU_CORRUPT_SPEC_DRAFT_LENS="3,4") as srv:
        fine = probe(srv.base_url)
    assert candidate_verdict(base, fine, 2)["verdict"] == "passed"


def test_sampled_output_is_not_greedy(tmp_path):
    with trtllm(tmp_path, 0) as srv:
        status, a, _ = bench_probe.post_json(bench_probe.Endpoint(srv.base_url, "/v1/chat/completions"),
                                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
                                              "temperature": 0.7})
        status, b, _ = bench_probe.post_json(bench_probe.Endpoint(srv.base_url, "/v1/chat/completions"),
                                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
                                              "temperature": 0.7})
    assert a["choices"][0]["logprobs"] is None  # not asked for
    assert a["choices"][0]["message"]["content"] != b["choices"][0]["message"]["content"]


class NoLogprobs(BaseHTTPRequestHandler):
    """An engine that refuses logprobs with 400 and answers text only."""
    seen = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(req)
        if req.get("logprobs"):
            status, body = 400, {"error": {"message": "logprobs are not supported"}}
        else:
            status, body = 200, {"choices": [{"message": {"content": " text for %d" % req["max_tokens"]},
                                              "finish_reason": "length"}], "usage": {"completion_tokens": 3}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def no_logprobs():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), NoLogprobs)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    NoLogprobs.seen = []
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()


def test_module_falls_back_to_characters_when_logprobs_are_refused(tmp_path, no_logprobs):
    res = run_module(tmp_path, {"url": no_logprobs, "num_prompts": 2, "max_tokens": 7})
    assert not res.get("failed"), res
    assert res["changed"] is False and res["unit"] == "character" and res["failed_prompts"] == 0
    assert [o["text"] for o in res["outputs"]] == [" text for 7", " text for 7"]
    assert all(o["tokens"] is None and o["logprobs"] is False for o in res["outputs"])
    # each prompt asked with logprobs, then without; temperature 0, not streamed
    assert [bool(r.get("logprobs")) for r in NoLogprobs.seen] == [True, False, True, False]
    assert all(r["temperature"] == 0 and r["stream"] is False and r["model"] == "fake" for r in NoLogprobs.seen)


def test_module_against_the_emulator_returns_tokens(tmp_path):
    with trtllm(tmp_path, 3) as srv:
        res = run_module(tmp_path, {"url": srv.base_url, "num_prompts": 2, "max_tokens": 9})
    assert not res.get("failed"), res
    assert res["unit"] == "token" and len(res["outputs"]) == 2 and res["temperature"] == 0.0
    assert [o["completion_tokens"] for o in res["outputs"]] == [9, 9]


def test_module_check_mode_sends_nothing(tmp_path, no_logprobs):
    res = run_module(tmp_path, {"url": no_logprobs}, check=True)
    assert res["outputs"] == [] and NoLogprobs.seen == []


@pytest.mark.parametrize("args, needle", [
    ({"max_tokens": 0}, "max_tokens must be >= 1"),
    ({"num_prompts": -1}, "num_prompts must be >= 0"),
    ({"prompts": []}, "prompts must not be an empty list"),
    ({"url": "ftp://x"}, "could not start"),
])
def test_bad_arguments_are_refused(tmp_path, args, needle):
    res = run_module(tmp_path, args)
    assert res.get("failed") and needle in res["msg"], res


def test_a_failed_request_is_recorded_not_raised(tmp_path):
    with trtllm(tmp_path, 0, SPECDEC_EMU_FAULT="dead_after:1") as srv:
        res = probe(srv.base_url)
    # a failed request is not a failed task: Ansible reads a true `failed` key as the task failing
    assert not res.get("failed") and res["failed_prompts"] == 2 and res["outputs"][0]["error"] is None
    assert res["outputs"][1]["error"].startswith("HTTP 500")
