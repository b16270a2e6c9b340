"""spec_config: profiles x versions, seed reproduction, rejected combinations, and a cross-check
of every rendering against the lab engine emulator's own per-version parser."""

import copy
import io
import json
import shlex
from pathlib import Path

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_config as sc
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_instance as spec_instance
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_schema as spec_schema, _spec_tables as spec_tables
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_profiles import PROFILES, list_profiles, profiles_for
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import (
    TRTLLM_REPRESENTATIVE,
    VLLM_REPRESENTATIVE,
    EngineVersion,
    SpecConfigError,
    version_from_image,
)
from ansible_collections.specdec.serve.plugins.filter.spec_config import spec_config
from ansible.errors import AnsibleFilterError

from specdec_emulator import trtllm_args, trtllm_cli, vllm_cli
from specdec_emulator.validation import ValidationError

SEEDS = Path(__file__).parent / "seed_yaml"


def profile_versions(name):
    prof = PROFILES[name]
    engine = prof["instance"]["engine"]
    pool = TRTLLM_REPRESENTATIVE if engine == "trtllm" else VLLM_REPRESENTATIVE
    out = []
    for text in pool:
        v = EngineVersion(engine, text)
        if prof.get("min_version") and v < prof["min_version"]:
            continue
        if prof.get("max_version") and v > prof["max_version"]:
            continue
        out.append(text)
    return out


PROFILE_CASES = [(name, v) for name in sorted(PROFILES) for v in profile_versions(name)]


def render(profile=None, version="1.2.0rc6", **over):
    inst = {"name": "t"}
    if profile:
        inst["profile"] = profile
    inst["engine_version"] = version
    inst.update(over)
    return sc.render(inst)


def emulate_trtllm(out, version):
    """Feed the rendered CLI and YAML to the emulator's trtllm-serve parser; return the LLM args."""
    values, code = trtllm_cli.parse_cli(out["args"], version, io.StringIO())
    assert code is None, "emulated trtllm-serve %s refused the command line %s" % (version, out["args"])
    return trtllm_args.build_llm_args(version, trtllm_cli.cli_to_llm_args(values), yaml.safe_load(out["config_yaml"]))


def emulate_vllm(out):
    assert out["args"][0] == "serve"
    args = vllm_cli.build_parser().parse_args(vllm_cli._flexible(out["args"][1:]))
    if args.speculative_config is None:
        return args, None
    return args, vllm_cli.speculative_config(args.speculative_config, args.tensor_parallel_size, out["env"],
                                             lambda w: None)


# --------------------------------------------------------------------------- every profile, every version

def test_every_seed_system_has_a_profile():
    seeds = set()
    for meta in list_profiles().values():
        seeds.update(meta["seeds"])
    assert seeds == {"000", "001", "002", "003", "004"}
    assert len(PROFILES) == 10
    assert all(profile_versions(name) for name in PROFILES), "a profile supports no representative version"


@pytest.mark.parametrize("name,version", PROFILE_CASES)
def test_profile_renders_and_the_emulated_engine_accepts_it(name, version):
    out = render(name, version)
    again = render(name, version)
    assert out == again, "rendering is not deterministic"
    assert out["version"] == version and out["profile"] == name
    assert out["command"][1:] == out["args"]
    engine = PROFILES[name]["instance"]["engine"]
    if engine == "trtllm":
        assert out["command"][0] == "trtllm-serve"
        assert yaml.safe_load(out["config_yaml"]) == out["config"]
        assert out["config"]["enable_iter_perf_stats"] is True
        assert out["args"][-2:] == ["--extra_llm_api_options", "/etc/specdec/engine.yaml"]
        assert out["health_model_id"] == Path(out["model_path"]).name
        llm = emulate_trtllm(out, version)
        assert llm["enable_iter_perf_stats"] is True
        spec = out["config"].get("speculative_config")
        if spec:
            if PROFILES[name]["instance"]["speculative"]["method"] == "eagle3":
                assert spec["decoding_type"] == ("Eagle3" if version.startswith("1.3") else "Eagle")
            assert llm["speculative_config"]["max_draft_len"] == spec["max_draft_len"]
    else:
        assert out["command"][:2] == ["vllm", "serve"] and out["config"] == {} and out["config_yaml"] == ""
        args, spec = emulate_vllm(out)
        assert args.served_model_name == [out["served_model_name"]] == [out["health_model_id"]]
        method = PROFILES[name]["instance"]["speculative"]["method"]
        assert (spec is None) == (method == "none")
        if spec:
            assert spec["num_speculative_tokens"] == PROFILES[name]["instance"]["speculative"]["max_draft_len"]


def test_b200_profile_sampler_follows_the_version():
    assert render("trtllm-gpt-oss-120b-eagle3-b200", "1.1.0rc0")["config"]["use_torch_sampler"] is True
    # 1.1.0rc5 already took sampler_type (the tables say which key a release takes, not its version number)
    for version in ("1.1.0rc5", "1.1.0", "1.2.0rc1", "1.2.1", "1.3.0rc3", "1.3.0rc18"):
        cfg = render("trtllm-gpt-oss-120b-eagle3-b200", version)["config"]
        assert cfg["sampler_type"] == "TorchSampler" and "use_torch_sampler" not in cfg
    # 1.3.0rc27 removed sampler_type: the instance key that asks for it is refused by name, auto renders nothing
    with pytest.raises(SpecConfigError, match="sampler 'torch' cannot be set on TensorRT-LLM 1.3.0rc27: its LLM API "
                                              "has no sampler_type"):
        render("trtllm-gpt-oss-120b-eagle3-b200", "1.3.0rc27")
    cfg = render("trtllm-gpt-oss-120b-eagle3-b200", "1.3.0rc28", sampler="auto")["config"]
    assert "sampler_type" not in cfg and "use_torch_sampler" not in cfg
    assert cfg["speculative_config"]["decoding_type"] == "Eagle3"


