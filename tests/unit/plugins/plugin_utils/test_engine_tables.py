"""spec_config against the generated engine tables (not against the emulator).

For every table: every field of every class reachable from the root is accepted with a value of its
type; a literal field refuses a value outside its literal; a class refuses an unknown sibling key
(as the engine does where the class forbids extras, as project policy where it ignores them); and
keys that exist in another table (or in the hand-transcribed schema) but not in this version's table
are refused on this version. One test per (table, class) keeps the run short.
"""

import copy
import html
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_config as sc
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_schema as spec_schema, _spec_tables as spec_tables
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import EngineVersion, SpecConfigError

REPO = Path(__file__).resolve().parents[4]
INDEX = spec_tables.index()
TRT_TABLES = sorted(INDEX["tables"].get("trtllm", {}), key=lambda v: EngineVersion("trtllm", v).key)
VLLM_TABLES = sorted(INDEX["tables"].get("vllm", {}), key=lambda v: EngineVersion("vllm", v).key)
WRONG = "no-such-value-in-any-table"


def trt(version):
    return spec_tables.load_table("trtllm", version)


def vllm(version):
    return spec_tables.load_table("vllm", version)


# --------------------------------------------------------------------------- TensorRT-LLM

def _spec_base(table, dtype, cls):
    """A speculative_config that passes every rule for this decoding class."""
    fields = table["classes"][cls]["fields"]
    base = {"decoding_type": dtype, "max_draft_len": 3}
    if "speculative_model" in fields:
        base["speculative_model"] = "/models/draft"
    elif "speculative_model_dir" in fields:
        base["speculative_model_dir"] = "/models/draft"
    if "max_matching_ngram_size" in fields:
        base["max_matching_ngram_size"] = 2
    for name, field in fields.items():
        if field.get("required"):
            base[name] = spec_tables.example_value(field["type"], table)
    return base


class KeyPath(tuple):
    """A path of keys from the root, with the siblings each enclosing mapping needs (``outer``: depth -> mapping;
    a class nested in a decoding class sits beside that class's decoding_type)."""

    def __new__(cls, keys, outer=None):
        self = super().__new__(cls, keys)
        self.outer = dict(outer or {})
        return self

    def __add__(self, more):
        return KeyPath(tuple(self) + tuple(more), self.outer)


def trt_locations(table):
    """class name -> (path of keys from the root, the mapping the class sits in with its siblings)."""
    out = {table["root"]: (KeyPath(()), {})}
    for dotted, dispatch in sorted(table["dispatch"].items()):
        field = dotted.split(".", 1)[1]
        picked = {}
        for kind, cls in dispatch["classes"].items():
            override = dispatch.get("backend_overrides", {}).get(kind, {})
            cls = override.get("pytorch", cls)
            rule = table["classes"][cls].get("backends") or {}
            if "pytorch" in rule.get("unsupported", []) or (rule.get("supported") and "pytorch" not in rule["supported"]):
                continue
            if field == "speculative_config" and kind in spec_schema._TRTLLM_YAML_REFUSED:
                continue
            picked.setdefault(cls, kind)
        for cls, kind in picked.items():
            base = _spec_base(table, kind, cls) if field == "speculative_config" else \
                dict(_required_of(table, cls), **{dispatch["key"]: kind})
            out[cls] = (KeyPath((field,)), base)
    # the root's fields, and those of the dispatched classes (1.3.0rc13's Eagle3 holds an SAEnhancerConfig)
    queue = [table["root"]] + sorted(c for c in out if c != table["root"])
    while queue:
        parent = queue.pop(0)
        path = out[parent][0]
        for name, field in sorted(table["classes"][parent]["fields"].items()):
            if "%s.%s" % (parent, name) in table["dispatch"]:
                continue
            ty = field["type"]
            opts = ty["options"] if ty["kind"] == "union" else [ty]
            for opt in opts:
                if opt["kind"] == "dict" and opt["value"]["kind"] == "class" and opt["value"]["name"] not in out:
                    # a mapping of names to a class (1.3.0rc28's multimodal_config.encoder_cuda_graph)
                    outer = dict(path.outer)
                    outer[len(path)] = out[parent][1]
                    out[opt["value"]["name"]] = (KeyPath(tuple(path) + (name, "any-name"), outer),
                                                 _required_of(table, opt["value"]["name"]))
                    queue.append(opt["value"]["name"])
                if opt["kind"] == "class" and opt["name"] not in out:
                    outer = dict(path.outer)
                    outer[len(path)] = out[parent][1]
                    inner = KeyPath(tuple(path) + (name,), outer)
                    out[opt["name"]] = (inner, _required_of(table, opt["name"]))
                    queue.append(opt["name"])
    return out


def _place(path, mapping):
    config = mapping
    outer = getattr(path, "outer", {})
    for depth in reversed(range(len(path))):
        config = dict(outer.get(depth, {}), **{path[depth]: config})
    return config


def _value_for(table, cls, name, field, base):
    """A value of the field's type that our own rules accept too."""
    if name == "draft_len_schedule":
        return {1: base.get("max_draft_len", 3)}
    if name == "max_batch_size" and cls == "CudaGraphConfig":
        return 0
    if name in ("free_gpu_memory_fraction",):
        return 0.5
    if name == "sampler_type":  # project policy: a SamplerType value, though upstream types it str too
        return table["enums"]["SamplerType"][0]
    if field.get("value_rule"):  # an enum member name, in any case (lower case proves it)
        return field["value_rule"]["names"][0].lower()
    ty = field["type"]
    opts = ty["options"] if ty["kind"] == "union" else [ty]
    first = [o for o in opts if o["kind"] != "none"][0]
    if first["kind"] == "class":
        return _required_of(table, first["name"])
    if first["kind"] == "dict" and first["value"]["kind"] == "class":
        return {"any-name": _required_of(table, first["value"]["name"])}
    return spec_tables.example_value(ty, table)


def _required_of(table, cls):
    """A mapping holding the required fields of a class (nested classes likewise)."""
    out = {}
    for name, field in table["classes"][cls]["fields"].items():
        if field.get("required"):
            out[name] = _value_for(table, cls, name, field, {})
    return out


def _trt_ok(version, config):
    spec_schema.validate_trtllm_config("t", EngineVersion("trtllm", version), config)


def _trt_refused(version, config, *fragments):
    with pytest.raises(SpecConfigError) as err:
        _trt_ok(version, config)
    text = str(err.value)
    assert text.startswith("instance 't': "), text
    for fragment in fragments:
        assert fragment in text, "%r not in %r" % (fragment, text)
    return text


TRT_CLASS_CASES = [(v, c) for v in TRT_TABLES for c in sorted(trt_locations(trt(v)))]


