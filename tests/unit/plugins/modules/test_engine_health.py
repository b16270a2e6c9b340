"""engine_health against a local HTTP engine stand-in (127.0.0.1) and fake systemctl/docker/journalctl.

The module runs as Ansible runs it: a separate Python process given its arguments as JSON; the fakes
are small shell scripts put first on its PATH that read the unit/container state from files the test
changes while the module polls.
"""

import json
import os
import datetime
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "engine_health.py"


class Engine:
    """An OpenAI-style engine that answers /health 503 until it is ready.

    Ready means: `ready_after_polls` /health requests were answered 503 (counted, so independent of
    how fast the machine is), or else `ready_after` seconds have passed. It records every request and
    every /health answer in order. With `listen_when` (a callable), it opens its port only once that
    returns true; until then connections are refused.
    """

    def __init__(self, ready_after=0.0, models=("tiny",), api_key=None, generation_status=200, listen_when=None,
                 ready_after_polls=None, version=None, tls=None):
        self.ready_after, self.models, self.api_key = ready_after, list(models), api_key
        self.tls = tls  # (certificate file, key file): serve https
        self.version = version
        self.ready_after_polls = ready_after_polls
        self.generation_status = generation_status
        self.requests = []
        self.health_answers = []
        self.start = time.monotonic()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.server = None
        self._closed = threading.Event()
        if listen_when is None:
            self._listen()
        else:
            threading.Thread(target=self._listen_when, args=(listen_when,), daemon=True).start()

    def _listen_when(self, condition):
        while not self._closed.is_set():
            if condition():
                return self._listen()
            self._closed.wait(0.02)

    def ready(self):
        if self.ready_after_polls is not None:
            return self.health_answers.count(503) >= self.ready_after_polls
        return time.monotonic() - self.start >= self.ready_after

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
                if self.path == "/health":
                    ready = engine.ready()
                    engine.health_answers.append(200 if ready else 503)
                    return self._send(200, b"") if ready else self._send(503, {"error": "loading"})
                if self.path == "/v1/models":
                    if not self._authorized():
                        return self._send(401, {"error": "Unauthorized"})
                    return self._send(200, {"object": "list", "data": [{"id": m} for m in engine.models]})
                if self.path == "/version" and engine.version is not None:
                    return self._send(200, {"version": engine.version})
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
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def close(self):
        self._closed.set()
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
# read once: what it logs is what it reports, even while the test changes the state
unit=$(cat "$FAKE_STATE/unit")
echo "systemctl show" $unit >> "$FAKE_STATE/calls"
printf '%s\\n' "$unit"
""",
    "journalctl": """#!/bin/sh
echo "journalctl $*" >> "$FAKE_STATE/calls"
cat "$FAKE_STATE/journal"
""",
    "docker": """#!/bin/sh
case "$1" in
  inspect) if doc=$(cat "$FAKE_STATE/container.json" 2>/dev/null); then
             echo "docker inspect $doc" >> "$FAKE_STATE/calls"
             printf '%s\\n' "$doc"; else
             echo "docker inspect missing" >> "$FAKE_STATE/calls"
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

        def polls(self, command):
            """What the fake `command` (systemctl show or docker inspect) reported, call by call."""
            return [line[len(command) + 1:] for line in self.calls().splitlines() if line.startswith(command + " ")]

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
    # not ready for the first three /health polls: counted by the engine, not timed
    engine = engines(ready_after_polls=3, models=["gpt-oss-120b"])
    out, _ = run_module({"url": engine.url, "model": "gpt-oss-120b", "generate": True, "timeout": 60,
                         "interval": 0.1}, tmp=tmp_path)
    assert "failed" not in out, out
    assert out["changed"] is False and out["stage"] == "ready" and out["models"] == ["gpt-oss-120b"]
    # readiness was reported only after the engine said so, and the module stopped polling /health then
    assert engine.health_answers == [503, 503, 503, 200], "did not wait for the engine to become ready"
    paths = [r[1] for r in engine.requests]
    assert paths.index("/v1/models") > paths.index("/health") + 3, "asked for the models before /health passed"
    t = out["timings"]
    assert all(isinstance(t[k], float) for k in ("tcp_accept", "health", "models", "generate", "total")), t
    assert 0 <= t["tcp_accept"] <= t["health"] <= t["models"] <= t["generate"] <= t["total"] and t["total"] > 0
    # three unready answers mean three sleeps of `interval` on the module's own clock before health passed
    assert t["health"] - t["tcp_accept"] >= 3 * 0.1, "health timed at the wrong poll"
    gen = [r for r in engine.requests if r[0] == "POST"][-1]
    assert gen[1] == "/v1/chat/completions" and gen[2]["max_tokens"] == 1 and gen[2]["model"] == "gpt-oss-120b"


