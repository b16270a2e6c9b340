"""serve_bench module: argument handling, check mode, results and failure rules.

The module runs as Ansible runs it (a Python process reading its arguments from a
file) against the streaming server of tests/unit/sse_engine.py.
"""

import json
import os
import subprocess
import sys

import pytest

import ansible_collections.specdec.serve as collection
from sse_engine import FakeEngine

COLLECTION_DIR = list(collection.__path__)[0]
MODULE = os.path.join(COLLECTION_DIR, "plugins", "modules", "serve_bench.py")
# the directory that holds ansible_collections/
ROOT = os.path.abspath(os.path.join(COLLECTION_DIR, "..", "..", ".."))


def run_module(tmp_path, args, check=False, preexec_fn=None):
    if check:
        args = dict(args, _ansible_check_mode=True)
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in sys.path if p])
    proc = subprocess.run([sys.executable, MODULE, str(f)], capture_output=True, text=True,
                          timeout=120, env=env, preexec_fn=preexec_fn)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module output is not JSON: %s %s" % (proc.stdout, proc.stderr))


def test_module_measures_and_returns_json(tmp_path):
    with FakeEngine(ttft=0.03, interval=0.01, per_chunk=2, tokens=20) as eng:
        res = run_module(tmp_path, {"url": eng.url, "concurrency": 2, "num_requests": 4,
                                    "warmup_requests": 2, "repetitions": 3,
                                    "prompt_set": "vacation", "spec_metrics": "none",
                                    "include_requests": True, "max_tokens": 20})
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    assert res["model"] == "fake-model"
    assert len(res["runs"]) == 3
    assert [r["repetition"] for r in res["runs"]] == [0, 1, 2]
    assert len(res["runs"][0]["request_records"]) == 4
    assert res["runs"][0]["request_records"][0]["output_tokens"] == 20
    # whether the usage count came with the stream: the acceptance estimate counts only those that did
    assert res["runs"][0]["request_records"][0]["usage_reported"] is True
    assert len(res["summary"]["output_throughput"]["values"]) == 3
    # measured, and never faster than the engine's schedule (which the real clock can only add to)
    assert res["summary"]["tpot_ms"]["p50"] > 0 and res["summary"]["tokens_per_chunk"]["mean"] == pytest.approx(2.0)
    assert set(res["summary"]["ttft_ms"]) >= {"mean", "p50", "p90", "p99"}
    assert res["summary"]["ttft_ms"]["p50"] >= eng.ttft * 1000 - 1e-3
    assert all(r["ttft_ms"]["min"] >= eng.ttft * 1000 - 1e-3 for r in res["runs"])
    assert all(r["e2e_ms"]["min"] >= eng.true_e2e * 1000 - 1e-3 for r in res["runs"])
    assert len(eng.requests) == 2 + 3 * 4
    assert res["errors"]["count"] == 0


def test_module_fails_when_errors_exceed_the_allowed_rate(tmp_path):
    with FakeEngine(mode="http500") as eng:
        res = run_module(tmp_path, {"url": eng.url, "model": "m", "num_requests": 3,
                                    "warmup_requests": 0, "spec_metrics": "none"})
        assert res["failed"] is True
        assert "3 of 3 measured requests failed" in res["msg"] and "HTTP 500" in res["msg"]
        assert res["runs"][0]["errors"]["count"] == 3  # the measurements come back with the failure
        tolerated = run_module(tmp_path, {"url": eng.url, "model": "m", "num_requests": 2,
                                          "warmup_requests": 0, "spec_metrics": "none",
                                          "max_error_rate": 1.0})
    assert not tolerated.get("failed")
    assert tolerated["errors"]["count"] == 2


def test_check_mode_sends_nothing(tmp_path):
    with FakeEngine() as eng:
        res = run_module(tmp_path, {"url": eng.url, "model": "m"}, check=True)
    assert res["changed"] is False and res["runs"] == []
    assert eng.requests == []


@pytest.mark.parametrize("args,needle", [
    ({"concurrency": 0}, "concurrency must be >= 1"),
    ({"max_error_rate": 2}, "max_error_rate must be within 0..1"),
    ({"percentiles": [50, 120]}, "percentiles must be within 0..100"),
    ({"prompts": []}, "prompts must not be an empty list"),
    ({"prompt_set": "nope"}, "prompt_set"),
    ({"url": "ftp://x"}, "url must start with http"),
])
def test_bad_arguments_are_refused(tmp_path, args, needle):
    base = {"url": "http://127.0.0.1:9", "model": "m", "spec_metrics": "none"}
    base.update(args)
    res = run_module(tmp_path, base)
    assert res["failed"] is True
    assert needle in res["msg"]


def test_api_key_is_not_echoed(tmp_path):
    with FakeEngine(tokens=2) as eng:
        res = run_module(tmp_path, {"url": eng.url, "model": "m", "num_requests": 1,
                                    "warmup_requests": 0, "api_key": "s3cr3t-token",
                                    "spec_metrics": "none"})
    assert "s3cr3t-token" not in json.dumps(res)
