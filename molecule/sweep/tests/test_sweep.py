"""Verify of the sweep scenario, after converge (serve, sweep, apply) and idempotence.

The emulator's analytic optimum is computed here, from the scenario's own acceptance profile and
step-time knobs, with specdec_emulator.clock; the tests compare the sweep's winner with it. Then a
sweep killed half-way, and the next one (without apply, at -vvvv with --diff) that restores it and
sweeps, must leave the running config byte for byte as it was, and serving. The instance is one-model EAGLE-3 on TensorRT-LLM 1.2.0rc6, whose
engine reports no acceptance statistics and decodes greedily: the report's acceptance figure is the
client-side estimate, and a temperature above 0 is refused, or flagged when the sweep is told to go
on. Tests run in file order; the tests that read one sweep share it through a module-scoped fixture
(a sweep of a single candidate still restarts the engine three times). The engine's environment holds
a secret from converge on (group_vars): no run prints it, at any verbosity, and no report keeps it.
"""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

sys.path.insert(0, str(PROJECT / "lab" / "emulator"))
from specdec_emulator.clock import Profile, analytic_table  # noqa: E402

VARS = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())
(INSTANCE,) = VARS["inference_server_instances"]
NAME = INSTANCE["name"]
CANDIDATES = [0] + VARS["draft_sweep_draft_lens"]
LEVELS = VARS["draft_sweep_concurrency"]
FILES = ("/etc/specdec/%s/engine.yaml" % NAME, "/etc/specdec/%s/engine.env" % NAME,
         "/etc/systemd/system/specdec-%s.service" % NAME)
STATE = "/var/lib/specdec/sweep/%s.json" % NAME
SECRET = VARS["inference_server_secret_env"]["HF_TOKEN"]
# every run this module starts (run id -> its output), and converge's sweep: none may show the secret
RUNS = {}


def analytic_throughput():
    """{concurrency: {draft length: output tokens/s}} of the emulator running this instance, over the candidates."""
    env = {k: str(v) for k, v in INSTANCE["env"].items()}
    table = analytic_table(Profile.load(env, None, None), concurrencies=tuple(LEVELS),
                           max_draft_len=max(CANDIDATES), max_batch_size=INSTANCE["max_batch_size"])
    out = {}
    for conc, entry in table["concurrency"].items():
        tput = {int(k): v["output_tok_s"] for k, v in entry["draft_len"].items() if int(k) in CANDIDATES}
        ranked = sorted(tput.values(), reverse=True)
        # the scenario's profile must leave a clear margin, or the test would measure noise
        assert ranked[0] / ranked[1] > 1.05, (conc, tput)
        assert max(tput, key=tput.get) == entry["optimum_draft_len"], "the candidates miss the optimum"
        out[int(conc)] = tput
    return out


def analytic_optimum(eligible=None):
    """{concurrency: optimum draft length} of the emulator running this instance; with `eligible`
    ({concurrency: [draft lengths]}), the optimum among those lengths only."""
    best = {}
    for conc, tput in analytic_throughput().items():
        if eligible is not None:
            tput = {k: v for k, v in tput.items() if k in eligible[conc]}
        best[conc] = max(tput, key=tput.get)
    return best


def measured_optimum(data):
    """The analytic optimum among the groups the sweep could pick from. On a machine so busy that
    serve_bench flags its own client (a group left with too few runs is client_bottleneck), the sweep
    must pick the best of what it measured soundly, not a length it measured while starved. So too for a
    group measured so noisily that the selection's own penalty (k x 1.4826 x its relative MAD, the score
    being median - k x 1.4826 x MAD) exceeds the profile's margin at that level (the optimum's lead over
    the next length): the selection ranks it down by design, and the test cannot expect it to win."""
    k = data["selection"]["params"]["k"]
    margin = dict((conc, sorted(tput.values(), reverse=True)) for conc, tput in analytic_throughput().items())
    margin = dict((conc, ranked[0] / ranked[1] - 1) for conc, ranked in margin.items())
    eligible = {}
    for g in data["selection"]["groups"]:
        assert g["status"] in ("ok", "client_bottleneck"), g
        assert g["status"] == "ok" or g["flagged_runs"] > 0, g
        if g["status"] == "ok" and k * 1.4826 * (g["rel_mad"] or 0) < margin[g["concurrency"]]:
            eligible.setdefault(g["concurrency"], []).append(g["draft_len"])
    return analytic_optimum(eligible)


