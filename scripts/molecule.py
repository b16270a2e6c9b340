"""Run the molecule scenarios: `make molecule` (every scenario) or `make molecule SCENARIOS="a b"`.

Every scenario makes its own lab hosts on its own subnet, so scenarios can run side by side. Most of
a scenario's time is spent waiting on its hosts (engine starts, health gates, measured requests):
one scenario keeps about half of a 2-core machine busy (bench/HISTORY.md). So the whole set runs
in two lanes at once. Each lane starts with a job of its own, then both take from one queue:

- lane 1 starts with the foundation (a broken foundation fails early);
- lane 2, under `make test`, with the other checks (below);
- then each lane, as it comes free, takes the next scenario of the queue, longest first (by the times
  measured beside each other, bench/HISTORY.md), so the two lanes end close together whatever a scenario
  costs on the machine at hand. Fixed lanes balanced by measured times ended up to 700 s apart when one
  scenario ran slower than measured, and one lane then idled while the other ran alone.

A scenario waits for the checks only where it needs what they build: the real engine's image and models
(`make real-engine` runs beside the checks); a lane that comes free before then takes the next one instead.

`make test` gives the rest of its checks as one command (`--checks "make checks real-engine ee"`): lint,
sanity and the unit tests, with the real engine's image and the execution environment built beside them. It runs
first in lane 2 and counts as a scenario (its log: lab/.state/molecule/checks.log), so lane 1's first scenarios,
which mostly wait on their hosts, use the CPU the checks leave, rather than the whole run waiting for the checks.

Two lanes pay only where the second has idle CPU to use. On a machine that other work keeps busy, a
second lane adds load instead (bench/HISTORY.md: under `stress-ng --cpu 2`, each scenario ran 4 to
6 times slower in two lanes). So before it starts, the runner measures for a few seconds how many
cores the machine leaves idle (/proc/stat), and runs one lane (lane 1, then lane 2's scenarios) when
fewer than LANE_CORES * 2 are idle (the checks first, then the foundation, then the queue in order).
SPECDEC_MOLECULE_LANES=1 or 2 sets the number instead.

Each scenario's output goes to lab/.state/molecule/<scenario>.log and is printed whole when the
scenario ends, so the two lanes' lines never interleave. A scenario that fails ends its lane, and
the other lane starts no new scenario; the exit status is 1 if any scenario failed. Where the lanes
ran, a failed scenario's log was printed before the other lane's, so before the last line the runner
prints again, from each failed scenario's log, the lines around its last failed tasks, and then, one
line each, the failed tests and tasks it names (a CI log's tail then holds the cause). The last line
names the scenarios that failed. Scenarios run with COLUMNS=200 (unless set), so that molecule and
pytest do not wrap a test's name across lines. lab/.state/molecule/results
gets a line "<scenario> <exit status>" as each scenario ends (after a failure is known to both lanes).

Scenarios named on the command line run one after another in that order, their output printed as
it comes.
"""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

# The first job of lane 1: the foundation. (Lane 2 starts with the checks, where `make test` gives them.)
FIRST = ("default",)
# Then the queue both lanes take from, longest first: under `make test` at eb76342 (two lanes, beside each
# other) fleet about 1,800 s, real_engine 800 (more beside fleet), stack 700, serving 580, sweep 600, hostprep 470,
# monitoring 400, model_cache 125 (bench/HISTORY.md). A scenario no list names comes last.
QUEUE = ("fleet", "real_engine", "stack", "serving", "sweep", "hostprep", "monitoring", "model_cache")
# the scenarios that need what the checks build (`make real-engine`): under --checks, taken only once they ended
AFTER_CHECKS = ("real_engine",)
# Scenarios run by a make target of their own, never by `make test`: the aarch64 lane (an emulated arm64 VM,
# about ten times slower than an x86_64 lab host). Named on the command line, they run like any other.
OWN_TARGET = {"aarch64": "make test-arm64"}
LOGS = Path("lab/.state/molecule")
# `make test` gives its other checks (lint, sanity, unit tests, the images the later scenarios need) as one
# command (--checks): it runs first in lane 2, beside the first scenarios of lane 1, and a failure of it counts
# as a scenario's; its output is logged as lab/.state/molecule/checks.log
CHECKS = "checks"
# the cores one lane keeps busy (about one: bench/HISTORY.md), less a margin for what the machine
# itself does between scenarios; a second lane needs twice that idle
LANE_CORES = 0.75
SAMPLE_S = 5.0
# what the summary of a failed scenario's log holds: lines after each failed task, the log's last lines
AFTER_FAILED = 12
LAST_LINES = 25
LINE_CHARS = 240
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FAILED_TASK = re.compile(r"fatal: \[|failed: \[|ERROR|CRITICAL|Traceback|FAILED ")
MAX_LINES = 40
# what names a failure in one line: pytest's summary of a failed test, a failed task; the last CAUSES
# of them are the very last lines before the runner's own, where a CI log's short tail shows them
CAUSE = re.compile(r"^(FAILED|ERROR) \S+::\S+|^fatal: \[|^failed: \[")
CAUSES = 8
BOX = re.compile(r"^\s*\u2502 ?")
# molecule and pytest wrap their lines at the terminal's width, 80 columns without a terminal
COLUMNS = "200"


