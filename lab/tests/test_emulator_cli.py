"""trtllm-serve / vllm serve command lines and YAML strictness per emulated version."""

import json
import os
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulator_fixtures"))
import emu_helpers as H  # noqa: E402

from specdec_emulator.trtllm_args import EngineConfigError, build_llm_args  # noqa: E402
from specdec_emulator.validation import ValidationError  # noqa: E402
from specdec_emulator.versions import TRTLLM_VERSIONS, at_least, parse  # noqa: E402


def seed(name):
    with open(os.path.join(H.FIXTURES, name)) as fh:
        return yaml.safe_load(fh)


CLI = {"backend": "pytorch", "max_batch_size": 1, "kv_cache_config": {"free_gpu_memory_fraction": 0.9}}


def test_version_order():
    ordered = sorted(TRTLLM_VERSIONS + ("1.2.0rc6.post1", "1.3.0"), key=parse)
    assert ordered == ["1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.0rc6.post1", "1.2.1", "1.3.0rc3", "1.3.0"]
    assert at_least("1.2.1", "1.2.0rc6") and not at_least("1.2.0rc6", "1.2.1")


@pytest.mark.parametrize("name,version", sorted(H.SEED_YAMLS.items()))
def test_seed_yaml_valid_on_its_version(name, version):
    values = build_llm_args(version, CLI, seed(name))
    spec = values.get("speculative_config")
    if "eagle" in name:
        assert spec["decoding_type"] == "Eagle" and spec["speculative_model_dir"]
    if "draft_target" in name:
        assert spec["decoding_type"] == "DraftTarget" and spec["max_draft_len"] == 4


def test_yaml_keys_override_cli_and_kv_cache_is_deep_merged():
    values = build_llm_args("1.1.0rc0", CLI, seed("seed004_b200_eagle3_1.1.0rc0.yaml"))
    kv = values["kv_cache_config"]
    assert kv["free_gpu_memory_fraction"] == 0.8 and kv["enable_block_reuse"] is False
    values = build_llm_args("1.2.0rc6", CLI, {"kv_cache_config": {"enable_block_reuse": False}})
    assert values["kv_cache_config"]["free_gpu_memory_fraction"] == 0.9
    values = build_llm_args("1.2.0rc6", CLI, {"max_batch_size": 4})
    assert values["max_batch_size"] == 4


@pytest.mark.parametrize("version", ["1.2.0rc1", "1.2.0rc6", "1.2.1", "1.3.0rc3"])
def test_use_torch_sampler_rejected_after_1_1(version):
    with pytest.raises(ValidationError) as exc:
        build_llm_args(version, CLI, seed("seed004_b200_eagle3_1.1.0rc0.yaml"))
    text = exc.value.render()
    assert text.startswith("1 validation error for TorchLlmArgs\nuse_torch_sampler\n")
    assert "Extra inputs are not permitted [type=extra_forbidden, input_value=True, input_type=bool]" in text


def test_sampler_type_rejected_on_1_1_and_accepted_after():
    with pytest.raises(ValidationError, match="sampler_type"):
        build_llm_args("1.1.0rc0", CLI, {"sampler_type": "TorchSampler"})
    assert build_llm_args("1.2.0rc1", CLI, {"sampler_type": "TorchSampler"})["sampler_type"] == "TorchSampler"
    # typed Union[str, SamplerType] upstream (the table's soft literal): pydantic takes any string
    assert build_llm_args("1.2.1", CLI, {"sampler_type": "torch"})["sampler_type"] == "torch"


@pytest.mark.parametrize("version", ["1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.1"])
def test_eagle3_decoding_type_rejected_before_1_3(version):
    data = seed("seed002_spark_eagle3_1.2.0rc6.yaml")
    data["speculative_config"]["decoding_type"] = "Eagle3"
    with pytest.raises(EngineConfigError) as exc:
        build_llm_args(version, CLI, data)
    assert str(exc.value) == "ValueError: Invalid decoding type: Eagle3"