def fact(host):
    return json.loads(host.file("/etc/ansible/facts.d/specdec_sweep.fact").content_string)[NAME]


def checksums(host):
    return {f: host.file(f).sha256sum for f in FILES}


def load_report(run_id, host_name):
    base = PROJECT / "reports" / run_id / ("%s-%s" % (host_name, NAME))
    data = json.loads(base.with_suffix(".json").read_text())
    return base, data, base.with_suffix(".md").read_text()


def playbook(*extra, background=False, flags=(), rc=0):
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "sweep.yml")] + list(flags)
    for e in extra:
        argv += ["-e", e]
    if background:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == rc, proc.stdout[-6000:] + proc.stderr[-3000:]
    # the engine's environment holds a secret in every run: no run prints it
    assert SECRET not in proc.stdout + proc.stderr
    run_id = [e.split("=", 1)[1] for e in extra if e.startswith("draft_sweep_run_id=")]
    RUNS[run_id[0] if run_id else "?"] = proc.stdout
    return proc.stdout


def lab_host():
    """The scenario's host, for the module-scoped fixtures (testinfra's `host` is per test)."""
    (name,) = testinfra_hosts
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY))


def serves(host):
    out = host.run("curl -sf -m 10 http://127.0.0.1:%d/v1/completions -H 'Content-Type: application/json' "
                   "-d '{\"model\": \"x\", \"prompt\": \"hi\", \"max_tokens\": 5}'" % INSTANCE["port"])
    return out.rc == 0 and json.loads(out.stdout)["usage"]["completion_tokens"] == 5


def test_winner_is_the_analytic_optimum_at_each_concurrency(host):
    mine = fact(host)
    RUNS[mine["last_sweep"]["run_id"]] = ""  # converge's sweep: its report is checked for the secret at the end
    _, data, _ = load_report(mine["last_sweep"]["run_id"], host.backend.host)
    optimum = measured_optimum(data)
    chosen = {e["concurrency"]: e["draft_len"] for e in data["selection"]["by_concurrency"]}
    assert chosen == optimum
    assert data["selection"]["winner"]["draft_len"] == optimum[min(LEVELS)]
    assert data["applied"] is True
    assert data["candidates"] == CANDIDATES
    # the engine reports no acceptance (specDecodingStats null on 1.2.0rc6 one-model EAGLE-3); the
    # client-side estimate follows the deterministic profile: min(k, 3) + 1 tokens per step, 1 without
    for g in data["selection"]["groups"]:
        assert g["acceptance_length"] is None, g
        assert g["acceptance_length_estimate"] == pytest.approx(1 + min(g["draft_len"], 3), rel=0.01), g
    win = data["selection"]["winner"]
    assert win["acceptance_length_estimate"] == pytest.approx(1 + min(win["draft_len"], 3), rel=0.01)
    # greedy decoding, said so in the report
    assert data["sampling"]["greedy_only"] is True and data["sampling"]["honoured"] is True
    assert data["sampling"]["warning"] is None