@pytest.mark.parametrize("version,cls", TRT_CLASS_CASES, ids=["%s-%s" % c for c in TRT_CLASS_CASES])
def test_trtllm_every_field_literal_and_unknown_key(version, cls):
    table = trt(version)
    path, base = trt_locations(table)[cls]
    entry = table["classes"][cls]
    title = "TensorRT-LLM %s" % version
    for name, field in sorted(entry["fields"].items()):
        if "%s.%s" % (cls, name) in table["dispatch"]:
            continue  # dispatched (speculative_config, sparse_attention_config, ...): covered through their classes
        if cls == table["root"] and name == "enable_iter_perf_stats":
            continue  # project policy, tested in test_spec_config
        value = _value_for(table, cls, name, field, base)
        names = field.get("accepted_names") or [name] + field.get("aliases", [])
        for alias in names:
            aliased = dict((k, v) for k, v in base.items() if k not in [name] + field.get("aliases", []))
            aliased[alias] = value
            _trt_ok(version, _place(path, aliased))
        if name not in names:  # aliased, without populate_by_name: the field name itself is refused
            dotted = ".".join(path + (name,))
            _trt_refused(version, _place(path, dict(base, **{name: value})), dotted, "is not a field of %s" % cls)
        ty = field["type"]
        opts = ty["options"] if ty["kind"] == "union" else [ty]
        dotted = ".".join(path + (name,))
        # the key of a discriminated union (1.3.0rc13 on) picks the class: a foreign value picks none
        picks = [d["key"] for d in table["dispatch"].values()
                 if d.get("discriminated") and d["key"] == name and cls in d["classes"].values()]
        if picks:
            _trt_refused(version, _place(path, dict(base, **{name: WRONG})), dotted,
                         "'%s' is not a %s of %s" % (WRONG, name, title))
        elif any(o["kind"] in ("literal", "enum") for o in opts) and not any(
                o["kind"] in ("str", "path", "any", "opaque") for o in opts):
            _trt_refused(version, _place(path, dict(base, **{name: WRONG})), dotted, "one of", title)
        if field.get("value_rule"):
            _trt_refused(version, _place(path, dict(base, **{name: WRONG})), dotted,
                         "must be a %s name, in any case" % field["value_rule"]["enum"], title)
    dotted = ".".join(path + ("no_such_key",))
    text = _trt_refused(version, _place(path, dict(base, no_such_key=1)), dotted, "is not a field of %s" % cls, title)
    if entry["extra"] == "forbid":
        assert 'rejects unknown keys in %s (extra="forbid")' % cls in text
    else:
        assert "refused as project policy" in text


@pytest.mark.parametrize("version", TRT_TABLES)
def test_trtllm_every_class_is_reached_or_refused_whole(version):
    """The per-class test above covers every class of the table, but for dispatch bases (never built
    themselves) and decoding classes refused as a whole on the pytorch backend (the table's backend
    rule, a backend override, or project policy)."""
    table = trt(version)
    reached = set(trt_locations(table))
    for dotted, dispatch in table["dispatch"].items():
        reached.add(dispatch["base"])
        for kind, cls in dispatch["classes"].items():
            override = dispatch.get("backend_overrides", {}).get(kind, {}).get("pytorch")
            if cls in reached or override:
                reached.add(cls)
                continue
            config = {"speculative_config": {dispatch["key"]: kind, "max_draft_len": 3}}
            _trt_refused(version, config, "%s.%s '%s'" % (dotted.split(".", 1)[1], dispatch["key"], kind))
            reached.add(cls)
    assert set(table["classes"]) <= reached


@pytest.mark.parametrize("version", TRT_TABLES)
def test_trtllm_keys_of_other_versions_are_refused(version):
    table = trt(version)
    accepted = set(spec_tables.accepted_names(table, table["root"]))
    others = set()
    for other in TRT_TABLES:
        others.update(spec_tables.accepted_names(trt(other), trt(other)["root"]))
    # keys trtllm-serve drops on the pytorch backend are dropped with a warning (tested below)
    absent = sorted(others - accepted - set(table.get("serve_drops_for_pytorch", [])))
    assert absent, "expected keys of other releases that this table lacks"
    for key in absent:
        _trt_refused(version, {key: True}, key, "is not a field of TorchLlmArgs in TensorRT-LLM %s" % version)


@pytest.mark.parametrize("version", TRT_TABLES)
def test_trtllm_dispatch_follows_the_table(version):
    table = trt(version)
    dispatch = table["dispatch"]["TorchLlmArgs.speculative_config"]
    _trt_refused(version, {"speculative_config": {"decoding_type": WRONG}}, "speculative_config.decoding_type",
                 "'%s' is not a decoding_type of TensorRT-LLM %s" % (WRONG, version))
    for dtype, cls in dispatch["classes"].items():
        rule = table["classes"][cls].get("backends") or {}
        if "pytorch" in rule.get("unsupported", []):
            _trt_refused(version, {"speculative_config": {"decoding_type": dtype, "max_draft_len": 3}},
                         "'%s' (%s) does not support the pytorch backend" % (dtype, cls))


# --------------------------------------------------------------------------- vLLM

def _vllm_ok(version, spec, arctic=False):
    spec_schema.validate_vllm_speculative("t", EngineVersion("vllm", version), spec, arctic, 1)


def _vllm_refused(version, spec, *fragments):
    with pytest.raises(SpecConfigError) as err:
        _vllm_ok(version, spec)
    text = str(err.value)
    for fragment in fragments:
        assert fragment in text, "%r not in %r" % (fragment, text)
    return text


def _vllm_value(table, name, field):
    if name == "num_speculative_tokens_per_batch_size":
        return [[1, 4, 3]]
    if name in ("prompt_lookup_min", "prompt_lookup_max", "draft_tensor_parallel_size"):
        return 1
    if name == "method":
        return "ngram"
    value = spec_tables.example_value(field["type"], table)
    bounds = field.get("bounds") or {}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "gt" in bounds:
            value = bounds["gt"] + 1
        if "ge" in bounds:
            value = max(value, bounds["ge"])
    return value


@pytest.mark.parametrize("version", VLLM_TABLES)
def test_vllm_every_field_literal_unknown_and_internal(version):
    table = vllm(version)
    entry = table["classes"][table["root"]]
    base = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    internal = set(table["set_by_engine"]) | set(n for n, f in entry["fields"].items() if f["type"].get("internal"))
    assert table["speculative_methods"] and "ngram" in table["speculative_methods"]
    for name, field in sorted(entry["fields"].items()):
        if name in internal:
            _vllm_refused(version, dict(base, **{name: None}), "speculative_config.%s is set by vLLM itself" % name)
            continue
        _vllm_ok(version, dict(base, **{name: _vllm_value(table, name, field)}))
        ty = field["type"]
        opts = ty["options"] if ty["kind"] == "union" else [ty]
        if any(o["kind"] in ("literal", "enum") for o in opts) and not any(
                o["kind"] in ("str", "path", "any", "opaque") for o in opts):
            _vllm_refused(version, dict(base, **{name: WRONG}), "speculative_config.%s" % name, "vLLM %s" % version)
    text = _vllm_refused(version, dict(base, no_such_key=1), "speculative_config.no_such_key is not a known key",
                         "vLLM %s" % version)
    if entry["extra"] == "forbid":
        assert "vLLM rejects unknown keys there" in text
    else:
        assert "refused as project policy" in text


