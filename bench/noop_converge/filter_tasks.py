#!/usr/bin/env python3
"""Controller CPU of a task that uses one of the collection's filters: this checkout against a revision.

    python3 bench/noop_converge/filter_tasks.py --base REV [--tasks 40] [--rounds 3]

A playbook on localhost (local connection, no host needed) runs N set_fact tasks, each calling
`specdec.serve.rollout_status`, a filter that is not named as its file (it lives in fleet_plan.py and runs
plugin_utils/_fleet.py). ansible-core resolves such a filter by loading every filter file of the collection,
in each task's worker process. The same playbook with no task gives the fixed cost. (HISTORY.md's figures
called `specdec.serve.disks_below`, from the same file and module; it is no filter since it became internal,
and `rollout_status` is a filter in both trees of those figures.) Both trees run alternately; the figure is the
ansible-playbook process tree's user + system CPU per task above the fixed cost, median of the rounds.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def cpu_of(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="filter-tasks-"))
    base = work / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.base],
                   check=True, capture_output=True)
    try:
        tasks = "".join("    - name: t%d\n      ansible.builtin.set_fact:\n        x%d: \"{{ {'instances': []}"
                        " | specdec.serve.rollout_status({'instances': []}, 1, 2, []) }}\"\n" % (i, i)
                        for i in range(args.tasks))
        head = "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        (work / "filters.yml").write_text(head + tasks)
        (work / "empty.yml").write_text(head + "    - ansible.builtin.meta: noop\n")
        (work / "ansible.cfg").write_text("[defaults]\n")
        per_task = {"base": [], "head": []}
        for _ in range(args.rounds):
            for label, tree in (("base", base), ("head", REPO)):
                env = dict(os.environ, ANSIBLE_CONFIG=str(work / "ansible.cfg"),
                           ANSIBLE_COLLECTIONS_PATH=str(tree / "collections"))
                argv = [str(PLAYBOOK), "-i", "localhost,", "-c", "local"]
                fixed = cpu_of(argv + [str(work / "empty.yml")], env)
                total = cpu_of(argv + [str(work / "filters.yml")], env)
                per_task[label].append((total - fixed) / args.tasks)
        for label in ("base", "head"):
            print("%s: %.1f ms of controller CPU per task (rounds: %s)" % (
                label, 1000 * statistics.median(per_task[label]), ", ".join("%.1f" % (1000 * v) for v in per_task[label])))
        print("head/base: %.2f" % (statistics.median(per_task["head"]) / statistics.median(per_task["base"])))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)


if __name__ == "__main__":
    main()