def test_every_candidate_passed_the_output_equivalence_gate(host):
    """The emulator, like a correct engine, generates the same greedy text at every draft length."""
    _, data, md = load_report(fact(host)["last_sweep"]["run_id"], host.backend.host)
    eq = data["equivalence"]
    assert eq["enabled"] is True and eq["status"] == "passed"
    assert eq["passed"] == VARS["draft_sweep_draft_lens"] and eq["rejected"] == []
    assert eq["tolerance"]["min_prefix"] is None
    assert eq["baseline"] == {"draft_len": 0, "measured": True, "probed": True, "unit": "token", "errors": 0}
    assert [c["draft_len"] for c in eq["candidates"]] == VARS["draft_sweep_draft_lens"]
    for c in eq["candidates"]:
        assert c["verdict"] == "passed" and c["eligible"] is True and c["unit"] == "token", c
        assert c["identical"] == c["prompts"] == eq["probe"]["prompts"] > 0
        assert all(r["first_divergence"] is None for r in c["per_prompt"])
    assert {g["status"] for g in data["selection"]["groups"]} <= {"ok", "client_bottleneck"}
    assert "## Output equivalence" in md and "Gate: **passed**." in md
    assert fact(host)["last_sweep"]["equivalence"] == {"status": "passed", "rejected": []}


def test_winner_is_applied_in_the_engine_yaml_and_the_fact(host):
    mine = fact(host)
    _, data, _ = load_report(mine["last_sweep"]["run_id"], host.backend.host)
    winner = measured_optimum(data)[min(LEVELS)]
    assert mine["applied"]["max_draft_len"] == winner
    assert mine["applied"]["speculative"]["max_draft_len"] == winner
    assert mine["applied"]["run_id"] == mine["last_sweep"]["run_id"]
    engine = yaml.safe_load(host.file(FILES[0]).content_string)
    assert engine["speculative_config"]["max_draft_len"] == winner
    assert engine["speculative_config"]["decoding_type"] == "Eagle"
    assert engine["speculative_config"]["speculative_model_dir"].endswith(INSTANCE["speculative"]["draft_model"])
    assert not host.file(STATE).exists
    assert host.service("specdec-%s" % NAME).is_running
    assert serves(host)


def test_report_files_exist_and_the_markdown_equals_the_json(host):
    base, data, md = load_report(fact(host)["last_sweep"]["run_id"], host.backend.host)
    png = base.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000
    groups = {(g["concurrency"], g["draft_len"]): g for g in data["selection"]["groups"]}
    assert len(groups) == len(CANDIDATES) * len(LEVELS)
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                      r"([\d.]+) \| ([\d.]+|-) \| ([\d.]+|-) \| ([\d.]+|-) \|", md, re.M)
    assert len(rows) == len(groups)
    assert "| acceptance length (engine) | acceptance length (client-side estimate) |" in md
    for conc, dl, runs, failed, flagged, med, mad, _rel, score, speedup, acc, est in rows:
        g = groups[(int(conc), int(dl))]
        # a run the client may have limited would be left out (flagged) and leave too few runs
        assert (int(runs) + int(flagged), int(failed)) == (g["runs"] + g["flagged_runs"], g["failed_runs"]) == (3, 0)
        assert float(med) == pytest.approx(g["median"], abs=0.051)
        assert float(mad) == pytest.approx(g["mad"], abs=0.051)
        assert float(score) == pytest.approx(g["score"], abs=0.051)
        assert float(speedup) == pytest.approx(g["speedup"], abs=0.0006)
        assert (acc == "-") == (g["acceptance_length"] is None)
        # the demo's EAGLE-3 profile gets an acceptance figure: the client-side estimate
        assert est != "-" and float(est) == pytest.approx(g["acceptance_length_estimate"], abs=0.0051)
    win = data["selection"]["winner"]
    assert "**Winner: draft length %d** at concurrency %d: %.1f tok/s" % (
        win["draft_len"], win["concurrency"], win["median"]) in md
    assert "acceptance length - (engine), %.2f (client-side estimate)." % win["acceptance_length_estimate"] in md
    assert "- Sampling: eagle3 on TensorRT-LLM 1.2.0rc6 decodes greedily" in md
    # the local fact keeps the winner's figures, for the fleet view
    assert fact(host)["last_sweep"]["winner"]["acceptance_length_estimate"] == win["acceptance_length_estimate"]
    # every repetition of every candidate at every level is in the JSON
    runs = [m for m in data["selection"]["measurements"] if m.get("repetition") is not None]
    assert len(runs) == len(CANDIDATES) * len(LEVELS) * VARS["draft_sweep_repetitions"]
    # phases: one restart per candidate plus the apply, and times that add up
    steps = [p["step"] for p in data["phases"]]
    assert steps == ["candidate"] * len(CANDIDATES) + ["apply"]
    total = sum(data["phase_totals"][k] for k in ("restart_s", "warmup_s", "measure_s"))
    assert 0 < total <= data["wall_s"]