@pytest.mark.parametrize("version", VLLM_TABLES)
def test_vllm_keys_and_methods_of_other_versions_are_refused(version):
    table = vllm(version)
    fields = set(table["classes"][table["root"]]["fields"])
    methods = set(table["speculative_methods"])
    other_fields, other_methods = set(), set()
    for other in VLLM_TABLES:
        other_fields.update(vllm(other)["classes"]["SpeculativeConfig"]["fields"])
        other_methods.update(vllm(other)["speculative_methods"])
    base = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
    for key in sorted(other_fields - fields):
        _vllm_refused(version, dict(base, **{key: 1}), "speculative_config.%s is not a known key of the vLLM %s"
                      % (key, version))
    for method in sorted(other_methods - methods):
        _vllm_refused(version, {"method": method, "num_speculative_tokens": 3, "model": "/m"},
                      "'%s' is not a speculative method of vLLM %s" % (method, version))


def test_vllm_methods_follow_the_release():
    """The methods the old single key table allowed everywhere, per release (from the wheels)."""
    def has(version, method):
        return method in vllm(version)["speculative_methods"]
    assert not has("0.10.1", "suffix") and not has("0.11.0", "suffix") and has("0.14.1", "suffix")
    assert not has("0.10.1", "mtp") and has("0.11.0", "mtp")
    inst = {"name": "t", "engine": "vllm", "engine_version": "0.10.1", "model": "a/b",
            "speculative": {"method": "mtp", "max_draft_len": 1}}
    with pytest.raises(SpecConfigError, match="'mtp' is not a speculative method of vLLM 0.10.1"):
        sc.render(inst)


def test_every_vllm_release_in_the_range_is_judged_by_its_own_table():
    """The 0.31.0 case: its own table takes keys and methods the 0.20.0 table (which judged it before) lacked."""
    assert "0.31.0" in VLLM_TABLES and "0.20.1" in VLLM_TABLES and len(VLLM_TABLES) >= 44
    inst = {"name": "t", "engine": "vllm", "engine_version": "0.31.0", "model": "a/b",
            "speculative": {"method": "ngram", "max_draft_len": 3, "draft_len_schedule": {1: 3, 8: 2}}}
    out = sc.render(inst)
    assert out["table_version"] == "0.31.0" and not out["warnings"]
    assert json.loads(out["args"][-1])["num_speculative_tokens_per_batch_size"]
    with pytest.raises(SpecConfigError, match="num_speculative_tokens_per_batch_size is not a known key of the vLLM "
                                              "0.20.0 speculative config"):
        sc.render(dict(inst, engine_version="0.20.0"))


@pytest.mark.parametrize("engine,version,tabled", [("vllm", "0.35.0", "0.34.0"), ("trtllm", "1.3.0", TRT_TABLES[-1]),
                                                   ("trtllm", "1.3.0rc4", "1.3.0rc3"),
                                                   ("trtllm", "1.3.0rc15", "1.3.0rc14")])
def test_a_release_without_its_own_table_is_refused_unless_judged_in_its_image(engine, version, tabled):
    inst = {"name": "t", "engine": engine, "engine_version": version, "model": "a/b",
            "speculative": {"method": "ngram", "max_draft_len": 3}}
    with pytest.raises(SpecConfigError) as err:
        sc.render(inst)
    text = str(err.value)
    assert "instance 't': engine_version" in text and "%s has no engine table of its own" % version in text
    assert "set judged_in_image_only: true" in text
    why = INDEX["not_sourced"].get(engine, {}).get(version)
    if why:  # a release whose table could not be made says why
        assert "(%s; tabled: " % why in text
    # opted in: rendered with the table below it, its checks skipped (a key no table knows passes to the engine),
    # and a warning that names the release and what judges it
    inst["judged_in_image_only"] = True
    if engine == "vllm":
        inst["speculative"]["options"] = {"a_key_of_a_later_release": 1}
    else:
        inst["llm_api_options"] = {"a_key_of_a_later_release": 1}
    out = sc.render(inst)
    assert out["version"] == version and out["table_version"] == tabled
    assert any("%s has no engine table of its own and judged_in_image_only is set: the engine check in its image "
               "alone judges its configuration" % version in w and "the %s table" % tabled in w
               for w in out["warnings"]), out["warnings"]
    assert "a_key_of_a_later_release" in json.dumps(out["config"]) + " ".join(out["args"])
    # a tabled release is judged by its table whatever the opt-in says
    with pytest.raises(SpecConfigError, match="a_key_of_a_later_release"):
        sc.render(dict(inst, engine_version=tabled))


def test_no_table_is_used_for_another_release_without_the_opt_in():
    """What picks a table for a release: its own, the one of its .postN base (TensorRT-LLM), or none."""
    assert spec_tables.table_for(EngineVersion("trtllm", "1.2.0rc6.post1"))["version"] == "1.2.0rc6"
    assert spec_tables.table_for(EngineVersion("vllm", "0.9.0.1"))["version"] == "0.9.0.1"
    for engine, text in (("vllm", "0.34.1"), ("trtllm", "1.3.0rc4"), ("trtllm", "1.2.0rc4")):
        with pytest.raises(SpecConfigError, match="has no engine table of its own"):
            spec_tables.table_for(EngineVersion(engine, text))
    assert spec_tables.table_for(EngineVersion("trtllm", "1.1.0rc0.post3"))["version"] == "1.1.0rc0"


def test_consecutive_releases_with_the_same_facts_share_a_file():
    rows = INDEX["tables"]["vllm"]
    shared = dict((version, row["file"]) for version, row in rows.items() if row["file"] != "vllm-%s.json" % version)
    assert shared, "no two releases share facts"
    for version, name in shared.items():
        table = vllm(version)
        first = json.loads((Path(spec_tables.TABLE_DIR) / name).read_text())
        assert table["version"] == version and version in first["also_releases"]
        assert table["source"]["commit"] == "release %s" % version
        assert ({k: v for k, v in table.items() if k not in ("version", "source")}
                == {k: v for k, v in first.items() if k not in ("version", "source")})
    # releases that differ do not share: 0.31.0 and 0.32.0 have one file each only if their facts differ
    order = VLLM_TABLES
    for before, after in zip(order, order[1:]):
        if rows[before]["file"] != rows[after]["file"]:
            assert ({k: v for k, v in vllm(before).items() if k not in ("version", "source", "also_releases")}
                    != {k: v for k, v in vllm(after).items() if k not in ("version", "source", "also_releases")}), \
                (before, after)