@pytest.fixture
def self_signed(tmp_path):
    """A certificate for 127.0.0.1 signed by itself (no CA on this machine trusts it)."""
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "engine")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "engine.crt", tmp_path / "engine.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_https_is_verified_unless_told_not_to(engines, self_signed, tmp_path):
    engine = engines(tls=self_signed, models=["tiny"])
    out, _ = run_module({"url": engine.url, "timeout": 0.5, "interval": 0.1}, tmp=tmp_path)
    assert out["failed"] and out["stage"] == "health", out
    assert "CERTIFICATE_VERIFY_FAILED" in out["msg"], out["msg"]
    assert engine.requests == [], "a request went out over a connection whose certificate did not verify"
    out, _ = run_module({"url": engine.url, "timeout": 30, "validate_certs": False}, tmp=tmp_path)
    assert "failed" not in out and out["stage"] == "ready" and out["models"] == ["tiny"], out


def test_the_engine_is_asked_directly_whatever_proxy_the_host_sets(engines, tmp_path):
    engine = engines(models=["tiny"])
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", no_proxy="")
    out, _ = run_module({"url": engine.url, "timeout": 30}, env=env, tmp=tmp_path)
    assert "failed" not in out and out["stage"] == "ready", out
    assert ("GET", "/health", None) in engine.requests


def test_version_is_asked_only_when_wanted_ready_or_not(engines, tmp_path):
    engine = engines(version="1.2.0rc2")
    out, _ = run_module({"url": engine.url, "timeout": 30, "version": True}, tmp=tmp_path)
    assert out["stage"] == "ready" and out["engine_version"] == "1.2.0rc2", out
    out, _ = run_module({"url": engine.url, "timeout": 30}, tmp=tmp_path)
    assert "engine_version" not in out and ("GET", "/version", None) in engine.requests
    assert [r[1] for r in engine.requests].count("/version") == 1
    # an engine that never becomes ready is still asked, and one without /version gives null
    down = engines(ready_after=3600, version="0.32.0")
    out, _ = run_module({"url": down.url, "timeout": 0.5, "interval": 0.1, "version": True}, tmp=tmp_path)
    assert out["failed"] and out["stage"] == "health" and out["engine_version"] == "0.32.0", out
    mute = engines()
    out, _ = run_module({"url": mute.url, "timeout": 30, "version": True}, tmp=tmp_path)
    assert out["stage"] == "ready" and out["engine_version"] is None, out


def test_tcp_accept_is_timed_separately(engines, host, tmp_path):
    # The port opens only after the module's third poll (it watches the unit at every poll, and the
    # fake systemctl counts those), so connections were refused at least twice before one was accepted.
    engine = engines(listen_when=lambda: len(host.polls("systemctl show")) >= 3)
    out, _ = run_module({"url": engine.url, "unit": "specdec-x.service", "timeout": 60, "interval": 0.1},
                        env=host.env, tmp=tmp_path)
    assert out["stage"] == "ready", out
    t = out["timings"]
    assert len(host.polls("systemctl show")) >= 3
    # two refused polls, each followed by a sleep of `interval` on the module's own clock
    assert t["tcp_accept"] >= 2 * 0.1, "tcp_accept not timed at the accepted connection"
    assert t["tcp_accept"] <= t["health"] <= t["models"] <= t["total"] and t["generate"] is None