def test_eagle3_accepted_on_1_3_and_eagle_converted():
    data = seed("seed002_spark_eagle3_1.2.0rc6.yaml")
    warnings = []
    values = build_llm_args("1.3.0rc3", CLI, data, warn=warnings.append)
    assert values["speculative_config"]["decoding_type"] == "Eagle3" and warnings
    data["speculative_config"]["decoding_type"] = "Eagle3"
    assert build_llm_args("1.3.0rc3", CLI, data)["speculative_config"]["decoding_type"] == "Eagle3"


@pytest.mark.parametrize("version,ok", [("1.1.0rc0", False), ("1.2.0rc1", False), ("1.2.0rc6", False),
                                        ("1.2.1", True), ("1.3.0rc3", True)])
def test_speculative_model_needs_1_2_1(version, ok):
    data = seed("seed002_spark_eagle3_1.2.0rc6.yaml")
    spec = data["speculative_config"]
    spec["speculative_model"] = spec.pop("speculative_model_dir")
    if ok:
        values = build_llm_args(version, CLI, data)
        assert values["speculative_config"]["speculative_model_dir"] == "/opt/gpt-oss-120b-Eagle3/"
    else:
        with pytest.raises(ValidationError) as exc:
            build_llm_args(version, CLI, data)
        assert exc.value.title == "EagleDecodingConfig"
        assert "speculative_model\n  Extra inputs are not permitted" in exc.value.render()


def test_decoding_types_per_version():
    with pytest.raises(EngineConfigError, match="Invalid decoding type: SaveState"):
        build_llm_args("1.1.0rc0", CLI, {"speculative_config": {"decoding_type": "SaveState"}})
    with pytest.raises(ValidationError, match="output_directory\n  Field required"):
        build_llm_args("1.2.0rc1", CLI, {"speculative_config": {"decoding_type": "SaveState"}})
    with pytest.raises(EngineConfigError, match="Invalid decoding type: None"):
        build_llm_args("1.2.1", CLI, {"speculative_config": {"max_draft_len": 3}})
    with pytest.raises(EngineConfigError, match="Invalid decoding type: eagle"):
        build_llm_args("1.2.1", CLI, {"speculative_config": {"decoding_type": "eagle"}})