@pytest.mark.parametrize("version", spec_tables.table_versions("trtllm"))
def test_every_tensorrt_llm_profile_renders_on_every_tabled_release_but_a_sampler_removed_upstream(version):
    """Which profile needs which release (docs/spec_config.md, Profiles): each renders on each tabled release, the
    B200 profile's sampler: torch excepted from 1.3.0rc27, where upstream removed sampler_type."""
    for name in sorted(n for n in PROFILES if n.startswith("trtllm-")):
        inst = {"name": "x", "profile": name, "engine_version": version}
        if name == "trtllm-gpt-oss-120b-eagle3-b200" and "sampler_type" not in spec_tables.accepted_names(
                spec_tables.load_table("trtllm", version), "TorchLlmArgs") and version >= "1.2.0rc0":
            with pytest.raises(SpecConfigError, match="sampler 'torch' cannot be set"):
                sc.render(inst)
            inst["sampler"] = "auto"
        assert sc.render(inst)["table_version"] == version, name


def test_draft_target_is_the_decoding_type_its_release_takes():
    # a from_dict table took DraftTarget up to 1.3.0rc3; from 1.3.0rc12 the discriminated union takes only the literal
    for version, dtype in (("1.2.1", "DraftTarget"), ("1.3.0rc3", "DraftTarget"), ("1.3.0rc12", "Draft_Target"),
                           ("1.3.0rc28", "Draft_Target")):
        inst = {"name": "d", "engine": "trtllm", "engine_version": version, "model": "a/b",
                "speculative": {"method": "draft_target", "max_draft_len": 4, "draft_model": "a/draft"}}
        assert sc.render(inst)["config"]["speculative_config"]["decoding_type"] == dtype, version
    with pytest.raises(SpecConfigError, match="'DraftTarget' is not a decoding_type of TensorRT-LLM 1.3.0rc13"):
        sc.render(dict(inst, engine_version="1.3.0rc13", speculative={"method": "none"},
                       llm_api_options={"speculative_config": {"decoding_type": "DraftTarget", "max_draft_len": 4,
                                                               "speculative_model": "/models/a/draft"}}))


def test_instance_keys_override_the_profile_deeply():
    out = render("trtllm-gpt-oss-120b-eagle3-long-context", "1.2.1",
                 speculative={"max_draft_len": 3}, llm_api_options={"kv_cache_config": {"enable_block_reuse": True}})
    spec = out["config"]["speculative_config"]
    assert spec["max_draft_len"] == 3
    assert spec["speculative_model_dir"] == "/models/nvidia/gpt-oss-120b-Eagle3-long-context"
    assert out["config"]["kv_cache_config"] == {"enable_block_reuse": True, "free_gpu_memory_fraction": 0.9}


def test_outputs_options_and_paths():
    out = sc.render({"name": "a", "engine": "trtllm", "image": "registry.local/specdec-lab/tensorrt-llm-emulator:1.2.1",
                     "model": "Qwen/Qwen3-0.6B", "port": 8123, "gpus": "all",
                     "speculative": {"method": "draft_target", "draft_model": "/srv/draft", "max_draft_len": 2}},
                    models_dir="/weights", config_path="/etc/specdec/a/engine.yaml")
    assert out["version"] == "1.2.1"
    assert out["model_path"] == "/weights/Qwen/Qwen3-0.6B" and out["args"][0] == "/weights/Qwen/Qwen3-0.6B"
    assert out["health_model_id"] == out["served_model_name"] == "Qwen3-0.6B"
    assert out["config"]["speculative_config"]["speculative_model_dir"] == "/srv/draft"
    assert out["config_path"] == "/etc/specdec/a/engine.yaml" and out["port"] == 8123
    assert out["args"][out["args"].index("--port") + 1] == "8123"
    assert out["config_yaml"].startswith("# extra_llm_api_options of trtllm-serve for instance 'a' (TensorRT-LLM 1.2.1)")


@pytest.mark.parametrize("image,expected", [
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "1.2.0rc6"),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post1", "1.2.0rc6.post1"),
    ("specdec-lab/tensorrt-llm-emulator:1.2.1", "1.2.1"),
    ("localhost:5000/specdec-lab/tensorrt-llm-emulator:1.1.0rc0", "1.1.0rc0"),
    ("vllm/vllm-openai:v0.11.0", "0.11.0"),
    ("vllm/vllm-openai:v0.11.0@sha256:" + "a" * 64, "0.11.0"),
    ("nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev", None),
    ("localhost:5000/vllm/vllm-openai", None),
    ("vllm/vllm-openai:latest", None),
])
def test_version_from_image(image, expected):
    assert version_from_image(image) == expected


def test_versions_order_like_releases():
    order = ["1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.0rc6.post1", "1.2.0", "1.2.1", "1.3.0rc3", "1.3.0"]
    keys = [EngineVersion("trtllm", v) for v in order]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert EngineVersion("vllm", "0.9.0.1") > "0.9.0" and EngineVersion("vllm", "v0.11.0") == "0.11.0"