def found():
    return sorted(p.parent.name for p in Path("molecule").glob("*/molecule.yml"))


def schedule(scenarios, checks=False):
    """(each lane's first jobs, the queue) for these scenarios: FIRST in lane 1, the checks (CHECKS) first in lane 2
    where given, then QUEUE's order, any scenario no list names at its end."""
    first = [[s for s in FIRST if s in scenarios], [CHECKS] if checks else []]
    queue = [s for s in QUEUE if s in scenarios] + [s for s in scenarios if s not in FIRST and s not in QUEUE]
    return first, queue


def cpu_times(stat="/proc/stat"):
    """(idle, total) jiffies of all CPUs from /proc/stat, or None where it cannot be read."""
    try:
        with open(stat) as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal (guest time is counted in user already)
    return values[3] + values[4], sum(values[:8])


def idle_cores(sample_s=SAMPLE_S, cores=None, times=cpu_times, sleep=time.sleep):
    """How many cores were idle over sample_s seconds, or None where /proc/stat cannot be read."""
    cores = cores or os.cpu_count() or 1
    before = times()
    sleep(sample_s)
    after = times()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return cores * (after[0] - before[0]) / float(after[1] - before[1])


def lane_count(env, measure=idle_cores):
    """(number of lanes, why): SPECDEC_MOLECULE_LANES if set, else by the cores the machine leaves idle."""
    chosen = env.get("SPECDEC_MOLECULE_LANES", "")
    if chosen:
        if chosen not in ("1", "2"):
            sys.exit("SPECDEC_MOLECULE_LANES=%r: it must be 1 or 2 (or unset: chosen by the idle cores)" % chosen)
        return int(chosen), "SPECDEC_MOLECULE_LANES=%s" % chosen
    idle = measure()
    if idle is None:
        return 2, "the idle cores could not be measured (/proc/stat)"
    lanes_ = 2 if idle >= 2 * LANE_CORES else 1
    return lanes_, "%.2f of %d cores idle over %g s (two lanes need %g)" % (
        idle, os.cpu_count() or 1, SAMPLE_S, 2 * LANE_CORES)


def failure_summary(text):
    """The lines of a failed scenario's log that name its cause, for the end of a CI log whose tail is
    all a reader may see: each failed task or error line with the AFTER_FAILED lines that follow it
    (the last MAX_LINES of them: a play stops at its last failure), or the log's last LAST_LINES lines
    where none is found; colour codes removed, each line cut at LINE_CHARS."""
    lines = [ANSI.sub("", line)[:LINE_CHARS] for line in text.splitlines()]
    keep = set()
    for number, line in enumerate(lines):
        if FAILED_TASK.search(line):
            keep.update(range(number, min(number + AFTER_FAILED + 1, len(lines))))
    if not keep:
        keep = set(range(max(0, len(lines) - LAST_LINES), len(lines)))
    out, last = [], None
    for number in sorted(keep):
        if last is not None and number != last + 1:
            out.append("[...]")
        out.append(lines[number])
        last = number
    if len(out) > MAX_LINES:
        out = ["[...]"] + out[-MAX_LINES:]
    return "\n".join(out) + ("\n" if out else "")


def causes(text):
    """The last CAUSES lines of a failed scenario's log that name a failed test or task, each on one
    line (molecule's frame and colour codes removed, cut at LINE_CHARS)."""
    found = []
    for line in text.splitlines():
        line = BOX.sub("", ANSI.sub("", line)).strip()
        if CAUSE.search(line):
            found.append(line[:LINE_CHARS])
    return "".join(line + "\n" for line in found[-CAUSES:])


def say(msg):
    print("==> " + msg, flush=True)


def run_one(scenario, buffered, lock, command=None):
    """Run one scenario (or, named `scenario` in the logs, the shell command `command`); its exit status."""
    started = time.monotonic()
    argv = ["molecule", "test", "-s", scenario] if command is None else ["/bin/sh", "-c", command]
    what = "molecule test -s %s" % scenario if command is None else command
    env = dict(os.environ, COLUMNS=os.environ.get("COLUMNS", COLUMNS))
    if buffered:
        log = LOGS / (scenario + ".log")
        with log.open("w") as out:
            rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    else:
        rc = subprocess.call(argv, env=env)
    took = time.monotonic() - started
    with lock:
        if buffered:
            say("%s: its output (%s)" % (what, log))
            sys.stdout.write(log.read_text(errors="replace"))
        say("%s: %s in %.0f s" % (what, "passed" if rc == 0 else "FAILED (exit %d)" % rc, took))
        sys.stdout.flush()
    return rc


