"""TensorRT-LLM `TorchLlmArgs` as the emulated version defines it, and the YAML merge of
`trtllm-serve --extra_llm_api_options` (`update_llm_args_with_extra_dict`).

A version with a generated engine table (upstream.py; today 1.3.x) takes every class, field, alias,
type, literal and the decoding_type dispatch from it, keeping the defaults and model-level checks
written here. The other versions use the hand-written models below, transcribed from the reference
of `llm_args.py` for 1.1.0rc0, 1.2.0rc1, 1.2.0rc6(.post1) and 1.2.1 (every config class strict,
pydantic `extra="forbid"`).
"""

from . import upstream
from .validation import Field as F, Model, ValidationError
from .versions import at_least

MOE_BACKENDS = ("AUTO", "CUTLASS", "CUTEDSL", "WIDEEP", "TRTLLM", "DEEPGEMM", "VANILLA", "TRITON")


class EngineConfigError(Exception):
    """A start-up failure: `exc_type` is the Python exception the engine would show."""

    def __init__(self, exc_type, message):
        self.exc_type = exc_type
        self.message = message
        super().__init__("%s: %s" % (exc_type, message))


def _between_0_1(values):
    frac = values.get("free_gpu_memory_fraction")
    if frac is not None and not 0 <= frac <= 1:
        return "kv_cache_config.free_gpu_memory_fraction must be a float between 0 and 1"
    return None


def kv_cache_model(version):
    return Model("KvCacheConfig", {
        "enable_block_reuse": F("bool", True),
        "max_tokens": F("int", None),
        "max_attention_window": F("list", None, item=F("int")),
        "sink_token_length": F("int", None),
        "free_gpu_memory_fraction": F("float", None if not at_least(version, "1.3.0rc0") else 0.9),
        "host_cache_size": F("int", None),
        "onboard_blocks": F("bool", True),
        "cross_kv_cache_fraction": F("float", None),
        "secondary_offload_min_priority": F("int", None),
        "event_buffer_max_size": F("int", 0),
        "attention_dp_events_gather_period_ms": F("int", 5),
        "enable_partial_reuse": F("bool", True),
        "copy_on_partial_reuse": F("bool", True),
        "use_uvm": F("bool", False),
        "max_gpu_total_bytes": F("int", 0),
        "dtype": F("str", "auto"),
        "mamba_ssm_cache_dtype": F("str", "auto"),
        "tokens_per_block": F("int", 32),
    }, checks=[_between_0_1])


def _cuda_graph_check(values):
    sizes, mbs = values.get("batch_sizes"), values.get("max_batch_size") or 0
    if sizes and mbs and mbs != max(sizes):
        return ("CudaGraphConfig.max_batch_size must be equal to the largest value in "
                "CudaGraphConfig.batch_sizes, got max_batch_size=%d and batch_sizes=%s" % (mbs, sizes))
    return None


CUDA_GRAPH = Model("CudaGraphConfig", {
    "batch_sizes": F("list", None, item=F("int")),
    "max_batch_size": F("int", 0, ge=0),
    "enable_padding": F("bool", False),
}, checks=[_cuda_graph_check])

ATTENTION_DP = Model("AttentionDpConfig", {
    "enable_balance": F("bool", False),
    "timeout_iters": F("int", 50),
    "batching_wait_iters": F("int", 10),
})

TORCH_COMPILE = Model("TorchCompileConfig", {
    "enable_fullgraph": F("bool", True),
    "enable_inductor": F("bool", False),
    "enable_piecewise_cuda_graph": F("bool", False),
    "capture_num_tokens": F("list", None, item=F("int")),
    "enable_userbuffers": F("bool", True),
    "max_num_streams": F("int", 1),
})


def moe_model(version):
    fields = {
        "backend": F("literal", "AUTO", choices=MOE_BACKENDS),
        "max_num_tokens": F("int", None),
        "load_balancer": F("any", None),
        "disable_finalize_fusion": F("bool", False),
    }
    if at_least(version, "1.2.0rc1"):
        fields["use_low_precision_moe_combine"] = F("bool", False)
    return Model("MoeConfig", fields)


# ---------------------------------------------------------------- speculative_config

def decoding_types(version):
    types = ["MTP", "Medusa", "Eagle", "Lookahead", "NGram", "DraftTarget", "UserProvided", "AUTO"]
    if at_least(version, "1.2.0rc1"):
        types.append("SaveState")
    if at_least(version, "1.3.0rc0"):
        types.append("Eagle3")
    return types


