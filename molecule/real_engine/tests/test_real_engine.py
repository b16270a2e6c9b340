"""Verify of the real_engine scenario, after converge (fetch, serve, sweep, apply) and idempotence.

The engine is vLLM's CPU build, not the emulator: what these tests see is what vLLM does. Tests run
in file order.
"""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

VARS = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())
(INSTANCE,) = VARS["inference_server_instances"]
NAME = INSTANCE["name"]
PORT = INSTANCE["port"]
URL = "http://127.0.0.1:%d" % PORT
CANDIDATES = [0] + VARS["draft_sweep_draft_lens"]
MODELS = PROJECT / "lab" / ".cache" / "models"
VERSION = INSTANCE["image"].rsplit(":", 1)[1]


def fact(host):
    return json.loads(host.file("/etc/ansible/facts.d/specdec_sweep.fact").content_string)[NAME]


def load_report(run_id, host_name):
    base = PROJECT / "reports" / run_id / ("%s-%s" % (host_name, NAME))
    return json.loads(base.with_suffix(".json").read_text())


def get(host, path):
    out = host.run("curl -sf -m 20 %s%s" % (URL, path))
    assert out.rc == 0, out.stderr
    return out.stdout


def counters(host):
    """vLLM's own speculative-decoding counters, summed over label sets."""
    totals = {}
    for line in get(host, "/metrics").splitlines():
        match = re.match(r"^(vllm:spec_decode_num_(?:drafts|draft_tokens|accepted_tokens)_total)\{[^}]*\} (\S+)$", line)
        if match:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(2))
    return totals


def ansible_module(module, args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run(["ansible", "-i", INVENTORY, "spark-nodes", "-m", module, "-a", json.dumps(args)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the JSON document, without what other enabled callbacks print after it (profile_tasks' recap)
    document, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])
    (result,) = [h for play in document["plays"] for t in play["tasks"] for h in t["hosts"].values()]
    return result


def test_the_model_came_from_the_hub_stand_in_byte_for_byte(host):
    for repo in ("specdec-lab/tiny-llama",):
        local = MODELS / repo.split("/")[1]
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            remote = host.file("/var/lib/specdec/models/%s/%s" % (repo, path.relative_to(local)))
            assert remote.exists, path
            assert remote.sha256sum == hashlib.sha256(path.read_bytes()).hexdigest(), path


def test_the_real_engine_runs_under_systemd_and_answers(host):
    assert host.service("specdec-%s" % NAME).is_running
    image = host.run("docker inspect -f '{{.Config.Image}}' specdec-%s" % NAME).stdout.strip()
    assert image.startswith("sha256:") or image == INSTANCE["image"]
    assert json.loads(get(host, "/version")) == {"version": VERSION}
    models = json.loads(get(host, "/v1/models"))
    assert [m["id"] for m in models["data"]] == [INSTANCE["served_model_name"]]
    body = json.dumps({"model": INSTANCE["served_model_name"], "prompt": "def main(", "max_tokens": 8,
                       "temperature": 0})
    out = host.run("curl -sf -m 60 %s/v1/completions -H 'Content-Type: application/json' -d '%s'" % (URL, body))
    assert out.rc == 0 and json.loads(out.stdout)["usage"]["completion_tokens"] == 8


def test_the_sweep_measured_every_candidate_and_applied_its_winner(host):
    mine = fact(host)
    data = load_report(mine["last_sweep"]["run_id"], host.backend.host)
    assert data["candidates"] == CANDIDATES and data["applied"] is True
    groups = {g["draft_len"]: g for g in data["selection"]["groups"]}
    assert sorted(groups) == CANDIDATES
    for k, g in groups.items():
        # a run serve_bench flagged as client-limited is left out of the selection (flagged_runs)
        assert g["runs"] + g["flagged_runs"] == VARS["draft_sweep_repetitions"] and g["failed_runs"] == 0, g
        if k == 0:
            assert g["acceptance_length"] is None
        else:
            # the real engine's own counters, read by serve_bench around each run
            assert 1.0 <= g["acceptance_length"] <= k + 1, g
    winner = data["selection"]["winner"]["draft_len"]
    # on this model n-gram drafts are mostly accepted and every length measured 1.3-1.7x the baseline
    # (docs/PERFORMANCE.md): a baseline win means speculation broke, not noise
    assert winner in CANDIDATES and winner > 0, groups
    assert mine["applied"]["max_draft_len"] == winner
    unit = host.file("/etc/systemd/system/specdec-%s.service" % NAME).content_string
    assert '\\"num_speculative_tokens\\": %d' % winner in unit or '"num_speculative_tokens": %d' % winner in unit


def test_serve_bench_acceptance_agrees_with_the_engine_counters_over_the_same_window(host):
    assert fact(host)["applied"]["max_draft_len"] > 0
    before = counters(host)
    result = ansible_module("specdec.serve.serve_bench", {
        "url": URL, "model": INSTANCE["served_model_name"], "concurrency": 1,
        "num_requests": 4, "warmup_requests": 0, "max_tokens": 48, "ignore_eos": True, "spec_metrics": "vllm"})
    after = counters(host)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    drafts = delta["vllm:spec_decode_num_drafts_total"]
    accepted = delta["vllm:spec_decode_num_accepted_tokens_total"]
    assert drafts > 0
    (run,) = result["runs"]
    spec = run["spec_decode"]
    assert spec["available"] is True
    assert spec["num_drafts"] == drafts and spec["num_accepted_tokens"] == accepted
    assert spec["acceptance_length"] == pytest.approx(1 + accepted / drafts, abs=5.1e-5)  # reported to 4 decimals
    # the client-side estimate, from the stream alone, describes the same decoding steps
    assert result["summary"]["acceptance_length_estimate"]["median"] == pytest.approx(1 + accepted / drafts, rel=0.1)


def test_the_engine_log_reports_the_same_speculation_as_the_metrics(host):
    assert fact(host)["applied"]["max_draft_len"] > 0
    log = host.run("journalctl -u specdec-%s --no-pager -o cat" % NAME).stdout
    lines = re.findall(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+).*Avg Draft acceptance rate: ([\d.]+)%",
                       log)
    assert lines, log[-3000:]
    for mean, rate in lines:
        # the unit's journal holds every candidate the sweep served, the longest included
        assert 1.0 <= float(mean) <= max(CANDIDATES) + 1
        assert 0.0 <= float(rate) <= 100.0


def test_the_fleet_view_shows_the_real_engine_and_its_sweep(host, tmp_path):
    proc = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "health.yml"),
         "-e", "fleet_view_report_dir=%s" % tmp_path],
        env=dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1"),
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (row,) = json.loads((tmp_path / "fleet.json").read_text())["rows"]
    mine = fact(host)
    assert row["health"] == "ready", row
    assert row["image"] == INSTANCE["image"] and row["engine"] == "vllm %s" % VERSION
    assert row["speculative"] == "ngram" and int(row["draft_len"]) == mine["applied"]["max_draft_len"]
    # the sweep's figures for its winner, the engine's acceptance beside the client-side estimate
    winner = mine["last_sweep"]["winner"]
    assert row["sweep_acceptance_length"] == winner["acceptance_length"]
    assert row["sweep_acceptance_estimate"] == winner["acceptance_length_estimate"]
