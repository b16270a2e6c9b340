"""Verify of the real_engine scenario, after converge (fetch, serve, sweep, apply) and idempotence.

The engine is vLLM's CPU build, not the emulator: what these tests see is what vLLM does. The sweep
measures two workloads (code-like prompts, greedy; free prose, sampled) and applies the draft length
its rule chooses for both; when that is no speculation, the tests that need an engine that
speculates start a second one beside the instance. Tests run in file order.
"""

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

sys.path.insert(0, str(PROJECT / "collections"))
from ansible_collections.specdec.serve.plugins.module_utils import engine_check as EC  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as M  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_references as MR  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_schedule as SS  # noqa: E402

import test_emulator_conformance as CF  # noqa: E402  (engines started beside the instance)

VARS = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())
(INSTANCE,) = VARS["inference_server_instances"]
NAME = INSTANCE["name"]
PORT = INSTANCE["port"]
URL = "http://127.0.0.1:%d" % PORT
CANDIDATES = [0] + VARS["draft_sweep_draft_lens"]
# the workloads with prompts of their own, measured as given; the synthetic one once per input length
WORKLOADS = [w for w in VARS["draft_sweep_workloads"] if w.get("prompts")]
LENGTHS = VARS["draft_sweep_input_lengths"]
(SYNTHETIC,) = [w for w in VARS["draft_sweep_workloads"] if not w.get("prompts")]
NAMES = [w["name"] for w in WORKLOADS] + ["%s-in%d" % (SYNTHETIC["name"], n) for n in sorted(LENGTHS)]
RULE = VARS["draft_sweep_workload_rule"]
SPARE, SPARE_PORT = "specdec-speculating", 18602
MODELS = PROJECT / "lab" / ".cache" / "models"
VERSION = INSTANCE["image"].rsplit(":", 1)[1]


def fact(host):
    return json.loads(host.file("/etc/ansible/facts.d/specdec_sweep.fact").content_string)[NAME]


def load_report(run_id, host_name):
    """(JSON report, Markdown report) of a sweep."""
    base = PROJECT / "reports" / run_id / ("%s-%s" % (host_name, NAME))
    return json.loads(base.with_suffix(".json").read_text()), base.with_suffix(".md").read_text()


def get(host, path, url=URL):
    out = host.run("curl -sf -m 20 %s%s" % (url, path))
    assert out.rc == 0, out.stderr
    return out.stdout


def counters(host, url=URL):
    """vLLM's own speculative-decoding counters, summed over label sets."""
    totals = {}
    for line in get(host, "/metrics", url).splitlines():
        match = re.match(r"^(vllm:spec_decode_num_(?:drafts|draft_tokens|accepted_tokens)_total)\{[^}]*\} (\S+)$", line)
        if match:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(2))
    return totals


def own_winner(groups, rel_tol):
    """The draft length one workload's groups make the winner: the smallest whose score is within
    rel_tol of the best ok score (bench_select's rule within one workload); None if none is ok."""
    ok = [g for g in groups if g["status"] == "ok"]
    if not ok:
        return None
    best = max(g["score"] for g in ok)
    return min(g["draft_len"] for g in ok if g["score"] >= best - abs(best) * rel_tol)


@pytest.fixture(scope="module")
def speculating(host):
    """(url, draft length) of an engine that speculates: the instance when the sweep applied a draft
    length, else one started beside it with the instance's arguments and n-gram speculation."""
    applied = fact(host)["applied"]["max_draft_len"]
    if applied:
        yield URL, applied
        return
    info = CF.inspect(host, "specdec-%s" % NAME)
    args = CF.with_speculation(CF.engine_args(info))
    words = ["docker", "run", "-d", "--name", SPARE, "-p", "%d:8000" % SPARE_PORT] + CF.docker_options(info) + [
        "--entrypoint", "vllm", INSTANCE["image"], "serve", args[1]] + CF.C.serve_args(args)
    host.run("docker rm -f %s" % SPARE)
    out = host.run(" ".join(shlex.quote(w) for w in words))
    assert out.rc == 0, out.stderr
    try:
        assert CF.wait_healthy(host, SPARE_PORT), host.run("docker logs --tail 60 %s" % SPARE).stdout
        yield "http://127.0.0.1:%d" % SPARE_PORT, CF.NGRAM["num_speculative_tokens"]
    finally:
        host.run("docker rm -f %s" % SPARE)


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