def main(argv):
    checks = None
    if argv[:1] == ["--checks"]:
        if len(argv) != 2:
            sys.exit("--checks COMMAND runs COMMAND first in lane 2, beside the scenarios of lane 1: "
                     "it takes one command and no scenario names")
        checks = argv[1]
        argv = []
    known = found()
    unknown = [s for s in argv if s not in known]
    if unknown:
        sys.exit("no such molecule scenario: %s (there are: %s)" % (" ".join(unknown), " ".join(known)))
    if argv:
        lanes_, queue = [list(argv)], []
    else:
        first, queue = schedule([s for s in known if s not in OWN_TARGET], checks is not None)
        count, why = lane_count(os.environ)
        say("molecule: %d lane%s (%s)" % (count, "s" if count > 1 else "", why))
        if count == 1:  # the checks first (they fail soonest), then the foundation, then the queue
            lanes_, queue = [first[1] + first[0] + queue], []
        else:
            lanes_ = first
    buffered = len(lanes_) > 1
    LOGS.mkdir(parents=True, exist_ok=True)
    results = LOGS / "results"
    results.write_text("")
    lock = threading.Lock()
    taking = threading.Condition(lock)
    failed = threading.Event()
    checks_over = threading.Event()  # what AFTER_CHECKS waits for is there
    if checks is None or not buffered:
        checks_over.set()
    times: list = []  # (lane, scenario, started at, took, exit status), from the runner's start

    def title(scenario):
        return checks if scenario == CHECKS else "molecule test -s %s" % scenario

    failures = []

    def take():
        """The next scenario of the queue this lane may start (once a scenario failed, the next one, to be
        reported as not started), waiting while only ones that need the checks are left; None when it is empty."""
        with taking:
            while queue:
                for index, scenario in enumerate(queue):
                    if failed.is_set() or checks_over.is_set() or scenario not in AFTER_CHECKS:
                        return queue.pop(index)
                taking.wait()
            return None

    def lane(number, own):
        while True:
            scenario = own.pop(0) if own else take()
            if scenario is None:
                return
            if failed.is_set():
                with lock:
                    say("%s: not started (a scenario failed)" % title(scenario))
                continue
            command = checks if scenario == CHECKS else None
            with lock:
                say("%s: started%s" % (title(scenario), " (lane %d)" % number if buffered else ""))
            began = time.monotonic() - started
            rc = run_one(scenario, buffered, lock, command)
            with lock:
                times.append((number, scenario, began, time.monotonic() - started - began, rc))
            if rc != 0:
                failed.set()  # before the result is written: whoever reads it sees both lanes stopped
            with taking:
                if rc != 0:
                    failures.append(scenario)
                with results.open("a") as out:
                    out.write("%s %d\n" % (scenario, rc))
                if scenario == CHECKS:
                    checks_over.set()
                taking.notify_all()

    if buffered:
        for number, own in enumerate(lanes_, 1):
            say("lane %d starts with: %s" % (number, " ".join(own) or "the queue"))
        say("then each lane takes the next of: %s%s" % (" ".join(queue), "".join(
            " (%s once the checks ended)" % s for s in AFTER_CHECKS if s in queue and not checks_over.is_set())))
    started = time.monotonic()
    threads = [threading.Thread(target=lane, args=(n, own)) for n, own in enumerate(lanes_, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    # where the time went, in a few lines a CI log's tail still shows (before any failure's summary)
    for number, scenario, began, spent, rc in sorted(times, key=lambda t: t[2]):
        where = (" in lane %d" % number if buffered else "") + ("" if rc == 0 else ", FAILED")
        say("%s ran from %.0f s to %.0f s (%.0f s)%s" % (scenario, began, began + spent, spent, where))
    if failures and buffered:
        texts = dict((scenario, (LOGS / (scenario + ".log")).read_text(errors="replace")) for scenario in failures)
        for scenario in failures:
            say("%s failed: its failed tasks again (whole log: %s)" % (title(scenario), LOGS / (scenario + ".log")))
            sys.stdout.write(failure_summary(texts[scenario]))
        for scenario in failures:
            named = causes(texts[scenario])
            if named:
                say("%s: its failed tests and tasks" % title(scenario))
                sys.stdout.write(named)
    if failures:
        say("molecule: FAILED in %.0f s (failed: %s)" % (took, " ".join(failures)))
    else:
        say("molecule: all passed in %.0f s" % took)
    return 1 if failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
