#!/usr/bin/env python3
"""Fleet rollout figures on 8 lab hosts of the b200-nodes class (the lab inventory's group_vars).

    python3 bench/fleet_rollout/run.py [--hosts 8] [--load-delays 2,30,120] [--keep]

1. `lab.py up` of N hosts, the hub stand-in on the lab gateway, `site.yml` (cold converge).
2. For each emulated model-load time L: a config change (draft length, and the load time itself)
   rolled out with `playbooks/rollout.yml` (canary, then 25 % batches) while a probe polls every
   host's /health from here 10 times a second. A host's restart-and-ready time is its outage as the
   probe saw it (first failed poll to first answered poll); a batch's is the longest of its hosts'
   (they restart together); the figure is the rollout's wall time against the sum over batches.
3. `site.yml` back to the inventory's state, then no-op converges of all N hosts, of 2 and of 1,
   each with the machine's CPU-seconds over the run (/proc/stat): the lab's hosts and the controller
   share this machine's cores, so a converge cannot be faster than its CPU-seconds / cores.

Everything goes to 172.29.246.0/24 (lab `bench-fleet`) and is removed at the end unless --keep.
Prints a Markdown table; raw figures go to bench/fleet_rollout/results.json.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
LAB_NAME = "bench-fleet"
SUBNET = "172.29.246.0/24"
GATEWAY = "172.29.246.1"
HUB_PORT = 18080
PORT = 8000
CLASS_VARS = REPO / "inventories" / "b200" / "group_vars" / "b200-nodes" / "host_class.yml"
PYTHON = sys.executable
BIN = Path(PYTHON).parent


def cpu_seconds():
    """CPU-seconds this machine spent busy since boot (every process: controller and lab hosts)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def run(cmd, timeout=1800, quiet=True):
    start = time.monotonic()
    proc = subprocess.run(cmd, timeout=timeout, text=True, check=False,
                          stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT if quiet else None)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout or "")[-6000:])
        raise SystemExit("bench: %s failed (rc %d)" % (" ".join(map(str, cmd[:4])), proc.returncode))
    return wall, proc.stdout or ""


class HealthProbe:
    """Poll /health on every host; keep (time, ok) per host. Bounded by a stop event and a limit."""

    def __init__(self, ips, interval=0.1, limit_s=1800):
        self.ips, self.interval, self.limit_s = ips, interval, limit_s
        self.samples = {h: [] for h in ips}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(h,), daemon=True) for h in ips]

    def _run(self, host):
        url = "http://%s:%d/health" % (self.ips[host], PORT)
        deadline = time.monotonic() + self.limit_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            t = time.time()
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    ok = resp.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            self.samples[host].append((t, ok))
            self.stop.wait(self.interval)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(5)

    def outage(self, host):
        """Seconds from the first failed poll to the next answered one (0 when none failed)."""
        samples = self.samples[host]
        down = next((i for i, (_, ok) in enumerate(samples) if not ok), None)
        if down is None:
            return 0.0, None
        up = next((t for t, ok in samples[down:] if ok), None)
        if up is None:
            raise SystemExit("bench: %s did not answer again" % host)
        return up - samples[down][0], samples[down][0]