@pytest.mark.parametrize("extra,needle", [
    ({"speculative_config": {"decoding_type": "Eagle", "speculative_model_dir": "/x"}},
     "max_draft_len is required for Eagle"),
    ({"speculative_config": {"decoding_type": "NGram", "max_draft_len": 3}}, "max_matching_ngram_size must be > 0"),
    ({"speculative_config": {"decoding_type": "DraftTarget", "max_draft_len": 3}},
     "speculative_model_dir must be specified for DraftTarget"),
    ({"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "must be a float between 0 and 1"),
    ({"kv_cache_config": {"free_gpu_memory_fraction": 0.9, "bogus": 1}}, "1 validation error for KvCacheConfig\nbogus"),
    ({"stream_interval": 0}, "stream_interval must be positive"),
    ({"cuda_graph_config": {"max_batch_size": -1}}, "cuda_graph_config.max_batch_size must be non-negative"),
    ({"cuda_graph_config": {"batch_sizes": [1, 2, 4], "max_batch_size": 8}}, "must be equal to the largest"),
    ({"moe_config": {"backend": "FOO"}}, "Input should be 'CUTLASS', 'CUTEDSL'"),  # 'AUTO' from 1.3
    ({"enable_autotuner": "maybe"}, "Input should be a valid boolean, unable to interpret input"),
    ({"max_batch_size": "ten"}, "unable to parse string as an integer"),
    ({"cuda_graph_config": {"max_batch_size": 1, "padding": True}}, "CudaGraphConfig\npadding"),
])
def test_invalid_values_rejected(extra, needle):
    with pytest.raises((ValidationError, EngineConfigError)) as exc:
        build_llm_args("1.2.0rc6", CLI, extra)
    assert needle in str(exc.value)


def test_accepted_names_and_value_rules_come_from_the_table():
    # mpi_session is taken only under its alias before 1.3 (no populate_by_name); 1.3 takes both names
    assert build_llm_args("1.2.1", CLI, {"_mpi_session": None})["mpi_session"] is None
    with pytest.raises(ValidationError) as exc:
        build_llm_args("1.2.1", CLI, {"mpi_session": None})
    assert "mpi_session\n  Extra inputs are not permitted" in exc.value.render()
    assert "mpi_session" in build_llm_args("1.3.0rc3", CLI, {"mpi_session": None})
    # load_format: upstream's validator looks the upper-cased name up in LoadFormat
    assert build_llm_args("1.2.0rc6", CLI, {"load_format": "dummy"})["load_format"] == "dummy"
    with pytest.raises(ValidationError, match="load_format\n  Value error, Invalid LoadFormat: safetensors"):
        build_llm_args("1.2.0rc6", CLI, {"load_format": "safetensors"})


def test_a_version_without_a_table_is_refused():
    with pytest.raises(EngineConfigError, match="no engine table for TensorRT-LLM 1.0.0"):
        build_llm_args("1.0.0", CLI, {})


def test_draft_len_schedule_needs_1_2_0rc6_and_is_checked():
    spec = {"decoding_type": "Eagle", "max_draft_len": 4, "speculative_model_dir": "/x",
            "draft_len_schedule": {1: 4, 8: 2, 32: 0}}
    with pytest.raises(ValidationError, match="draft_len_schedule"):
        build_llm_args("1.2.0rc1", CLI, {"speculative_config": dict(spec)})
    assert build_llm_args("1.2.0rc6", CLI, {"speculative_config": dict(spec)})
    with pytest.raises(ValidationError, match="must contain key 1"):
        build_llm_args("1.2.1", CLI, {"speculative_config": dict(spec, draft_len_schedule={2: 3})})


# ------------------------------------------------------------------ whole command lines

@pytest.fixture
def models(tmp_path):
    return {"target": H.make_model(tmp_path, "gpt-oss-120b", "gpt_oss"),
            "llama": H.make_model(tmp_path, "Llama-3.3-70B-Instruct-FP4"),
            "draft": H.make_model(tmp_path, "draft"), "tik": H.make_tiktoken(tmp_path), "tmp": tmp_path}


def seed_with_paths(models, name):
    data = seed(name)
    if "speculative_config" in data:
        data["speculative_config"]["speculative_model_dir"] = models["draft"]
    return H.write_yaml(models["tmp"], yaml.safe_dump(data), name)


@pytest.mark.parametrize("name,version", sorted(H.SEED_YAMLS.items()))
def test_seed_command_lines_configure(models, name, version):
    path = seed_with_paths(models, name)
    argv = [models["target"], "--host", "0.0.0.0", "--port", "8000", "--backend", "pytorch", "--tp_size", "1",
            "--ep_size", "1", "--max_batch_size", "1", "--trust_remote_code", "--extra_llm_api_options", path,
            "--kv_cache_free_gpu_memory_fraction", "0.9"]
    cfg, code, err = H.configure("trtllm", argv, H.base_env(SPECDEC_EMU_VERSION=version))
    assert code is None, err
    assert cfg.version == version and cfg.served_name == "gpt-oss-120b" and cfg.max_batch_size == 1
    if "eagle" in name or "draft_target" in name:
        assert cfg.spec.enabled and cfg.draft is not None


def test_unknown_option_is_a_click_usage_error(models):
    cfg, code, err = H.configure("trtllm", ["serve", models["target"], "--foo", "1"], H.base_env())
    assert cfg is None and code == 2
    assert err.splitlines()[0] == "Usage: trtllm-serve serve [OPTIONS] MODEL"
    assert err.rstrip().endswith("Error: No such option: --foo")
    _, code, err = H.configure("trtllm", [models["target"], "--tp_siz", "1"], H.base_env())
    assert code == 2 and "Error: No such option: --tp_siz Did you mean --tp_size?" in err


@pytest.mark.parametrize("argv,needle", [
    ([], "Error: Missing argument 'MODEL'."),
    (["M", "--port", "http"], "Error: Invalid value for '--port': 'http' is not a valid integer."),
    (["M", "--backend", "jax"], "is not one of 'pytorch', 'tensorrt', '_autodeploy'."),
    (["M", "--port"], "Error: Option '--port' requires an argument."),
    (["M", "N"], "Error: Got unexpected extra argument (N)"),
])
def test_click_errors(argv, needle):
    cfg, code, err = H.configure("trtllm", argv, H.base_env())
    assert code == 2 and needle in err


@pytest.mark.parametrize("version,ok", [("1.1.0rc0", False), ("1.2.0rc1", False), ("1.2.0rc6", True),
                                        ("1.2.1", True), ("1.3.0rc3", True)])
def test_config_alias_and_newer_options_per_version(models, version, ok):
    path = H.write_yaml(models["tmp"], "enable_iter_perf_stats: true\n")
    env = H.base_env(SPECDEC_EMU_VERSION=version, TIKTOKEN_ENCODINGS_BASE=models["tik"])
    cfg, code, err = H.configure("trtllm", [models["llama"], "--config", path], env)
    if ok:
        assert code is None and cfg.iter_perf_stats
    else:
        assert code == 2 and "No such option: --config" in err
    _, code, err = H.configure("trtllm", [models["llama"], "--tool_parser", "qwen3"], env)
    assert (code is None) == ok
    _, code, _ = H.configure("trtllm", [models["llama"], "--custom_tokenizer", "x"], env)
    assert (code is None) == at_least(version, "1.2.1")
    _, code, _ = H.configure("trtllm", [models["llama"], "--enable_chunked_prefill"], env)
    assert (code is None) == at_least(version, "1.2.0rc1")


def test_yaml_error_fails_with_the_engines_traceback(models):
    path = seed_with_paths(models, "seed004_b200_eagle3_1.1.0rc0.yaml")
    cfg, code, err = H.configure("trtllm", [models["target"], "--extra_llm_api_options", path],
                                 H.base_env(SPECDEC_EMU_VERSION="1.2.1"))
    assert cfg is None and code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for TorchLlmArgs" in err
    assert "Extra inputs are not permitted" in err
    missing = str(models["tmp"] / "nope.yaml")
    _, code, err = H.configure("trtllm", [models["target"], "--extra_llm_api_options", missing], H.base_env())
    assert code == 1 and "FileNotFoundError: [Errno 2] No such file or directory" in err


def test_missing_models(models, tmp_path):
    _, code, err = H.configure("trtllm", ["/models/none"], H.base_env())
    assert code == 1 and "HFValidationError: Repo id must be in the form" in err
    _, code, err = H.configure("trtllm", ["org/none"], H.base_env(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1"))
    assert code == 1 and "LocalEntryNotFoundError" in err
    data = seed("seed002_spark_draft_target_1.2.0rc6.yaml")
    path = H.write_yaml(tmp_path, yaml.safe_dump(data))
    _, code, err = H.configure("trtllm", [models["llama"], "--extra_llm_api_options", path], H.base_env())
    assert code == 1 and "/opt/Llama-3.1-8B-Instruct-FP4/" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    _, code, err = H.configure("trtllm", [str(empty)], H.base_env())
    assert code == 1 and "does not appear to have a file named config.json" in err


def test_hf_cache_layout_and_model_id(tmp_path, monkeypatch):
    hf = tmp_path / "hf"
    H.make_hf_cache_model(hf, "nvidia/Llama-3.3-70B-Instruct-FP4")
    cfg, code, err = H.configure("trtllm", ["nvidia/Llama-3.3-70B-Instruct-FP4"], H.base_env(HF_HOME=str(hf)))
    assert code is None, err
    assert cfg.served_name == "nvidia/Llama-3.3-70B-Instruct-FP4"
    assert cfg.model.path.endswith("snapshots/0123456789abcdef0123456789abcdef01234567")


# ------------------------------------------------------------------ vllm

def test_vllm_seed_command_lines(models):
    argv = [models["target"], "--tensor-parallel-size", "1", "--max_num_seqs", "1", "--max-model-len", "131072",
            "--gpu-memory-utilization", "0.97", "--tool-call-parser", "openai", "--reasoning-parser",
            "openai_gptoss", "--enable-auto-tool-choice",
            "--speculative-config", '{"model": "%s", "num_speculative_tokens": 3, "method":"eagle3", '
            '"draft_tensor_parallel_size":1}' % models["draft"], "--host", "0.0.0.0", "--port", "8000"]
    cfg, code, err = H.configure("vllm", argv, H.base_env())
    assert code is None, err
    assert cfg.spec.max_draft_len == 3 and cfg.spec.method == "eagle3" and cfg.max_batch_size == 1
    cfg, code, err = H.configure("vllm", [models["llama"], "--served-model-name", "Qwen3-32B"], H.base_env())
    assert cfg.served_name == "Qwen3-32B"


def test_vllm_argparse_errors(models):
    cfg, code, err = H.configure("vllm", [models["llama"], "--foo"], H.base_env())
    assert code == 2 and "vllm: error: unrecognized arguments: --foo" in err
    assert err.startswith("usage: vllm [-h] [-v]")  # the top-level parser reports what `serve` left
    _, code, err = H.configure("vllm", [models["llama"], "--speculative-config", "{bad"], H.base_env())
    assert code == 2 and "argument --speculative-config/-sc: invalid loads value" in err


def test_vllm_032_options_and_speculative_config_from_the_engine_table(models):
    env = H.base_env(SPECDEC_EMU_VERSION="0.32.0")
    # an EngineArgs option of 0.32.0 that the hand-written parser lacks; frontend options stay
    cfg, code, err = H.configure("vllm", [models["llama"], "--port", "0", "--attention-backend", "CPU_ATTN",
                                          "--enforce-eager", "--api-key", "k"], env)
    assert cfg is not None, err
    # removed by 0.32.0, as the real engine says
    _, code, err = H.configure("vllm", [models["llama"], "--swap-space", "4", "--disable-log-requests"], env)
    assert code == 2 and "vllm: error: unrecognized arguments: --swap-space 4 --disable-log-requests" in err
    spec = {"method": "dflash", "model": models["draft"], "num_speculative_tokens": 3}
    cfg, code, err = H.configure("vllm", [models["llama"], "--port", "0", "--speculative-config", json.dumps(spec)],
                                 env)
    assert cfg is not None, err
    _, code, err = H.configure("vllm", [models["llama"], "--speculative-config",
                                        json.dumps({"method": "step5_mtp", "num_speculative_tokens": 2})], env)
    assert code == 1 and "'dflash', 'ngram_gpu' or 'dspark' [type=literal_error" in err
    _, code, err = H.configure("vllm", [models["llama"], "--speculative-config", json.dumps(
        {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2})], env)
    assert code == 1 and "1 validation error for SpeculativeConfig\n  Value error, prompt_lookup_min=4 must be <= " \
        "prompt_lookup_max=2 [type=value_error, input_value=ArgsKwargs((), " in err


@pytest.mark.parametrize("spec,env,needle", [
    ({"method": "arctic", "model": "D", "num_speculative_tokens": 3, "enable_suffix_decoding": True}, {},
     "Input should be 'ngram'"),
    ({"method": "eagle3", "model": "D", "num_speculative_tokens": 3, "enable_suffix_decoding": True},
     {}, "enable_suffix_decoding\n  Unexpected keyword argument"),
    ({"method": "eagle3", "num_speculative_tokens": 3}, {}, "without speculative model"),
    ({"method": "eagle3", "model": "D"}, {}, "num_speculative_tokens must be provided"),
    ({"method": "eagle3", "model": "D", "num_speculative_tokens": 0}, {}, "greater than zero"),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 6, "prompt_lookup_max": 2}, {},
     "prompt_lookup_min=6 must be <= prompt_lookup_max=2"),
    ({"method": "suffix"}, {}, "Arctic Inference is required for suffix decoding"),
    ({"model": "D", "num_speculative_tokens": 3, "tensor_parallel_size": 1}, {}, "tensor_parallel_size"),
])
def test_vllm_speculative_config_rejections(models, spec, env, needle):
    import json
    spec = {k: (models["draft"] if v == "D" else v) for k, v in spec.items()}
    cfg, code, err = H.configure("vllm", [models["llama"], "--speculative-config", json.dumps(spec)],
                                 H.base_env(**env))
    assert code == 1 and needle in err


def test_vllm_arctic_plugin_fields_when_enabled(models):
    import json
    spec = {"method": "arctic", "model": models["draft"], "num_speculative_tokens": 3, "enable_suffix_decoding": True}
    cfg, code, err = H.configure("vllm", [models["target"], "--speculative-config", json.dumps(spec)],
                                 H.base_env(ARCTIC_INFERENCE_ENABLED="1"))
    assert code is None, err
    assert cfg.spec.method == "arctic" and cfg.spec.max_concurrency == 64
