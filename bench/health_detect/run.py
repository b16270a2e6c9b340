#!/usr/bin/env python3
"""How fast readiness and crashes are detected: engine_health against the hand recipes' way.

    python3 bench/health_detect/run.py [--ready-trials 5] [--crash-trials 3] [--load-delay 15] [--keep]

One lab host (lab `bench-health`, 172.29.247.0/24) serves one engine emulator instance through the
inference_server role (systemd unit, docker container), the emulator loading its model for
--load-delay seconds. In each trial the unit is restarted, then three watchers start together:

- engine_health: an `ansible-playbook` task of specdec.serve.engine_health (polls every 0.2 s and
  watches the unit and the container);
- uri: an `ansible-playbook` task of ansible.builtin.uri on /health with `until`, `retries` and
  `delay: 5` (Ansible's default delay), the usual way to write the recipes' health check in Ansible;
- curl loop: `until curl -sf /health; do sleep 5; done` on the host, the recipes' check in a loop.

Readiness trials: the engine comes up; the truth is the docker log timestamp of the engine's
"Uvicorn running on" line (it listens from then on). Crash trials: the engine's environment gets
SPECDEC_EMU_FAULT=crash_at_start, so it exits after loading; the truth is the docker `die` event of
its container. A watcher's detection time is when its result is in hand: the task's end on the
controller (json callback), or the host clock after the curl loop (lab hosts share this machine's
clock). The uri and curl watchers give up after --give-up seconds (they cannot tell a crash from a
slow load, so that is when they report it).

Writes bench/health_detect/results.json and prints the Markdown for RESULTS.md.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
LAB_NAME = "bench-health"
HOST = "bench-health-01"
SUBNET = "172.29.247.0/24"
PORT = 8000
UNIT = "specdec-bench.service"
CONTAINER = "specdec-bench"
PYTHON = sys.executable
BIN = Path(PYTHON).parent


def sh(cmd, timeout=900, check=True, env=None):
    proc = subprocess.run(cmd, timeout=timeout, text=True, capture_output=True, env=env, check=False)
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit("bench: %s failed (rc %d)" % (" ".join(map(str, cmd[:5])), proc.returncode))
    return proc


def ansible_env():
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"),
               PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
    return env


class Lab:
    def __init__(self, workdir):
        self.inventory = Path(workdir) / "inventory.yml"
        self.ssh = None

    def up(self):
        sh([PYTHON, str(REPO / "lab" / "lab.py"), "up", "--name", LAB_NAME, "--subnet", SUBNET,
            "--host", HOST + ":bench", "--inventory", str(self.inventory)])
        hv = json.loads(self.inventory.read_text().split("\n", 1)[1])["all"]["hosts"][HOST]
        self.ssh = ["ssh", "-i", hv["ansible_ssh_private_key_file"], "-p", str(hv["ansible_port"]),
                    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                    "-o", "BatchMode=yes", "root@127.0.0.1"]

    def run(self, command, timeout=300, check=True):
        return sh(self.ssh + [command], timeout=timeout, check=check)

    def down(self):
        sh([PYTHON, str(REPO / "lab" / "lab.py"), "down", "--name", LAB_NAME], check=False)


def playbook(lab, name, extra, timeout=900):
    """Run a bench playbook with the json callback; return (rc, {task name: host result})."""
    env = ansible_env()
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CALLBACKS_ENABLED="ansible.posix.timer")
    proc = sh([str(BIN / "ansible-playbook"), "-i", str(lab.inventory), str(HERE / name), "-e", json.dumps(extra)],
              timeout=timeout, check=False, env=env)
    out = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    tasks = {}
    for play in out["plays"]:
        for task in play["tasks"]:
            res = task["hosts"].get(HOST)
            if res is not None:
                res = dict(res, _end=task["task"].get("duration", {}).get("end"))
                tasks[task["task"]["name"]] = res
    return proc.returncode, tasks, out


def iso(ts):
    """Ansible json callback / docker timestamps (UTC, 'Z', up to nanoseconds) -> epoch seconds."""
    ts = ts.strip().replace("Z", "")
    if "." in ts:
        head, frac = ts.split(".", 1)
        ts = head + "." + frac[:6]
    else:
        ts += ".0"
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def ready_time(lab, since):
    """Epoch of the engine's 'Uvicorn running on' log line (docker log timestamp)."""
    logs = lab.run("docker logs --timestamps %s 2>&1" % CONTAINER).stdout
    for line in logs.splitlines():
        if "Uvicorn running on" in line:
            t = iso(line.split(" ", 1)[0])
            if t >= since:
                return t
    raise SystemExit("bench: no 'Uvicorn running on' line in the engine log")


def models_answer_time(lab, since):
    """Epoch of the first answered GET /v1/models after `since` (only engine_health asks for it)."""
    logs = lab.run("docker logs --timestamps %s 2>&1" % CONTAINER).stdout
    for line in logs.splitlines():
        if '"GET /v1/models HTTP/1.1" 200' in line:
            t = iso(line.split(" ", 1)[0])
            if t >= since:
                return t
    raise SystemExit("bench: no answered GET /v1/models in the engine log")


def die_time(lab, since, until):
    out = lab.run("docker events --since %.3f --until %.3f --filter container=%s --filter event=die "
                  "--format '{{.TimeNano}}'" % (since, until, CONTAINER)).stdout.split()
    if not out:
        raise SystemExit("bench: no die event of %s" % CONTAINER)
    return int(out[0]) / 1e9