# --------------------------------------------------------------------------- upstream facts the old hand tables got wrong

@pytest.mark.parametrize("config,fragments", [
    ({"scheduler_config": {"policy": "X"}}, ["scheduler_config.policy is not a field of SchedulerConfig"]),
    ({"scheduler_config": {"capacity_scheduler_policy": "FIFO"}},
     ["scheduler_config.capacity_scheduler_policy must be one of: MAX_UTILIZATION, GUARANTEED_NO_EVICT"]),
    ({"allreduce_strategy": "FAST"}, ["allreduce_strategy must be one of: AUTO, NCCL"]),
    ({"guided_decoding_backend": "outlines"}, ["guided_decoding_backend must be one of: xgrammar, llguidance"]),
    ({"quant_config": {}}, ["quant_config is not a field of TorchLlmArgs"]),
    ({"torch_compile_config": {"enable_everything": True}}, ["torch_compile_config.enable_everything"]),
    ({"cache_transceiver_config": {"backend": "TCP"}}, ["cache_transceiver_config.backend must be one of"]),
])
def test_nested_and_literal_fields_are_checked_on_1_3(config, fragments):
    assert "1.3.0rc3" in TRT_TABLES  # committed with the generator
    _trt_refused("1.3.0rc3", config, *fragments)


def test_real_1_3_fields_are_accepted():
    assert "1.3.0rc3" in TRT_TABLES  # committed with the generator
    _trt_ok("1.3.0rc3", {"orchestrator_type": "ray", "otlp_traces_endpoint": "http://collector:4317",
                         "max_stats_len": 100, "scheduler_config": {"capacity_scheduler_policy": "MAX_UTILIZATION"},
                         "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3,
                                                "speculative_model": "/m", "eagle3_model_arch": "llama3"}})


# --------------------------------------------------------------------------- the tables themselves

def test_index_lists_every_table_and_the_unsourced_versions():
    files = sorted(p.name for p in Path(spec_tables.TABLE_DIR).glob("*.json") if p.name != "index.json")
    listed = sorted(set(row["file"] for rows in INDEX["tables"].values() for row in rows.values()))
    assert files == listed
    for engine, rows in INDEX["tables"].items():
        for version in rows:
            table = spec_tables.load_table(engine, version)
            assert table["engine"] == engine and table["version"] == version
            assert table["source"]["from"] and table["source"]["commit"] and table["source"]["files"]
            assert table["classes"][table["root"]]["fields"]
    assert set(INDEX["not_sourced"].get("trtllm", {})) >= {"1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.1"} - set(TRT_TABLES)
    # every 1.1, 1.2 and 1.3.0 release up to the newest tabled one has a table, or the index says why not
    newest = int(TRT_TABLES[-1].rsplit("rc", 1)[1])
    releases = (["1.1.0rc%d" % n for n in range(6)] + ["1.1.0"] + ["1.2.0rc%d" % n for n in range(9)] + ["1.2.0", "1.2.1"]
                + ["1.3.0rc%d" % n for n in range(newest + 2)])
    for version in releases:
        assert version in TRT_TABLES or INDEX["not_sourced"]["trtllm"].get(version), version
    assert not set(INDEX["not_sourced"]["trtllm"]) & set(TRT_TABLES)


def test_generator_reads_source_without_importing_it(tmp_path):
    """A tiny llm_args.py with the shapes the generator understands, turned into a table."""
    pkg = tmp_path / "tensorrt_llm" / "llmapi"
    pkg.mkdir(parents=True)
    (tmp_path / "tensorrt_llm" / "version.py").write_text('__version__ = "9.9.9"\n')
    (pkg / "llm_args.py").write_text('''
import this_module_does_not_exist
from typing import ClassVar, Literal, Optional, Union
from pydantic import AliasChoices, BaseModel, Field


class StrictBaseModel(BaseModel):
    class Config:
        extra = "forbid"


class Mode(str, Enum):
    A = "a"
    B = "b"


class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: Optional[int] = None
    speculative_model: Optional[str] = Field(default=None,
                                             validation_alias=AliasChoices("speculative_model", "model_dir"))

    @classmethod
    def from_dict(cls, data: dict, backend=None):
        config_classes = {"X": XDecodingConfig}
        decoding_type = data.get("decoding_type")
        return config_classes[decoding_type](**data)


class XDecodingConfig(DecodingBaseConfig):
    decoding_type: ClassVar[str] = "X"
    width: int = Field(default=2, ge=1)


class Inner(BaseModel):
    mode: Mode = Mode.A


class TorchLlmArgs(StrictBaseModel):
    model: str
    backend: Literal["pytorch", "_autodeploy"] = "pytorch"
    inner: Optional[Inner] = None
    speculative_config: Optional[Union[XDecodingConfig]] = None
    _private: int = 0
''')
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm", "--version", "9.9.9",
                    "--root", str(tmp_path), "--source", "test tree", "--commit", "none", "--out", str(out)],
                   check=True, capture_output=True)
    table = json.loads((out / "trtllm-9.9.9.json").read_text())
    root = table["classes"]["TorchLlmArgs"]
    assert sorted(root["fields"]) == ["backend", "inner", "model", "speculative_config"]
    assert root["extra"] == "forbid" and root["fields"]["model"]["required"]
    assert root["fields"]["backend"]["type"] == {"kind": "literal", "values": ["pytorch", "_autodeploy"]}
    assert table["classes"]["Inner"]["extra"] == "ignore"
    assert table["enums"]["Mode"] == ["a", "b"]
    x = table["classes"]["XDecodingConfig"]
    assert x["fields"]["speculative_model"]["aliases"] == ["model_dir"]
    assert x["fields"]["width"]["bounds"] == {"ge": 1}
    assert table["dispatch"]["TorchLlmArgs.speculative_config"]["classes"] == {"X": "XDecodingConfig"}
    assert table["source_version"] == "9.9.9"
    index = json.loads((out / "index.json").read_text())
    assert index["tables"]["trtllm"]["9.9.9"]["file"] == "trtllm-9.9.9.json"

    # the same module as a Sphinx viewcode page (how the versioned docs render llm_args.py)
    source = (pkg / "llm_args.py").read_text()
    page = tmp_path / "llm_args.html"
    page.write_text('<html><body><div class="highlight"><pre>'
                    + html.escape(source).replace("class TorchLlmArgs", '<a class="viewcode-back" href="#">[docs]</a>'
                                                  '<span class="k">class</span> TorchLlmArgs')
                    + "</pre></div></body></html>")
    subprocess.run([sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm", "--version", "9.9.8",
                    "--html", str(page), "--source", "test page", "--out", str(out)], check=True, capture_output=True)
    from_page = json.loads((out / "trtllm-9.9.8.json").read_text())
    assert from_page["classes"] == table["classes"] and from_page["dispatch"] == table["dispatch"]


