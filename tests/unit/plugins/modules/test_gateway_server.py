# -*- coding: utf-8 -*-
"""gateway_server against a stand-in of HAProxy's runtime API (a UNIX socket speaking `show stat` and
`set server ... state ...`), so the drain's wait, its reported timeout and check mode are checked here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.modules.gateway_server import admin_state, parse_stat, select

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "gateway_server.py"
HEADER = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,status,weight,addr,check_status,type,\n"


class Runtime:
    """Servers with a status and a session count; `set server` changes the status, sessions drop over time."""

    def __init__(self, path, servers):
        self.path, self.servers, self.commands = str(path), servers, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def stat(self):
        lines = [HEADER, "openai,FRONTEND,,,0,0,0,0,0,0,OPEN,,,,0,\n"]
        for (backend, server), s in sorted(self.servers.items()):
            lines.append("%s,%s,0,0,%d,0,,%d,0,0,%s,1,10.0.0.1:8000,L7OK,2,\n"
                         % (backend, server, s["sessions"], s["total"], s["status"]))
            # a draining server's requests finish, one per poll
            if s["status"] == "DRAIN" and s.get("finishing") and s["sessions"] > 0:
                s["sessions"] -= 1
        lines.append("model_x,BACKEND,0,0,0,0,0,0,0,0,UP,1,,,1,\n")
        return "".join(lines)

    def state(self):
        lines = ["1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight\n"]
        for (backend, server), s in sorted(self.servers.items()):
            flags = {"ready": 0, "drain": 8, "maint": 1}[s.get("admin", "ready")]
            lines.append("3 %s 1 %s 10.0.0.1 2 %d 1\n" % (backend, server, flags))
        return "".join(lines) + "\n"

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    data += conn.recv(4096)
                cmd = data.decode().strip()
                self.commands.append(cmd)
                if cmd == "show stat":
                    conn.sendall(self.stat().encode())
                elif cmd == "show servers state":
                    conn.sendall(self.state().encode())
                elif cmd.startswith("set server "):
                    target, _, state = cmd[len("set server "):].partition(" state ")
                    backend, server = target.split("/", 1)
                    s = self.servers[(backend, server)]
                    s["status"] = {"drain": "DRAIN", "ready": s.get("after_ready", "UP"), "maint": "MAINT"}[state]
                    s["admin"] = state
                else:
                    conn.sendall(b"Unknown command.\n")

    def close(self):
        self.stop = True
        self.sock.close()


@pytest.fixture
def runtime(tmp_path):
    made = []

    def make(servers):
        rt = Runtime(tmp_path / "admin.sock", servers)
        made.append(rt)
        return rt
    yield make
    for rt in made:
        rt.close()


def run_module(args, tmp, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    args_file = Path(tmp) / ("args-%d.json" % time.monotonic_ns())
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    start = proc.stdout.find("{")
    assert start >= 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout[start:])


def servers(**over):
    base = {("model_x", "h1:x"): {"status": "UP", "sessions": 3, "total": 10, "finishing": True},
            ("model_x", "h2:x"): {"status": "UP", "sessions": 1, "total": 9},
            ("model_y", "h1:y"): {"status": "UP", "sessions": 0, "total": 2}}
    for key, val in over.items():
        backend, server = key.split("__")
        base[(backend, server.replace("_", ":"))].update(val)
    return base


def test_parse_stat_keeps_servers_only():
    rows = parse_stat(HEADER + "model_x,h1:x,0,0,2,5,,7,0,0,DRAIN,1,10.0.0.1:8000,L7OK,2,\n"
                      "model_x,BACKEND,0,0,2,5,,7,0,0,UP,1,,,1,\n")
    assert rows == [{"backend": "model_x", "server": "h1:x", "status": "DRAIN", "sessions": 2, "total": 7,
                     "queued": 0, "address": "10.0.0.1:8000", "check": "L7OK", "weight": 1}]
    with pytest.raises(ValueError):
        parse_stat("Unknown command.\n")


def test_select_by_name_and_host():
    rows = [{"backend": "b", "server": s} for s in ("h1:x", "h1:y", "h10:x", "h2:x")]
    chosen, missing = select(rows, ["h2:x", "h9:x"], "h1")
    assert [r["server"] for r in chosen] == ["h1:x", "h1:y", "h2:x"] and missing == ["h9:x"]


@pytest.mark.parametrize("status, state", [("UP", "ready"), ("DOWN", "ready"), ("DRAIN", "drain"),
                                           ("DRAIN (agent)", "drain"), ("MAINT", "maint"), ("NOLB", "drain")])
def test_admin_state(status, state):
    assert admin_state({"status": status}) == state


def test_drain_waits_until_the_sessions_finish(runtime, tmp_path):
    rt = runtime(servers())
    out = run_module({"socket": rt.path, "state": "drain", "host": "h1", "interval": 0.01, "timeout": 30}, tmp_path)
    assert out["changed"] is True and out["timed_out"] is False, out
    assert sorted(r["server"] for r in out["servers"]) == ["h1:x", "h1:y"]
    assert all(r["status"] == "DRAIN" and r["sessions"] == 0 for r in out["servers"])
    assert rt.servers[("model_x", "h2:x")]["status"] == "UP"  # another host is left alone
    assert "set server model_x/h1:x state drain" in rt.commands


def test_drain_timeout_is_reported_not_failed(runtime, tmp_path):
    rt = runtime(servers())
    out = run_module({"socket": rt.path, "state": "drain", "servers": ["h2:x"], "interval": 0.05, "timeout": 0.3},
                     tmp_path)
    assert "failed" not in out and out["timed_out"] is True, out
    assert any("drain timeout of 0.3s passed" in str(w) and "model_x/h2:x (1)" in str(w) for w in out.get("warnings", [])), out


def test_ready_waits_for_up_and_says_when_not(runtime, tmp_path):
    rt = runtime(servers(model_x__h1_x={"status": "DRAIN", "admin": "drain"}))
    out = run_module({"socket": rt.path, "state": "ready", "servers": ["h1:x"], "interval": 0.01}, tmp_path)
    assert out["changed"] is True and out["up"] is True and out["servers"][0]["status"] == "UP"
    rt.servers[("model_x", "h1:x")].update(status="DRAIN", admin="drain", after_ready="DOWN")
    out = run_module({"socket": rt.path, "state": "ready", "servers": ["h1:x"], "interval": 0.01,
                      "up_timeout": 0.2}, tmp_path)
    assert out["up"] is False and out["servers"][0]["status"] == "DOWN"


def test_unchanged_and_check_mode_set_nothing(runtime, tmp_path):
    rt = runtime(servers())
    out = run_module({"socket": rt.path, "state": "ready", "host": "h1", "interval": 0.01}, tmp_path)
    assert out["changed"] is False
    out = run_module({"socket": rt.path, "state": "drain", "host": "h1"}, tmp_path, check=True)
    assert out["changed"] is True
    assert not [c for c in rt.commands if c.startswith("set server")]
    assert rt.servers[("model_x", "h1:x")]["status"] == "UP"


def test_query_lists_every_server_and_the_missing_names(runtime, tmp_path):
    rt = runtime(servers())
    out = run_module({"socket": rt.path}, tmp_path)
    assert len(out["servers"]) == 3 and out["changed"] is False
    out = run_module({"socket": rt.path, "servers": ["h1:y", "h7:z"]}, tmp_path)
    assert [r["server"] for r in out["servers"]] == ["h1:y"] and out["missing"] == ["h7:z"]


def test_an_unreachable_socket_fails_with_its_path(tmp_path):
    out = run_module({"socket": str(tmp_path / "none.sock")}, tmp_path)
    assert out["failed"] is True and "none.sock" in out["msg"]


def test_a_missing_socket_is_not_an_error_when_allowed(tmp_path):
    out = run_module({"socket": str(tmp_path / "none.sock"), "state": "drain", "host": "h1", "missing_ok": True},
                     tmp_path)
    assert "failed" not in out and out["running"] is False and out["changed"] is False and out["up"] is True


def test_parse_state_reads_the_admin_flags():
    from ansible_collections.specdec.serve.plugins.modules.gateway_server import parse_state
    text = ("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight\n"
            "5 model_x 1 h1:x 127.0.0.1 0 8 1 1\n5 model_x 2 h2:x 127.0.0.1 2 0 1 1\n5 model_x 3 h3:x 127.0.0.1 0 1 1 1\n")
    assert parse_state(text) == {("model_x", "h1:x"): "drain", ("model_x", "h2:x"): "ready",
                                 ("model_x", "h3:x"): "maint"}


def test_a_drained_server_that_is_down_is_set_ready(runtime, tmp_path):
    """A drained engine restarting shows DOWN in show stat; its admin state is still drain."""
    rt = runtime(servers(model_x__h1_x={"status": "DOWN", "admin": "drain"}))
    out = run_module({"socket": rt.path, "state": "ready", "servers": ["h1:x"], "interval": 0.01}, tmp_path)
    assert out["changed"] is True and "set server model_x/h1:x state ready" in rt.commands
    assert out["up"] is True and out["servers"][0]["admin"] == "ready"
