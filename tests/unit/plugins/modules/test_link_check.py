"""The link_check module on this machine: the real `ip` reads the loopback link, and a stand-in `ping`
(first on PATH) answers only packets up to a peer's MTU, as a peer whose MTU is smaller drops the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "link_check.py"

pytestmark = pytest.mark.skipif(shutil.which("ip") is None and not os.path.exists("/usr/sbin/ip"),
                                reason="iproute2's ip is not installed on this machine")

# answers when the payload (after -s) fits the peer's MTU (PEER_MTU - 28); logs its argv
PING = """#!/bin/sh
echo "$@" >> "$PING_LOG"
size=0; prev=""
for a in "$@"; do [ "$prev" = "-s" ] && size=$a; prev=$a; done
if [ $((size + 28)) -le "$PEER_MTU" ]; then
  echo "2 packets transmitted, 2 received, 0% packet loss, time 1001ms"; exit 0
fi
echo "2 packets transmitted, 0 received, 100% packet loss, time 1010ms"; exit 1
"""


def lo_mtu():
    out = subprocess.run(["ip", "-json", "link", "show", "dev", "lo"], capture_output=True, text=True,
                         env=dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"))
    return json.loads(out.stdout)[0]["mtu"]


def run_module(args, tmp, peer_mtu=65536):
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "ping").write_text(PING)
    (bindir / "ping").chmod(0o755)
    path = tmp / ("args-%d.json" % time.monotonic_ns())
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"), PEER_MTU=str(peer_mtu), PING_LOG=str(tmp / "ping.log"),
               PATH="%s:%s:/usr/sbin:/sbin" % (bindir, os.environ.get("PATH", "")))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, env=env, timeout=60)
    start = proc.stdout.find("{")
    assert start >= 0, "no JSON from the module: %s %s" % (proc.stdout, proc.stderr)
    return json.loads(proc.stdout[start:])


def test_a_link_as_planned_passes_and_pings_at_the_full_mtu(tmp_path):
    mtu = lo_mtu()
    out = run_module({"interface": "lo", "address": "127.0.0.1/8", "mtu": mtu, "peers": ["127.0.0.2"],
                      "fail_on_problem": True}, tmp_path)
    assert out.get("failed") is not True, out
    assert out["changed"] is False and out["problems"] == []
    assert out["state"]["mtu"] == mtu and "127.0.0.1/8" in out["state"]["addresses"]
    assert out["peers"] == [{"address": "127.0.0.2", "ok": True,
                             "summary": "2 packets transmitted, 2 received, 0% packet loss, time 1001ms"}]
    logged = (tmp_path / "ping.log").read_text().split()
    assert logged[logged.index("-M") + 1] == "do" and logged[logged.index("-s") + 1] == str(mtu - 28)


def test_a_peer_with_a_smaller_mtu_fails_naming_it_and_the_size(tmp_path):
    mtu = lo_mtu()
    out = run_module({"interface": "lo", "address": "127.0.0.1/8", "mtu": mtu, "peers": ["127.0.0.2"],
                      "fail_on_problem": True, "wait": 1}, tmp_path, peer_mtu=1500)
    assert out["failed"] is True
    assert ("peer 127.0.0.2 did not answer %d-byte packets with the don't-fragment bit on lo: 2 packets transmitted, "
            "0 received, 100%% packet loss" % mtu) in out["msg"]


def test_a_link_that_differs_is_reported_without_pinging(tmp_path):
    out = run_module({"interface": "lo", "address": "127.0.0.9/8", "mtu": 9000, "peers": ["127.0.0.2"]}, tmp_path)
    assert out.get("failed") is not True and out["peers"] == []
    assert out["problems"] == ["lo: MTU %d, want 9000" % lo_mtu(),
                               "lo: 127.0.0.9/8 not configured (has %s)" % ", ".join(out["state"]["addresses"])]
    assert not (tmp_path / "ping.log").exists()


def test_an_absent_interface_fails_when_asked(tmp_path):
    out = run_module({"interface": "specdec-none0", "address": "192.168.100.10/24", "mtu": 9000,
                      "fail_on_problem": True}, tmp_path)
    assert out["failed"] is True and out["msg"] == "stack link: specdec-none0: no such interface on the host"