def batches(summary):
    """Hosts grouped by batch: a batch starts after the previous one finished."""
    hosts = sorted(summary["hosts"].items(), key=lambda kv: float(kv[1]["status"]["started"]))
    groups, end = [], None
    for name, rec in hosts:
        st = rec["status"]
        if end is None or float(st["started"]) >= end:
            groups.append([])
        groups[-1].append(name)
        end = max(end or 0, float(st["finished"]))
    return groups


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--load-delays", default="2,30,120", help="emulated model-load seconds, one rollout each")
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    args = parser.parse_args()
    delays = [int(x) for x in args.load_delays.split(",")]
    names = ["%s-%02d" % (LAB_NAME, i) for i in range(1, args.hosts + 1)]
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    inv_dir = work / "inventory"
    inv_dir.mkdir()
    (inv_dir / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    os.environ.update(SPECDEC_LAB_DIR=str(REPO / "lab"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                      PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
    playbook = [str(BIN / "ansible-playbook"), "-i", str(inv_dir / "hosts.yml")]
    results = {"hosts": args.hosts, "rollouts": [], "machine": "%d cores" % os.cpu_count()}
    hub = None
    try:
        run([PYTHON, str(REPO / "lab" / "lab.py"), "up", "--name", LAB_NAME, "--subnet", SUBNET,
             "--inventory", str(inv_dir / "hosts.yml")] + ["--host=%s:b200-nodes" % n for n in names], quiet=False)
        run([PYTHON, str(REPO / "lab" / "hfhub" / "fetch_tiktoken.py")])
        run([PYTHON, str(REPO / "lab" / "hfhub" / "build_wheelhouse.py")])
        hub = subprocess.Popen([PYTHON, str(REPO / "lab" / "hfhub" / "hfhub.py"), "serve", "--host", GATEWAY,
                                "--port", str(HUB_PORT), "--tiktoken-dir", str(REPO / "lab" / ".cache" / "tiktoken")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        inventory = json.loads((inv_dir / "hosts.yml").read_text().split("\n", 1)[1])
        ips = {n: inventory["all"]["hosts"][n]["lab_ip"] for n in names}

        wall, _ = run(playbook + [str(REPO / "site.yml"), "-e", "fleet_report_dir=%s" % work])
        results["cold_converge_s"] = wall
        print("cold converge of %d hosts: %.1f s" % (args.hosts, wall), flush=True)

        with CLASS_VARS.open() as fh:
            inst = yaml.safe_load(fh)["inference_server_instances"]
        for n, delay in enumerate(delays):
            inst[0]["speculative"] = {"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3",
                                      "max_draft_len": 4 + n}
            extra = work / ("change-%d.yml" % n)
            extra.write_text(yaml.safe_dump({"inference_server_instances": inst,
                                             "inference_server_env": {"SPECDEC_EMU_LOAD_DELAY_S": str(delay)},
                                             "inference_server_health_timeout": delay + 60}))
            run_id = "bench-load%d" % delay
            with HealthProbe(ips) as probe:
                wall, _ = run(playbook + [str(REPO / "playbooks" / "rollout.yml"), "-e", "@%s" % extra,
                                          "-e", "rollout_run_id=%s" % run_id, "-e", "fleet_report_dir=%s" % work])
            summary = json.loads((work / ("rollout-%s.json" % run_id)).read_text())
            groups = batches(summary)
            per_host = {h: probe.outage(h)[0] for h in names}
            per_batch = [max(per_host[h] for h in g) for g in groups]
            assert all(summary["hosts"][h]["status"]["status"] == "updated" for h in names), summary["hosts"]
            rec = {"load_delay_s": delay, "wall_s": wall, "batches": groups, "batch_restart_ready_s": per_batch,
                   "host_restart_ready_s": per_host, "sum_batches_s": sum(per_batch),
                   "overhead": wall / sum(per_batch) - 1}
            results["rollouts"].append(rec)
            print("rollout, load %d s: wall %.1f s, batches %s, sum of restart-and-ready %.1f s, overhead %.0f %%"
                  % (delay, wall, [len(g) for g in groups], sum(per_batch), 100 * rec["overhead"]), flush=True)

        wall, _ = run(playbook + [str(REPO / "site.yml"), "-e", "fleet_report_dir=%s" % work])
        results["back_to_inventory_s"] = wall
        noop = {"all": [], "two": [], "one": []}
        for _ in range(2):
            for key, subset in (("all", names), ("two", names[:2]), ("one", names[:1])):
                cpu0 = cpu_seconds()
                wall, out = run(playbook + [str(REPO / "site.yml"), "-e", "fleet_report_dir=%s" % work,
                                            "-l", ",".join(subset)])
                assert "0 of %d host(s) to change" % len(subset) in out, out[-3000:]
                noop[key].append({"wall_s": wall, "cpu_s": cpu_seconds() - cpu0})
        best = {k: min(v, key=lambda r: r["wall_s"]) for k, v in noop.items()}
        results["noop"] = noop
        results["noop_ratio"] = best["all"]["wall_s"] / best["one"]["wall_s"]
        results["noop_cpu_per_host_s"] = {"all": best["all"]["cpu_s"] / args.hosts, "one": best["one"]["cpu_s"]}
        results["noop_all_cpu_floor_s"] = best["all"]["cpu_s"] / os.cpu_count()
        results["noop_ratio_two"] = best["two"]["wall_s"] / best["one"]["wall_s"]
        print("no-op converge: %d hosts %.1f s (%.0f CPU-s), 2 hosts %.1f s (%.0f CPU-s), 1 host %.1f s (%.0f CPU-s), "
              "ratio %.2f" % (args.hosts, best["all"]["wall_s"], best["all"]["cpu_s"], best["two"]["wall_s"],
                              best["two"]["cpu_s"], best["one"]["wall_s"], best["one"]["cpu_s"], results["noop_ratio"]))
    finally:
        if hub is not None:
            hub.send_signal(signal.SIGTERM)
            hub.wait(10)
        if not args.keep:
            subprocess.run([PYTHON, str(REPO / "lab" / "lab.py"), "down", "--name", LAB_NAME], check=False)
        shutil.rmtree(work, ignore_errors=True)

    (Path(__file__).parent / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n| figure | value |\n|---|---:|")
    print("| cold converge, %d hosts (prepare, model cache, rollout) | %.1f s |" % (args.hosts, results["cold_converge_s"]))
    for rec in results["rollouts"]:
        print("| config change, model load %d s: wall | %.1f s |" % (rec["load_delay_s"], rec["wall_s"]))
        print("| config change, model load %d s: sum of %d batches' restart-and-ready | %.1f s |"
              % (rec["load_delay_s"], len(rec["batches"]), rec["sum_batches_s"]))
        print("| config change, model load %d s: overhead | %.0f %% (%.1f s) |"
              % (rec["load_delay_s"], 100 * rec["overhead"], rec["wall_s"] - rec["sum_batches_s"]))
    best = {k: min(v, key=lambda r: r["wall_s"]) for k, v in results["noop"].items()}
    print("| no-op converge, %d hosts (best of 2) | %.1f s |" % (args.hosts, best["all"]["wall_s"]))
    print("| no-op converge, 1 host (best of 2) | %.1f s |" % best["one"]["wall_s"])
    print("| no-op converge, 2 hosts (best of 2) | %.1f s |" % best["two"]["wall_s"])
    print("| no-op ratio %d hosts / 1 host | %.2f |" % (args.hosts, results["noop_ratio"]))
    print("| no-op ratio 2 hosts / 1 host | %.2f |" % results["noop_ratio_two"])
    print("| no-op CPU-bound floor of the ratio: %d hosts' CPU-s / %d cores / 1 host's wall | %.2f |"
          % (args.hosts, os.cpu_count(), results["noop_all_cpu_floor_s"] / best["one"]["wall_s"]))
    print("| no-op CPU-seconds per host: %d hosts / 1 host | %.1f / %.1f |"
          % (args.hosts, results["noop_cpu_per_host_s"]["all"], results["noop_cpu_per_host_s"]["one"]))
    print("| no-op converge, %d hosts: CPU-bound floor (CPU-s / %d cores) | %.1f s |"
          % (args.hosts, os.cpu_count(), results["noop_all_cpu_floor_s"]))


if __name__ == "__main__":
    main()