def test_a_temperature_the_engine_ignores_is_refused_before_anything_changes(host):
    before = checksums(host)
    started = host.run("docker inspect -f '{{.State.StartedAt}}' specdec-%s" % NAME).stdout
    out = playbook("draft_sweep_temperature=0.7", "draft_sweep_run_id=molecule-refused", "draft_sweep_force=true",
                   rc=2)
    assert ("draft_sweep: instance %s: draft_sweep_temperature=0.7 is not allowed here: eagle3 on TensorRT-LLM "
            "1.2.0rc6 decodes greedily" % NAME) in out
    assert "Allowed: draft_sweep_temperature=0" in out and "draft_sweep_allow_greedy_fallback=true" in out
    assert checksums(host) == before
    assert host.run("docker inspect -f '{{.State.StartedAt}}' specdec-%s" % NAME).stdout == started
    assert not host.file(STATE).exists
    assert not (PROJECT / "reports" / "molecule-refused").exists()


@pytest.fixture(scope="module")
def interrupted():
    """A sweep without apply killed while it serves its first candidate; the next run restores what it
    recorded. That next run is itself a sweep without apply, told to go on at a temperature the engine
    ignores ([2] at [1], no measured baseline), at -vvvv with --diff: the engine's environment carries
    the scenario's secret through both runs' restarts and restores."""
    host = lab_host()
    before, applied = checksums(host), fact(host)["applied"]
    started = host.run("docker inspect -f '{{.State.StartedAt}}' specdec-%s" % NAME).stdout
    assert SECRET in host.file(FILES[1]).content_string  # the premise: the secret is in the environment
    proc = playbook("draft_sweep_apply=false", "draft_sweep_run_id=molecule-killed", "draft_sweep_force=true",
                    '{"draft_sweep_draft_lens": [2], "draft_sweep_concurrency": [1]}', background=True)
    try:
        deadline = time.monotonic() + 180
        # kill the controller (no always block runs) while the first candidate is being served
        while time.monotonic() < deadline:
            if host.file(STATE).exists and host.file(FILES[0]).sha256sum != before[FILES[0]]:
                break
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            time.sleep(0.5)
        else:
            pytest.fail("the sweep never served a candidate")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        killed_out = proc.communicate()[0]
    left = {"state": host.file(STATE).exists, "checksums": checksums(host)}
    out = playbook("draft_sweep_apply=false", "draft_sweep_run_id=molecule-recovered", "draft_sweep_force=true",
                   "draft_sweep_temperature=0.7", "draft_sweep_allow_greedy_fallback=true",
                   '{"draft_sweep_draft_lens": [2], "draft_sweep_concurrency": [1], "draft_sweep_baseline": false}',
                   flags=("-vvvv", "--diff"))
    return {"before": before, "applied": applied, "started": started, "left": left, "killed_out": killed_out,
            "out": out}


def test_a_sweep_without_apply_restores_the_running_config_byte_for_byte(interrupted, host):
    assert checksums(host) == interrupted["before"]
    assert host.run("docker inspect -f '{{.State.StartedAt}}' specdec-%s" % NAME).stdout != interrupted["started"]
    mine = fact(host)
    assert mine["applied"] == interrupted["applied"]
    assert mine["last_sweep"]["run_id"] == "molecule-recovered"
    _, data, md = load_report("molecule-recovered", host.backend.host)
    assert data["applied"] is False and [p["step"] for p in data["phases"]][-1] == "restore"
    assert "was restored" in md
    assert not host.file(STATE).exists
    assert host.service("specdec-%s" % NAME).is_running
    assert serves(host)


