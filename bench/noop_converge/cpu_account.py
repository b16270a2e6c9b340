#!/usr/bin/env python3
"""Run ansible-playbook and write where its controller CPU went, one line per task and host.

    CPU_ACCOUNT_LOG=FILE python3 bench/noop_converge/cpu_account.py [ansible-playbook arguments]

Ansible runs every task on every host in a worker process forked from the main process; a worker
starts the connection's processes (ssh) as its children. For each worker the log gets a
tab-separated line: the worker's own CPU-seconds, its children's, the task's action, the role and
the task's name; the last line is the main process (parsing, variables, queueing, callbacks).
`run.py --profile` sums it by action. A measuring aid for the bench only: it wraps
WorkerProcess._run, an ansible-core internal.
"""

import os
import resource
import sys
import time

from ansible.executor.process import worker

LOG = os.environ["CPU_ACCOUNT_LOG"]
_run = worker.WorkerProcess._run


def _accounted(self):
    start = time.process_time()
    try:
        return _run(self)
    finally:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        role = self._task._role.get_name() if self._task._role else ""
        with open(LOG, "a") as handle:
            handle.write("%.4f\t%.4f\t%s\t%s\t%s\n" % (time.process_time() - start,
                                                     children.ru_utime + children.ru_stime,
                                                     self._task.action, role, self._task.get_name()))


worker.WorkerProcess._run = _accounted


def main():
    from ansible.cli.playbook import main as playbook
    sys.argv = ["ansible-playbook"] + sys.argv[1:]
    try:
        playbook()
    finally:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(LOG, "a") as handle:
            handle.write("%.4f\t0\tMAIN\t\tmain process\n" % (usage.ru_utime + usage.ru_stime))


if __name__ == "__main__":
    main()