def test_post_release_uses_its_base_schema():
    out = render("trtllm-gpt-oss-120b-eagle3", "1.2.0rc6.post1", tool_parser="qwen3")
    assert out["args"][out["args"].index("--tool_parser") + 1] == "qwen3"


def test_draft_len_schedule_both_engines():
    out = render("trtllm-gpt-oss-120b-eagle3-long-context", "1.2.0rc6",
                 speculative={"draft_len_schedule": {"1": 5, "4": 3, "8": 0}})
    assert out["config"]["speculative_config"]["draft_len_schedule"] == {1: 5, 4: 3, 8: 0}
    emulate_trtllm(out, "1.2.0rc6")
    out = render("vllm-gpt-oss-120b-eagle3", "0.32.0", max_batch_size=16,
                 speculative={"draft_len_schedule": {1: 3, 4: 2, 8: 0}})
    spec = json.loads(out["args"][out["args"].index("--speculative-config") + 1])
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 3, 3], [4, 7, 2], [8, 16, 0]]


@pytest.mark.parametrize("version", [v for v in TRTLLM_REPRESENTATIVE if v.startswith("1.3")])
@pytest.mark.parametrize("profile", ["trtllm-gpt-oss-120b-eagle3-long-context", "trtllm-llama-3.3-70b-fp4-draft-target"])
def test_a_trtllm_1_3_instance_with_a_schedule_gets_a_verdict(profile, version):
    """Every 1.3 decoding config class takes draft_len_schedule (the 1.3.0rc3 table); the check looked it up on
    DecodingBaseConfig, which that table does not list, and the filter stopped with KeyError instead."""
    instance = {"name": "t", "profile": profile, "engine_version": version,
                "speculative": {"max_draft_len": 3, "draft_len_schedule": {"1": 3, "4": 2, "16": 0}}}
    out = spec_config(instance)
    spec = out["config"]["speculative_config"]
    assert spec["draft_len_schedule"] == {1: 3, 4: 2, 16: 0}
    assert spec["decoding_type"] == ("Eagle3" if "eagle3" in profile else "DraftTarget")
    assert out["table_version"] == "1.3.0rc3"
    assert emulate_trtllm(out, version)["speculative_config"]["draft_len_schedule"] == {1: 3, 4: 2, 16: 0}
    # a bad schedule on 1.3 is a refusal that names the setting, not an internal error
    with pytest.raises(AnsibleFilterError, match=r"^spec_config: instance 't': speculative.draft_len_schedule\[1\] is 2 "
                                                 r"but must equal max_draft_len 3"):
        spec_config(dict(instance, speculative={"max_draft_len": 3, "draft_len_schedule": {1: 2}}))
    # ngram and mtp too: each decoding type's 1.3 class has the field
    for method in ("ngram", "mtp"):
        out = spec_config({"name": "t", "engine": "trtllm", "engine_version": version, "model": "a/b",
                           "speculative": {"method": method, "max_draft_len": 2, "draft_len_schedule": {1: 2, 8: 1}}})
        assert out["config"]["speculative_config"]["draft_len_schedule"] == {1: 2, 8: 1}


def test_pdl_is_the_profiles_or_the_instances_only():
    """TRTLLM_ENABLE_PDL=1 comes from the profiles of the recipes that set it (000, 001) or from the
    instance's env; nothing adds it to other TensorRT-LLM instances (the DGX Spark and B200 recipes)."""
    with_pdl = {name for name, prof in PROFILES.items() if "TRTLLM_ENABLE_PDL" in prof["instance"].get("env", {})}
    assert with_pdl == {"trtllm-gpt-oss-120b-low-latency", "trtllm-gpt-oss-120b-eagle3", "trtllm-gpt-oss-120b-eagle3-v2"}
    for name in ("trtllm-gpt-oss-120b-eagle3-long-context", "trtllm-llama-3.3-70b-fp4-draft-target",
                 "trtllm-gpt-oss-120b-eagle3-b200"):
        assert "TRTLLM_ENABLE_PDL" not in render(name, "1.2.0rc6")["env"]
    assert render(None, engine="trtllm", model="openai/gpt-oss-120b")["env"] == {}
    out = render("trtllm-gpt-oss-120b-eagle3-long-context", env={"TRTLLM_ENABLE_PDL": "1"})
    assert out["env"] == {"TRTLLM_ENABLE_PDL": "1"}
    # the instance wins over its profile: "0" turns it off
    assert render("trtllm-gpt-oss-120b-eagle3", env={"TRTLLM_ENABLE_PDL": "0"})["env"] == {"TRTLLM_ENABLE_PDL": "0"}