def test_generator_reads_the_discriminated_unions_constrained_types_and_backend_rules_of_1_3_13_and_later(tmp_path):
    """From 1.3.0rc13 the speculative configs are a discriminated union (each class's literal decoding_type picks
    it, no from_dict), counts are pydantic's constrained types, and a backend rule may be an or of comparisons. A
    condensed transcription of the release's page is tabled with the serve options read off its CLI page, and the
    table records what its source is."""
    pkg = tmp_path / "tensorrt_llm" / "llmapi"
    pkg.mkdir(parents=True)
    (pkg / "llm_args.py").write_text('''
from typing import Annotated, Literal, Optional, Union
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt
from .utils import StrictBaseModel


class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: Optional[NonNegativeInt] = Field(default=None)
    max_concurrency: Optional[PositiveInt] = Field(default=None, le=1024)

    def supports_backend(self, backend: str) -> bool:
        return True


class ADecodingConfig(DecodingBaseConfig):
    decoding_type: Literal["A_B"] = "A_B"

    def supports_backend(self, backend: str) -> bool:
        return backend == "pytorch" or backend == "_autodeploy"


class CDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal["C"] = "C"

    def supports_backend(self, backend: str) -> bool:
        return backend != "tensorrt" and backend != "other"


SpeculativeConfig = Annotated[Union[ADecodingConfig, CDecodingConfig], Field(discriminator="decoding_type")]


class TorchLlmArgs(StrictBaseModel):
    model_config = ConfigDict(extra="forbid")
    speculative_config: Optional[SpeculativeConfig] = None
''')
    (pkg / "utils.py").write_text('''
from pydantic import BaseModel, ConfigDict


class StrictBaseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
''')
    cli = tmp_path / "cli.json"
    cli.write_text(json.dumps({"page": "9.9.7/commands/trtllm-serve/trtllm-serve.html", "commit": "ef" * 20,
                               "options": [{"names": ["--config", "--extra_llm_api_options"], "takes_value": True},
                                           {"names": ["--trust_remote_code"], "takes_value": False}]}))
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm", "--version", "9.9.7",
                    "--root", str(tmp_path), "--source", "page", "--commit", "ef" * 20, "--serve-cli", str(cli),
                    "--source-kind", "condensed-transcription-of-rendered-html", "--out", str(out)],
                   check=True, capture_output=True)
    table = json.loads((out / "trtllm-9.9.7.json").read_text())
    assert table["dispatch"]["TorchLlmArgs.speculative_config"] == {
        "key": "decoding_type", "classes": {"A_B": "ADecodingConfig", "C": "CDecodingConfig"}, "discriminated": True,
        "base": "DecodingBaseConfig"}
    a = table["classes"]["ADecodingConfig"]
    assert a["extra"] == "forbid" and a["backends"] == {"supported": ["pytorch", "_autodeploy"]}
    assert table["classes"]["CDecodingConfig"]["backends"] == {"unsupported": ["tensorrt", "other"]}
    assert a["fields"]["max_draft_len"]["type"] == {"kind": "union", "options": [{"kind": "int"}, {"kind": "none"}]}
    assert a["fields"]["max_draft_len"]["bounds"] == {"ge": 0}
    assert a["fields"]["max_concurrency"]["bounds"] == {"gt": 0, "le": 1024}
    assert table["cli"]["options"] == {"--config": {"aliases": ["--extra_llm_api_options"], "type": "str"},
                                       "--trust_remote_code": {"flag": True}}
    assert table["source"]["kind"] == "condensed-transcription-of-rendered-html"
    assert table["source"]["files"]["serve_cli"]["path"] == "cli.json" and table["source_version"] == "9.9.7"


INFERRED = [v for v in TRT_TABLES if trt(v)["dispatch"].get("TorchLlmArgs.cuda_graph_config", {}).get("inferred")]


@pytest.mark.parametrize("version", INFERRED)
def test_a_cuda_graph_config_without_its_mode_is_what_the_release_infers(version):
    """From 1.3.0rc18 cuda_graph_config is a union discriminated by mode, and a before-validator fills a missing mode
    in: encode when an encoder key is set (not None, not 0), else decode."""
    _trt_ok(version, {"cuda_graph_config": {"batch_sizes": [1, 2], "enable_padding": True}})
    _trt_ok(version, {"cuda_graph_config": {"num_tokens": [8, 16]}})
    _trt_ok(version, {"cuda_graph_config": {"mode": "encode", "max_num_token": 16}})
    # num_tokens 0 does not make it an encoder config, and the decoder config has no num_tokens
    _trt_refused(version, {"cuda_graph_config": {"num_tokens": 0}}, "cuda_graph_config.num_tokens",
                 "is not a field of DecodeCudaGraphConfig")
    _trt_refused(version, {"cuda_graph_config": {"mode": "prefill"}}, "'prefill' is not a mode of")


def test_the_generator_reads_a_before_validator_that_fills_in_a_tag(tmp_path):
    pkg = tmp_path / "tensorrt_llm" / "llmapi"
    pkg.mkdir(parents=True)
    (pkg / "llm_args.py").write_text('''
from typing import Annotated, Literal, Optional, Union
from pydantic import BaseModel, ConfigDict, Field, field_validator


class DGraph(BaseModel):
    mode: Literal["decode"] = "decode"


class EGraph(BaseModel):
    mode: Literal["encode"] = "encode"
    num_tokens: Optional[list] = None


class TorchLlmArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cuda_graph_config: Optional[Annotated[Union[DGraph, EGraph], Field(discriminator="mode")]] = None

    @field_validator("cuda_graph_config", mode="before")
    @classmethod
    def infer(cls, v):
        if isinstance(v, dict) and "mode" not in v:
            keys = {"num_tokens", "seq_lens"}
            v = dict(v)
            v["mode"] = "encode" if any(k in v and v[k] not in (None, 0) for k in keys) else "decode"
        return v
''')
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm", "--version", "9.9.6",
                    "--root", str(tmp_path), "--source", "page", "--commit", "ab" * 20, "--out", str(out)],
                   check=True, capture_output=True)
    dispatch = json.loads((out / "trtllm-9.9.6.json").read_text())["dispatch"]["TorchLlmArgs.cuda_graph_config"]
    assert dispatch["inferred"] == {"when_any": ["num_tokens", "seq_lens"], "value": "encode", "otherwise": "decode"}
    assert dispatch["classes"] == {"decode": "DGraph", "encode": "EGraph"}


