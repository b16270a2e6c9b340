"""engine_health against a local HTTP engine stand-in (127.0.0.1) and fake systemctl/docker/journalctl.

The module runs as Ansible runs it: a separate Python process given its arguments as JSON; the fakes
are small shell scripts put first on its PATH that read the unit/container state from files the test
changes while the module polls.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "engine_health.py"


class Engine:
    """An OpenAI-style engine that answers /health 503 until `ready_after` seconds have passed."""

    def __init__(self, ready_after=0.0, models=("tiny",), api_key=None, generation_status=200, listen_after=0.0):
        self.ready_after, self.models, self.api_key = ready_after, list(models), api_key
        self.generation_status = generation_status
        self.requests = []
        self.start = time.monotonic()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.server = None
        self._timer = threading.Timer(listen_after, self._listen)
        self._timer.start()
        if listen_after == 0:
            self._timer.join()

    def _listen(self):
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self):
                return engine.api_key is None or self.headers.get("Authorization") == "Bearer " + engine.api_key

            def do_GET(self):
                engine.requests.append(("GET", self.path, self.headers.get("Authorization")))
                ready = time.monotonic() - engine.start >= engine.ready_after
                if self.path == "/health":
                    return self._send(200, b"") if ready else self._send(503, {"error": "loading"})
                if self.path == "/v1/models":
                    if not self._authorized():
                        return self._send(401, {"error": "Unauthorized"})
                    return self._send(200, {"object": "list", "data": [{"id": m} for m in engine.models]})
                self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                engine.requests.append(("POST", self.path, body))
                if not self._authorized():
                    return self._send(401, {"error": "Unauthorized"})
                if engine.generation_status != 200:
                    return self._send(engine.generation_status, {"error": "engine dead"})
                self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self._timer.cancel()
        if self.server:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def engines():
    made = []

    def make(**kw):
        made.append(Engine(**kw))
        return made[-1]
    yield make
    for e in made:
        e.close()


FAKES = {
    "systemctl": """#!/bin/sh
# fake: systemctl show UNIT -p PROPS -> the state file
[ "$1" = show ] || exit 1
cat "$FAKE_STATE/unit"
""",
    "journalctl": """#!/bin/sh
echo "journalctl $*" >> "$FAKE_STATE/calls"
cat "$FAKE_STATE/journal"
""",
    "docker": """#!/bin/sh
case "$1" in
  inspect) if [ -f "$FAKE_STATE/container.json" ]; then cat "$FAKE_STATE/container.json"; else
             echo "Error: No such container: $4" >&2; exit 1; fi ;;
  logs) echo "docker $*" >> "$FAKE_STATE/calls"
        if [ -f "$FAKE_STATE/container.json" ]; then cat "$FAKE_STATE/docker_logs"; else exit 1; fi ;;
  *) exit 1 ;;