def test_the_sweep_measured_every_workload_and_candidate_and_applied_the_rules_choice(host):
    mine = fact(host)
    data, dummy = load_report(mine["last_sweep"]["run_id"], host.backend.host)
    assert data["candidates"] == CANDIDATES and data["applied"] is True, data["selection"]["notes"]
    assert data["selection"]["params"]["client_limited"] == VARS["draft_sweep_client_limited"] == "count"
    # the workloads as given, the chat one sampled as it is served
    measured = dict((w["name"], w) for w in data["workload"]["workloads"])
    assert list(measured) == NAMES
    for w in WORKLOADS:
        assert measured[w["name"]]["prompts"] == w["prompts"]
        assert measured[w["name"]]["temperature"] == w["temperature"] and measured[w["name"]]["top_p"] == w.get("top_p")
    for n in LENGTHS:
        synthetic = measured["%s-in%d" % (SYNTHETIC["name"], n)]
        assert synthetic["prompts"] is None and synthetic["input_len"]["mean"] == n
        assert synthetic["temperature"] == SYNTHETIC["temperature"]
    assert data["sampling"]["error"] is None and data["sampling"]["warning"] is None, data["sampling"]
    groups = dict(((g["workload"], g["draft_len"]), g) for g in data["selection"]["groups"])
    assert sorted(groups) == sorted((n, k) for n in NAMES for k in CANDIDATES)
    for (dummy, k), g in groups.items():
        # every repetition counts, those serve_bench flagged as client-limited too (draft_sweep_client_limited)
        assert g["runs"] == VARS["draft_sweep_repetitions"] and g["failed_runs"] == 0, g
        assert 0 <= g["flagged_runs"] <= g["runs"], g
        if k == 0:
            assert g["acceptance_length"] is None
        else:
            # the real engine's own counters, read by serve_bench around each run
            assert 1.0 <= g["acceptance_length"] <= k + 1, g
    # what makes them two workloads, from the engine's counters (no timing): greedy code-like prompts
    # accept more drafts than sampled prose at every length (1.95-4.13 against 1.00-1.16 measured)
    for k in CANDIDATES[1:]:
        assert groups[("code", k)]["acceptance_length"] > groups[("chat", k)]["acceptance_length"], (k, groups)
    # what the levels chose is applied (proven as served: the next test), and the fact says which rule chose it
    served = data["served_check"]["served_draft_len"]
    assert served in CANDIDATES
    assert mine["applied"]["max_draft_len"] == served and mine["applied"]["rule"] == RULE
    unit = host.file("/etc/systemd/system/specdec-%s.service" % NAME).content_string
    if served:
        assert '\\"num_speculative_tokens\\": %d' % served in unit or '"num_speculative_tokens": %d' % served in unit
    else:  # no speculation won for both: the instance serves without it
        assert "num_speculative_tokens" not in unit and mine["applied"]["speculative"] == {"method": "none"}


