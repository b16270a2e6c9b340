#!/usr/bin/env python3
"""Lab bring-up figures: base-image build cold and cached, and host creation per host.

    python3 bench/lab_bringup/run.py [--hosts 4] [--skip-cold]

Cold = the lab images removed first (debootstrap and the host image build run for real);
cached = the same command again with nothing changed. Host creation: `lab.py up` of 1 host and of
N hosts in one run, so the per-host cost and the fixed cost are both visible. Everything it makes
is removed at the end (the images stay, as after `make images`).
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = [sys.executable, str(REPO / "lab" / "lab.py")]
BENCH_LAB = "bench-bringup"


def timed(cmd):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--skip-cold", action="store_true", help="do not remove the images first")
    args = parser.parse_args()

    rows = []
    if not args.skip_cold:
        subprocess.run(["docker", "rmi", "-f", "specdec-lab/host:latest", "specdec-lab/core:latest"],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cold = timed(LAB + ["images"])
        rows.append(("images, cold (debootstrap + host image + emulators)", cold))
    cached = timed(LAB + ["images"])
    rows.append(("images, cached (recipes unchanged)", cached))

    subnet = "172.29.250.0/24"
    one = timed(LAB + ["up", "--no-build", "--name", BENCH_LAB, "--subnet", subnet, "--host", f"{BENCH_LAB}-01"])
    timed(LAB + ["down", "--name", BENCH_LAB])
    hosts = [f"--host={BENCH_LAB}-{i:02d}" for i in range(1, args.hosts + 1)]
    many = timed(LAB + ["up", "--no-build", "--name", BENCH_LAB, "--subnet", subnet] + hosts)
    down = timed(LAB + ["down", "--name", BENCH_LAB])
    rows.append(("1 host up (start, systemd boot, dockerd and sshd answer)", one))
    rows.append((f"{args.hosts} hosts up in one run", many))
    rows.append((f"  per host, {args.hosts} hosts", many / args.hosts))
    rows.append((f"{args.hosts} hosts down", down))

    print("| step | seconds |")
    print("|---|---:|")
    for name, secs in rows:
        print(f"| {name} | {secs:.1f} |")
    if not args.skip_cold:
        print(f"\ncached / cold image build: {cached / rows[0][1]:.3f}")
    print(f"per-host cost at {args.hosts} hosts / 1 host: {many / args.hosts / one:.2f}")


if __name__ == "__main__":
    main()
