"""TensorRT-LLM `TorchLlmArgs` as the emulated version defines it, and the YAML merge of
`trtllm-serve --extra_llm_api_options` (`update_llm_args_with_extra_dict`).

Every class, field, alias, type, literal and the decoding_type dispatch come from the version's
generated engine table (upstream.py); a version without a table is refused. Kept here is only what a
table cannot say: the upstream validators the emulator imitates (small named checks, attached by class
name or decoding type) and the few upstream defaults the emulator's own behaviour reads.
"""

from . import upstream
from .validation import ValidationError
from .versions import at_least


class EngineConfigError(Exception):
    """A start-up failure: `exc_type` is the Python exception the engine would show."""

    def __init__(self, exc_type, message):
        self.exc_type = exc_type
        self.message = message
        super().__init__("%s: %s" % (exc_type, message))


def engine_table(version):
    """The generated table of the emulated version."""
    table = upstream.trtllm_table(version)
    if table is None:
        raise EngineConfigError("ValueError", "no engine table for TensorRT-LLM %s in %s; the emulator cannot "
                                "emulate this version" % (version, upstream.tables_dir()))
    return table


# Upstream defaults the emulator reads (trtllm_cli.configure) that the tables read off a release's
# rendered pages do not record; a table's own default wins. Keyed by field name.
EMULATOR_DEFAULTS = {
    "stream_interval": 1,  # TorchLlmArgs: tokens are streamed every stream_interval iterations
    "num_nextn_predict_layers": 1,  # MTPDecodingConfig: MTP's draft length when max_draft_len is unset
}


# ---------------------------------------------------------------- upstream validators the emulator imitates

def _stream_interval_positive(values):
    """TorchLlmArgs: stream_interval must be positive."""
    if not (values.get("stream_interval") or 0) > 0:
        return "stream_interval must be positive, got %s" % values.get("stream_interval")
    return None


def _kv_fraction_between_0_1(values):
    """KvCacheConfig: free_gpu_memory_fraction within [0, 1]."""
    frac = values.get("free_gpu_memory_fraction")
    if frac is not None and not 0 <= frac <= 1:
        return "kv_cache_config.free_gpu_memory_fraction must be a float between 0 and 1"
    return None


def _cuda_graph_max_batch_size_non_negative(values):
    """CudaGraphConfig: the field validator of max_batch_size."""
    if (values.get("max_batch_size") or 0) < 0:
        return "cuda_graph_config.max_batch_size must be non-negative"
    return None


def _cuda_graph_sizes_match(values):
    """CudaGraphConfig: max_batch_size and batch_sizes must agree when both are set."""
    sizes, mbs = values.get("batch_sizes"), values.get("max_batch_size") or 0
    if sizes and mbs and mbs != max(sizes):
        return ("CudaGraphConfig.max_batch_size must be equal to the largest value in "
                "CudaGraphConfig.batch_sizes, got max_batch_size=%d and batch_sizes=%s" % (mbs, sizes))
    return None


CLASS_CHECKS = {
    "TorchLlmArgs": [_stream_interval_positive],
    "KvCacheConfig": [_kv_fraction_between_0_1],
    "CudaGraphConfig": [_cuda_graph_max_batch_size_non_negative, _cuda_graph_sizes_match],
}


def _eagle_needs_max_draft_len(values):
    """EagleDecodingConfig (and Eagle3): max_draft_len is required."""
    return None if values.get("max_draft_len") is not None else "max_draft_len is required for Eagle"


def _ngram_needs_positive_lengths(values):
    """NGramDecodingConfig: a positive max_draft_len and max_matching_ngram_size."""
    if not (values.get("max_draft_len") or 0) > 0:
        return "max_draft_len must be > 0 for NGram"
    if not (values.get("max_matching_ngram_size") or 0) > 0:
        return "max_matching_ngram_size must be > 0 for NGram"
    return None


def _draft_len_schedule_check(values):
    """DecodingBaseConfig: draft_len_schedule maps batch sizes to draft lengths, key 1 = max_draft_len."""
    schedule = values.get("draft_len_schedule")
    if not schedule:
        return None
    mdl = values.get("max_draft_len")
    try:
        sched = {int(k): int(v) for k, v in schedule.items()}
    except (TypeError, ValueError):
        return "draft_len_schedule keys and values must be integers"
    if sched.get(1) != mdl:
        return "draft_len_schedule must contain key 1 with value equal to max_draft_len (%s)" % mdl
    if any(v > (mdl or 0) or v < 0 for v in sched.values()):
        return "draft_len_schedule values must be between 0 and max_draft_len (%s)" % mdl
    return None


SPEC_CHECKS = {
    "Eagle": [_eagle_needs_max_draft_len],
    "Eagle3": [_eagle_needs_max_draft_len],
    "NGram": [_ngram_needs_positive_lengths],
}


