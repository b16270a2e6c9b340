#!/usr/bin/env python3
"""Rollout wall time with draining at the gateway against without, and what the front door sees.

    python3 bench/gateway/rollout.py [--hosts 2] [--rounds 2] [--keep]

1. `lab.py up` of N engine hosts (b200-nodes class, the lab inventory's group_vars) and one gateway
   host (group `gateways`), the hub stand-in, the gateway's lab CA, certificate and key
   (lab/gateway_tls.py), then `site.yml` (engines, then the gateway).
2. Rounds of two draft-length rollouts (`playbooks/rollout.yml`), alternating which goes first:
   "drain", with the inventory as it is (each host drained at the gateway, restarted, put back), and
   "no drain", with the same hosts in an inventory without the `gateways` group (the rollout does not
   know the gateway, which still routes and only notices a restart by its health checks). During each
   rollout 4 threads stream chat completions through the gateway; failed or truncated streams counted.

Everything goes to 172.29.247.0/24 (lab `bench-gateway`), removed at the end unless --keep.
Prints a Markdown table; raw figures go to bench/gateway/rollout.json.
"""

import argparse
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
LAB_NAME = "bench-gateway"
SUBNET = "172.29.247.0/24"
LAB_GW = "172.29.247.1"
HUB_PORT = 18080
PYTHON = sys.executable
BIN = Path(PYTHON).parent
CLASS_VARS = REPO / "inventories" / "lab" / "group_vars" / "b200-nodes" / "host_class.yml"
# its own CA and key, apart from the fleet scenario's (lab/.cache/gateway)
SECRETS = REPO / "lab" / ".cache" / "gateway-bench"
MODEL = "gpt-oss-120b"


def run(cmd, timeout=1800):
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit("bench: %s failed (%d):\n%s\n%s" % (" ".join(cmd[:3]), proc.returncode,
                                                             proc.stdout[-4000:], proc.stderr[-2000:]))
    return wall, proc.stdout