CLASS_NAMES = {
    "MTP": "MTPDecodingConfig", "Medusa": "MedusaDecodingConfig", "Eagle": "EagleDecodingConfig",
    "Eagle3": "Eagle3DecodingConfig", "Lookahead": "LookaheadDecodingConfig",
    "NGram": "NGramDecodingConfig", "DraftTarget": "DraftTargetDecodingConfig",
    "UserProvided": "UserProvidedDecodingConfig", "AUTO": "AutoDecodingConfig",
    "SaveState": "SaveHiddenStatesDecodingConfig",
}


def _base_fields(version, decoding_type):
    fields = {
        "max_draft_len": F("int", None),
        "speculative_model_dir": F("str", None),
        "max_concurrency": F("int", None),
    }
    if at_least(version, "1.2.0rc1"):
        fields["load_format"] = F("str", None)
        fields["acceptance_window"] = F("int", None)
        fields["acceptance_length_threshold"] = F("float", None, ge=0)
        if decoding_type in ("Eagle", "Eagle3") or at_least(version, "1.2.0rc6"):
            fields["max_total_draft_tokens"] = F("int", None)
    if at_least(version, "1.2.0rc6"):
        fields["draft_len_schedule"] = F("dict", None)
        fields["allow_advanced_sampling"] = F("bool", False)
    if at_least(version, "1.2.1"):
        fields["speculative_model"] = F("str", None)
    return fields


def _draft_len_schedule_check(values):
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


def spec_model(version, decoding_type):
    fields = _base_fields(version, decoding_type)
    checks = [_draft_len_schedule_check]
    if decoding_type in ("Eagle", "Eagle3"):
        fields.update({
            "eagle_choices": F("list", None),
            "greedy_sampling": F("bool", True),
            "posterior_threshold": F("float", None),
            "use_dynamic_tree": F("bool", False),
            "dynamic_tree_max_topK": F("int", None),
            "num_eagle_layers": F("int", None),
            "max_non_leaves_per_layer": F("int", None),
            "eagle3_one_model": F("bool", True),
            "eagle3_layers_to_capture": F("list", None, item=F("int")),
        })
        if at_least(version, "1.3.0rc0"):
            fields["eagle3_model_arch"] = F("str", "llama3")
        checks.insert(0, lambda v: None if v.get("max_draft_len") is not None
                      else "max_draft_len is required for Eagle")
    elif decoding_type == "NGram":
        fields.update({
            "max_matching_ngram_size": F("int", 0),
            "is_keep_all": F("bool", True),
            "is_use_oldest": F("bool", True),
            "is_public_pool": F("bool", True),
        })
        checks.insert(0, lambda v: None if (v.get("max_matching_ngram_size") or 0) > 0
                      else "max_matching_ngram_size must be > 0 for NGram")
        checks.insert(0, lambda v: None if (v.get("max_draft_len") or 0) > 0
                      else "max_draft_len must be > 0 for NGram")
    elif decoding_type == "MTP":
        fields.update({
            "num_nextn_predict_layers": F("int", 1),
            "use_relaxed_acceptance_for_thinking": F("bool", False),
            "relaxed_topk": F("int", 1),
            "relaxed_delta": F("float", 0.0),
            "use_mtp_vanilla": F("bool", False),
            "mtp_eagle_one_model": F("bool", True),
            "num_nextn_predict_layers_from_model_config": F("int", 1),
        })
    elif decoding_type == "Medusa":
        fields.update({"medusa_choices": F("list", None), "num_medusa_heads": F("int", None)})
    elif decoding_type == "Lookahead":
        fields.update({"max_window_size": F("int", 4), "max_ngram_size": F("int", 3),
                       "max_verification_set_size": F("int", 4)})
    elif decoding_type == "UserProvided":
        fields.update({"drafter": F("any", None), "resource_manager": F("any", None)})
    elif decoding_type == "SaveState":
        fields.update({"output_directory": F("str", None, required=True),
                       "write_interval": F("int", 20), "file_prefix": F("str", "data"),
                       "eagle3_layers_to_capture": F("list", None)})
    elif decoding_type == "DraftTarget" and at_least(version, "1.3.0rc0"):
        checks.insert(0, lambda v: None if (v.get("max_draft_len") or 0) > 0
                      else "max_draft_len must be > 0 for DraftTarget")
    return Model(CLASS_NAMES[decoding_type], fields, checks=checks)


def _spec_from_table(version, table, data, backend, warn):
    """`DecodingBaseConfig.from_dict` as the generated table records it."""
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
    hand_type = effective if effective in CLASS_NAMES else None
    checks = {cls: spec_model(version, hand_type).checks} if hand_type else {}
    model = upstream.class_model(table, cls, checks=checks)
    values = model.parse(upstream.unalias(model, data))
    if values.get("speculative_model"):
        values["speculative_model_dir"] = values["speculative_model"]
    values["decoding_type"] = effective
    return values


