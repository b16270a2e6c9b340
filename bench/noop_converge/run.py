#!/usr/bin/env python3
"""No-op converge of site.yml on 1 and 2 lab hosts: this checkout against an earlier revision, in one run.

    python3 bench/noop_converge/run.py --base REV [--rounds 2] [--keep]

Both trees run against the same two lab hosts (spark-nodes class, lab `bench-noop`, 172.29.247.0/24)
and the same hub stand-in. For each round and each tree, alternately: `site.yml` once to bring the
hosts to that tree's state (its units and files differ), then a no-op `site.yml` limited to one host
and to both. For each no-op run (the table shows each tree's round with the least CPU):

- wall time;
- controller CPU-seconds: user + system time of the ansible-playbook process tree (its children,
  ssh included, as the kernel accounts them to the waiting parent);
- tasks per host (ok + skipped + changed in the recap; changed must be 0).

Prints a Markdown table and the ratios head/base of the best round; raw figures go to
bench/noop_converge/results.json. The lab is removed at the end unless --keep.

With --profile, one more no-op run per tree on one host goes through cpu_account.py, which records
the controller CPU of every worker (one per task and host) and of the main process; the table sums
it by action, and splits each action's first run (which builds the module's payload, once per
run) from the later ones.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_NAME = "bench-noop"
SUBNET = "172.29.247.0/24"
GATEWAY = "172.29.247.1"
HUB_PORT = 18080
PYTHON = sys.executable
BIN = Path(PYTHON).parent
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd, env=None, timeout=1800):
    cpu0, start = children_cpu(), time.monotonic()
    proc = subprocess.run(cmd, env=env, timeout=timeout, text=True, check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall, cpu = time.monotonic() - start, children_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout[-6000:]))
    return wall, cpu, proc.stdout


def tree_env(tree):
    env = dict(os.environ, ANSIBLE_CONFIG=str(tree / "ansible.cfg"), SPECDEC_LAB_DIR=str(REPO / "lab"),
               PATH="%s:%s" % (BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    return env


def account(log):
    """Sum cpu_account.py's log by action: runs, first run's CPU, the later runs' CPU, ssh CPU."""
    actions, main_cpu = {}, 0.0
    for line in log.read_text().splitlines():
        own, children, action, _role, _name = line.split("\t", 4)
        if action == "MAIN":
            main_cpu = float(own)
            continue
        rec = actions.setdefault(action, {"runs": 0, "first_s": 0.0, "later_s": 0.0, "ssh_s": 0.0})
        rec["first_s" if rec["runs"] == 0 else "later_s"] += float(own)
        rec["ssh_s"] += float(children)
        rec["runs"] += 1
    return {"main_s": round(main_cpu, 2), "actions": actions,
            "workers_s": round(sum(a["first_s"] + a["later_s"] + a["ssh_s"] for a in actions.values()), 2),
            "tasks": sum(a["runs"] for a in actions.values())}