def test_what_the_levels_chose_was_served_measured_as_served_and_kept_or_dropped_by_the_reports_numbers(host):
    """At three or more load levels the sweep serves the schedule the levels' winners make (or the one
    length it reduces to), measures it as served at every level, and keeps it only if it is within noise of
    the best fixed length at every level and beats every single length over them; the decision is
    recomputed here from the report's own numbers, and the engine serves what it says."""
    mine = fact(host)
    data, md = load_report(mine["last_sweep"]["run_id"], host.backend.host)
    levels = VARS["draft_sweep_concurrency"]
    assert len(levels) >= 3 and VARS["draft_sweep_apply_schedule"] is True
    sel, plan, chk = data["selection"], data["served_plan"], data["served_check"]
    assert plan == SS.schedule_plan(sel)
    # measured as served: every workload at every level, every repetition
    measured = data["served_measurements"]
    assert sorted((m["workload"], m["concurrency"]) for m in measured) == sorted((n, c) for n in NAMES for c in levels)
    assert all(len(m["runs"]) == VARS["draft_sweep_repetitions"] for m in measured), measured
    assert SS.schedule_verdict(sel, measured, plan) == chk
    # the same decision, worked out here from the medians the report holds (rule worst_case: the lowest
    # workload's ratio to its best at the level)
    assert RULE == "worst_case"
    ok = {}
    for g in sel["groups"]:
        if g["status"] == "ok":
            ok.setdefault(g["concurrency"], {}).setdefault(g["draft_len"], {})[g["workload"]] = g["median"]
    best = dict((c, dict((n, max(v[n] for v in row.values() if n in v)) for n in NAMES)) for c, row in ok.items())
    fixed = dict((c, dict((d, min(v[n] / best[c][n] for n in NAMES)) for d, v in row.items() if len(v) == len(NAMES)))
                 for c, row in ok.items())
    assert sorted(fixed) == levels
    runs = dict(((m["workload"], m["concurrency"]), sorted(r["output_throughput"] for r in m["runs"])) for m in measured)
    for lv in chk["levels"]:
        c = lv["concurrency"]
        assert dict((f["draft_len"], f["rating"]) for f in lv["fixed"]) == pytest.approx(fixed[c], abs=1e-4)
        assert lv["best_fixed_rating"] == pytest.approx(max(fixed[c].values()), abs=1e-4)
        mid = dict((n, runs[(n, c)][len(runs[(n, c)]) // 2]) for n in NAMES)  # 3 runs: the median is the middle
        assert lv["served_rating"] == pytest.approx(min(mid[n] / best[c][n] for n in NAMES), abs=1e-3)
        assert lv["within_noise"] == (lv["served_rating"] >= lv["best_fixed_rating"] * (1 - lv["tolerance"]))
        if plan["mode"] == "schedule":
            assert lv["served_draft_len"] == SS.schedule_length(plan["schedule"]["trtllm_draft_len_schedule"], c)
    def gm(xs):
        out = 1.0
        for x in xs:
            out *= x
        return out ** (1.0 / len(xs))
    over = dict((d, gm([fixed[c][d] for c in levels])) for d in fixed[levels[0]] if all(d in fixed[c] for c in levels))
    assert dict((f["draft_len"], f["rating"]) for f in chk["range"]["fixed"]) == pytest.approx(over, abs=1e-4)
    if plan["mode"] == "schedule":
        keep = (all(lv["within_noise"] for lv in chk["levels"])
                and chk["range"]["served"] > max(f["rating"] for f in chk["range"]["fixed"]))
        assert chk["keep"] == keep, chk
    else:
        # the levels agreed (or no schedule can say what they chose): that one length, kept
        assert chk["keep"] is True and chk["served_draft_len"] == plan["draft_len"]
    # what serves is what the decision says, and the fact and the Markdown report say so too
    unit = host.file("/etc/systemd/system/specdec-%s.service" % NAME).content_string
    assert ("num_speculative_tokens_per_batch_size" in unit) == chk["serve_schedule"], unit
    if chk["serve_schedule"]:
        assert mine["applied"]["speculative"]["draft_len_schedule"] == plan["schedule"]["trtllm_draft_len_schedule"]
    else:
        assert chk["served_draft_len"] == (chk["fallback_draft_len"] if not chk["keep"] else plan["draft_len"])
        assert "draft_len_schedule" not in (mine["applied"]["speculative"] or {})
    assert mine["last_sweep"]["served_check"] == dict((k, chk[k]) for k in ("mode", "keep", "served_draft_len", "reason"))
    assert "## Served, measured as served" in md and chk["reason"] in md


def test_the_sweep_records_what_it_was_measured_on(host):
    """The engine, its release, the image ID and the model the sweep measured: what serves now."""
    recorded = fact(host)["last_sweep"]["measured_on"]
    image_id = host.run("docker inspect --format '{{.Image}}' specdec-%s" % NAME).stdout.strip()
    assert recorded == {"engine": "vllm", "engine_version": VERSION, "image": INSTANCE["image"], "image_id": image_id,
                        "model": INSTANCE["model"], "draft_model": None, "host_groups": ["spark-nodes"]}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", fact(host)["last_sweep"]["finished_at"])


def test_each_workload_gets_its_winner_and_the_rule_chooses_from_the_reports_own_scores(host):
    mine = fact(host)
    last = mine["last_sweep"]
    data, md = load_report(last["run_id"], host.backend.host)
    sel = data["selection"]
    rel_tol = sel["params"]["rel_tol"]
    levels = VARS["draft_sweep_concurrency"]
    # each workload's own winner is its choice at the lowest level, recomputed from its own groups there; the
    # report and the fact agree
    low = min(levels)
    groups = dict((n, [g for g in sel["groups"] if g["workload"] == n and g["concurrency"] == low]) for n in NAMES)
    own = dict((n, own_winner(groups[n], rel_tol)) for n in NAMES)
    assert sorted(sel["workloads"]) == sorted(NAMES)  # a mapping (the report's JSON sorts its keys)
    assert dict((n, (w["winner"] or {}).get("draft_len")) for n, w in sel["workloads"].items()) == own
    assert last["workload_winners"] == own
    # greedy code-like prompts accept nearly every draft token, and every length measured 1.3-1.7x the
    # baseline in one workload (bench/real_engine/HISTORY.md): a baseline win there means speculation broke
    assert own["code"] is not None and own["code"] > 0, groups["code"]
    # the rule, recomputed from the report's own scores at every level: each length that is ok in every workload
    # is rated by its score relative to each workload's best; worst_case combines them by the lowest, and the
    # smallest length within rel_tol of the best combined rating is chosen for the level
    assert sel["rule"]["name"] == RULE == "worst_case"
    assert data["workload"]["workload_rule"] == RULE and last["rule"] == RULE and mine["applied"]["rule"] == RULE
    chosen = {}
    for c in levels:
        at = [g for g in sel["groups"] if g["concurrency"] == c]
        ok = dict((n, [g["draft_len"] for g in at if g["workload"] == n and g["status"] == "ok"]) for n in NAMES)
        scores = dict(((g["workload"], g["draft_len"]), g["score"]) for g in at if g["status"] == "ok")
        rated = [r for r in sel["rule"]["ratings"] if r["concurrency"] == c and r["combined"] is not None]
        assert sorted(r["draft_len"] for r in rated) == sorted(set.intersection(*(set(ok[n]) for n in NAMES)))
        for r in rated:
            for n in NAMES:
                top = max(scores[(n, d)] for d in ok[n])
                assert r["relative"][n] == pytest.approx(scores[(n, r["draft_len"])] / top, abs=1e-3), r
            assert r["combined"] == pytest.approx(min(r["relative"].values()), abs=1e-4), r
        top = max(r["combined"] for r in rated)
        chosen[c] = min(r["draft_len"] for r in rated if r["combined"] >= top - abs(top) * rel_tol)
    assert [e["draft_len"] for e in sel["by_concurrency"]] == [chosen[c] for c in levels]
    assert sel["winner"]["draft_len"] == chosen[low] and set(sel["winner"]["per_workload"]) == set(NAMES)
    assert last["winner"]["draft_len"] == chosen[low]
    chosen = chosen[low]
    # the Markdown report: a row per workload with its own winner, the rule, and the choice for both
    assert "## Workloads" in md and "Rule: **%s**" % RULE in md
    for w in WORKLOADS:
        row = r"^\| %s \| %d given \| - / - \| %d \| %s \| closed loop \| %s \|" % (
            w["name"], len(w["prompts"]), VARS["draft_sweep_max_tokens"], w["temperature"],
            "-" if own[w["name"]] is None else own[w["name"]])
        assert re.search(row, md, re.M), md
    for n in LENGTHS:
        name = "%s-in%d" % (SYNTHETIC["name"], n)
        row = r"^\| %s \| synthetic \| %d / - \| %d \| %s \| closed loop \| %s \|" % (
            name, n, VARS["draft_sweep_max_tokens"], SYNTHETIC["temperature"], "-" if own[name] is None else own[name])
        assert re.search(row, md, re.M), md
    assert "**Winner: draft length %d** at concurrency 1, chosen for %d workloads by rule %s" % (
        chosen, len(NAMES), RULE) in md
    print("workload winners %s; rule %s chose %d" % (own, RULE, chosen))


def test_the_report_shows_acceptance_and_speedup_at_each_input_length(host):
    data, md = load_report(fact(host)["last_sweep"]["run_id"], host.backend.host)
    levels = VARS["draft_sweep_concurrency"]
    view = data["context"]["workloads"]
    assert list(view) == [SYNTHETIC["name"]]  # code and chat have prompts of their own: measured as given
    by_level = view[SYNTHETIC["name"]]["concurrency"]
    assert sorted(int(c) for c in by_level) == levels
    groups = dict(((g["workload"], g["concurrency"], g["draft_len"]), g) for g in data["selection"]["groups"])
    assert "## Input length" in md
    for conc, level in by_level.items():
        assert [r["input_len"] for r in level["lengths"]] == sorted(LENGTHS)
        for r in level["lengths"]:
            name = "%s-in%d" % (SYNTHETIC["name"], r["input_len"])
            assert r["workload"] == name and r["baseline_median"] == groups[(name, int(conc), 0)]["median"]
            # the best speculative candidate that passed the checks, recomputed from the report's own groups
            ok = [g for (n, c, d), g in groups.items() if n == name and c == int(conc) and d and g["status"] == "ok"]
            if not ok:
                assert r["draft_len"] is None and r["paid"] is False, r
                continue
            best = max(ok, key=lambda g: (g["speedup"], -g["draft_len"]))
            assert (r["draft_len"], r["speedup"], r["median"]) == (best["draft_len"], best["speedup"], best["median"])
            # the engine's own acceptance at that length
            assert r["acceptance_length"] == best["acceptance_length"] and 1.0 <= r["acceptance_length"] <= r["draft_len"] + 1
            assert r["paid"] is (best["speedup"] > 1.0)
        paid = [r["paid"] for r in level["lengths"]]
        beyond = (level["lengths"][0]["input_len"] if paid == [True, False] else None)
        assert level["stopped_paying_beyond"] == beyond and level["never_paid"] is (paid == [False, False]), level
        # the Markdown report: the verdict and a row per length
        verdict = ("**speculation stopped paying beyond %d input tokens**" % beyond if beyond is not None else
                   "**speculation paid at no input length**" if level["never_paid"] else
                   "speculation paid at every input length measured")
        assert "Workload `%s`, concurrency %s: %s" % (SYNTHETIC["name"], conc, verdict) in md, md
        for r in level["lengths"]:
            assert re.search(r"^\| %d \| [\d.]+ \| %s \|" % (r["input_len"], "-" if r["draft_len"] is None
                                                                else r["draft_len"]), md, re.M), md
    print("per input length: %s" % json.dumps(by_level, sort_keys=True))


def test_an_engine_mode_the_engine_refuses_is_reported_with_its_message_and_the_sweep_goes_on(host):
    """vLLM's adaptive verification, asked for beside the fixed lengths: the lab's CPU build refuses it in the
    engine's check in its image (before any restart), the report and the fact say "refused by the engine" with the
    engine's own message, and the sweep selected, applied and recorded the fixed lengths' choice."""
    last = fact(host)["last_sweep"]
    data, md = load_report(last["run_id"], host.backend.host)
    (mode,) = data["engine_modes"]
    assert (mode["mode"], mode["status"], mode["outcome"], mode["kept"]) == (
        "adaptive_verification", "refused", "refused by the engine", False), mode
    assert mode["draft_len"] == max(VARS["draft_sweep_draft_lens"])
    assert mode["message"].startswith("instance '%s': vLLM %s in image %s" % (NAME, VERSION, INSTANCE["image"]))
    assert "does not support: adaptive draft verification" in mode["message"], mode["message"]
    assert "## Engine modes" in md
    assert "| vLLM's adaptive verification | %d | refused by the engine | refused by the engine: instance '%s'" % (
        mode["draft_len"], NAME) in md, md
    assert [(m["mode"], m["status"], m["kept"]) for m in last["engine_modes"]] == [
        ("adaptive_verification", "refused", False)]
    # its step is in the sweep's time, failed; every candidate before it was measured and a winner applied
    (phase,) = [p for p in data["phases"] if p["step"] == "engine_mode"]
    assert phase["failed"] is True and phase["mode"] == "adaptive_verification"
    assert data["applied"] is True and data["selection"]["winner"] is not None
    applied = fact(host)["applied"]["speculative"]
    assert "enable_adaptive_verification" not in json.dumps(applied)
    assert "adaptive" not in host.file("/etc/systemd/system/specdec-%s.service" % NAME).content_string


def prefix_cache_counters(host):
    """(prompt tokens the engine looked up in its prefix cache, tokens it found), summed over label sets."""
    totals = {}
    for line in get(host, "/metrics").splitlines():
        match = re.match(r"^vllm:prefix_cache_(queries|hits)_total(?:\{[^}]*\})? (\S+)$", line)
        if match:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(2))
    assert set(totals) == {"queries", "hits"}, "the engine exports no prefix-cache counters"
    return totals["queries"], totals["hits"]


@pytest.mark.parametrize("allowed", [False, True], ids=["tagged", "prefix_cache-allowed"])
def test_repeated_prompts_are_not_served_from_the_prefix_cache_unless_the_workload_allows_it(host, allowed):
    """serve_bench against the real engine (its prefix cache on, vLLM's default), one long prompt sent four times
    in a row: by default each request starts with a tag of its own and the engine finds next to nothing of it in
    its cache (a chat template's tokens before the prompt at most); with prefix_cache allowed the last three are
    replays of the first, and the engine's own counters say so."""
    prompt = " ".join(["the quiet harbour town woke slowly as fishing boats came home"] * 20)
    queries, hits = prefix_cache_counters(host)
    result = ansible_module("specdec.serve.serve_bench", {
        "url": URL, "prompts": [prompt], "num_requests": 4, "concurrency": 1, "warmup_requests": 0,
        "repetitions": 1, "max_tokens": 2, "spec_metrics": "none", "prefix_cache": allowed})
    assert result["prefix_cache"] is allowed and result["runs"][0]["completed"] == 4, result
    queried, found = (a - b for a, b in zip(prefix_cache_counters(host), (queries, hits)))
    prompt_tokens = result["runs"][0]["prompt_tokens"]
    assert queried >= prompt_tokens * 0.9, (queried, prompt_tokens)
    if allowed:
        assert found >= queried * 0.6, (found, queried)
    else:
        assert found <= queried * 0.1, (found, queried)


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w["name"] for w in WORKLOADS])
def test_serve_bench_acceptance_agrees_with_the_engine_counters_over_the_same_window(host, speculating, workload):
    url, dummy = speculating
    before = counters(host, url)
    args = {"url": url, "model": INSTANCE["served_model_name"], "concurrency": 1, "num_requests": 4,
            "warmup_requests": 0, "max_tokens": 48, "ignore_eos": True, "spec_metrics": "vllm",
            "prompts": workload["prompts"], "temperature": workload["temperature"], "include_requests": True}
    if workload.get("top_p") is not None:
        args["top_p"] = workload["top_p"]
    result = ansible_module("specdec.serve.serve_bench", args)
    after = counters(host, url)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    drafts = delta["vllm:spec_decode_num_drafts_total"]
    accepted = delta["vllm:spec_decode_num_accepted_tokens_total"]
    assert drafts > 0
    (run,) = result["runs"]
    spec = run["spec_decode"]
    assert spec["available"] is True
    assert spec["num_drafts"] == drafts and spec["num_accepted_tokens"] == accepted
    assert spec["acceptance_length"] == pytest.approx(1 + accepted / drafts, abs=5.1e-5)  # reported to 4 decimals
    # the client-side estimate is the tokens after each request's first over the chunks that carried
    # them (ignore_eos: every request makes max_tokens), of the requests it can count: those with a
    # usage count and at least two chunks (a busy host can deliver a whole answer in one chunk)
    assert run["completed"] == args["num_requests"]
    after_first = run["completed"] * (args["max_tokens"] - 1)
    counted = [r for r in run["request_records"]
               if r["ok"] and r["usage_reported"] and r["chunks"] >= 2 and r["output_tokens"] >= 2]
    assert counted, run["request_records"]
    chunks = run["decoding_steps_counted"]
    assert chunks == sum(r["chunks"] - 1 for r in counted)
    estimate = result["summary"]["acceptance_length_estimate"]["median"]
    assert estimate >= 1.0 and estimate == pytest.approx(sum(r["output_tokens"] - 1 for r in counted) / chunks,
                                                         abs=5.1e-5)
    if len(counted) < run["completed"]:
        return  # the engine's counters cover every request, the estimate only those it counted
    # the decoding steps that made those tokens: every step makes one token plus the drafts it accepted
    # (a request's last step may accept drafts past max_tokens, which vLLM counts too)
    steps = after_first - accepted
    # the stream never shows more steps than the engine took: vLLM sends one chunk per step, and merges
    # into one chunk the steps its HTTP server has not sent yet, which a busy host makes happen
    assert chunks <= steps + run["completed"] * dummy, (chunks, steps)
    merged = steps - chunks
    print("%s: %d steps, %d chunks, estimate %.4f, engine %.4f" % (workload["name"], steps, chunks, estimate,
                                                                   1 + accepted / drafts))
    if merged > 0.05 * steps:
        return  # the estimate is high by steps/chunks, the merge's doing: the bound above is what holds
    # every step its own chunk: with greedy code-like prompts nearly every step has an n-gram match, so
    # vLLM counts a draft on nearly every step and the two agree; on sampled prose many steps have none
    # (82 of 164 in one run), so the estimate is lower, and equals the tokens over the steps
    if workload["temperature"] == 0:
        assert estimate == pytest.approx(1 + accepted / drafts, rel=0.1)
    else:
        assert estimate == pytest.approx(after_first / steps, rel=0.1)