def test_seed_001_kv_fraction_by_name_or_override():
    """Recipe 001 runs trtllm-serve with --kv_cache_free_gpu_memory_fraction 0.95: its Eagle3-v2 profile
    says so; its no-speculation run is the low-latency profile (000's 0.9) with gpu_memory_fraction: 0.95."""
    def fraction(out):
        return out["args"][out["args"].index("--kv_cache_free_gpu_memory_fraction") + 1]
    assert fraction(render("trtllm-gpt-oss-120b-eagle3-v2")) == "0.95"
    assert fraction(render("trtllm-gpt-oss-120b-low-latency")) == "0.9"
    out = render("trtllm-gpt-oss-120b-low-latency", gpu_memory_fraction=0.95)
    assert fraction(out) == "0.95" and "free_gpu_memory_fraction" not in out["config_yaml"]
    emulate_trtllm(out, "1.2.0rc6")
    # the same value given in the YAML would disagree with the profile's command line value
    with pytest.raises(sc.SpecConfigError, match="gpu_memory_fraction is 0.9 but llm_api_options.kv_cache_config"):
        render("trtllm-gpt-oss-120b-low-latency", llm_api_options={"kv_cache_config": {"free_gpu_memory_fraction": 0.95}})


def test_vllm_arctic_env_and_requirement():
    out = render("vllm-gpt-oss-120b-arctic-suffix", "0.10.1")
    assert out["env"]["ARCTIC_INFERENCE_ENABLED"] == "1"
    assert out["image_requirements"] == ["arctic-inference==0.1.0"]
    out = render(None, "0.11.0", engine="vllm", model="Qwen/Qwen3-0.6B",
                 speculative={"method": "suffix", "arctic_inference_version": "0.1.2"})
    assert out["env"]["ARCTIC_INFERENCE_ENABLED"] == "1"
    args, spec = emulate_vllm(out)
    assert spec["method"] == "suffix"


def test_extra_args_pass_through_when_known():
    out = render("trtllm-llama-3.3-70b-fp4-draft-target", "1.2.0rc6", extra_args=["--num_postprocess_workers", "2",
                                                                                  "--enable_chunked_prefill"])
    assert out["args"][-3:] == ["--num_postprocess_workers", "2", "--enable_chunked_prefill"]
    emulate_trtllm(out, "1.2.0rc6")


def test_filter_wrapper_and_profile_listing():
    with pytest.raises(AnsibleFilterError, match=r"^spec_config: instance 't': speculative_config.speculative_model"):
        spec_config({"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": "1.2.0rc6",
                     "llm_api_options": {"speculative_config": {"speculative_model": "/m"}}})
    assert set(profiles_for("vllm")) == {n for n in PROFILES if n.startswith("vllm-")}
    assert profiles_for()["trtllm-gpt-oss-120b-eagle3-b200"]["seeds"] == ["004"]
    with pytest.raises(AnsibleFilterError):
        profiles_for("sglang")


def test_ansible_tagged_strings_are_accepted():
    class Tagged(str):
        pass
    out = sc.render({Tagged("name"): Tagged("t"), "engine": Tagged("trtllm"), "engine_version": Tagged("1.2.1"),
                     "model": Tagged("openai/gpt-oss-120b"), "env": {"A": Tagged("x")}})
    assert type(out["env"]["A"]) is str and "Tagged" not in out["config_yaml"]


# --------------------------------------------------------------------------- the seeds, reproduced

PATH = "<model path>"
# Options the collection sets on purpose although a seed leaves them at their default or unset:
# --backend pytorch (the default backend, always explicit), --host 0.0.0.0 and --port (container
# networking instead of --network host), --served-model-name (clients and health checks use the HF id).
ADDED_ON_PURPOSE = {"--backend", "--host", "--port", "--served-model-name"}


def _strip_paths(cfg):
    cfg = copy.deepcopy(cfg)
    spec = cfg.get("speculative_config")
    if spec and "speculative_model_dir" in spec:
        assert spec["speculative_model_dir"].startswith("/")
        spec["speculative_model_dir"] = PATH
    return cfg


def _options(words, engine):
    """argv -> (positional model, {option: value or True}), paths replaced by PATH."""
    words = list(words)
    opts = {}
    model = None
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            model = w
            i += 1
            continue
        name = w if engine == "trtllm" else w.replace("_", "-")
        flag = i + 1 >= len(words) or words[i + 1].startswith("--")
        opts[name] = True if flag else words[i + 1]
        i += 1 if flag else 2
    for path_opt in ("--extra_llm_api_options", "--config"):
        if path_opt in opts:
            opts[path_opt] = PATH
    if "--speculative-config" in opts:
        spec = json.loads(opts["--speculative-config"])
        if "model" in spec:
            spec["model"] = PATH
        opts["--speculative-config"] = spec
    return model, opts


