"""The speculative-decoding clock: acceptance sampling, step model, analytic optimum, profile sources."""

import json
import os
import random
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulator_fixtures"))
import emu_helpers as H  # noqa: E402

from specdec_emulator.clock import Profile, ProfileError, analytic_table  # noqa: E402

SEED_PROFILE = [0.601, 0.286, 0.128]  # the vLLM log line in the seeds


def test_expected_tokens_matches_the_seed_log_line():
    p = Profile(acceptance=SEED_PROFILE)
    assert p.expected_tokens(3) == pytest.approx(2.015)
    assert p.expected_tokens(0) == 1.0
    # beyond the list the last conditional rate (0.128/0.286) repeats
    assert p.p(4) == pytest.approx(0.128 * 0.128 / 0.286)


def test_rejection_sampling_reproduces_per_position_rates():
    p = Profile(acceptance=SEED_PROFILE)
    rng = random.Random(7)
    n = 40000
    counts = [0, 0, 0]
    total = 0
    for _ in range(n):
        a = p.sample_accepted(rng, 3)
        total += a
        for i in range(a):
            counts[i] += 1
    for i, rate in enumerate(SEED_PROFILE):
        assert counts[i] / n == pytest.approx(rate, abs=0.01)
    assert 1 + total / n == pytest.approx(2.015, abs=0.02)


def test_step_model_and_batch_effect():
    p = Profile(target_step_ms=10, draft_cost_ratio=0.1, batch_effect=0.03)
    assert p.step_ms(1, 0) == pytest.approx(10)
    assert p.step_ms(1, 3) == pytest.approx(10 * (1 + 0.03 * 3) + 3 * 0.1 * 10)
    assert p.step_ms(64, 0) == pytest.approx(10 * (1 + 0.03 * 63))
    assert p.step_ms(0, 0, prefill_tokens=100, context_requests=1) == pytest.approx(10 + 100 * p.prefill_ms_per_token)
    assert p.speedup(1, 3) > p.speedup(64, 3)


def test_default_profile_has_an_interior_optimum_that_shrinks_with_load():
    p = Profile()
    k1, k8, k64 = p.optimum(1), p.optimum(8), p.optimum(64)
    assert 3 <= k1 <= 4
    assert 1 <= k8 < k1
    assert k64 <= 1 and k64 < k8
    assert p.speedup(1, k1) > 1.5
    assert p.speedup(64, 4) < 1.0  # long drafts hurt at high concurrency
    best = max(range(9), key=lambda k: p.throughput(1, k))
    assert best == k1


def test_profile_sources_and_precedence(tmp_path):
    target = H.make_model(tmp_path, "t", profile={"target_step_ms": 7, "acceptance": [0.5]})
    draft = H.make_model(tmp_path, "d", profile={"acceptance": [0.9, 0.8], "draft_cost_ratio": 0.2})
    cfg, code, err = H.configure("trtllm", [target, "--config", H.write_yaml(tmp_path, (
        "speculative_config:\n  decoding_type: DraftTarget\n  max_draft_len: 2\n  speculative_model_dir: %s\n" % draft))],
        {"SPECDEC_EMU_BATCH_EFFECT": "0.5"})
    assert code is None, err
    prof = cfg.profile
    assert prof.target_step_ms == 7 and prof.acceptance == [0.9, 0.8]
    assert prof.draft_cost_ratio == 0.2 and prof.batch_effect == 0.5
    cfg, _, _ = H.configure("trtllm", [target, "--config", str(tmp_path / "extra.yaml")],
                            {"SPECDEC_EMU_ACCEPTANCE": "0.7,0.3", "SPECDEC_EMU_TARGET_STEP_MS": "3"})
    assert cfg.profile.acceptance == [0.7, 0.3] and cfg.profile.target_step_ms == 3
    with pytest.raises(ProfileError):
        Profile(acceptance=[0.5, 0.7])
    _, code, err = H.configure("trtllm", [target], {"SPECDEC_EMU_ACCEPTANCE": "0.3,0.9"})
    assert code == 1 and "non-increasing" in err