def print_account(label, acc):
    print("\n%s, 1 host: main process %.2f CPU-s, %d workers %.2f CPU-s (ssh included)"
          % (label, acc["main_s"], acc["tasks"], acc["workers_s"]))
    print("| action | runs | first run CPU-s | later runs CPU-s (mean) | ssh CPU-s |\n|---|---|---|---|---|")
    for action, rec in sorted(acc["actions"].items(), key=lambda kv: -(kv[1]["first_s"] + kv[1]["later_s"])):
        later = rec["later_s"] / (rec["runs"] - 1) if rec["runs"] > 1 else 0.0
        print("| %s | %d | %.3f | %.3f (%.3f) | %.3f |" % (action, rec["runs"], rec["first_s"], rec["later_s"],
                                                          later, rec["ssh_s"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the revision to compare with (e.g. a commit before a change)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    parser.add_argument("--profile", action="store_true", help="where the controller CPU goes, by action")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="noop-bench-"))
    base = work / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.base],
                   check=True, capture_output=True)
    trees = {"base": base, "head": REPO}
    names = ["%s-01" % LAB_NAME, "%s-02" % LAB_NAME]
    inv_file = work / "hosts.yml"
    inventories = {}
    for label, tree in trees.items():
        inv_dir = work / ("inventory-" + label)
        inv_dir.mkdir()
        (inv_dir / "group_vars").symlink_to(tree / "inventories" / "lab" / "group_vars")
        inventories[label] = inv_dir / "hosts.yml"
    results = {"base": args.base, "head": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                                          capture_output=True, text=True).stdout.strip(),
               "machine": "%d cores" % os.cpu_count(), "runs": []}
    hub = None
    try:
        subprocess.run([PYTHON, str(REPO / "lab" / "lab.py"), "up", "--name", LAB_NAME, "--subnet", SUBNET,
                        "--inventory", str(inv_file)] + ["--host=%s:spark-nodes" % n for n in names], check=True)
        for path in inventories.values():
            shutil.copy(inv_file, path)
        subprocess.run([PYTHON, str(REPO / "lab" / "hfhub" / "fetch_tiktoken.py")], check=True, capture_output=True)
        subprocess.run([PYTHON, str(REPO / "lab" / "hfhub" / "build_wheelhouse.py")], check=True, capture_output=True)
        hub = subprocess.Popen([PYTHON, str(REPO / "lab" / "hfhub" / "hfhub.py"), "serve", "--host", GATEWAY,
                                "--port", str(HUB_PORT), "--tiktoken-dir", str(REPO / "lab" / ".cache" / "tiktoken")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for rnd in range(args.rounds):
            for label, tree in trees.items():
                playbook = [str(BIN / "ansible-playbook"), "-i", str(inventories[label]), str(tree / "site.yml"),
                            "-e", "fleet_report_dir=%s" % work]
                wall, _, _ = run(playbook, env=tree_env(tree))
                print("round %d, %s: converge %.1f s" % (rnd + 1, label, wall), flush=True)
                for subset in (names[:1], names):
                    wall, cpu, out = run(playbook + ["-l", ",".join(subset)], env=tree_env(tree))
                    recap = {m.group(1): [int(x) for x in m.groups()[1:]] for m in RECAP.finditer(out)}
                    assert all(recap[h][1] == 0 for h in subset), recap  # changed=0: a no-op
                    tasks = sum(recap[h][0] + recap[h][4] for h in subset) / len(subset)
                    rec = {"round": rnd + 1, "tree": label, "hosts": len(subset), "wall_s": round(wall, 2),
                           "cpu_s": round(cpu, 2), "cpu_per_host_s": round(cpu / len(subset), 2),
                           "tasks_per_host": tasks}
                    results["runs"].append(rec)
                    print("  no-op %s, %d host(s): %.1f s wall, %.1f CPU-s (%.1f per host), %.0f tasks per host"
                          % (label, len(subset), wall, cpu, cpu / len(subset), tasks), flush=True)
        if args.profile:
            for label, tree in trees.items():
                # the trees' hosts differ (units, files): bring them to this tree's state first, so the
                # profiled run is a no-op like the measured ones
                run([str(BIN / "ansible-playbook"), "-i", str(inventories[label]), str(tree / "site.yml"),
                     "-e", "fleet_report_dir=%s" % work], env=tree_env(tree))
                log = work / ("account-%s.log" % label)
                run([PYTHON, str(Path(__file__).parent / "cpu_account.py"), "-i", str(inventories[label]),
                     str(tree / "site.yml"), "-e", "fleet_report_dir=%s" % work, "-l", names[0]],
                    env=dict(tree_env(tree), CPU_ACCOUNT_LOG=str(log)))
                results["profile_" + label] = account(log)
                print_account(label, results["profile_" + label])
    finally:
        if hub is not None:
            hub.terminate()
        if not args.keep:
            subprocess.run([PYTHON, str(REPO / "lab" / "lab.py"), "down", "--name", LAB_NAME], check=False)
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    best = {}  # the round with the least controller CPU: the one least disturbed by anything else
    for rec in results["runs"]:
        key = (rec["tree"], rec["hosts"])
        if key not in best or rec["cpu_s"] < best[key]["cpu_s"]:
            best[key] = rec
    print("\n| tree | hosts | wall s | controller CPU-s per host | tasks per host |\n|---|---|---|---|---|")
    for (tree, hosts), rec in sorted(best.items()):
        print("| %s | %d | %.1f | %.1f | %.0f |" % (tree, hosts, rec["wall_s"], rec["cpu_per_host_s"],
                                                  rec["tasks_per_host"]))
    for tree in ("base", "head"):  # what one more host costs: the run's fixed cost cancels
        results["marginal_cpu_s_" + tree] = round(best[(tree, 2)]["cpu_s"] - best[(tree, 1)]["cpu_s"], 2)
        print("%s: a second host adds %.1f controller CPU-s" % (tree, results["marginal_cpu_s_" + tree]))
    print("head/base, the second host's CPU: %.2f" % (results["marginal_cpu_s_head"] / results["marginal_cpu_s_base"]))
    for hosts in (1, 2):
        head, base_rec = best[("head", hosts)], best[("base", hosts)]
        results["ratio_%d" % hosts] = {"wall": head["wall_s"] / base_rec["wall_s"],
                                       "cpu_per_host": head["cpu_per_host_s"] / base_rec["cpu_per_host_s"]}
        print("head/base at %d host(s): wall %.2f, CPU per host %.2f"
              % (hosts, results["ratio_%d" % hosts]["wall"], results["ratio_%d" % hosts]["cpu_per_host"]))
    (Path(__file__).parent / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