def test_the_engine_log_reports_the_same_speculation_as_the_metrics(host):
    data, dummy = load_report(fact(host)["last_sweep"]["run_id"], host.backend.host)
    log = host.run("journalctl -u specdec-%s --no-pager -o cat" % NAME).stdout
    lines = re.findall(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+).*Avg Draft acceptance rate: ([\d.]+)%",
                       log)
    assert lines, log[-3000:]
    for mean, rate in lines:
        # the unit's journal holds every candidate the sweep served, the longest included
        assert 1.0 <= float(mean) <= max(CANDIDATES) + 1
        assert 0.0 <= float(rate) <= 100.0
    # the journal saw greedy decoding (the code workload, the equivalence probes) accept more drafts than
    # the sampled chat workload ever did
    chat = [g["acceptance_length"] for g in data["selection"]["groups"] if g["workload"] == "chat" and g["draft_len"]]
    assert max(float(mean) for mean, dummy in lines) > max(chat), (lines, chat)


def test_the_monitoring_queries_read_what_the_real_engine_serves(host, speculating):
    """Every vLLM metric the monitoring role's rules and dashboard read, with every label they use, is
    on the real engine's /metrics (after the traffic above, with speculation on). The scrape adds the
    target's labels (host, engine_instance, engine) and job and instance; those are not the engine's."""
    url, dummy = speculating
    served = MR.exposition_labels(get(host, "/metrics", url))
    dashboard = json.loads((PROJECT / "roles" / "monitoring" / "files" / "grafana" / "specdec-dashboard.json").read_text())
    refs = MR.metric_references(MR.query_expressions(R.rules({}), dashboard), "vllm:")
    # and any vLLM name written anywhere else in the role (the exporter reads TensorRT-LLM only)
    for path in sorted(p for p in (PROJECT / "roles" / "monitoring").rglob("*") if p.is_file()):
        for name in re.findall(r"(?<![\w:])(vllm:[A-Za-z_][\w:]*)", path.read_text(errors="replace")):
            refs["names"].setdefault(name, [])
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in refs["names"], refs  # the check sees the rules
    scrape = M.scrape_config({NAME: {"inference_server_instances": [INSTANCE]}}, {"spark-nodes": [NAME]}, "m", {})
    (job,) = [j for j in scrape["scrape_configs"] if j["job_name"] == "specdec-vllm"]
    provided = {"job", "instance"} | set(k for c in job["static_configs"] for k in c["labels"])
    assert MR.unserved(refs, served, provided) == [], (refs, served)


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
    applied = mine["applied"]["max_draft_len"]
    if applied:
        assert row["speculative"] == "ngram" and int(row["draft_len"]) == applied
    else:
        assert row["speculative"] in ("none", "", None) and row["draft_len"] is None
    # the sweep's winner (the rule's choice for both workloads) and its figures: per workload, and as
    # one figure the lowest workload's acceptance (what live traffic should reach; none without speculation)
    winner = mine["last_sweep"]["winner"]
    served = "schedule from draft %d" % applied if mine["last_sweep"]["served_check"]["mode"] == "schedule" and \
        mine["last_sweep"]["served_check"]["keep"] else "draft %d" % applied
    assert row["sweep"].startswith(served) and mine["last_sweep"]["run_id"] in row["sweep"]
    # what the sweep measured is what serves, and when it measured it
    assert row["tuned_on"] == "as serving" and row["tuned_drift"] == []
    assert row["verified_at"] == mine["last_sweep"]["finished_at"]
    assert set(winner["per_workload"]) == set(NAMES)
    for key in ("acceptance_length", "acceptance_length_estimate"):
        values = [f[key] for f in winner["per_workload"].values() if f[key] is not None]
        assert winner[key] == (min(values) if values else None), (key, winner)
    assert row["sweep_acceptance_length"] == winner["acceptance_length"]
    assert row["sweep_acceptance_estimate"] == winner["acceptance_length_estimate"]