def spec_from_dict(version, data, backend="pytorch", warn=None):
    """`DecodingBaseConfig.from_dict` of the emulated version."""
    if not isinstance(data, dict):
        raise EngineConfigError("TypeError", "'%s' object is not a mapping" % type(data).__name__)
    data = dict(data)
    table = upstream.trtllm_table(version)
    if table is not None:
        return _spec_from_table(version, table, data, backend, warn)
    decoding_type = data.get("decoding_type")
    if decoding_type not in decoding_types(version):
        raise EngineConfigError("ValueError", "Invalid decoding type: %s" % (decoding_type,))
    data.pop("decoding_type")
    model = spec_model(version, decoding_type)
    values = model.parse(data)
    if at_least(version, "1.2.1") and values.get("speculative_model"):
        values["speculative_model_dir"] = values["speculative_model"]
    if decoding_type == "Eagle" and at_least(version, "1.3.0rc0") and backend in ("pytorch", "_autodeploy"):
        if warn:
            warn("EagleDecodingConfig is deprecated on the %s backend; converting to Eagle3DecodingConfig"
                 % backend)
        decoding_type = "Eagle3"
    values["decoding_type"] = decoding_type
    return values


# ---------------------------------------------------------------- TorchLlmArgs

def torch_llm_args_model(version):
    """TorchLlmArgs of the emulated version: the table's when there is one, else the hand-written one."""
    table = upstream.trtllm_table(version)
    hand = torch_llm_args_model_hand(version)
    if table is None:
        return hand
    return _table_model(version, table, "TorchLlmArgs", hand)


def torch_llm_args_model_hand(version):
    fields = {
        # BaseLlmArgs
        "model": F("str", None), "tokenizer": F("str", None), "tokenizer_mode": F("str", "auto"),
        "skip_tokenizer_init": F("bool", False), "trust_remote_code": F("bool", False),
        "tensor_parallel_size": F("int", 1), "dtype": F("str", "auto"), "revision": F("str", None),
        "tokenizer_revision": F("str", None), "pipeline_parallel_size": F("int", 1),
        "context_parallel_size": F("int", 1), "gpus_per_node": F("int", None),
        "moe_cluster_parallel_size": F("int", None), "moe_tensor_parallel_size": F("int", None),
        "moe_expert_parallel_size": F("int", None), "enable_attention_dp": F("bool", False),
        "cp_config": F("dict", None), "load_format": F("str", "auto"), "enable_lora": F("bool", False),
        "lora_config": F("dict", None), "kv_cache_config": F("any", None),
        "enable_chunked_prefill": F("bool", False), "guided_decoding_backend": F("str", None),
        "batched_logits_processor": F("any", None), "iter_stats_max_iterations": F("int", None),
        "request_stats_max_iterations": F("int", None), "peft_cache_config": F("dict", None),
        "scheduler_config": F("dict", None), "cache_transceiver_config": F("dict", None),
        "speculative_config": F("any", None), "max_batch_size": F("int", None),
        "max_input_len": F("int", None), "max_seq_len": F("int", None), "max_beam_width": F("int", None),
        "max_num_tokens": F("int", None), "gather_generation_logits": F("bool", False),
        "num_postprocess_workers": F("int", 0), "postprocess_tokenizer_dir": F("str", None),
        "reasoning_parser": F("str", None), "decoding_config": F("any", None),
        "mpi_session": F("any", None), "backend": F("str", None),
        "return_perf_metrics": F("bool", False), "perf_metrics_max_requests": F("int", 0, ge=0),
        "orchestrator_type": F("str", None),
        # TorchLlmArgs
        "garbage_collection_gen0_threshold": F("int", 20000), "cuda_graph_config": F("any", "default"),
        "attention_dp_config": F("any", None), "disable_overlap_scheduler": F("bool", False),
        "moe_config": F("any", None), "attn_backend": F("str", "TRTLLM"),
        "enable_iter_perf_stats": F("bool", False), "enable_iter_req_stats": F("bool", False),
        "print_iter_log": F("bool", False), "torch_compile_config": F("any", None),
        "enable_autotuner": F("bool", True), "enable_layerwise_nvtx_marker": F("bool", False),
        "enable_min_latency": F("bool", False), "stream_interval": F("int", 1),
        "force_dynamic_quantization": F("bool", False), "allreduce_strategy": F("str", "AUTO"),
        "checkpoint_loader": F("any", None), "checkpoint_format": F("str", None),
        "kv_connector_config": F("dict", None), "mm_encoder_only": F("bool", False),
        "ray_worker_extension_cls": F("str", None), "batch_wait_timeout_ms": F("float", 0, ge=0),
        "batch_wait_timeout_iters": F("int", 0, ge=0), "batch_wait_max_tokens_ratio": F("float", 0, ge=0),
    }
    if at_least(version, "1.2.0rc1"):
        fields["sampler_type"] = F("literal", "auto", choices=("TRTLLMSampler", "TorchSampler", "auto"))
    else:
        fields["use_torch_sampler"] = F("bool", False)
        fields["enable_mixed_sampler"] = F("bool", False)
    if at_least(version, "1.2.0rc6"):
        fields["env_overrides"] = F("dict", None)
    checks = [lambda v: None if (v.get("stream_interval") or 0) > 0
              else "stream_interval must be positive, got %s" % v.get("stream_interval")]
    return Model("TorchLlmArgs", fields, checks=checks)


