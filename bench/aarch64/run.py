#!/usr/bin/env python3
"""The same converge on an aarch64 lab host (a VM under full-system emulation, lab/vmhost.py) and an
x86_64 one, in one run: what the emulated CPU costs a scenario.

    python3 bench/aarch64/run.py [--keep]

Lab `bench-arch` (172.29.246.0/24): bench-x86 and bench-arm@arm64. bench/aarch64/converge.yml
(docker_host and firewall) runs on each host alone (-l), first to converge, then again (a no-op, changed=0).
Prints a Markdown table with the wall time of each run and the aarch64/x86_64 ratios; the raw figures go
to bench/aarch64/results.json. The lab is removed at the end unless --keep.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_NAME = "bench-arch"
SUBNET = "172.29.246.0/24"
HOSTS = {"bench-x86": "amd64", "bench-arm": "arm64"}
BIN = Path(sys.executable).parent
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def run(cmd, env=None):
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, text=True, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=3600)
    if proc.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout[-6000:]))
    return time.monotonic() - start, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    args = parser.parse_args()
    inventory = REPO / "lab" / ".state" / LAB_NAME / "inventory.yml"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
    up_s, _ = run([sys.executable, str(REPO / "lab" / "lab.py"), "up", "--name", LAB_NAME, "--subnet", SUBNET,
                   "--inventory", str(inventory)] + ["--host=%s@%s" % (h, a) for h, a in HOSTS.items()], env)
    results = {"lab_up_s": round(up_s, 1), "hosts": {}}
    try:
        for host, arch in HOSTS.items():
            rows = {}
            for kind in ("converge", "no-op"):
                wall, out = run([str(BIN / "ansible-playbook"), "-i", str(inventory), "-l", host,
                                 str(REPO / "bench" / "aarch64" / "converge.yml")], env)
                recap = {m.group(1): [int(x) for x in m.groups()[1:]] for m in RECAP.finditer(out)}[host]
                if kind == "no-op" and recap[1] != 0:
                    sys.exit("%s: the second converge changed %d tasks" % (host, recap[1]))
                rows[kind] = {"wall_s": round(wall, 1), "tasks": recap[0] + recap[4], "changed": recap[1]}
                print("%s (%s) %s: %.1f s" % (host, arch, kind, wall), flush=True)
            results["hosts"][host] = {"arch": arch, **rows}
    finally:
        if not args.keep:
            subprocess.run([sys.executable, str(REPO / "lab" / "lab.py"), "down", "--name", LAB_NAME], check=False,
                           capture_output=True)
    x86, arm = results["hosts"]["bench-x86"], results["hosts"]["bench-arm"]
    results["ratio_arm_x86"] = {kind: round(arm[kind]["wall_s"] / x86[kind]["wall_s"], 1) for kind in ("converge", "no-op")}
    print("\n| host | arch | converge (s) | tasks | no-op converge (s) | tasks |\n|---|---|---:|---:|---:|---:|")
    for host, rec in results["hosts"].items():
        print("| %s | %s | %.1f | %d | %.1f | %d |" % (host, rec["arch"], rec["converge"]["wall_s"], rec["converge"]["tasks"],
                                                     rec["no-op"]["wall_s"], rec["no-op"]["tasks"]))
    print("\naarch64 / x86_64: converge %.1fx, no-op %.1fx (lab up of both hosts: %.0f s)"
          % (results["ratio_arm_x86"]["converge"], results["ratio_arm_x86"]["no-op"], up_s))
    (REPO / "bench" / "aarch64" / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