def test_instances_given_on_the_command_line_keep_the_applied_winner(host, tmp_path):
    """deploy.yml with the instance as an extra var (-e @file, as an operator hands a changed list) plans
    from it and keeps the draft length the sweep applied, as from the inventory: in check mode nothing
    would change. The extra var names a draft length no candidate had (3), same method and model; were
    it served as given, the engine's arguments and with them the unit would change. A winner of no
    speculation (the rule may choose it: n-gram costs on sampled prose) is kept the same way."""
    assert fact(host)["applied"]["swept"] == {"method": "ngram", "draft_model": None}
    given = dict(INSTANCE, speculative=dict(INSTANCE["speculative"], max_draft_len=3))
    extra = tmp_path / "instances.json"
    extra.write_text(json.dumps({"inference_server_instances": [given]}))
    proc = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "deploy.yml"), "--check", "--diff",
         "-e", "@%s" % extra],
        env=dict({k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"},  # molecule forces colour
                 ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1"),
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    recap = re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", plain, re.M)
    assert recap and all(c == "0" for c in recap), proc.stdout[-3000:]


def deploy(tmp_path, instance, *args):
    """deploy.yml with the instance as an extra var, its output as JSON: (rc, result document)."""
    extra = tmp_path / "instances.json"
    extra.write_text(json.dumps({"inference_server_instances": [instance]}))
    proc = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "deploy.yml"), "-e", "@%s" % extra]
        + list(args),
        env=dict({k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"},
                 ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                 ANSIBLE_STDOUT_CALLBACK="json"),
        capture_output=True, text=True, timeout=900, check=False)
    document, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])
    return proc.returncode, document