def watchers(lab, give_up):
    """Start the three watchers together; return {watcher: (detected epoch, outcome)}."""
    results = {}
    retries = int(give_up / 5)

    def eh():
        rc, tasks, _ = playbook(lab, "watch.yml", {"watch": "engine_health", "port": PORT, "unit": UNIT,
                                                    "container": CONTAINER, "give_up": give_up})
        res = tasks["Wait with engine_health"]
        results["engine_health"] = (iso(res["_end"]), "failed" if res.get("failed") else "ready",
                                    res.get("timings", {}))

    def uri():
        rc, tasks, _ = playbook(lab, "watch.yml", {"watch": "uri", "port": PORT, "retries": retries})
        res = tasks["Wait with uri retries"]
        results["uri"] = (iso(res["_end"]), "failed" if res.get("failed") else "ready", {})

    def curl():
        proc = lab.run("timeout %d sh -c 'until curl -sf -o /dev/null http://127.0.0.1:%d/health; do sleep 5; done'; "
                       "echo rc=$?; date +%%s.%%N" % (give_up, PORT), timeout=give_up + 60)
        rc_line, stamp = proc.stdout.split()[-2:]
        results["curl_loop"] = (float(stamp), "ready" if rc_line == "rc=0" else "failed", {})

    errors = []

    def guard(fn):
        def wrapped():
            try:
                fn()
            except Exception as exc:  # reported after the join
                errors.append("%s: %r" % (fn.__name__, exc))
        return wrapped

    threads = [threading.Thread(target=guard(f)) for f in (eh, uri, curl)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("bench: watcher failed: %s" % "; ".join(errors))
    return results


def trial(lab, kind, give_up):
    lab.run("systemctl reset-failed %s; true" % UNIT)
    started = time.time()
    lab.run("systemctl restart %s" % UNIT)
    restarted = time.time()  # the previous container has exited (ExecStop waits for it)
    found = watchers(lab, give_up)
    if kind == "ready":
        truth = ready_time(lab, started)
        # engine_health's last stage is GET /v1/models; the engine's access log stamps its answer
        found["engine_health (decided on host)"] = (models_answer_time(lab, truth), "ready", {})
    else:
        truth = die_time(lab, restarted, time.time())
    return {"kind": kind, "truth": truth, "restart": started,
            "watchers": {name: {"detected": t, "outcome": outcome, "latency_s": round(t - truth, 3),
                                "timings": timings}
                         for name, (t, outcome, timings) in found.items()}}


def summary(trials, kind, name):
    lat = [t["watchers"][name]["latency_s"] for t in trials if t["kind"] == kind]
    outcomes = sorted({t["watchers"][name]["outcome"] for t in trials if t["kind"] == kind})
    return {"median": round(statistics.median(lat), 2), "min": round(min(lat), 2), "max": round(max(lat), 2),
            "n": len(lat), "outcomes": outcomes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ready-trials", type=int, default=5)
    ap.add_argument("--crash-trials", type=int, default=3)
    ap.add_argument("--load-delay", type=float, default=15.0, help="emulated model load time (s)")
    ap.add_argument("--give-up", type=int, default=60, help="uri/curl give-up time (s), a multiple of 5")
    ap.add_argument("--keep", action="store_true", help="leave the lab host running")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-health-")
    lab = Lab(work)
    t0 = time.monotonic()
    lab.up()
    try:
        rc, tasks, _ = playbook(lab, "deploy.yml", {"bench_load_delay": str(args.load_delay),
                                                    "bench_repo": str(REPO)})
        if rc != 0:
            raise SystemExit("bench: deploy failed: %s" % [r.get("msg") for r in tasks.values() if r.get("failed")])
        trials = []
        for i in range(args.ready_trials):
            trials.append(trial(lab, "ready", args.give_up))
            print("ready trial %d: %s" % (i + 1, {k: v["latency_s"] for k, v in trials[-1]["watchers"].items()}),
                  flush=True)
        lab.run("echo SPECDEC_EMU_FAULT=crash_at_start >> /etc/specdec/bench/engine.env")
        for i in range(args.crash_trials):
            trials.append(trial(lab, "crash", args.give_up))
            print("crash trial %d: %s" % (i + 1, {k: v["latency_s"] for k, v in trials[-1]["watchers"].items()}),
                  flush=True)
        lab.run("sed -i '/^SPECDEC_EMU_FAULT=/d' /etc/specdec/bench/engine.env")
    finally:
        if not args.keep:
            lab.down()
    names = ("engine_health", "uri", "curl_loop")
    ready_names = ("engine_health (decided on host)",) + names
    result = {
        "settings": {"load_delay_s": args.load_delay, "give_up_s": args.give_up, "poll": {
            "engine_health": "0.2 s (module default)", "uri": "delay 5 s, retries %d" % (args.give_up // 5),
            "curl_loop": "sleep 5 s"}},
        "ready": {n: summary(trials, "ready", n) for n in ready_names},
        "crash": {n: summary(trials, "crash", n) for n in names},
        "trials": trials,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    (HERE / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print()
    print("| watcher | ready: latency median (min-max) | crash: latency median (min-max), outcome |")
    print("|---|---|---|")
    r = result["ready"][ready_names[0]]
    print("| %s | %.2f s (%.2f-%.2f), n=%d | |" % (ready_names[0], r["median"], r["min"], r["max"], r["n"]))
    for n in names:
        r, c = result["ready"][n], result["crash"][n]
        print("| %s | %.2f s (%.2f-%.2f), n=%d | %.2f s (%.2f-%.2f), n=%d, %s |" % (
            n, r["median"], r["min"], r["max"], r["n"], c["median"], c["min"], c["max"], c["n"], "/".join(c["outcomes"])))
    print("\nwall time %.0f s" % result["wall_s"])


if __name__ == "__main__":
    main()