class Streams:
    """Threads streaming chat completions through the gateway back to back; failures kept."""

    def __init__(self, address, threads=4):
        self.address, self.key = address, (SECRETS / "api-key").read_text().strip()
        self.ctx = ssl.create_default_context(cafile=str(SECRETS / "ca.crt"))
        self.ok, self.failed, self.lock, self.stop = 0, [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _one(self):
        conn = http.client.HTTPSConnection(self.address, 8443, context=self.ctx, timeout=60)
        try:
            conn.request("POST", "/v1/chat/completions", body=json.dumps({
                "model": MODEL, "messages": [{"role": "user", "content": "bench"}], "max_tokens": 48, "stream": True}),
                headers={"Content-Type": "application/json", "Authorization": "Bearer %s" % self.key})
            resp = conn.getresponse()
            if resp.status != 200:
                return "status %d" % resp.status
            body = resp.read().decode()
            return None if "data: [DONE]" in body and '"finish_reason":"length"' in body.replace(" ", "") \
                else "truncated"
        finally:
            conn.close()

    def _run(self):
        while not self.stop.is_set():
            try:
                err = self._one()
            except (OSError, http.client.HTTPException) as exc:
                err = repr(exc)
            with self.lock:
                if err:
                    self.failed.append(err)
                else:
                    self.ok += 1
            self.stop.wait(0.05)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    names = ["%s-%02d" % (LAB_NAME, i) for i in range(1, args.hosts + 1)]
    gw = "%s-gw" % LAB_NAME
    work = Path(tempfile.mkdtemp(prefix="gateway-bench-"))
    inv_dir = work / "inventory"
    inv_dir.mkdir()
    (inv_dir / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    os.environ.update(SPECDEC_LAB_DIR=str(REPO / "lab"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                      PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
    secrets = ["-e", "gateway_lab_secrets=%s" % SECRETS]
    results = {"hosts": args.hosts, "machine": "%d cores" % os.cpu_count(), "rollouts": []}
    hub = None
    try:
        run([PYTHON, str(REPO / "lab" / "lab.py"), "up", "--name", LAB_NAME, "--subnet", SUBNET,
             "--inventory", str(inv_dir / "hosts.yml")] + ["--host=%s:b200-nodes" % n for n in names]
            + ["--host=%s:gateways" % gw])
        run([PYTHON, str(REPO / "lab" / "hfhub" / "fetch_tiktoken.py")])
        run([PYTHON, str(REPO / "lab" / "hfhub" / "build_wheelhouse.py")])
        hub = subprocess.Popen([PYTHON, str(REPO / "lab" / "hfhub" / "hfhub.py"), "serve", "--host", LAB_GW,
                                "--port", str(HUB_PORT), "--tiktoken-dir", str(REPO / "lab" / ".cache" / "tiktoken")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = (inv_dir / "hosts.yml").read_text()
        inventory = json.loads(text.split("\n", 1)[1])
        gw_ip = inventory["all"]["hosts"][gw]["lab_ip"]
        run([PYTHON, str(REPO / "lab" / "gateway_tls.py"), "--out", str(SECRETS), "--dns", gw, "--ip", gw_ip])
        nogw = json.loads(json.dumps(inventory))
        del nogw["all"]["children"]["gateways"]
        del nogw["all"]["hosts"][gw]
        (inv_dir / "hosts-nogw.yml").write_text(json.dumps(nogw, indent=2) + "\n")

        wall, _ = run([str(BIN / "ansible-playbook"), "-i", str(inv_dir / "hosts.yml"), str(REPO / "site.yml"),
                       "-e", "fleet_report_dir=%s" % work] + secrets)
        results["cold_converge_s"] = wall
        print("cold converge of %d engine hosts and a gateway: %.1f s" % (args.hosts, wall), flush=True)

        with CLASS_VARS.open() as fh:
            inst = yaml.safe_load(fh)["inference_server_instances"]
        n = 0
        for rnd in range(args.rounds):
            for mode in (("drain", "no drain") if rnd % 2 == 0 else ("no drain", "drain")):
                n += 1
                inst[0]["speculative"] = {"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3",
                                          "max_draft_len": 1 + n % 6}
                extra = work / ("change-%d.yml" % n)
                extra.write_text(yaml.safe_dump({"inference_server_instances": inst}))
                inv = inv_dir / ("hosts.yml" if mode == "drain" else "hosts-nogw.yml")
                run_id = "bench-gw-%d" % n
                with Streams(gw_ip) as streams:
                    wall, _ = run([str(BIN / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "rollout.yml"),
                                   "-e", "@%s" % extra, "-e", "rollout_run_id=%s" % run_id,
                                   "-e", "fleet_report_dir=%s" % work] + secrets)
                summary = json.loads((work / ("rollout-%s.json" % run_id)).read_text())
                assert all(summary["hosts"][h]["status"]["status"] == "updated" for h in names), summary["hosts"]
                drained = [summary["hosts"][h]["status"].get("gateway") for h in names]
                rec = {"mode": mode, "round": rnd, "wall_s": wall, "streams_ok": streams.ok,
                       "streams_failed": len(streams.failed), "failures": streams.failed[:5],
                       "drain_waited_s": [d.get("drain_waited_s") for d in drained if d]}
                results["rollouts"].append(rec)
                print("%-8s rollout of %d hosts: wall %.1f s, streams ok %d, failed %d %s" % (
                    mode, args.hosts, wall, streams.ok, len(streams.failed), streams.failed[:2]), flush=True)
    finally:
        if hub is not None:
            hub.send_signal(signal.SIGTERM)
            hub.wait(10)
        if not args.keep:
            subprocess.run([PYTHON, str(REPO / "lab" / "lab.py"), "down", "--name", LAB_NAME],
                           capture_output=True, check=False)
    (REPO / "bench" / "gateway" / "rollout.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n| rollout of %d hosts | wall (s) | streams through the gateway | failed or truncated |" % args.hosts)
    print("| --- | --- | --- | --- |")
    for r in results["rollouts"]:
        print("| %s (round %d) | %.1f | %d | %d |" % (r["mode"], r["round"], r["wall_s"],
                                                    r["streams_ok"] + r["streams_failed"], r["streams_failed"]))


if __name__ == "__main__":
    main()