esac
""",
}


@pytest.fixture
def host(tmp_path):
    """Fake systemctl/docker/journalctl on PATH, with setters for the state they report."""
    bin_dir = tmp_path / "bin"
    state = tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in FAKES.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)

    class Host:
        env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), FAKE_STATE=str(state))

        def unit(self, active="active", sub="running", restarts=0, status=0, result="success"):
            (state / "unit.tmp").write_text("LoadState=loaded\nActiveState=%s\nSubState=%s\nResult=%s\nNRestarts=%d\n"
                                            "ExecMainStatus=%d\n" % (active, sub, result, restarts, status))
            os.replace(state / "unit.tmp", state / "unit")

        def container(self, status="running", exit_code=0, cid="c0ffee" * 8, restarts=0, oom=False):
            doc = [{"Id": cid, "RestartCount": restarts,
                    "State": {"Status": status, "Running": status == "running", "ExitCode": exit_code,
                              "OOMKilled": oom, "Error": ""}}]
            (state / "c.tmp").write_text(json.dumps(doc))
            os.replace(state / "c.tmp", state / "container.json")

        def remove_container(self):
            (state / "container.json").unlink()

        def calls(self):
            p = state / "calls"
            return p.read_text() if p.exists() else ""

    h = Host()
    (state / "journal").write_text("".join("journal line %d\n" % i for i in range(100)) +
                                   "RuntimeError: CUDA out of memory\n")
    (state / "docker_logs").write_text("".join("engine log %d\n" % i for i in range(100)) +
                                       "pydantic ValidationError: extra fields not permitted\n")
    h.unit()
    return h


def run_module(args, env=None, tmp=None, timeout=60):
    args_file = Path(tmp) / ("args-%d.json" % time.monotonic_ns())
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(env or os.environ)
    env["PYTHONPATH"] = str(REPO / "collections")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env,
                          timeout=timeout)
    took = time.monotonic() - started
    start = proc.stdout.find("{")
    assert start >= 0, "no JSON from the module: %s %s" % (proc.stdout, proc.stderr)
    return json.loads(proc.stdout[start:]), took


def test_waits_for_readiness_and_reports_ordered_timings(engines, tmp_path):
    engine = engines(ready_after=0.8, models=["gpt-oss-120b"])
    out, _ = run_module({"url": engine.url, "model": "gpt-oss-120b", "generate": True, "timeout": 20}, tmp=tmp_path)
    assert "failed" not in out, out
    assert out["changed"] is False and out["stage"] == "ready" and out["models"] == ["gpt-oss-120b"]
    t = out["timings"]
    assert t["tcp_accept"] <= t["health"] <= t["models"] <= t["generate"] <= t["total"]
    assert t["health"] >= 0.6, "became ready before the engine did"
    health_polls = [r for r in engine.requests if r[1] == "/health"]
    assert len(health_polls) >= 3, "did not poll /health repeatedly"
    gen = [r for r in engine.requests if r[0] == "POST"][-1]
    assert gen[1] == "/v1/chat/completions" and gen[2]["max_tokens"] == 1 and gen[2]["model"] == "gpt-oss-120b"


def test_tcp_accept_is_timed_separately(engines, tmp_path):
    # The module times from its own start, which lags the engine's by the subprocess start-up
    # (up to a second on a loaded 2-core machine), hence a listen delay well above the bound.
    engine = engines(listen_after=2.0)
    out, _ = run_module({"url": engine.url, "timeout": 20}, tmp=tmp_path)
    assert out["stage"] == "ready"
    assert out["timings"]["tcp_accept"] >= 0.5 and out["timings"]["generate"] is None


def test_model_not_listed_times_out_with_the_listed_ids(engines, tmp_path):
    engine = engines(models=["other-model"])
    out, took = run_module({"url": engine.url, "model": "gpt-oss-120b", "timeout": 1.0}, tmp=tmp_path)
    assert out["failed"] is True and out["stage"] == "models"
    assert "not ready after 1.0s: still waiting for models" in out["msg"]
    assert "does not list 'gpt-oss-120b' (it lists: other-model)" in out["msg"]
    assert 1.0 <= took < 10


def test_api_key_is_sent_and_never_returned(engines, tmp_path):
    engine = engines(api_key="s3cr3t-key", models=["m"])
    out, _ = run_module({"url": engine.url, "model": "m", "timeout": 5, "api_key": "wrong-key"}, tmp=tmp_path)
    assert out["failed"] is True and "answered 401: the API key is wrong" in out["msg"]
    out, _ = run_module({"url": engine.url, "model": "m", "generate": True, "timeout": 5, "api_key": "s3cr3t-key"},
                        tmp=tmp_path)
    assert out["stage"] == "ready", out
    assert "s3cr3t-key" not in json.dumps(out)
    assert ("GET", "/v1/models", "Bearer s3cr3t-key") in engine.requests


def test_dead_executor_fails_generation(engines, tmp_path):
    engine = engines(generation_status=500)
    out, _ = run_module({"url": engine.url, "generate": True, "timeout": 1.0}, tmp=tmp_path)
    assert out["failed"] is True and out["stage"] == "generate"
    assert "POST /v1/chat/completions answered 500" in out["msg"]


def test_check_mode_only_reads(engines, tmp_path):
    engine = engines(models=["m"])
    out, _ = run_module({"url": engine.url, "model": "m", "_ansible_check_mode": True, "timeout": 5}, tmp=tmp_path)
    assert out["changed"] is False and out["stage"] == "ready"


def _flip_later(delay, action):
    timer = threading.Timer(delay, action)
    timer.start()
    return timer


def test_unit_failure_fails_at_once_with_journal_lines(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    _flip_later(0.7, lambda: host.unit(active="failed", sub="failed", status=1, result="exit-code"))
    out, took = run_module({"url": engine.url, "unit": "specdec-x.service", "timeout": 60, "log_lines": 5},
                           env=host.env, tmp=tmp_path)
    assert out["failed"] is True
    assert took < 10, "did not fail fast (%.1fs)" % took
    assert "unit specdec-x.service failed (failed, result exit-code, exit status 1)" in out["msg"]
    assert out["unit_state"]["ActiveState"] == "failed"
    assert out["log_lines"][-1] == "RuntimeError: CUDA out of memory" and len(out["log_lines"]) == 5
    assert "RuntimeError: CUDA out of memory" in out["msg"]
    assert "journalctl -u specdec-x.service -n 5 --no-pager" in host.calls()


def test_unit_restart_is_a_failure(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    host.unit(restarts=2)
    _flip_later(0.7, lambda: host.unit(restarts=3, sub="start"))
    out, took = run_module({"url": engine.url, "unit": "specdec-x.service", "timeout": 60}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True and took < 10
    assert "restarted (NRestarts 2 -> 3" in out["msg"]


def test_container_exit_fails_at_once_with_docker_logs(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    host.container()
    _flip_later(0.7, lambda: host.container(status="exited", exit_code=1))
    out, took = run_module({"url": engine.url, "unit": "specdec-x.service", "container": "specdec-x",
                            "timeout": 60, "log_lines": 3}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True and took < 10
    assert "container specdec-x exited (exit code 1)" in out["msg"]
    assert out["container_state"]["Status"] == "exited"
    assert out["log_lines"][-1] == "pydantic ValidationError: extra fields not permitted"
    assert "docker logs --tail 3 specdec-x" in host.calls()


def test_container_waited_for_then_disappearing_is_a_failure(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    _flip_later(0.5, host.container)          # created late (image pull)
    _flip_later(1.2, host.remove_container)   # --rm container gone after a crash
    out, took = run_module({"url": engine.url, "container": "specdec-x", "unit": "specdec-x.service",
                            "timeout": 60}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True and took < 10
    assert "container specdec-x disappeared" in out["msg"]
    # the container's logs are gone with it: the journal is used instead
    assert out["log_lines"][-1] == "RuntimeError: CUDA out of memory"


def test_healthy_unit_and_container_pass(engines, host, tmp_path):
    engine = engines(ready_after=0.3, models=["m"])
    host.container()
    out, _ = run_module({"url": engine.url, "model": "m", "unit": "specdec-x.service", "container": "specdec-x",
                         "timeout": 20}, env=host.env, tmp=tmp_path)
    assert out["stage"] == "ready", out
    assert out["unit_state"]["SubState"] == "running" and out["container_state"]["Status"] == "running"


def test_bad_arguments(tmp_path):
    out, _ = run_module({"url": "ftp://x", "timeout": 1}, tmp=tmp_path)
    assert out["failed"] is True and "url must be http(s)://host[:port]" in out["msg"]
    out, _ = run_module({"interval": 0}, tmp=tmp_path)
    assert out["failed"] is True and "interval must be > 0" in out["msg"]