def test_model_not_listed_times_out_with_the_listed_ids(engines, tmp_path):
    engine = engines(models=["other-model"])
    out, _ = run_module({"url": engine.url, "model": "gpt-oss-120b", "timeout": 1.0}, tmp=tmp_path)
    assert out["failed"] is True and out["stage"] == "models"
    assert "not ready after 1.0s: still waiting for models" in out["msg"]
    assert "does not list 'gpt-oss-120b' (it lists: other-model)" in out["msg"]
    # it gave up only once its own clock passed the timeout, having asked again meanwhile
    assert out["timings"]["total"] >= 1.0 and out["timings"]["models"] is None
    assert sum(1 for r in engine.requests if r[1] == "/v1/models") >= 2


def test_api_key_is_sent_and_never_returned(engines, tmp_path):
    engine = engines(api_key="s3cr3t-key", models=["m"])
    out, _ = run_module({"url": engine.url, "model": "m", "timeout": 5, "api_key": "wrong-key"}, tmp=tmp_path)
    assert out["failed"] is True and "answered 401: the API key is wrong" in out["msg"]
    out, _ = run_module({"url": engine.url, "model": "m", "generate": True, "timeout": 5, "api_key": "s3cr3t-key"},
                        tmp=tmp_path)
    assert out["stage"] == "ready", out
    assert "s3cr3t-key" not in json.dumps(out)
    assert ("GET", "/v1/models", "Bearer s3cr3t-key") in engine.requests


def test_api_key_read_from_the_engines_env_file(engines, tmp_path):
    """An async gate's arguments stay on disk: the key is read on the host from the engine's env file."""
    engine = engines(api_key="s3cr3t-key", models=["m"])
    env_file = tmp_path / "engine.env"
    env_file.write_text("HF_HUB_OFFLINE=1\n# VLLM_API_KEY=commented-out\nVLLM_API_KEY=s3cr3t-key\n")
    out, _ = run_module({"url": engine.url, "model": "m", "timeout": 5, "api_key_env_file": str(env_file)},
                        tmp=tmp_path)
    assert out["stage"] == "ready", out
    assert "s3cr3t-key" not in json.dumps(out)
    assert ("GET", "/v1/models", "Bearer s3cr3t-key") in engine.requests
    # a file without the variable means no key: the engine refuses the models request
    env_file.write_text("HF_HUB_OFFLINE=1\n")
    out, _ = run_module({"url": engine.url, "model": "m", "timeout": 5, "api_key_env_file": str(env_file)},
                        tmp=tmp_path)
    assert out["failed"] is True and "the API key is missing" in out["msg"]
    out, _ = run_module({"url": engine.url, "timeout": 5, "api_key_env_file": str(tmp_path / "absent.env")},
                        tmp=tmp_path)
    assert out["failed"] is True and "cannot read api_key_env_file" in out["msg"]
    out, _ = run_module({"url": engine.url, "timeout": 5, "api_key": "k", "api_key_env_file": str(env_file)},
                        tmp=tmp_path)
    assert out["failed"] is True and "mutually exclusive" in out["msg"]


def test_dead_executor_fails_generation(engines, tmp_path):
    engine = engines(generation_status=500)
    out, _ = run_module({"url": engine.url, "generate": True, "timeout": 1.0}, tmp=tmp_path)
    assert out["failed"] is True and out["stage"] == "generate"
    assert "POST /v1/chat/completions answered 500" in out["msg"]


def test_check_mode_only_reads(engines, tmp_path):
    engine = engines(models=["m"])
    out, _ = run_module({"url": engine.url, "model": "m", "_ansible_check_mode": True, "timeout": 5}, tmp=tmp_path)
    assert out["changed"] is False and out["stage"] == "ready"