def _check_speculative(version, spec, backend):
    """Upstream's start-up checks of the speculative config (after validation), which the emulator imitates:
    Medusa and Lookahead have no PyTorch implementation, the draft-model methods need their model."""
    dt = spec["decoding_type"]
    if backend in ("pytorch", "_autodeploy") and dt in ("Medusa", "Lookahead"):
        raise EngineConfigError("ValueError", "%s decoding is not supported on the %s backend" % (dt, backend))
    if dt in ("Eagle", "Eagle3", "DraftTarget") and not spec.get("speculative_model_dir"):
        name = "speculative_model" if "speculative_model" in spec else "speculative_model_dir"
        raise EngineConfigError("ValueError", "%s must be specified for %s decoding" % (name, dt))
    # from 1.3 the PyTorch drafters assert a positive draft length
    if dt in ("Eagle3", "DraftTarget") and at_least(version, "1.3.0rc0") and not (spec.get("max_draft_len") or 0) > 0:
        raise EngineConfigError("AssertionError", "max_draft_len must be > 0 for %s" % dt)


# ---------------------------------------------------------------- models

def _model(table, cls, checks=None):
    return upstream.class_model(table, cls, checks=checks or CLASS_CHECKS, defaults=EMULATOR_DEFAULTS)


def _config_class(table, key):
    """The class of a TorchLlmArgs field typed as exactly one config class, else None."""
    field = table["classes"][table["root"]]["fields"].get(key)
    if field is None:
        return None
    opts = field["type"]["options"] if field["type"]["kind"] == "union" else [field["type"]]
    classes = [o["name"] for o in opts if o["kind"] == "class"]
    return classes[0] if len(classes) == 1 else None


def spec_from_dict(version, data, backend="pytorch", warn=None):
    """`DecodingBaseConfig.from_dict` of the emulated version, as its table records the dispatch."""
    if not isinstance(data, dict):
        raise EngineConfigError("TypeError", "'%s' object is not a mapping" % type(data).__name__)
    table = engine_table(version)
    data = dict(data)
    rule = upstream.dispatch(table)
    decoding_type = data.get(rule["key"])
    classes = rule["classes"]
    cls = classes.get(decoding_type) if isinstance(decoding_type, str) else None
    if cls is None:
        raise EngineConfigError("ValueError", "Invalid decoding type: %s" % (decoding_type,))
    data.pop(rule["key"])
    effective = decoding_type
    override = rule.get("backend_overrides", {}).get(decoding_type, {})
    if override.get(backend):
        cls = override[backend]
        effective = [k for k, v in classes.items() if v == cls][0]
        if warn:
            warn("speculative_config.decoding_type '%s' is treated as '%s' on the %s backend"
                 % (decoding_type, effective, backend))
    checks = dict(CLASS_CHECKS, **{cls: SPEC_CHECKS.get(effective, []) + [_draft_len_schedule_check]})
    values = _model(table, cls, checks).parse(data)
    if values.get("speculative_model"):  # the emulator reads the draft model as speculative_model_dir
        values["speculative_model_dir"] = values["speculative_model"]
    values["decoding_type"] = effective
    return values


def build_llm_args(version, cli_args, extra, warn=None):
    """Merge the YAML over the CLI (YAML keys win; kv_cache_config deep-merged) and validate.

    `cli_args` uses TorchLlmArgs names. As upstream, the config classes are built first (so their
    errors carry their class name), then TorchLlmArgs. Returns the validated dict. Raises
    ValidationError or EngineConfigError with the engine's wording.
    """
    table = engine_table(version)
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise EngineConfigError("AttributeError", "'%s' object has no attribute 'items'" % type(extra).__name__)
    backend = cli_args.get("backend", "pytorch")
    merged = dict(cli_args)
    if isinstance(merged.get("kv_cache_config"), dict) and isinstance(extra.get("kv_cache_config"), dict):
        extra = dict(extra, kv_cache_config={**merged["kv_cache_config"], **extra["kv_cache_config"]})
    merged.update(extra)
    if backend == "pytorch":
        # launch_server pops these before the LLM is built (the table's serve_drops_for_pytorch)
        for key in table.get("serve_drops_for_pytorch", []):
            if key not in table["classes"][table["root"]]["fields"]:
                merged.pop(key, None)
    built = {}
    for key, value in merged.items():
        if value is None:
            continue
        if key == "speculative_config":
            built[key] = spec_from_dict(version, value, backend=backend, warn=warn)
            continue
        cls = _config_class(table, key)
        if cls:
            built[key] = _model(table, cls).parse(value)
    values = _model(table, table["root"]).parse(dict((k, v) for k, v in merged.items() if k not in built))
    values.update(built)
    if values.get("speculative_config"):
        _check_speculative(version, values["speculative_config"], backend)
    return values


__all__ = ["build_llm_args", "spec_from_dict", "engine_table", "EngineConfigError", "ValidationError"]