def test_a_release_without_a_published_page_is_its_neighbours_table_less_what_its_search_index_lacks(tmp_path):
    """1.3.0rc12 publishes no llm_args page, but its docs' search index names every documented field: the table is
    1.3.0rc13's less the fields rc12's index lacks, once rc13's table agrees with rc13's own index."""
    pkg = tmp_path / "tensorrt_llm" / "llmapi"
    pkg.mkdir(parents=True)
    (pkg / "llm_args.py").write_text('''
from typing import Optional
from pydantic import BaseModel, ConfigDict, Field


class XConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int = 1
    b: int = 2
    old: Optional[int] = Field(default=None, deprecated="use a")


class TorchLlmArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    x: Optional[XConfig] = None
''')
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm", "--version", "9.9.13",
                    "--root", str(tmp_path), "--source", "page", "--commit", "cd" * 20, "--out", str(out)],
                   check=True, capture_output=True)

    def names(path, version, x_fields, x_attributes=("old", "model_config")):
        path.write_text(json.dumps({"version": version, "path": "%s/searchindex.js" % version, "commit": "ab" * 20,
                                    "classes": {"TorchLlmArgs": {"fields": ["model", "x"], "attributes": ["msg"]},
                                                "XConfig": {"fields": list(x_fields),
                                                            "attributes": list(x_attributes)}}}))
        return str(path)

    def derive(release_fields, base_fields=("a", "b")):
        return subprocess.run(
            [sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm-index", "--version", "9.9.12",
             "--base", "9.9.13", "--names", names(tmp_path / "r12.json", "9.9.12", release_fields),
             "--base-names", names(tmp_path / "r13.json", "9.9.13", base_fields), "--out", str(out)],
            capture_output=True, text=True)

    assert derive(["a"]).returncode == 0  # b is not documented in 9.9.12; old is a deprecated field on both
    table = json.loads((out / "trtllm-9.9.12.json").read_text())
    assert sorted(table["classes"]["XConfig"]["fields"]) == ["a", "old"]
    assert table["derived"] == {"from_table": "9.9.13", "removed_fields": {"XConfig": ["b"]}}
    assert table["source"]["kind"] == "search-index-names-over-the-9.9.13-table"
    assert table["source"]["from"].endswith("9.9.12/searchindex.js") and table["version"] == "9.9.12"
    # a field only the release documents cannot be typed from its name
    proc = derive(["a", "b", "c"])
    assert proc.returncode != 0 and "XConfig.c" in proc.stderr
    # the neighbour's table must agree with its own index
    proc = derive(["a"], base_fields=["a"])
    assert proc.returncode != 0 and "disagree" in proc.stderr and "XConfig: only in the table ['b']" in proc.stderr


def test_generator_reads_release_facts(tmp_path):
    """A tiny facts file (the shape of a release's extracted llm_args and trtllm-serve facts) and the
    serve options of its CLI page, turned into a table."""
    def field(annotation, names=None, required=False, **extra):
        return dict({"annotation": annotation, "accepted_names": names, "required": required}, **extra)
    facts = {
        "version": "9.9.9.post1", "source": "NVIDIA/TensorRT-LLM:9.9.9.post1/_modules/x.html", "source_commit": "ab" * 20,
        "source_kind": "condensed-transcription-of-rendered-html", "root_class": "TorchLlmArgs",
        "forbid_extra": {"TorchLlmArgs": True, "DecodingBaseConfig": True, "XDecodingConfig": True, "Inner": False},
        "class_details": {
            "TorchLlmArgs": {"bases": ["BaseLlmArgs"], "fields": {
                "model": field("Union[str, Path]", ["model"], True),
                "mpi_session": field("Optional[object]", ["_mpi_session"]),
                "load_format": field("Union[str, LoadFormat]", ["load_format"]),
                "policy": field("Optional[Policy]", ["policy"]),
                "inner": field("Inner", ["inner"]),
                "lora_config": field("Optional[LoraConfig]", ["lora_config"]),
                "speculative_config": field("SpeculativeConfig", ["speculative_config"])}},
            "Inner": {"bases": ["BaseModel"], "fields": {"mode": field("Literal['a', 'b']", ["mode"])}},
            "DecodingBaseConfig": {"bases": ["StrictBaseModel"], "fields": {
                "speculative_model": field("Optional[str]", ["speculative_model", "speculative_model_dir"])}},
            "XDecodingConfig": {"bases": ["DecodingBaseConfig"], "fields": {
                "speculative_model": field("Optional[str]", ["speculative_model", "speculative_model_dir"]),
                "width": field("int", ["width"], status="beta")}},
        },
        "literals": {"load_format": ["AUTO", "DUMMY"], "policy": ["FIFO", "LIFO", None], "Inner.mode": ["a", "b"]},
        "literal_modes": {"load_format": "enum_name_case_insensitive", "policy": "strict", "Inner.mode": "strict"},
        "literal_enums": {"load_format": "LoadFormat"},
        "decoding_types": {"X": "XDecodingConfig"},
        "dispatch": {"speculative_config": {"base": "DecodingBaseConfig", "key": "decoding_type",
                                            "table": {"X": "XDecodingConfig"}}},
        "nested": {"inner": "Inner"},
        "external_models_not_checked": ["LoraConfig"],
        "serve_cli_options": ["--host", "--tp_size", "--tensor_parallel_size", "--trust_remote_code", "--help"],
        "serve_drops_for_pytorch": [],
    }
    cli = {"page": "9.9.9.post1/commands/trtllm-serve/trtllm-serve.html", "commit": "cd" * 20,
           "options": [{"names": ["--host"], "takes_value": True},
                       {"names": ["--tensor_parallel_size", "--tp_size"], "takes_value": True},
                       {"names": ["--trust_remote_code"], "takes_value": False}]}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "cli.json").write_text(json.dumps(cli))
    out = tmp_path / "out"
    run = [sys.executable, str(REPO / "scripts" / "engine_tables.py"), "trtllm-facts", "--facts",
           str(tmp_path / "facts.json"), "--serve-cli", str(tmp_path / "cli.json"), "--version", "9.9.9", "--out", str(out)]
    subprocess.run(run, check=True, capture_output=True)
    table = json.loads((out / "trtllm-9.9.9.json").read_text())
    assert table["version"] == "9.9.9" and table["source_version"] == "9.9.9.post1"
    assert table["source"]["kind"] == "condensed-transcription-of-rendered-html"
    assert table["source"]["commit"] == "ab" * 20 and table["source"]["files"]["facts"]["path"] == "facts.json"
    root = table["classes"]["TorchLlmArgs"]["fields"]
    assert root["mpi_session"]["accepted_names"] == ["_mpi_session"]
    assert root["load_format"]["value_rule"] == {"rule": "enum_name_case_insensitive", "enum": "LoadFormat",
                                                 "names": ["AUTO", "DUMMY"]}
    assert table["enums"]["Policy"] == ["FIFO", "LIFO"]
    assert root["inner"]["type"] == {"kind": "class", "name": "Inner"}
    assert table["classes"]["Inner"]["extra"] == "ignore"
    assert root["lora_config"]["type"]["options"][0] == {"kind": "opaque", "name": "LoraConfig", "not_checked": True}
    assert {"kind": "class", "name": "XDecodingConfig"} in root["speculative_config"]["type"]["options"]
    x = table["classes"]["XDecodingConfig"]
    assert x["bases"] == ["DecodingBaseConfig", "StrictBaseModel"] and x["classvars"] == {"decoding_type": "X"}
    assert x["fields"]["speculative_model"]["aliases"] == ["speculative_model_dir"]
    assert "accepted_names" not in x["fields"]["speculative_model"]
    assert table["dispatch"]["TorchLlmArgs.speculative_config"]["classes"] == {"X": "XDecodingConfig"}
    assert table["cli"]["options"] == {"--host": {"type": "str"}, "--trust_remote_code": {"flag": True},
                                       "--tensor_parallel_size": {"aliases": ["--tp_size"], "type": "str"}}
    # the page and the facts must agree on the option names
    cli["options"].append({"names": ["--port"], "takes_value": True})
    (tmp_path / "cli.json").write_text(json.dumps(cli))
    proc = subprocess.run(run, capture_output=True, text=True)
    assert proc.returncode != 0 and "only on the page: ['--port']" in proc.stderr