SEED_CASES = yaml.safe_load((SEEDS / "commands.yml").read_text())


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: "%s-%s" % (c["seed"], c["profile"]))
def test_seed_reproduced_by_its_profile(case):
    for version in case["versions"]:
        out = render(case["profile"], version, **case.get("overrides", {}))
        engine = out["engine"]
        if "yaml" in case:
            seed_cfg = yaml.safe_load((SEEDS / case["yaml"]).read_text())
            ours = dict(out["config"])
            # we add enable_iter_perf_stats on purpose (trtllm-serve serves /metrics only with it)
            assert ours.pop("enable_iter_perf_stats") is True
            assert _strip_paths(ours) == _strip_paths(seed_cfg)
        words = shlex.split(case["command"])
        seed_model, seed_opts = _options(words[1:] if engine == "trtllm" else words[2:], engine)
        our_model, our_opts = _options(out["args"] if engine == "trtllm" else out["args"][1:], engine)
        assert seed_model and our_model.startswith("/models/")
        for name in ADDED_ON_PURPOSE:
            if name not in seed_opts:
                our_opts.pop(name, None)
        assert our_opts == seed_opts
        # exactly the recipe's environment: TRTLLM_ENABLE_PDL=1 only where the recipe sets it
        assert out["env"] == case.get("env", {})


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: "%s-%s" % (c["seed"], c["profile"]))
def test_seed_own_yaml_and_cli_pass_the_tables_and_the_emulator_of_their_release(case):
    """The recipe's own YAML and serve command line, as written, for each release it runs: the version's
    table accepts every YAML key and every option (with the value or flag the table says), and the
    emulated engine of that release accepts both."""
    for version in case["versions"]:
        ver = EngineVersion(case["profile"].split("-", 1)[0], version)
        words = shlex.split(case["command"])
        if ver.engine == "vllm":
            continue  # vLLM's options are the engine's own parser's (the engine check), not tabled
        table = spec_tables.table_for(ver)
        rows = spec_tables.trtllm_cli_rows(table)
        i = 2
        while i < len(words):
            assert words[i] in rows, "%s is not a trtllm-serve option of %s" % (words[i], version)
            i += 2 if rows[words[i]] else 1
        seed_cfg = yaml.safe_load((SEEDS / case["yaml"]).read_text()) if "yaml" in case else {}
        spec_schema.validate_trtllm_config("seed-%s" % case["seed"], ver, copy.deepcopy(seed_cfg))
        values, code = trtllm_cli.parse_cli(words[1:], version, io.StringIO())
        assert code is None, "the emulated trtllm-serve %s refused the recipe's command line" % version
        trtllm_args.build_llm_args(version, trtllm_cli.cli_to_llm_args(values), copy.deepcopy(seed_cfg))


def test_seed_004_on_later_versions_uses_sampler_type():
    seed_cfg = yaml.safe_load((SEEDS / "004_eagle_b200.yaml").read_text())
    del seed_cfg["use_torch_sampler"]
    seed_cfg["sampler_type"] = "TorchSampler"  # the seed's own instruction for later versions
    for version in ("1.2.0rc1", "1.2.0rc6", "1.2.1"):
        ours = render("trtllm-gpt-oss-120b-eagle3-b200", version)["config"]
        ours.pop("enable_iter_perf_stats")
        assert _strip_paths(ours) == _strip_paths(seed_cfg)


# --------------------------------------------------------------------------- rejected combinations