def test_a_sweep_at_vvvv_with_diff_shows_a_secret_nowhere_but_in_the_env_file(interrupted, host):
    """The engine's environment carries a secret through the sweep's restarts and the restore."""
    out = interrupted["out"]
    assert len(out) > 100000 and "engine.env" in out  # -vvvv printed the tasks, the env file was written
    assert SECRET not in out
    base, _, _ = load_report("molecule-recovered", host.backend.host)
    for path in base.parent.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    env_file = "/etc/specdec/%s/engine.env" % NAME
    found = host.run("grep -rlsF %s /etc/specdec /etc/ansible/facts.d /etc/systemd/system /var/lib/specdec /root /tmp"
                     % SECRET).stdout.split()
    assert found == [env_file]  # restored with the inventory's environment: the 0600 env file, and nothing else
    assert SECRET not in host.check_output("ps -eo args")


def test_an_interrupted_sweep_is_restored_by_the_next_run(interrupted, host):
    assert SECRET not in interrupted["killed_out"]
    assert interrupted["left"]["state"]
    assert interrupted["left"]["checksums"] != interrupted["before"]
    out = interrupted["out"]
    assert "run molecule-killed of %s did not finish; restoring the instance it recorded" % NAME in out
    assert checksums(host) == interrupted["before"]
    assert not host.file(STATE).exists
    assert host.service("specdec-%s" % NAME).is_running
    assert serves(host)


def test_a_sweep_told_to_go_on_flags_the_temperature_in_the_report(interrupted, host):
    out = interrupted["out"]
    assert "draft_sweep_temperature=0.7 is not honoured" in out
    assert checksums(host) == interrupted["before"]
    _, data, md = load_report("molecule-recovered", host.backend.host)
    assert data["workload"]["temperature"] == 0.7
    assert data["sampling"]["honoured"] is False and data["sampling"]["greedy_only"] is True
    assert data["sampling"]["warning"].startswith("draft_sweep_temperature=0.7 is not honoured: eagle3 on "
                                                  "TensorRT-LLM 1.2.0rc6 decodes greedily")
    assert md.split("\n")[2].startswith("> **Warning:** draft_sweep_temperature=0.7 is not honoured")
    assert "temperature 0.7 (not honoured: greedy decoding was measured)" in md
    (group,) = data["selection"]["groups"]
    assert group["acceptance_length"] is None and group["acceptance_length_estimate"] == pytest.approx(3.0, rel=0.01)
    # no measured baseline: the output-equivalence gate still served it, for its probe alone
    assert data["equivalence"]["status"] == "passed"
    assert data["equivalence"]["baseline"]["measured"] is False and data["equivalence"]["baseline"]["probed"] is True
    # the restore of the interrupted run comes before the sweep and is none of its phases
    assert [p["step"] for p in data["phases"]] == ["baseline_probe", "candidate", "restore"]
    assert "served for the probe only" in md
    assert serves(host)


def env_lines(host):
    return [line for line in host.file(FILES[1]).content_string.splitlines() if line and not line.startswith("#")]