# --------------------------------------------------------------------------- the emulator reads the same tables

@pytest.mark.parametrize("config", [
    {"scheduler_config": {"policy": "X"}},
    {"allreduce_strategy": "FAST"},
    {"quant_config": {}},
    {"moe_config": {"backend": "cutlass"}},
    {"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model": "/m",
                            "no_such_key": 1}},
], ids=["nested-unknown", "literal", "trtllm-args-only", "moe-literal", "spec-unknown"])
def test_emulator_and_spec_config_agree_on_tabled_versions(config):
    from specdec_emulator import trtllm_args, upstream
    for version in TRT_TABLES:
        assert upstream.trtllm_table(version)["version"] == version
        _trt_refused(version, config)
        with pytest.raises((trtllm_args.ValidationError, trtllm_args.EngineConfigError)):
            trtllm_args.build_llm_args(version, {"model": "/m", "backend": "pytorch"}, copy.deepcopy(config))
    for version in TRT_TABLES:
        root = spec_tables.accepted_names(trt(version), "TorchLlmArgs")
        good = dict((k, v) for k, v in (("orchestrator_type", "ray"), ("max_stats_len", 10)) if k in root)
        good["speculative_config"] = {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": "/m"}
        _trt_ok(version, copy.deepcopy(good))
        out = trtllm_args.build_llm_args(version, {"model": "/m", "backend": "pytorch"}, copy.deepcopy(good))
        assert out["speculative_config"]["decoding_type"] in ("Eagle", "Eagle3")


@pytest.mark.parametrize("version", TRT_TABLES)
def test_trtllm_serve_options_and_choices_come_from_the_table(version):
    from specdec_emulator import trtllm_cli
    options = trt(version)["cli"]["options"]
    base = {"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": version}
    for key, option in (("reasoning_parser", "--reasoning_parser"), ("tool_parser", "--tool_parser"),
                        ("log_level", "--log_level")):
        if option not in options:
            with pytest.raises(SpecConfigError, match="%s is not accepted by TensorRT-LLM %s" % (key, version)):
                sc.render(dict(base, **{key: "qwen3"}))
            continue
        for choice in options[option]["choices"]:
            out = sc.render(dict(base, **{key: choice}))
            assert out["args"][out["args"].index(option) + 1] == choice
            assert trtllm_cli.parse_cli(out["args"], version, io.StringIO())[1] is None  # the emulator agrees
        with pytest.raises(SpecConfigError, match="%s" % key):
            sc.render(dict(base, **{key: WRONG}))
    owned = set(sc._TRTLLM_OWNED)
    flags = sorted(name for name, opt in options.items() if opt.get("flag") and name not in owned)
    assert sc.render(dict(base, extra_args=flags))["args"][-len(flags):] == flags
    with pytest.raises(SpecConfigError, match="--no_such_option, which is not a trtllm-serve option of TensorRT-LLM"):
        sc.render(dict(base, extra_args=["--no_such_option"]))


# --------------------------------------------------------------------------- the documented version facts

def _doc_fact(table, fact):
    """✓, ✓ (alias) or — for one row of docs/spec_config.md's TensorRT-LLM version facts, read off a table."""
    dispatch = table["dispatch"]["TorchLlmArgs.speculative_config"]["classes"]
    if fact.startswith("speculative_config."):
        key = fact.split(".", 1)[1]
        names = {}
        for cls in set(dispatch.values()):
            names.update(spec_tables.accepted_names(table, cls))
        if key not in names:
            return "—"
        return "✓" if names[key] == key else "✓ (alias)"
    if fact.startswith("decoding_type: "):
        return "✓" if fact.split(": ", 1)[1] in dispatch else "—"
    if fact.startswith("--"):
        return "✓" if fact.split()[0] in spec_tables.trtllm_cli_rows(table) else "—"
    return "✓" if fact in spec_tables.accepted_names(table, table["root"]) else "—"


def test_documented_version_facts_are_the_tables():
    text = (REPO / "docs" / "spec_config.md").read_text()
    block = text.split("<!-- trtllm-version-facts", 1)[1].split("<!-- end trtllm-version-facts -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.splitlines()
            if line.startswith("| ")]
    header, facts = rows[0], rows[1:]
    versions = header[1:]
    assert versions == TRT_TABLES
    assert {"`speculative_config.draft_len_schedule`", "`speculative_config.max_concurrency`",
            "`speculative_config.acceptance_window`"} <= set(r[0] for r in facts)
    for row in facts:
        fact = row[0].split("`")[1]
        for version, cell in zip(versions, row[1:]):
            assert cell == _doc_fact(trt(version), fact), (fact, version)


def test_keys_trtllm_serve_drops_on_pytorch_are_dropped_with_a_warning_not_refused():
    """1.3's launch_server pops build_config on the pytorch backend (the table's serve_drops_for_pytorch,
    from the vendored serve.py): a YAML build_config is removed with a warning; on a release where
    TorchLlmArgs has the field (1.1.0rc0) it stays, and where neither holds it is refused."""
    assert trt("1.3.0rc3")["serve_drops_for_pytorch"] == ["build_config"]
    out = sc.render({"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": "1.3.0rc3",
                     "llm_api_options": {"build_config": {"max_batch_size": 8}}})
    assert "build_config" not in out["config"] and "build_config" not in out["config_yaml"]
    assert out["warnings"] == ["instance 't': build_config is dropped: trtllm-serve of TensorRT-LLM 1.3.0rc3 drops "
                               "it on the pytorch backend (launch_server), and TorchLlmArgs has no such field"]
    out = sc.render({"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": "1.1.0rc0",
                     "llm_api_options": {"build_config": {"max_batch_size": 8}}})
    assert out["config"]["build_config"] == {"max_batch_size": 8} and out["warnings"] == []
    from specdec_emulator import trtllm_args  # the emulated trtllm-serve drops it as well
    assert "build_config" not in trtllm_args.build_llm_args("1.3.0rc3", {"model": "/m", "backend": "pytorch"},
                                                            {"build_config": {"max_batch_size": 8}})
    with pytest.raises(SpecConfigError, match="build_config is not a field of TorchLlmArgs in TensorRT-LLM 1.2.1"):
        sc.render({"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": "1.2.1",
                   "llm_api_options": {"build_config": {"max_batch_size": 8}}})


def test_1_3_load_format_follows_its_validator_and_the_cli_is_the_vendored_upstream_one():
    table = trt("1.3.0rc3")
    assert table["classes"]["TorchLlmArgs"]["fields"]["load_format"]["value_rule"]["names"] == [
        "AUTO", "DUMMY", "VISION_ONLY"]
    _trt_ok("1.3.0rc3", {"load_format": "dummy"})
    _trt_refused("1.3.0rc3", {"load_format": "safetensors"}, "must be a LoadFormat name, in any case")
    assert "--enable-xqa-jit" not in spec_tables.trtllm_cli_rows(table)
    assert table["source"]["files"]["tensorrt_llm.commands.serve"]["path"].startswith("third_party/tensorrt_llm/")


# --------------------------------------------------------------------------- the generator's remote wheels and sharing

def _generator():
    import importlib.util
    spec = importlib.util.spec_from_file_location("engine_tables_script", REPO / "scripts" / "engine_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Response(io.BytesIO):
    def __init__(self, data, status=200, headers=None):
        super().__init__(data)
        self.status = status
        self.headers = headers or {}


def _range_server(blob, log):
    """An opener that answers HEAD and Range requests for one file, like files.pythonhosted.org."""
    def opener(request, timeout=None):
        if request.get_method() == "HEAD":
            return _Response(b"", headers={"Accept-Ranges": "bytes", "Content-Length": str(len(blob))})
        first, last = (int(x) for x in request.get_header("Range").split("=")[1].split("-"))
        log.append((first, last))
        return _Response(blob[first:last + 1], status=206)
    return opener


def _spec_source(fields):
    return ("from pydantic.dataclasses import dataclass\nfrom typing import Literal, Optional\n"
            "SpeculativeMethod = Literal['ngram', 'eagle3']\n@dataclass\nclass SpeculativeConfig:\n"
            "    method: Optional[SpeculativeMethod] = None\n"
            + "".join("    %s: Optional[int] = None\n" % name for name in fields))


def _wheel(fields, padding=0):
    import zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr("vllm/__init__.py", "")
        wheel.writestr("vllm/config/__init__.py", "")
        wheel.writestr("vllm/config/speculative.py", _spec_source(fields))
        # what the tables do not need (a wheel's compiled libraries): stored, never fetched
        wheel.writestr("vllm/_C.abi3.so", bytes(padding), compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def test_a_remote_wheel_is_read_by_ranges_without_fetching_the_rest():
    gen = _generator()
    blob = _wheel(["num_speculative_tokens"], padding=4 * gen.HttpRangeFile.BLOCK)
    log = []
    remote = gen.HttpRangeFile("https://files.example/vllm.whl", opener=_range_server(blob, log))
    source = gen.Source(wheel=remote)
    assert "num_speculative_tokens" in source.text("vllm.config.speculative")
    fetched = sum(last - first + 1 for first, last in log)
    assert remote.size == len(blob) and fetched < len(blob) / 2, (fetched, len(blob))
    # a server without ranges is refused by name, not read whole
    def no_ranges(request, timeout=None):
        return _Response(b"", headers={"Content-Length": "10"})
    with pytest.raises(SystemExit, match="does not take range requests"):
        gen.HttpRangeFile("https://files.example/x.whl", opener=no_ranges)


def test_releases_with_the_same_facts_share_one_file(tmp_path):
    gen = _generator()
    wheels = {"0.9.0": _wheel(["num_speculative_tokens"]), "0.9.1": _wheel(["num_speculative_tokens"]),
              "0.10.0": _wheel(["num_speculative_tokens", "prompt_lookup_max"])}
    servers = dict(("https://files.example/vllm-%s-cp38-abi3-manylinux_2_28_x86_64.whl" % v, _range_server(blob, []))
                   for v, blob in wheels.items())
    index = {"files": [{"filename": url.rsplit("/", 1)[1], "url": url} for url in servers]
             + [{"filename": "vllm-0.8.5-cp38-abi3-manylinux_2_28_x86_64.whl", "url": "https://files.example/old"},
                {"filename": "vllm-0.10.1rc1-cp38-abi3-manylinux_2_28_x86_64.whl", "url": "https://files.example/rc"},
                {"filename": "vllm-0.9.0.tar.gz", "url": "https://files.example/sdist"}]}

    def opener(request, timeout=None):
        if request.full_url == "https://pypi.org/simple/vllm/":
            assert "application/vnd.pypi.simple.v1+json" in request.get_header("Accept")
            return _Response(json.dumps(index).encode())
        return servers[request.full_url](request, timeout)
    (tmp_path / "vllm-0.8.0.json").write_text("{}")  # a table of an earlier run: replaced
    assert gen.main(["vllm-releases", "--out", str(tmp_path)], opener=opener) == 0
    assert sorted(p.name for p in tmp_path.glob("vllm-*.json")) == ["vllm-0.10.0.json", "vllm-0.9.0.json"]
    shared = json.loads((tmp_path / "vllm-0.9.0.json").read_text())
    assert shared["version"] == "0.9.0" and list(shared["also_releases"]) == ["0.9.1"]
    assert shared["also_releases"]["0.9.1"]["commit"] == "release 0.9.1"
    rows = json.loads((tmp_path / "index.json").read_text())["tables"]["vllm"]
    assert {v: r["file"] for v, r in rows.items()} == {
        "0.9.0": "vllm-0.9.0.json", "0.9.1": "vllm-0.9.0.json", "0.10.0": "vllm-0.10.0.json"}
    assert "prompt_lookup_max" in json.loads((tmp_path / "vllm-0.10.0.json").read_text())["classes"]["SpeculativeConfig"]["fields"]
