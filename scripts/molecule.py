"""Run the molecule scenarios: `make molecule` (every scenario) or `make molecule SCENARIOS="a b"`.

Every scenario makes its own lab hosts on its own subnet, so scenarios can run side by side. Most of
a scenario's time is spent waiting on its hosts (engine starts, health gates, measured requests):
one scenario keeps about half of a 2-core machine busy (docs/PERFORMANCE.md). So the whole set runs
in two lanes at once:

- lane 1: the foundation first, then what builds on it (a broken foundation fails early);
- lane 2: the scenarios that measure an engine for minutes (the real engine, the sweep, the sweep
  beside the monitoring exporter).

Lane 2 is the longer (2789 against 2339 s in the run docs/PERFORMANCE.md records).

Each scenario's output goes to lab/.state/molecule/<scenario>.log and is printed whole when the
scenario ends, so the two lanes' lines never interleave. A scenario that fails ends its lane, and
the other lane starts no new scenario; the exit status is 1 if any scenario failed.

Scenarios named on the command line run one after another in that order, their output printed as
it comes.
"""

import subprocess
import sys
import threading
import time
from pathlib import Path

LANES = (
    ("default", "hostprep", "model_cache", "serving", "fleet"),
    ("real_engine", "sweep", "monitoring"),
)
LOGS = Path("lab/.state/molecule")


def found():
    return sorted(p.parent.name for p in Path("molecule").glob("*/molecule.yml"))


def lanes(scenarios):
    """The lanes for these scenarios: LANES' order, any scenario no lane names at the end of the last."""
    out = [[s for s in lane if s in scenarios] for lane in LANES]
    out[-1] += [s for s in scenarios if not any(s in lane for lane in LANES)]
    return [lane for lane in out if lane]


def say(msg):
    print("==> " + msg, flush=True)


def run_one(scenario, buffered, lock):
    started = time.monotonic()
    argv = ["molecule", "test", "-s", scenario]
    if buffered:
        log = LOGS / (scenario + ".log")
        with log.open("w") as out:
            rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    else:
        rc = subprocess.call(argv)
    took = time.monotonic() - started
    with lock:
        if buffered:
            say("molecule test -s %s: its output (%s)" % (scenario, log))
            sys.stdout.write(log.read_text(errors="replace"))
        say("molecule test -s %s: %s in %.0f s" % (scenario, "passed" if rc == 0 else "FAILED (exit %d)" % rc, took))
        sys.stdout.flush()
    return rc == 0


def main(argv):
    known = found()
    unknown = [s for s in argv if s not in known]
    if unknown:
        sys.exit("no such molecule scenario: %s (there are: %s)" % (" ".join(unknown), " ".join(known)))
    plan = [list(argv)] if argv else lanes(known)
    buffered = len(plan) > 1
    LOGS.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    failed = threading.Event()

    def lane(number, scenarios):
        for scenario in scenarios:
            if failed.is_set():
                with lock:
                    say("molecule test -s %s: not started (a scenario failed)" % scenario)
                continue
            with lock:
                say("molecule test -s %s: started%s" % (scenario, " (lane %d)" % number if buffered else ""))
            if not run_one(scenario, buffered, lock):
                failed.set()

    if buffered:
        for number, scenarios in enumerate(plan, 1):
            say("lane %d: %s" % (number, " ".join(scenarios)))
    started = time.monotonic()
    threads = [threading.Thread(target=lane, args=(n, s)) for n, s in enumerate(plan, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say("molecule: %s in %.0f s" % ("FAILED" if failed.is_set() else "all passed", time.monotonic() - started))
    return 1 if failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