def greedy(host, max_tokens=12):
    out = host.check_output("curl -sf -m 10 http://127.0.0.1:%d/v1/chat/completions -H 'Content-Type: application/json' "
                            "-d '{\"model\": \"x\", \"temperature\": 0, \"max_tokens\": %d, "
                            "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}'"
                            % (INSTANCE["port"], max_tokens))
    return json.loads(out)["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def diverged(interrupted):
    """A sweep of the instance with the emulator's fault injection at the length that runs, given as
    draft_sweep_instances: the inventory's definition is left with the fault in its environment."""
    host = lab_host()
    before, applied = checksums(host), fact(host)["applied"]
    # the length that runs: the analytic optimum, unless a busy machine starved the client measuring it
    optimum = applied["max_draft_len"]
    others = [n for n in (optimum - 1, optimum + 1) if n >= 1]
    # the environment as the inventory defines it, the scenario's secret with it
    env_before = env_lines(host)
    assert "HF_TOKEN=%s" % SECRET in env_before
    reference = greedy(host)
    knob = {"SPECDEC_EMU_CORRUPT_SPEC_OUTPUT": "5", "SPECDEC_EMU_CORRUPT_SPEC_DRAFT_LENS": str(optimum)}
    faulty = dict(INSTANCE, env=dict(INSTANCE["env"], **knob))
    out = playbook("draft_sweep_apply=false", "draft_sweep_run_id=molecule-diverged",
                   json.dumps({"draft_sweep_instances": [faulty], "draft_sweep_concurrency": [1],
                               "draft_sweep_draft_lens": sorted(others + [optimum])}))
    return {"before": before, "applied": applied, "optimum": optimum, "others": others, "env_before": env_before,
            "reference": reference, "knob": knob, "out": out}


def test_a_candidate_whose_greedy_output_differs_is_rejected_never_picked_and_the_instance_kept(diverged, host):
    """The emulator's fault injection corrupts the text from token 5 at draft length 3, the analytic
    optimum and the length that runs: the gate rejects it before it is measured, the sweep picks
    another length, applies nothing and serves the running definition again."""
    before, applied, optimum, others = diverged["before"], diverged["applied"], diverged["optimum"], diverged["others"]
    env_before, knob, out = diverged["env_before"], diverged["knob"], diverged["out"]
    assert "draft length %d is rejected by the output-equivalence gate (diverged): prompt 0: first divergent " \
           "token at index 5 (identical output required)" % optimum in out
    base, data, md = load_report("molecule-diverged", host.backend.host)
    eq = data["equivalence"]
    assert eq["status"] == "rejected" and eq["rejected"] == [optimum] and eq["passed"] == others
    (bad,) = [c for c in eq["candidates"] if c["draft_len"] == optimum]
    assert bad["verdict"] == "diverged" and bad["eligible"] is False and bad["unit"] == "token"
    assert bad["diverged"] == bad["prompts"] == eq["probe"]["prompts"]
    for row in bad["per_prompt"]:
        assert row["unit"] == "token" and row["first_divergence"] == 5 and row["matched_prefix"] == 5
        assert row["passed"] is False and row["baseline_excerpt"] != row["candidate_excerpt"]
        # the excerpts start a little before the divergence and agree up to it
        assert row["baseline_excerpt"].startswith("...") and row["candidate_excerpt"].startswith("...")
        assert row["baseline_excerpt"].split()[:4] == row["candidate_excerpt"].split()[:4]
    # never measured, never picked although it is the fastest
    groups = {g["draft_len"]: g for g in data["selection"]["groups"]}
    assert groups[optimum]["status"] == "not_equivalent" and groups[optimum]["runs"] == 0
    assert data["selection"]["winner"]["draft_len"] != optimum
    assert data["selection"]["params"]["excluded"] == [optimum]
    assert [p.get("rejected", False) for p in data["phases"] if p["step"] == "candidate"] == [False, False, True, False]
    assert "Gate: **rejected**." in md and "Rejected (never picked, never applied): draft length %d." % optimum in md
    assert "| %d | token | 5 | no |" % bad["per_prompt"][0]["index"] in md
    # nothing applied; the running definition is served again (with the variables this run was given:
    # the environment holds the injected fault, and the inventory's secret)
    assert data["applied"] is False and fact(host)["applied"] == applied
    assert fact(host)["last_sweep"]["equivalence"] == {"status": "rejected", "rejected": [optimum]}
    now = checksums(host)
    assert now[FILES[0]] == before[FILES[0]] and now[FILES[2]] == before[FILES[2]]
    env = env_lines(host)
    assert sorted(set(env) - set(env_before)) == sorted("%s=%s" % kv for kv in knob.items())
    assert host.service("specdec-%s" % NAME).is_running and serves(host)
    # a sweep of the inventory's definition serves it without the fault again: the workloads' sweep,
    # next, is one (test_the_next_sweep_serves_the_inventorys_definition_without_the_fault_again)


# Two workloads whose best draft lengths differ: the scenario's emulator accepts every draft token of a
# prompt marked [code] and only the first of one marked [prose] (SPECDEC_EMU_ACCEPTANCE_BY_PROMPT).
WORKLOADS = [
    {"name": "code", "prompts": ["[code] def parse(line):", "[code] class Cache(dict):"]},
    {"name": "prose", "prompts": ["[prose] Once upon a time", "[prose] The harbour at dawn"]},
]
WORKLOAD_LENS = [1, 2, 4]


def workload_throughput(marker):
    """{draft length: analytic tokens/s at concurrency 1} of prompts carrying `marker`."""
    env = {k: str(v) for k, v in INSTANCE["env"].items() if k != "SPECDEC_EMU_ACCEPTANCE_BY_PROMPT"}
    env["SPECDEC_EMU_ACCEPTANCE"] = json.loads(INSTANCE["env"]["SPECDEC_EMU_ACCEPTANCE_BY_PROMPT"])[marker]
    table = analytic_table(Profile.load(env, None, None), concurrencies=(1,), max_draft_len=max(WORKLOAD_LENS),
                           max_batch_size=INSTANCE["max_batch_size"])
    (entry,) = table["concurrency"].values()
    return {int(k): v["output_tok_s"] for k, v in entry["draft_len"].items() if int(k) in [0] + WORKLOAD_LENS}


@pytest.fixture(scope="module")
def workloads(diverged):
    """A sweep of two workloads, of the inventory's definition: it follows the diverged sweep, which
    left the fault in the instance's environment, and serves the inventory's definition again."""
    return playbook("draft_sweep_apply=false", "draft_sweep_run_id=molecule-workloads",
                    json.dumps({"draft_sweep_workloads": WORKLOADS, "draft_sweep_concurrency": [1],
                                "draft_sweep_draft_lens": WORKLOAD_LENS}))


def test_the_next_sweep_serves_the_inventorys_definition_without_the_fault_again(diverged, workloads, host):
    before = diverged["before"]
    now = checksums(host)
    assert now[FILES[0]] == before[FILES[0]] and now[FILES[2]] == before[FILES[2]]
    assert env_lines(host) == diverged["env_before"] and fact(host)["applied"] == diverged["applied"]
    assert greedy(host) == diverged["reference"]


def test_two_workloads_each_get_their_winner_and_the_rule_chooses_one_for_both(diverged, workloads, host):
    # the running config before the diverged sweep, the inventory's definition, byte for byte
    assert checksums(host) == diverged["before"]
    base, data, md = load_report("molecule-workloads", host.backend.host)
    sel = data["selection"]
    truth = {"code": workload_throughput("[code]"), "prose": workload_throughput("[prose]")}
    best = {}
    for name, tput in truth.items():
        ranked = sorted(tput.values(), reverse=True)
        assert ranked[0] / ranked[1] > 1.05, (name, tput)  # a clear margin, or the test would measure noise
        best[name] = max(tput, key=tput.get)
    assert best["code"] != best["prose"], best  # the premise: their winners differ
    # on a machine so busy that serve_bench flagged its own client, the best of what was measured soundly
    ok = dict((n, [g["draft_len"] for g in sel["groups"] if g["workload"] == n and g["status"] == "ok"]) for n in truth)
    assert all(g["status"] == "ok" or g["flagged_runs"] for g in sel["groups"]), sel["groups"]
    best = dict((n, max(ok[n], key=truth[n].get)) for n in truth)
    # each workload's own winner is its analytic optimum
    assert {n: w["winner"]["draft_len"] for n, w in sel["workloads"].items()} == best
    # the rule, recomputed from the report's own ratings: the smallest length within rel_tol of the best
    # lowest rating (relative to each workload's best score)
    assert sel["rule"]["name"] == "worst_case" and data["workload"]["workload_rule"] == "worst_case"
    rated = [r for r in sel["rule"]["ratings"] if r["combined"] is not None]
    assert sorted(r["draft_len"] for r in rated) == sorted(set(ok["code"]) & set(ok["prose"]))
    scores = dict(((g["workload"], g["draft_len"]), g["score"]) for g in sel["groups"] if g["status"] == "ok")
    for r in rated:
        assert r["combined"] == pytest.approx(min(r["relative"].values()), abs=1e-4)
        for name in truth:  # each rating is the length's score relative to its workload's best score
            top = max(scores[(name, d)] for d in ok[name])
            assert r["relative"][name] == pytest.approx(scores[(name, r["draft_len"])] / top, abs=1e-3)
    top = max(r["combined"] for r in rated)
    chosen = min(r["draft_len"] for r in rated if r["combined"] >= top * (1 - sel["params"]["rel_tol"]))
    assert sel["winner"]["draft_len"] == chosen
    assert set(sel["winner"]["per_workload"]) == {"code", "prose"}
    # the client-side acceptance estimate shows why: every draft token accepted on code, one on prose
    # (48 tokens after the context step's, in steps of that many tokens, the last one maybe short)
    for g in sel["groups"]:
        per_step = 1 + (g["draft_len"] if g["workload"] == "code" else min(g["draft_len"], 1))
        expected = 48.0 / math.ceil(48.0 / per_step)
        assert g["acceptance_length_estimate"] == pytest.approx(expected, rel=0.02), g
    # the fact says which rule chose, and each workload's winner
    last = fact(host)["last_sweep"]
    assert last["rule"] == "worst_case" and last["workload_winners"] == best
    # the report: a row per workload with its own winner, the ratings, the rule; a plot row per workload
    assert "## Workloads" in md and "Rule: **worst_case**" in md
    for name in truth:
        assert re.search(r"^\| %s \| 2 given \| - / - \| 49 \| 0.0 \| closed loop \| %d \|" % (name, best[name]), md, re.M), md
    assert "chosen for 2 workloads by rule worst_case" in md
    png = base.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert host.service("specdec-%s" % NAME).is_running and serves(host)


def test_a_bad_workload_is_refused_before_anything_changes(host):
    before = checksums(host)
    out = playbook("draft_sweep_run_id=molecule-badworkload",
                   json.dumps({"draft_sweep_workloads": [{"name": "code", "temperature": 3},
                                                         {"name": "code", "prompts": []}],
                               "draft_sweep_workload_rule": "best"}), rc=2)
    assert "draft_sweep_workloads: [0] (code).temperature: 3 must be from 0.0 to 2.0" in out
    assert "[1] (code).name: 'code' is used by another workload" in out
    assert "draft_sweep_workload_rule: 'best' must be worst_case, mean or workload:NAME" in out
    assert checksums(host) == before
    assert not (PROJECT / "reports" / "molecule-badworkload").exists()


def test_no_report_of_any_sweep_holds_the_secret(host):
    """Every sweep of this module, and converge's, ran with the secret in the engine's environment."""
    swept = {"molecule-recovered", "molecule-diverged", "molecule-workloads"}
    assert swept <= set(RUNS), sorted(RUNS)
    for run_id in RUNS:
        reports = PROJECT / "reports" / run_id
        if run_id in swept:
            assert len(list(reports.iterdir())) == 3, run_id  # JSON, Markdown, plot
        for path in reports.iterdir() if reports.exists() else ():
            assert SECRET.encode() not in path.read_bytes(), path