EAGLE = "trtllm-gpt-oss-120b-eagle3"
INVALID = [
    # (id, profile, version, instance overrides, message fragments)
    ("speculative_model-before-1.2.0", EAGLE, "1.2.0rc6",
     {"llm_api_options": {"speculative_config": {"speculative_model": "/models/x/y"}}},
     ["instance 't': speculative_config.speculative_model is not a field of EagleDecodingConfig in TensorRT-LLM "
      "1.2.0rc6 (accepted by the sourced TensorRT-LLM 1.2.0 to ", "allowed: ", "speculative_model_dir"]),
    ("Eagle3-before-1.3", EAGLE, "1.2.1", {"llm_api_options": {"speculative_config": {"decoding_type": "Eagle3"}}},
     ["speculative_config.decoding_type 'Eagle3' is not a decoding_type of TensorRT-LLM 1.2.1",
      "decoding_type: Eagle"]),
    ("use_torch_sampler-on-1.2", EAGLE, "1.2.0rc1", {"llm_api_options": {"use_torch_sampler": True}},
     ["use_torch_sampler is not a field of TorchLlmArgs in TensorRT-LLM 1.2.0rc1 (accepted by the sourced "
      "TensorRT-LLM 1.1.0rc0 table)", "sampler_type"]),
    ("sampler_type-on-1.1", EAGLE, "1.1.0rc0", {"llm_api_options": {"sampler_type": "TorchSampler"}},
     ["sampler_type is not a field of TorchLlmArgs in TensorRT-LLM 1.1.0rc0 (accepted by the sourced TensorRT-LLM "
      "1.1.0rc5 to ", "use_torch_sampler"]),
    ("bad-sampler-type", EAGLE, "1.2.1", {"llm_api_options": {"sampler_type": "Torch"}},
     ["sampler_type must be one of: TRTLLMSampler, TorchSampler, auto (got 'Torch')"]),
    ("draft_len_schedule-before-rc3", EAGLE, "1.2.0rc1", {"speculative": {"draft_len_schedule": {1: 3}}},
     ["speculative.draft_len_schedule is not accepted by TensorRT-LLM 1.2.0rc1 (its EagleDecodingConfig has no "
      "draft_len_schedule; accepted by the sourced TensorRT-LLM 1.2.0rc3 to ", "(got {1: 3})"]),
    ("raw-draft_len_schedule-before-rc3", EAGLE, "1.2.0rc1",
     {"llm_api_options": {"speculative_config": {"draft_len_schedule": {1: 3}}}},
     ["speculative_config.draft_len_schedule is not a field of EagleDecodingConfig in TensorRT-LLM 1.2.0rc1 "
      "(accepted by the sourced TensorRT-LLM 1.2.0rc3 to "]),
    ("schedule-without-1", EAGLE, "1.2.1", {"speculative": {"draft_len_schedule": {2: 3}}},
     ["draft_len_schedule must contain batch size 1"]),
    ("schedule-1-not-max", EAGLE, "1.2.1", {"speculative": {"draft_len_schedule": {1: 2, 4: 1}}},
     ["draft_len_schedule[1] is 2 but must equal max_draft_len 3"]),
    ("schedule-above-max", EAGLE, "1.2.1",
     {"llm_api_options": {"speculative_config": {"draft_len_schedule": {1: 3, 4: 5}}}},
     ["speculative_config.draft_len_schedule[4] is 5, above max_draft_len 3"]),
    ("unknown-top-key", EAGLE, "1.2.1", {"llm_api_options": {"enable_magic": True}},
     ["enable_magic is not a field of TorchLlmArgs in TensorRT-LLM 1.2.1: TensorRT-LLM 1.2.1 rejects unknown keys"]),
    ("unknown-kv-key", EAGLE, "1.2.1", {"llm_api_options": {"kv_cache_config": {"fraction": 0.5}}},
     ["kv_cache_config.fraction is not a field of KvCacheConfig in TensorRT-LLM 1.2.1", "free_gpu_memory_fraction"]),
    ("kv-fraction-range", EAGLE, "1.2.1", {"llm_api_options": {"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}},
     ["kv_cache_config.free_gpu_memory_fraction must be a fraction in (0, 1] (got 1.5)"]),
    ("kv-fraction-zero", EAGLE, "1.2.1", {"llm_api_options": {"kv_cache_config": {"free_gpu_memory_fraction": 0}}},
     ["free_gpu_memory_fraction must be a fraction in (0, 1]"]),
    ("moe-backend", EAGLE, "1.2.1", {"llm_api_options": {"moe_config": {"backend": "cutlass"}}},
     ["moe_config.backend must be one of: CUTLASS, CUTEDSL, WIDEEP, TRTLLM, DEEPGEMM, VANILLA, TRITON in "
      "TensorRT-LLM 1.2.1 (got 'cutlass')"]),
    ("moe-low-precision-on-1.1", EAGLE, "1.1.0rc0",
     {"llm_api_options": {"moe_config": {"use_low_precision_moe_combine": True}}},
     ["moe_config.use_low_precision_moe_combine is not a field of MoeConfig in TensorRT-LLM 1.1.0rc0 (accepted by "
      "the sourced TensorRT-LLM 1.2.0rc1"]),
    ("cuda-graph-mismatch", EAGLE, "1.2.1",
     {"llm_api_options": {"cuda_graph_config": {"batch_sizes": [1, 2, 4], "max_batch_size": 8}}},
     ["cuda_graph_config.max_batch_size is 8 but batch_sizes ends at 4"]),
    ("cuda-graph-type", EAGLE, "1.2.1", {"llm_api_options": {"cuda_graph_config": {"enable_padding": "yes"}}},
     ["cuda_graph_config.enable_padding must be true or false"]),
    ("attention-dp-key", EAGLE, "1.2.1", {"llm_api_options": {"attention_dp_config": {"balance": True}}},
     ["attention_dp_config.balance is not a field of AttentionDpConfig", "enable_balance"]),
    ("max_draft_len-zero-raw", EAGLE, "1.2.1", {"llm_api_options": {"speculative_config": {"max_draft_len": 0}}},
     ["speculative_config.max_draft_len must be set to an integer > 0 for decoding_type Eagle"]),
    ("max_draft_len-neutral", EAGLE, "1.2.1", {"speculative": {"max_draft_len": 0}},
     ["speculative.max_draft_len must be an integer > 0 (got 0)"]),
    ("both-model-aliases", EAGLE, "1.2.1", {"llm_api_options": {"speculative_config": {"speculative_model": "/m"}}},
     ["speculative_model and speculative_model_dir are aliases"]),
    ("unknown-decoding-type", EAGLE, "1.2.1", {"llm_api_options": {"speculative_config": {"decoding_type": "Eagle2"}}},
     ["'Eagle2' is not a decoding_type of TensorRT-LLM 1.2.1 (accepted: AUTO, DraftTarget, Eagle"]),
    ("medusa-on-pytorch", EAGLE, "1.2.1", {"llm_api_options": {"speculative_config": {"decoding_type": "Medusa"}}},
     ["'Medusa': project policy: specdec.serve serves on the pytorch backend"]),
    ("eagle-key-on-draft-target", "trtllm-llama-3.3-70b-fp4-draft-target", "1.2.1",
     {"llm_api_options": {"speculative_config": {"eagle3_one_model": False}}},
     ["speculative_config.eagle3_one_model is not a field of DraftTargetDecodingConfig in TensorRT-LLM 1.2.1"]),
    ("load_format-on-1.1", EAGLE, "1.1.0rc0", {"llm_api_options": {"speculative_config": {"load_format": "auto"}}},
     ["speculative_config.load_format is not a field of EagleDecodingConfig in TensorRT-LLM 1.1.0rc0"]),
    ("perf-stats-off", EAGLE, "1.2.1", {"llm_api_options": {"enable_iter_perf_stats": False}},
     ["llm_api_options.enable_iter_perf_stats must stay true"]),
    ("stream_interval", EAGLE, "1.2.1", {"llm_api_options": {"stream_interval": 0}},
     ["stream_interval must be an integer > 0 (got 0)"]),
    ("env_overrides-before-rc5", EAGLE, "1.2.0rc1", {"llm_api_options": {"env_overrides": {"A": "1"}}},
     ["env_overrides is not a field of TorchLlmArgs in TensorRT-LLM 1.2.0rc1 (accepted by the sourced TensorRT-LLM "
      "1.2.0rc5 to "]),
    ("yaml-overrides-cli", "trtllm-gpt-oss-120b-eagle3-long-context", "1.2.1", {"gpu_memory_fraction": 0.8},
     ["gpu_memory_fraction is 0.8 but llm_api_options.kv_cache_config.free_gpu_memory_fraction is 0.9"]),
    ("tool-parser-before-rc6", EAGLE, "1.2.0rc1", {"tool_parser": "qwen3"},
     ["tool_parser is not accepted by TensorRT-LLM 1.2.0rc1"]),
    ("reasoning-parser-choice", EAGLE, "1.2.0rc1", {"reasoning_parser": "qwen3"},
     ["'qwen3' is not a --reasoning_parser choice of TensorRT-LLM 1.2.0rc1 (allowed: deepseek-r1)"]),
    ("config-alias-before-rc6", EAGLE, "1.2.0rc1", {"extra_args": ["--free_gpu_memory_fraction", "0.5"]},
     ["must not set --free_gpu_memory_fraction: spec_config sets it from the instance key gpu_memory_fraction"]),
    ("cli-alias-before-rc6", EAGLE, "1.2.0rc1", {"extra_args": ["--custom_module_dirs", "/x"]},
     ["--custom_module_dirs, which is not a trtllm-serve option of TensorRT-LLM 1.2.0rc1; TensorRT-LLM 1.2.0rc6 to ",
      " accept it"]),
    ("unknown-cli", EAGLE, "1.2.1", {"extra_args": ["--served_model_name", "x"]},
     ["--served_model_name, which is not a trtllm-serve option of TensorRT-LLM 1.2.1"]),
    ("served-name-trtllm", EAGLE, "1.2.1", {"served_model_name": "gpt"},
     ["served_model_name cannot be set for TensorRT-LLM", "'gpt-oss-120b'"]),
    ("suffix-on-trtllm", EAGLE, "1.2.1", {"speculative": {"method": "suffix"}}, ["'suffix' is vLLM-only"]),
    ("unsupported-trtllm-version", EAGLE, "1.0.0", {},
     ["engine_version - TensorRT-LLM 1.0.0 is not a supported version (supported: 1.1.x, 1.2.x, 1.3.x, each also "
      "as .postN)"]),
    ("unsupported-trtllm-line", EAGLE, "1.4.0rc1", {},
     ["engine_version - TensorRT-LLM 1.4.0rc1 is not a supported version (supported: 1.1.x, 1.2.x, 1.3.x"]),
    ("untabled-trtllm-release", EAGLE, "1.2.0rc4", {},
     ["engine_version - TensorRT-LLM 1.2.0rc4 has no engine table of its own", "judged_in_image_only: true"]),
    ("unparsable-version", EAGLE, "latest", {}, ["'latest' is not a TensorRT-LLM version"]),
    ("no-version", EAGLE, None, {"image": "nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev"},
     ["engine_version is not set and the image tag of 'nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev' "
      "is not a version"]),
    ("unknown-profile", "nope", "1.2.1", {}, ["profile 'nope' is not a known profile"]),
    ("unknown-instance-key", EAGLE, "1.2.1", {"max_batchsize": 2}, ["max_batchsize is not an instance key"]),
    ("unknown-speculative-key", EAGLE, "1.2.1", {"speculative": {"draft_len": 2}}, ["speculative.draft_len is not"]),
    ("bad-model-id", EAGLE, "1.2.1", {"model": "../etc/passwd"}, ["model must be a Hugging Face id"]),
    ("eagle3-needs-draft", None, "1.2.1",
     {"engine": "trtllm", "model": "a/b", "speculative": {"method": "eagle3", "max_draft_len": 3}},
     ["speculative.draft_model is required for method 'eagle3'"]),
    ("env-bool", EAGLE, "1.2.1", {"env": {"X": True}}, ["env.X must be a string"]),
    ("profile-engine-range", "vllm-gpt-oss-120b-arctic-suffix", "0.11.0", {},
     ["profile 'vllm-gpt-oss-120b-arctic-suffix' is made for vllm versions 0.10.1 to 0.10.1, not 0.11.0"]),
    # vLLM
    ("arctic-pin-mismatch", None, "0.11.0",
     {"engine": "vllm", "model": "openai/gpt-oss-120b", "speculative": {
         "method": "arctic", "draft_model": "Snowflake/Arctic-LSTM-Speculator-gpt-oss-120b", "max_draft_len": 3,
         "arctic_inference_version": "0.1.0"}},
     ["arctic_inference_version is 0.1.0, which pins vllm==0.10.1 exactly", "the image is vLLM 0.11.0",
      "or arctic-inference 0.1.2"]),
    ("arctic-no-release", None, "0.12.0",
     {"engine": "vllm", "model": "openai/gpt-oss-120b", "speculative": {
         "method": "arctic", "draft_model": "Snowflake/Arctic-LSTM-Speculator-gpt-oss-120b", "max_draft_len": 3}},
     ["no arctic-inference release pins vllm==0.12.0", "0.1.2 -> vllm==0.11.0"]),
    ("vllm-schedule-too-old", "vllm-gpt-oss-120b-eagle3", "0.11.0", {"speculative": {"draft_len_schedule": {1: 3}}},
     ["speculative_config.num_speculative_tokens_per_batch_size is not a known key of the vLLM 0.11.0 speculative "
      "config", "accepted by the sourced vLLM 0.24.0 to 0.34.0 tables", "remove that"]),
    ("vllm-schedule-not-in-0.20", "vllm-gpt-oss-120b-eagle3", "0.20.0", {"speculative": {"draft_len_schedule": {1: 3}}},
     ["num_speculative_tokens_per_batch_size is not a known key of the vLLM 0.20.0 speculative config",
      "vLLM rejects unknown keys there"]),
    ("vllm-unknown-spec-key", "vllm-gpt-oss-120b-eagle3", "0.11.0",
     {"speculative": {"options": {"enable_suffix_decoding": True}}},
     ["speculative_config.enable_suffix_decoding is not a known key of the vLLM 0.11.0 speculative config",
      "ArcticInference plugin"]),
    ("vllm-draft-tp", "vllm-gpt-oss-120b-eagle3", "0.11.0", {"speculative": {"options": {"draft_tensor_parallel_size": 2}}},
     ["draft_tensor_parallel_size must be 1 or the target tensor parallel size 1 (got 2)"]),
    ("vllm-tp-key", "vllm-gpt-oss-120b-eagle3", "0.11.0", {"speculative": {"options": {"tensor_parallel_size": 1}}},
     ["speculative_config.tensor_parallel_size is not a known key of the vLLM 0.11.0 speculative config",
      "use draft_tensor_parallel_size", "refused as project policy"]),
    ("vllm-llm-api-options", "vllm-gpt-oss-120b", "0.11.0", {"llm_api_options": {"enable_autotuner": False}},
     ["llm_api_options is not accepted for engine vllm"]),
    ("vllm-owned-arg", "vllm-gpt-oss-120b", "0.11.0", {"extra_args": ["--max_num_seqs", "4"]},
     ["must not set --max_num_seqs: spec_config sets it from the instance key max_batch_size"]),
    ("vllm-version-range", "vllm-gpt-oss-120b", "1.2.0", {}, ["vLLM 1.2.0 is not supported"]),
    ("vllm-suffix-decoding-flag", "vllm-gpt-oss-120b-eagle3", "0.11.0", {"speculative": {"suffix_decoding": True}},
     ["speculative.suffix_decoding applies to method 'arctic' only"]),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_rejected_with_key_version_and_fix(case):
    _id, profile, version, over, fragments = case
    inst = {"name": "t", "engine_version": version}
    if profile:
        inst["profile"] = profile
    inst.update(over)
    with pytest.raises(SpecConfigError) as err:
        sc.render(inst)
    text = str(err.value)
    assert text.startswith("instance 't': "), text
    for fragment in fragments:
        assert fragment in text, "%r not in %r" % (fragment, text)


# The same raw keys, written into an otherwise valid config, are refused by the emulated engine too:
# the controller-side check and the engine agree. Left out: rules that are ours, not the engine's
# (enable_iter_perf_stats must stay on; a KV fraction of 0 is accepted by the engine but reserves no
# cache, so the controller wants (0, 1]; pydantic coerces "yes" to true, the controller wants a real
# boolean; 1.2.x checks only that max_draft_len is set, 1.3 asserts > 0 and so does the controller
# everywhere; both model aliases at once are ambiguous, pydantic silently picks one; sampler_type is typed
# Union[str, SamplerType] upstream, so any string passes pydantic, and the controller wants a SamplerType).
OURS_ONLY = ("perf-stats-off", "kv-fraction-zero", "cuda-graph-type", "max_draft_len-zero-raw", "both-model-aliases",
             "bad-sampler-type")
ENGINE_AGREES = [c for c in INVALID if c[1] and c[1].startswith("trtllm") and set(c[3]) == {"llm_api_options"}
                 and c[0] not in OURS_ONLY]


@pytest.mark.parametrize("case", ENGINE_AGREES, ids=[c[0] for c in ENGINE_AGREES])
def test_the_emulated_engine_rejects_the_same_configs(case):
    _id, profile, version, over, _fragments = case
    good = render(profile, version)
    bad = spec_instance.deep_merge(good["config"], over["llm_api_options"])
    values, code = trtllm_cli.parse_cli(good["args"], version, io.StringIO())
    assert code is None
    with pytest.raises((ValidationError, trtllm_args.EngineConfigError, ValueError)):
        trtllm_args.build_llm_args(version, trtllm_cli.cli_to_llm_args(values), bad)


def test_options_are_checked():
    with pytest.raises(SpecConfigError, match="models_dir must be an absolute path"):
        sc.render({"name": "t", "profile": EAGLE, "engine_version": "1.2.1"}, models_dir="models")
    with pytest.raises(SpecConfigError, match="config_path must be an absolute path"):
        sc.render({"name": "t", "profile": EAGLE, "engine_version": "1.2.1"}, config_path="engine.yaml")
    out = sc.render({"name": "t", "profile": EAGLE, "engine_version": "1.2.1", "my_role_key": 1},
                    ignore_keys=["my_role_key"])
    assert out["engine"] == "trtllm"


def test_an_instance_name_is_a_plain_name_of_the_one_vocabulary():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
    instance = {"name": "n" * vocabulary.NAME_MAX, "engine": "vllm", "image": "x/y:0.11.0", "model": "m/n"}
    sc.render(instance)
    with pytest.raises(sc.SpecConfigError) as err:
        sc.render(dict(instance, name=instance["name"] + "n"))
    assert vocabulary.NAME_WORDS in str(err.value)
