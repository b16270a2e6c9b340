"""The output-equivalence gate: comparison, tolerance, verdicts and the report section."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select
from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import (
    EquivalenceError, candidate_verdict, compare_output, first_divergence)
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError
from sweep_decisions import equivalence_summary, equivalence_verdict, settings

WORDS = [" alpha", " beta", " gamma", " delta", " eps", " zeta", " eta", " theta", " iota", " kappa"]


def out(index, tokens, text=None, error=None, with_tokens=True, count=None):
    if error:
        return {"index": index, "text": None, "tokens": None, "error": error, "completion_tokens": None}
    return {"index": index, "text": "".join(tokens) if text is None else text,
            "tokens": list(tokens) if with_tokens else None, "error": None,
            "completion_tokens": len(tokens) if count is None else count}


def probe(*outputs):
    return {"outputs": list(outputs), "unit": "token"}


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2     # a strict prefix diverges at its end
    assert first_divergence("abc", "abd") == 2
    assert first_divergence([], []) is None


def test_identical_tokens_pass():
    row = compare_output(out(0, WORDS), out(0, WORDS))
    assert row["unit"] == "token" and row["identical"] and row["passed"]
    assert row["first_divergence"] is None and row["matched_prefix"] == len(WORDS)
    assert row["baseline_excerpt"] is None and row["candidate_excerpt"] is None


def test_token_divergence_names_the_token_index_with_excerpts():
    cand = WORDS[:6] + [" WRONG"] + WORDS[7:]
    row = compare_output(out(2, WORDS), out(2, cand))
    assert row["index"] == 2 and row["unit"] == "token"
    assert not row["identical"] and not row["passed"]
    assert row["first_divergence"] == 6 and row["matched_prefix"] == 6
    # four tokens before the divergence, cut with ...
    assert row["baseline_excerpt"] == "... gamma delta eps zeta eta theta iota kappa"
    assert row["candidate_excerpt"] == "... gamma delta eps zeta WRONG theta iota kappa"


def test_character_mode_when_either_side_has_no_tokens():
    row = compare_output(out(0, WORDS, with_tokens=False), out(0, WORDS[:3] + [" betx"] + WORDS[4:]))
    assert row["unit"] == "character"
    text = "".join(WORDS)
    assert row["first_divergence"] == text.index(" delta") + 1  # " d" against " b"
    assert row["baseline_length"] == len(text)


def test_min_prefix_tolerates_a_late_divergence_but_not_an_early_one():
    late = WORDS[:8] + [" x", " y"]
    early = WORDS[:2] + [" x"] + WORDS[3:]
    assert compare_output(out(0, WORDS), out(0, late), min_prefix=8)["passed"]
    row = compare_output(out(0, WORDS), out(0, late), min_prefix=9)
    assert not row["passed"] and row["required_prefix"] == 9
    assert not compare_output(out(0, WORDS), out(0, early), min_prefix=8)["passed"]
    # identical output is required without a tolerance
    assert not compare_output(out(0, WORDS), out(0, late))["passed"]


def test_min_prefix_longer_than_the_output_requires_all_of_it():
    row = compare_output(out(0, WORDS), out(0, WORDS), min_prefix=1000)
    assert row["passed"] and row["required_prefix"] == len(WORDS)
    shorter = compare_output(out(0, WORDS), out(0, WORDS[:-1]), min_prefix=1000)
    assert not shorter["passed"] and shorter["first_divergence"] == len(WORDS) - 1


def test_min_prefix_in_character_mode_is_an_estimate_from_characters_per_token():
    text = "".join(WORDS)  # 10 tokens
    cand = text[:len(text) // 2] + "#" * (len(text) - len(text) // 2)
    row = compare_output(out(0, WORDS, with_tokens=False), out(0, WORDS, text=cand, with_tokens=False),
                         min_prefix=4)
    assert row["unit"] == "character" and row["estimated"] and row["passed"]
    row = compare_output(out(0, WORDS, with_tokens=False), out(0, WORDS, text=cand, with_tokens=False),
                         min_prefix=6)
    assert not row["passed"]


def test_bad_tolerance_is_refused():
    with pytest.raises(EquivalenceError):
        compare_output(out(0, WORDS), out(0, WORDS), min_prefix=0)
    # the tolerance the role gives the gate is a setting, refused on the controller before the sweep
    with pytest.raises(SettingsError, match="draft_sweep_equivalence_min_prefix"):
        settings(equivalence_min_prefix=True)


def test_verdicts():
    base = probe(out(0, WORDS), out(1, WORDS[::-1]))
    same = probe(out(0, WORDS), out(1, WORDS[::-1]))
    wrong = probe(out(0, WORDS), out(1, WORDS[::-1][:3] + [" no"] + WORDS[::-1][4:]))
    v = candidate_verdict(base, same, 3)
    assert v["verdict"] == "passed" and v["eligible"] and v["identical"] == 2 and v["unit"] == "token"
    v = candidate_verdict(base, wrong, 4)
    assert v["verdict"] == "diverged" and not v["eligible"]
    assert v["diverged"] == 1 and v["identical"] == 1
    assert v["reason"] == "prompt 1: first divergent token at index 3 (identical output required)"
    assert v["per_prompt"][1]["first_divergence"] == 3
    # the baseline is the reference; a gate that is off checks nothing
    assert candidate_verdict(base, base, 0)["verdict"] == "reference"
    off = candidate_verdict(base, wrong, 4, enabled=False)
    assert off["verdict"] == "not_checked" and off["eligible"]


def test_the_gate_fails_closed():
    base = probe(out(0, WORDS))
    # no baseline output: nothing to compare with
    v = candidate_verdict(None, base, 2)
    assert v["verdict"] == "unverified" and not v["eligible"] and "baseline" in v["reason"]
    v = candidate_verdict(probe(out(0, [], error="HTTP 500: boom")), base, 2)
    assert v["verdict"] == "unverified"
    # the candidate did not start, or a request of its probe failed
    v = candidate_verdict(base, None, 2, error="engine did not become healthy")
    assert v["verdict"] == "unverified" and "engine did not become healthy" in v["reason"]
    v = candidate_verdict(base, probe(out(0, [], error="HTTP 500: boom")), 2)
    assert v["verdict"] == "unverified" and "HTTP 500" in v["reason"]


def test_summary_status_and_keys():
    base = probe(out(0, WORDS))
    good = equivalence_verdict(probe(out(0, WORDS)), base, 2)
    bad = equivalence_verdict(probe(out(0, WORDS[:5] + [" x"] + WORDS[6:])), base, 3)
    ref = equivalence_verdict(base, base, 0)
    s = equivalence_summary([ref, good], baseline=base, prompts=1, max_tokens=10)
    assert s["status"] == "passed" and s["passed"] == [2] and s["rejected"] == []
    assert [c["draft_len"] for c in s["candidates"]] == [2]
    assert s["tolerance"] == {"min_prefix": None, "meaning": "identical output (every token)"}
    assert s["probe"] == {"prompts": 1, "max_tokens": 10, "temperature": 0.0}
    assert s["baseline"]["probed"] and s["baseline"]["errors"] == 0
    s = equivalence_summary([ref, good, bad], baseline=base, min_prefix=4)
    assert s["status"] == "rejected" and s["rejected"] == [3]
    assert "first 4 tokens" in s["tolerance"]["meaning"]
    assert equivalence_summary([], enabled=False)["status"] == "off"
    assert equivalence_summary([ref])["status"] == "not_run"


def measurements(draft_len, values):
    return [{"draft_len": draft_len, "concurrency": 1, "output_throughput": v} for v in values]


def test_a_rejected_candidate_never_wins_the_selection():
    data = measurements(0, [100, 100, 100]) + measurements(2, [150, 150, 150]) + measurements(3, [200, 201, 200])
    assert select(data)["winner"]["draft_len"] == 3
    res = select(data, excluded=[3])
    assert res["winner"]["draft_len"] == 2
    assert {g["draft_len"]: g["status"] for g in res["groups"]}[3] == "not_equivalent"
    assert 3 in res["by_concurrency"][0]["rejected"]
    assert res["params"]["excluded"] == [3]
    # a candidate rejected before it was measured has no runs and is not eligible either
    skipped = [{"draft_len": 4, "concurrency": 1, "runs": [], "error": "rejected"}]
    res = select(data + skipped, excluded=[3, 4])
    assert res["winner"]["draft_len"] == 2
    assert {g["draft_len"]: g["status"] for g in res["groups"]}[4] == "not_equivalent"


def test_a_candidate_whose_usage_counts_exceed_the_baseline_for_identical_output_is_not_ranked():
    base = probe(out(0, WORDS), out(1, WORDS[::-1]))
    # the same tokens, but the server counted 14 for one of them (10 generated): flagged, not eligible
    inflated = probe(out(0, WORDS), out(1, WORDS[::-1], count=14))
    v = candidate_verdict(base, inflated, 3)
    assert v["verdict"] == "miscounted" and not v["eligible"] and v["miscounted"] == 1
    assert v["reason"] == ("prompt 1: the same output as the baseline, but the server counted 14 completion tokens "
                           "for it against the baseline's 10 (more than 1 apart), so its usage counts cannot be "
                           "ranked on")
    assert (v["per_prompt"][1]["baseline_count"], v["per_prompt"][1]["candidate_count"]) == (10, 14)
    # one token apart (a counted end-of-sequence token) is within the slack; so is a server that reports no count
    assert candidate_verdict(base, probe(out(0, WORDS, count=11), out(1, WORDS[::-1], count=9)), 3)["verdict"] == "passed"
    none = probe(out(0, WORDS), out(1, WORDS[::-1]))
    none["outputs"][1]["completion_tokens"] = None
    assert candidate_verdict(base, none, 3)["verdict"] == "passed"
    # a diverged output's counts are not compared (other tokens, other counts): the verdict is the divergence
    diverged = probe(out(0, WORDS), out(1, WORDS[::-1][:3] + [" no"] + WORDS[::-1][4:], count=30))
    v = candidate_verdict(base, diverged, 3)
    assert v["verdict"] == "diverged" and v["miscounted"] == 0
    # the summary rejects it, and the selection never ranks it first, however fast it measured
    s = equivalence_summary([equivalence_verdict(base, base, 0), equivalence_verdict(inflated, base, 3)], baseline=base)
    assert s["status"] == "rejected" and s["rejected"] == [3]
    data = measurements(0, [100, 100, 100]) + measurements(3, [300, 300, 300])
    assert select(data, excluded=s["rejected"])["winner"]["draft_len"] == 0