SUBCONFIGS = {
    "kv_cache_config": kv_cache_model,
    "cuda_graph_config": lambda v: CUDA_GRAPH,
    "attention_dp_config": lambda v: ATTENTION_DP,
    "moe_config": moe_model,
    "torch_compile_config": lambda v: TORCH_COMPILE,
}


def _table_checks(version):
    """Model-level checks written here, attached to the table's classes of the same name."""
    out = {"TorchLlmArgs": torch_llm_args_model_hand(version).checks}
    for key, make in SUBCONFIGS.items():
        hand = make(version)
        out[hand.name] = hand.checks
    return out


def _table_model(version, table, class_name, hand=None):
    defaults = dict((k, f.default) for k, f in hand.fields.items()) if hand is not None else None
    return upstream.class_model(table, class_name, checks=_table_checks(version), hand_defaults=defaults)


def sub_model(version, key):
    """The model of a nested config key of TorchLlmArgs (from the table when there is one)."""
    table = upstream.trtllm_table(version)
    hand = SUBCONFIGS[key](version) if key in SUBCONFIGS else None
    if table is None:
        return hand
    ty = table["classes"]["TorchLlmArgs"]["fields"][key]["type"] if key in table["classes"]["TorchLlmArgs"][
        "fields"] else None
    opts = (ty["options"] if ty["kind"] == "union" else [ty]) if ty else []
    classes = [o["name"] for o in opts if o["kind"] == "class"]
    if len(classes) != 1:
        return hand
    return _table_model(version, table, classes[0], hand)


def build_llm_args(version, cli_args, extra, warn=None):
    """Merge the YAML over the CLI (YAML keys win; kv_cache_config deep-merged) and validate.

    `cli_args` uses TorchLlmArgs names. Returns the validated dict. Raises ValidationError or
    EngineConfigError with the engine's wording.
    """
    merged = dict(cli_args)
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise EngineConfigError("AttributeError", "'%s' object has no attribute 'items'" % type(extra).__name__)
    backend = merged.get("backend", "pytorch")
    table = upstream.trtllm_table(version)
    for key, value in extra.items():
        if key == "speculative_config" and value is not None:
            merged[key] = spec_from_dict(version, value, backend=backend, warn=warn)
        elif value is not None and (key in SUBCONFIGS or (table is not None and sub_model(version, key) is not None)):
            base = dict(merged.get(key) or {}) if key == "kv_cache_config" else {}
            base.update(value if isinstance(value, dict) else {})
            model = sub_model(version, key)
            merged[key] = model.parse(base if isinstance(value, dict) else value)
        else:
            merged[key] = value
    if isinstance(merged.get("kv_cache_config"), dict) and "kv_cache_config" not in extra:
        merged["kv_cache_config"] = sub_model(version, "kv_cache_config").parse(merged["kv_cache_config"])
    values = torch_llm_args_model(version).parse(merged)
    spec = values.get("speculative_config")
    if spec:
        dt = spec["decoding_type"]
        if backend in ("pytorch", "_autodeploy") and dt in ("Medusa", "Lookahead"):
            raise EngineConfigError("ValueError", "%s decoding is not supported on the %s backend" % (dt, backend))
        if dt in ("Eagle", "Eagle3", "DraftTarget") and not spec.get("speculative_model_dir"):
            name = "speculative_model" if at_least(version, "1.2.1") else "speculative_model_dir"
            raise EngineConfigError("ValueError", "%s must be specified for %s decoding" % (name, dt))
        if dt in ("Eagle3", "DraftTarget") and at_least(version, "1.3.0rc0") and not (spec.get("max_draft_len") or 0) > 0:
            raise EngineConfigError("AssertionError", "max_draft_len must be > 0 for %s" % dt)
    return values


__all__ = ["build_llm_args", "spec_from_dict", "decoding_types", "EngineConfigError", "ValidationError"]