def _flip_after(condition, action):
    """Run `action` once `condition()` holds: after the module has polled a given number of times."""
    def wait():
        for _ in range(3000):
            if condition():
                return action()
            time.sleep(0.02)
    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_unit_failure_fails_at_once_with_journal_lines(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    _flip_after(lambda: len(host.polls("systemctl show")) >= 2,
                lambda: host.unit(active="failed", sub="failed", status=1, result="exit-code"))
    out, _ = run_module({"url": engine.url, "unit": "specdec-x.service", "timeout": 60, "log_lines": 5},
                        env=host.env, tmp=tmp_path)
    assert out["failed"] is True
    # failed at the first poll that saw the failed unit, not at the timeout
    seen = host.polls("systemctl show")
    assert "ActiveState=failed" in seen[-1] and sum("ActiveState=failed" in s for s in seen) == 1, seen
    assert "not ready after" not in out["msg"]
    assert "unit specdec-x.service failed (failed, result exit-code, exit status 1)" in out["msg"]
    assert out["unit_state"]["ActiveState"] == "failed"
    assert out["log_lines"][-1] == "RuntimeError: CUDA out of memory" and len(out["log_lines"]) == 5
    assert "RuntimeError: CUDA out of memory" in out["msg"]
    assert "journalctl -u specdec-x.service -n 5 --no-pager" in host.calls()


def test_unit_restart_is_a_failure(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    host.unit(restarts=2)
    _flip_after(lambda: len(host.polls("systemctl show")) >= 2, lambda: host.unit(restarts=3, sub="start"))
    out, _ = run_module({"url": engine.url, "unit": "specdec-x.service", "timeout": 60}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True
    seen = host.polls("systemctl show")
    assert "NRestarts=3" in seen[-1] and sum("NRestarts=3" in s for s in seen) == 1, seen
    assert "restarted (NRestarts 2 -> 3" in out["msg"]


def test_container_exit_fails_at_once_with_docker_logs(engines, host, tmp_path):
    engine = engines(ready_after=1000)
    host.container()
    _flip_after(lambda: len(host.polls("docker inspect")) >= 2, lambda: host.container(status="exited", exit_code=1))
    out, _ = run_module({"url": engine.url, "unit": "specdec-x.service", "container": "specdec-x",
                         "timeout": 60, "log_lines": 3}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True
    seen = host.polls("docker inspect")
    assert '"exited"' in seen[-1] and sum('"exited"' in s for s in seen) == 1, seen
    assert "container specdec-x exited (exit code 1)" in out["msg"]
    assert out["container_state"]["Status"] == "exited"
    assert out["log_lines"][-1] == "pydantic ValidationError: extra fields not permitted"
    assert "docker logs --tail 3 specdec-x" in host.calls()


def test_container_waited_for_then_disappearing_is_a_failure(engines, host, tmp_path):
    engine = engines(ready_after=1000)

    def inspected(what):
        return [s for s in host.polls("docker inspect") if (s == "missing") == (what == "missing")]
    # created late (image pull): after two polls found no container
    _flip_after(lambda: len(inspected("missing")) >= 2, host.container)
    # --rm container gone after a crash: after the module saw it running twice
    _flip_after(lambda: len(inspected("running")) >= 2, host.remove_container)
    out, _ = run_module({"url": engine.url, "container": "specdec-x", "unit": "specdec-x.service",
                         "timeout": 60}, env=host.env, tmp=tmp_path)
    assert out["failed"] is True
    seen = host.polls("docker inspect")
    first_seen = next(i for i, s in enumerate(seen) if s != "missing")
    # waited while it did not exist yet, failed at the first poll after it disappeared
    assert first_seen >= 2 and seen[-1] == "missing" and "missing" not in seen[first_seen:-1], seen
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
