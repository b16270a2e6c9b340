"""Run the molecule scenarios: `make molecule` (every scenario) or `make molecule SCENARIOS="a b"`.

Every scenario makes its own lab hosts on its own subnet, so scenarios can run side by side. Most of
a scenario's time is spent waiting on its hosts (engine starts, health gates, measured requests):
one scenario keeps about half of a 2-core machine busy (bench/HISTORY.md). So the whole set runs
in two lanes at once:

- lane 1: the foundation first, then what builds on it (a broken foundation fails early), then the
  sweep (an engine measured for minutes);
- lane 2: under `make test`, the other checks first (below); then the real engine (measured for minutes),
  the model cache (which needs nothing the others build), the stack (two hosts serving one instance,
  beside a single host and a front door) and the monitoring scenario (a short sweep beside the exporter).

The lanes are balanced by measured times (bench/HISTORY.md; one scenario's time depends on what runs beside
it). Under `make test` at acd7ac4, the checks beside lane 1: checks 787 s, default 118, hostprep 473 (with the
Spark-shaped host), serving 580; quiet, two lanes at d1dc33b: fleet 1,143 (more with the tune loop's hostile
inputs since), monitoring 294, real_engine 811, sweep 461, model_cache 125, stack 700. Lane 1 then about
3,200 s and lane 2 about 3,100 s; with monitoring in lane 1 as before, about 3,500 s against 2,800 s.

`make test` gives the rest of its checks as one command (`--checks "make checks real-engine ee"`): lint,
sanity and the unit tests, with the real engine's image and the execution environment built beside them. It runs
first in lane 2 and counts as a scenario (its log: lab/.state/molecule/checks.log), so lane 1's first scenarios,
which mostly wait on their hosts, use the CPU the checks leave, rather than the whole run waiting for the checks.

Two lanes pay only where the second has idle CPU to use. On a machine that other work keeps busy, a
second lane adds load instead (bench/HISTORY.md: under `stress-ng --cpu 2`, each scenario ran 4 to
6 times slower in two lanes). So before it starts, the runner measures for a few seconds how many
cores the machine leaves idle (/proc/stat), and runs one lane (lane 1, then lane 2's scenarios) when
fewer than LANE_CORES * 2 are idle (the checks first, then lane 1's scenarios, then lane 2's).
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

LANES = (
    ("default", "hostprep", "serving", "fleet", "sweep"),
    ("real_engine", "model_cache", "stack", "monitoring"),
)
# Scenarios run by a make target of their own, never by `make test`: the aarch64 lane (an emulated arm64 VM,
# about ten times slower than an x86_64 lab host). Named on the command line, they run like any other.
OWN_TARGET = {"aarch64": "make test-arm64"}
LOGS = Path("lab/.state/molecule")
# `make test` gives its other checks (lint, sanity, unit tests, the images the later scenarios need) as one
# command (--checks): it runs first in this lane (0-based), beside the first scenarios of the other, and a
# failure of it counts as a scenario's; its output is logged as lab/.state/molecule/checks.log
CHECKS_LANE = 1
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


def lanes(scenarios):
    """The lanes for these scenarios: LANES' order, any scenario no lane names at the end of the last."""
    out = [[s for s in lane if s in scenarios] for lane in LANES]
    out[-1] += [s for s in scenarios if not any(s in lane for lane in LANES)]
    return [lane for lane in out if lane]


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
        return len(LANES), "the idle cores could not be measured (/proc/stat)"
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
            sys.exit("--checks COMMAND runs COMMAND first in lane %d, beside the scenarios of the other lanes: "
                     "it takes one command and no scenario names" % (CHECKS_LANE + 1))
        checks = argv[1]
        argv = []
    known = found()
    unknown = [s for s in argv if s not in known]
    if unknown:
        sys.exit("no such molecule scenario: %s (there are: %s)" % (" ".join(unknown), " ".join(known)))
    if argv:
        plan = [list(argv)]
    else:
        plan = lanes([s for s in known if s not in OWN_TARGET])
        if checks is not None:
            plan[min(CHECKS_LANE, len(plan) - 1)].insert(0, CHECKS)
        count, why = lane_count(os.environ)
        say("molecule: %d lane%s (%s)" % (count, "s" if count > 1 else "", why))
        if count == 1:  # the checks first (they fail soonest), then lane after lane
            plan = [sorted((s for lane in plan for s in lane), key=lambda s: s != CHECKS)]
    buffered = len(plan) > 1
    LOGS.mkdir(parents=True, exist_ok=True)
    results = LOGS / "results"
    results.write_text("")
    lock = threading.Lock()
    failed = threading.Event()
    times: list = []  # (lane, scenario, started at, took, exit status), from the runner's start

    def title(scenario):
        return checks if scenario == CHECKS else "molecule test -s %s" % scenario

    failures = []

    def lane(number, scenarios):
        for scenario in scenarios:
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
            with lock:
                if rc != 0:
                    failures.append(scenario)
                with results.open("a") as out:
                    out.write("%s %d\n" % (scenario, rc))

    if buffered:
        for number, scenarios in enumerate(plan, 1):
            say("lane %d: %s" % (number, " ".join(scenarios)))
    started = time.monotonic()
    threads = [threading.Thread(target=lane, args=(n, s)) for n, s in enumerate(plan, 1)]
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