def test_optimum_cli_states_the_truth(tmp_path):
    draft = H.make_model(tmp_path, "d", profile={"acceptance": SEED_PROFILE})
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_EMU_")}
    env["PYTHONPATH"] = H.EMULATOR
    out = subprocess.run([sys.executable, "-m", "specdec_emulator.clock", "--optimum", "--concurrency", "1,8,64",
                          "--max-draft-len", "6", "--draft-dir", draft, "--json"], env=env, check=True,
                         capture_output=True, text=True, timeout=30).stdout
    table = json.loads(out)
    p = Profile(acceptance=SEED_PROFILE)
    for n in (1, 8, 64):
        row = table["concurrency"][str(n)]
        assert row["optimum_draft_len"] == p.optimum(n, 6)
        assert row["draft_len"]["3"]["mean_acceptance_length"] == pytest.approx(2.015)
    text = subprocess.run([sys.executable, "-m", "specdec_emulator.clock", "--concurrency", "1"], env=env,
                          check=True, capture_output=True, text=True, timeout=30).stdout
    assert text.startswith("concurrency 1: optimum draft length %d" % Profile().optimum(1))
    assert analytic_table(p, (4,), 3, max_batch_size=2)["concurrency"]["4"]["batch"] == 2


def test_emulated_step_timing_follows_absolute_deadlines(tmp_path, monkeypatch):
    """Each iteration ends at the previous one's deadline plus its own duration (k=3, c=1).

    Checked on the deadlines the engine scheduled (its step log), not on when chunks arrived, so
    the check does not depend on how fast the machine is: jitter would show as a gap that is not
    exactly the step; the loop re-anchors only after a stall of 0.25 s or more.
    """
    import urllib.request
    engines = []

    class Engine(H.server.Engine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(H.server, "Engine", Engine)
    draft = H.make_model(tmp_path, "d")
    path = H.write_yaml(tmp_path, "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n"
                                  "  speculative_model_dir: %s\n" % draft)
    env = {"SPECDEC_EMU_TARGET_STEP_MS": "5", "SPECDEC_EMU_PREFILL_MS_PER_TOKEN": "0"}
    with H.start("trtllm", [H.make_model(tmp_path, "t"), "--port", "0", "--config", path], env) as srv:
        body = json.dumps({"prompt": "x", "max_tokens": 400, "stream": True}).encode()
        req = urllib.request.Request(srv.base_url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        chunks = 0
        with urllib.request.urlopen(req, timeout=30) as resp:
            for line in resp:
                if line.startswith(b"data: {"):
                    chunks += 1
        expected = srv.cfg.profile.step_ms(1, 3) / 1000.0
    (engine,) = engines
    log = list(engine.step_log)  # (generating requests, draft length, duration s, deadline)
    # the context step, then generation steps of up to 4 tokens for the 399 others, a chunk each
    assert log[0][:2] == (0, 0) and all(e[:2] == (1, 3) for e in log[1:]) and 100 <= len(log) - 1 <= 399
    assert chunks >= len(log)
    assert all(dur == pytest.approx(expected) for _, _, dur, _ in log[1:])
    exact = 0
    for (_, _, _, prev), (_, _, dur, deadline) in zip(log, log[1:]):
        gap = deadline - prev
        assert gap == pytest.approx(dur, abs=1e-9) or gap >= dur + 0.25, (gap, dur)
        exact += gap == pytest.approx(dur, abs=1e-9)
    assert exact >= 1


def test_draft_length_policy_per_batch():
    from specdec_emulator.engine import SpecSettings
    s = SpecSettings(method="Eagle", max_draft_len=4, max_concurrency=8, draft_len_schedule={1: 4, 4: 2, 6: 0})
    assert [s.draft_len(b) for b in (1, 3, 4, 5, 6, 8, 9)] == [4, 4, 2, 2, 0, 0, 0]
    assert SpecSettings().draft_len(1) == 0
    assert SpecSettings(method="DraftTarget", max_draft_len=3, max_concurrency=2).draft_len(3) == 0