def task_result(document, name):
    """The host's result of the task of that name (the last run of it)."""
    found = [h for play in document["plays"] for t in play["tasks"] if t["task"]["name"].split(" : ", 1)[-1] == name
             for h in t["hosts"].values()]
    assert found, "no task %r" % name
    return found[-1]


ENGINE_CHECK = "Ask the engine in each image whether it accepts its instance's configuration"


def test_vllm_itself_refuses_what_the_tables_accept_and_the_engine_keeps_serving(host, tmp_path):
    """An extra vLLM option that the controller passes through (vLLM's CLI options are not tabled)
    is refused by vLLM's own parser in a throw-away container of the image, before any file or unit
    changes: the play fails with vLLM's message and the running engine keeps serving, not restarted."""
    started = host.run("systemctl show -p ActiveEnterTimestampMonotonic specdec-%s.service" % NAME).stdout
    given = dict(INSTANCE, extra_args=INSTANCE["extra_args"] + ["--no-such-vllm-option"])
    rc, document = deploy(tmp_path, given)
    assert rc != 0
    result = task_result(document, ENGINE_CHECK)
    (failed,) = [r for r in result["results"] if r.get("failed")]
    assert failed["msg"].startswith("instance '%s': vLLM %s in image %s (sha256:" % (NAME, VERSION, INSTANCE["image"]))
    assert "unrecognized arguments: --no-such-vllm-option" in failed["msg"], failed["msg"]
    assert "the running engine keeps serving" in failed["msg"]
    assert host.run("systemctl show -p ActiveEnterTimestampMonotonic specdec-%s.service" % NAME).stdout == started
    assert "--no-such-vllm-option" not in host.file("/etc/systemd/system/specdec-%s.service" % NAME).content_string
    assert json.loads(get(host, "/v1/models"))["data"][0]["id"] == INSTANCE["served_model_name"]


def test_an_unchanged_instance_is_not_checked_again(host, tmp_path):
    """The served configuration was checked when it was applied: a second deploy of the same image and
    configuration answers from the host's cache (image ID + configuration digest) and changes nothing."""
    rc, document = deploy(tmp_path, INSTANCE)
    assert rc == 0
    (result,) = task_result(document, ENGINE_CHECK)["results"]
    assert result["cached"] is True and result["changed"] is False, result
    assert "accepted this configuration before (cache hit" in result["msg"]
    cache = host.file("/var/lib/specdec/engine-checks/" + EC.cache_name(result["image_ref"], result["digest"]))
    assert cache.exists and json.loads(cache.content_string)["digest"] == result["digest"]
    assert document["stats"][host.backend.host]["changed"] == 0
