"""Greedy-only engines and the client-side acceptance estimate.

EAGLE-3 on TensorRT-LLM decodes greedily, so a benchmark at temperature > 0 is refused (or, when
asked to go on, flagged): bench_sampling decides, for serve_bench on the host and for the draft
sweep on the controller (its planner's plan and serving entries). serve_bench's estimate of the acceptance
length from the stream stands in where the engine reports none (one-model EAGLE-3 on TensorRT-LLM
1.2.x: specDecodingStats is null), checked here against the emulator's deterministic profile.
"""

import io
import json

import pytest

from sweep_decisions import Refused, sampling_check
from ansible_collections.specdec.serve.plugins.module_utils import bench_runner
from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import (
    SamplingError, check_sampling, serving_from_fact, serving_summary)
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_config as sc
from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select

from specdec_emulator import server, trtllm_cli  # lab/emulator, put on sys.path by conftest
from sse_engine import FakeEngine
from test_serve_bench import run_module

DEMO_PROFILE = "trtllm-gpt-oss-120b-eagle3-long-context"


def demo_instance(**extra):
    """The instance of the lab's spark-nodes class (inventories/spark): the demo sweeps it."""
    inst = {"name": "gpt-oss-120b", "profile": DEMO_PROFILE,
            "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "port": 8000}
    inst.update(extra)
    return inst


FACT_RECORD = {"name": "gpt-oss-120b", "engine": "trtllm", "engine_version": "1.2.0rc6",
               "speculative_method": "eagle3", "port": 8000, "image": "x", "unit": "u"}


# ------------------------------------------------------------------ what serves the endpoint

def test_the_three_shapes_of_a_serving_description_agree():
    rendered = sc.render(demo_instance())
    want = {"engine": "trtllm", "engine_version": "1.2.0rc6", "speculative_method": "eagle3",
            "allow_advanced_sampling": False, "stream_interval": 1}
    from_render = serving_summary(rendered)
    assert dict((k, from_render[k]) for k in want) == want
    assert from_render["decoding_type"] == "Eagle"  # EAGLE-3 is decoding type Eagle up to 1.2.x
    from_fact = serving_summary(FACT_RECORD)
    assert dict((k, from_fact[k]) for k in want) == want
    assert serving_summary(from_render) == from_render
    assert serving_summary(None) is None and serving_summary({}) is None


def test_a_raw_eagle_decoding_type_is_eagle3_and_stream_interval_is_read():
    s = serving_summary({"engine": "trtllm", "version": "1.3.0rc3", "speculative": {"method": "none"},
                         "config": {"stream_interval": 4, "speculative_config": {"decoding_type": "Eagle3"}}})
    assert s["speculative_method"] == "eagle3" and s["stream_interval"] == 4


@pytest.mark.parametrize("serving,needle", [
    ({"engine": "sglang"}, "serving.engine must be one of trtllm, vllm, got 'sglang'"),
    ({"engine": "trtllm", "stream_interval": 0}, "serving.stream_interval must be an integer >= 1, got 0"),
    ({"engine": "trtllm", "allow_advanced_sampling": "maybe"}, "serving.allow_advanced_sampling must be a boolean"),
    ("trtllm", "serving must be a mapping, got str"),
])
def test_a_bad_serving_description_is_refused(serving, needle):
    with pytest.raises(SamplingError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        serving_summary(serving)


def test_the_local_fact_record_is_the_instance_on_the_urls_port():
    fact = {"instances": {"a": dict(FACT_RECORD), "b": dict(FACT_RECORD, name="b", port=8001)}}
    assert serving_from_fact(fact, "127.0.0.1", 8000)["name"] == "gpt-oss-120b"
    assert serving_from_fact(fact, "localhost", 8001)["name"] == "b"
    assert serving_from_fact(fact, "10.0.0.5", 8000) is None  # another host's engine: not this fact
    assert serving_from_fact(fact, "127.0.0.1", 9000) is None
    assert serving_from_fact(None, "127.0.0.1", 8000) is None


# ------------------------------------------------------------------ the decision

def test_eagle3_on_trtllm_at_temperature_0_is_greedy_only_and_honoured():
    d = check_sampling(sc.render(demo_instance()), 0.0)
    assert d["checked"] and d["greedy_only"] and d["honoured"]
    assert d["error"] is None and d["warning"] is None
    assert d["reason"] == ("eagle3 on TensorRT-LLM 1.2.0rc6 decodes greedily: a request's temperature, "
                           "top_p, top_k and seed are ignored")


def test_a_temperature_above_0_is_refused_naming_the_setting_the_value_and_what_is_allowed():
    d = check_sampling(sc.render(demo_instance()), 0.7, temperature_setting="draft_sweep_temperature",
                       fallback_setting="draft_sweep_allow_greedy_fallback")
    assert not d["honoured"] and d["warning"] is None
    assert d["error"].startswith("draft_sweep_temperature=0.7 is not allowed here: eagle3 on TensorRT-LLM "
                                 "1.2.0rc6 decodes greedily")
    for allowed in ("Allowed: draft_sweep_temperature=0", "speculative_config.allow_advanced_sampling: true",
                    "TensorRT-LLM 1.2.0rc6 and later", "draft_sweep_allow_greedy_fallback=true"):
        assert allowed in d["error"]


def test_going_on_is_flagged_not_refused():
    d = check_sampling(FACT_RECORD, 1.0, allow_greedy_fallback=True)
    assert d["error"] is None and not d["honoured"] and d["greedy_only"]
    assert d["warning"].startswith("temperature=1 is not honoured: eagle3 on TensorRT-LLM 1.2.0rc6 decodes "
                                   "greedily")
    assert "figures are of greedy decoding" in d["warning"] and "allow_greedy_fallback is true" in d["warning"]


@pytest.mark.parametrize("inst", [
    # the prototype switch of 1.2.0rc6 and later lifts the limit
    demo_instance(llm_api_options={"speculative_config": {"allow_advanced_sampling": True}}),
    # other methods and engines sample
    {"name": "l", "profile": "trtllm-llama-3.3-70b-fp4-draft-target",
     "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"},
    {"name": "v", "engine": "vllm", "image": "vllm/vllm-openai:v0.11.0", "model": "openai/gpt-oss-120b",
     "speculative": {"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": 3}},
    # no speculation: the baseline of a sweep
    demo_instance(speculative={"method": "none"}),
], ids=["allow_advanced_sampling", "trtllm-draft-target", "vllm-eagle3", "no-speculation"])
def test_engines_that_sample_are_not_greedy_only(inst):
    d = check_sampling(sc.render(inst), 0.8)
    assert d["checked"] and not d["greedy_only"] and d["honoured"] and d["error"] is None


def test_an_unknown_engine_is_not_checked():
    d = check_sampling(None, 0.8)
    assert d == {"checked": False, "serving": None, "greedy_only": False, "temperature": 0.8,
                 "honoured": True, "reason": None, "error": None, "warning": None}


def test_a_bad_temperature_is_refused():
    with pytest.raises(SamplingError, match="draft_sweep_temperature must be >= 0, got -1"):
        check_sampling(FACT_RECORD, -1, temperature_setting="draft_sweep_temperature")


def test_a_fallback_is_flagged_and_an_unknown_engine_refused():
    assert sampling_check(FACT_RECORD, "0.5", True)["warning"]
    with pytest.raises(Refused, match="sampling_check: serving.engine must be one of"):
        sampling_check({"engine": "x"}, 0.5)


# ------------------------------------------------------------------ serve_bench, run as Ansible runs it

def test_serve_bench_refuses_before_sending_anything(tmp_path):
    with FakeEngine(tokens=4) as eng:
        res = run_module(tmp_path, {"url": eng.url, "model": "m", "temperature": 0.6,
                                    "spec_metrics": "none", "serving": FACT_RECORD})
        checked = run_module(tmp_path, {"url": eng.url, "model": "m", "temperature": 0.6,
                                        "spec_metrics": "none", "serving": FACT_RECORD}, check=True)
    assert res["failed"] is True and eng.requests == []
    assert res["msg"].startswith("serve_bench: temperature=0.6 is not allowed here: eagle3 on TensorRT-LLM "
                                 "1.2.0rc6 decodes greedily")
    assert "allow_greedy_fallback=true" in res["msg"]
    assert res["sampling"]["source"] == "serving" and res["sampling"]["honoured"] is False
    assert checked["failed"] is True  # check mode refuses too


def test_serve_bench_goes_on_when_asked_and_flags_the_result(tmp_path):
    with FakeEngine(tokens=4) as eng:
        res = run_module(tmp_path, {"url": eng.url, "model": "m", "temperature": 0.6, "num_requests": 1,
                                    "warmup_requests": 0, "spec_metrics": "none", "serving": FACT_RECORD,
                                    "allow_greedy_fallback": True})
    assert not res.get("failed"), res.get("msg")
    assert res["sampling"]["honoured"] is False and res["sampling"]["greedy_only"] is True
    assert "temperature=0.6 is not honoured" in json.dumps(res["warnings"])  # the module warns
    assert eng.requests and eng.requests[0]["temperature"] == 0.6


def test_serve_bench_reads_the_local_fact_of_the_instance_on_its_port(tmp_path):
    fact = tmp_path / "specdec_serving.fact"
    with FakeEngine(tokens=4) as eng:
        port = int(eng.url.rsplit(":", 1)[1])
        fact.write_text(json.dumps({"instances": {"gpt-oss-120b": dict(FACT_RECORD, port=port)}}))
        res = run_module(tmp_path, {"url": eng.url, "model": "m", "extra_body": {"temperature": 0.3},
                                    "spec_metrics": "none", "serving_fact": str(fact)})
        greedy = run_module(tmp_path, {"url": eng.url, "model": "m", "num_requests": 1, "warmup_requests": 0,
                                       "spec_metrics": "none", "serving_fact": str(fact)})
        unknown = run_module(tmp_path, {"url": eng.url, "model": "m", "num_requests": 1, "warmup_requests": 0,
                                        "temperature": 0.3, "spec_metrics": "none",
                                        "serving_fact": str(tmp_path / "absent.fact")})
    # a temperature in extra_body is the one sent, so it is the one checked
    assert res["failed"] is True and "temperature=0.3 is not allowed here" in res["msg"]
    assert res["sampling"]["source"] == "local fact"
    assert not greedy.get("failed") and greedy["sampling"]["greedy_only"] and greedy["sampling"]["honoured"]
    assert not unknown.get("failed") and unknown["sampling"] == dict(
        check_sampling(None, 0.3), source="none")


# ------------------------------------------------------------------ the client-side acceptance estimate

def _rec(tokens, chunks, ok=True, usage=True):
    return {"ok": ok, "usage_reported": usage, "output_tokens": tokens, "text_chunks": chunks}


def test_the_estimate_counts_tokens_per_step_after_the_context_step():
    # 1 token from the context step, then steps of 4: 1 + 4 * 12 = 49 tokens in 13 chunks
    assert bench_runner.acceptance_estimate([_rec(49, 13), _rec(49, 13)]) == (4.0, 24)
    # pooled over requests, as the engine pools over steps: (48 + 8) / (12 + 8)
    assert bench_runner.acceptance_estimate([_rec(49, 13), _rec(9, 9)]) == (2.8, 20)
    # failed requests, requests without usage counts and one-chunk requests say nothing
    assert bench_runner.acceptance_estimate([_rec(49, 13, ok=False), _rec(9, 9, usage=False),
                                             _rec(1, 1)]) == (None, 0)


def test_the_estimate_is_grouped_and_reported_with_the_winner():
    items = []
    for k, est, eng in ((0, 1.0, None), (2, 2.9, None), (3, 3.8, 3.9)):
        runs = [{"concurrency": 1, "repetition": r, "output_throughput": 100.0 + 10 * k + r, "failed": 0,
                 "acceptance_length_estimate": est,
                 "spec_decode": {"acceptance_length": eng}} for r in range(3)]
        items.append({"draft_len": k, "runs": runs})
    sel = select(items)
    groups = {g["draft_len"]: g for g in sel["groups"]}
    assert [groups[k]["acceptance_length_estimate"] for k in (0, 2, 3)] == [1.0, 2.9, 3.8]
    assert [groups[k]["acceptance_length"] for k in (0, 2, 3)] == [None, None, 3.9]
    assert sel["winner"]["draft_len"] == 3
    assert (sel["winner"]["acceptance_length"], sel["winner"]["acceptance_length_estimate"]) == (3.9, 3.8)
    assert sel["by_concurrency"][0]["acceptance_length_estimate"] == 3.8


@pytest.mark.parametrize("version,reported", [("1.1.0rc0", False), ("1.2.0rc1", False), ("1.2.0rc6", False),
                                              ("1.2.1", False), ("1.3.0rc3", True)])
def test_the_emulator_leaves_one_model_eagle_stats_null_before_1_3_as_upstream(version, reported):
    """Upstream PR #9855 ("Fix iteration stats for spec-dec", main, December 2025) made one-model
    speculation fill specDecodingStats; the emulator models it from 1.3 (docs/emulator.md)."""
    one_model = {"decoding_type": "Eagle", "max_draft_len": 3}
    assert trtllm_cli.spec_stats_reported(version, one_model, {}) is reported
    two_model = dict(one_model, eagle3_one_model=False)
    assert trtllm_cli.spec_stats_reported(version, two_model, {}) is True


def test_where_the_engine_reports_no_acceptance_the_estimate_does(tmp_path):
    """One-model EAGLE-3 on the emulated 1.2.0rc6, with the emulator's upstream default: the engine's
    specDecodingStats are null, the acceptance length is not available, and the estimate from the
    stream is the profile's exact tokens per step."""
    target, draft = tmp_path / "target", tmp_path / "draft"
    for d in (target, draft):
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 8192}))
    extra = tmp_path / "extra.yml"
    extra.write_text(json.dumps({"enable_iter_perf_stats": True, "speculative_config": {
        "decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": str(draft)}}))
    env = {"SPECDEC_EMU_VERSION": "1.2.0rc6", "SPECDEC_EMU_ACCEPTANCE": "1,1,1,0",
           "SPECDEC_EMU_TARGET_STEP_MS": "1", "SPECDEC_EMU_PREFILL_MS_PER_TOKEN": "0.001"}
    cfg, code = trtllm_cli.configure([str(target), "--host", "127.0.0.1", "--port", "0",
                                      "--extra_llm_api_options", str(extra)], env=env, out=io.StringIO())
    assert cfg is not None, code
    with server.ThreadedServer(cfg) as srv:
        res = bench_runner.run_benchmark({
            "url": srv.base_url, "model": None, "concurrency": 2, "num_requests": 4, "warmup_requests": 0,
            "repetitions": 2, "max_tokens": 61, "temperature": 0.0, "ignore_eos": True,
            "prompts": bench_runner.PROMPT_SETS["mixed"], "timeout": 30.0, "spec_metrics": "auto",
            "metrics_poll_interval": 0.2})
    for run in res["runs"]:
        assert run["completed"] == 4
        spec = run["spec_decode"]
        assert spec["engine"] == "trtllm" and spec["available"] is False and spec["acceptance_length"] is None
        assert spec["iterations"] > 0 and spec["iterations_without_spec_stats"] == spec["iterations"]
        # 61 tokens: the context step's 1, then 15 steps of 3 accepted drafts + 1
        assert run["acceptance_length_estimate"] == 4.0 and run["decoding_steps_counted"] == 4 * 15
    assert res["summary"]["acceptance_length"]["median"] is None
    assert res["summary"]["acceptance_length_estimate"] == {"values": [4.0, 4.0], "median": 4.0}


def test_no_estimate_when_a_chunk_spans_several_steps(tmp_path):
    with FakeEngine(tokens=12, per_chunk=3) as eng:
        base = {"url": eng.url, "model": "m", "concurrency": 1, "num_requests": 1, "warmup_requests": 0,
                "repetitions": 1, "max_tokens": 12, "temperature": 0.0, "prompts": ["x"], "timeout": 10.0,
                "spec_metrics": "none"}
        one = bench_runner.run_benchmark(base)
        several = bench_runner.run_benchmark(dict(base, stream_interval=4))
    # this fake engine's first chunk carries 3 tokens too: (12 - 1) / (4 - 1)
    assert one["runs"][0]["acceptance_length_estimate"] == round(11 / 3.0, 4)
    assert several["runs"][0]["acceptance_length_estimate"] is None
