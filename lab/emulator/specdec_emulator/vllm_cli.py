"""`vllm serve MODEL [options]` (argparse, vLLM's FlexibleArgumentParser accepts `_` for `-`)."""

import argparse
import asyncio
import json
import os
import sys

from .clock import Profile, ProfileError
from .engine import SpecSettings
from .logs import Logger
from .models import resolve
from .server import ServeConfig, serve
from .trtllm_args import EngineConfigError
from .upstream import class_model, tables_dir
from .validation import Field as F, Model, ValidationError
from .versions import at_least, engine_version
from .world import RayWorld, import_ray

METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3", "mtp")
DEPRECATED_MTP = ("deepseek_mtp", "mimo_mtp", "ernie_mtp", "qwen3_next_mtp", "longcat_flash_mtp",
                  "glm4_moe_mtp")
ARCTIC_FIELDS = {
    "enable_suffix_decoding": F("bool", False), "suffix_cache_max_depth": F("int", 64),
    "suffix_max_spec_factor": F("float", 1.0), "suffix_max_spec_offset": F("float", 0.0),
    "suffix_min_token_prob": F("float", 0.1), "suffix_cache_max_requests": F("int", 100000),
    "disable_by_batch_size": F("int", None), "hard_disable_by_batch_size": F("int", None),
}


# Options of the API server itself (vLLM's frontend arguments), which the engine tables (EngineArgs
# only) do not list; every other option of build_parser() must be in the version's table.
FRONTEND_OPTIONS = ("--host", "--port", "--api-key", "--chat-template", "--enable-auto-tool-choice",
                    "--tool-call-parser", "--uvicorn-log-level", "--help", "-h")
TABLES_FROM = "0.32.0"
TOP_USAGE = ("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n")


class SpeculativeConfigError(Exception):
    pass


def vllm_table(version):
    """The generated engine table of this vLLM version (CLI options, SpeculativeConfig), or None.

    Used from TABLES_FROM on (the versions checked against a real engine by lab/emulator/conformance.py);
    earlier versions keep the hand-written parser and SpeculativeConfig model."""
    if not at_least(version, TABLES_FROM):
        return None
    folder = tables_dir()
    if folder is None:
        return None
    path = folder / ("vllm-%s.json" % version.split(".post")[0])
    return json.loads(path.read_text()) if path.exists() else None


def table_speculative_model(table, arctic):
    """SpeculativeConfig as the version's table has it (fields, method literal, bounds)."""
    model = class_model(table, table["root"])
    fields = dict((k, v) for k, v in model.fields.items() if k not in table.get("set_by_engine", ()))
    if arctic:
        fields.update(ARCTIC_FIELDS)
        method = fields.get("method")
        if method is not None and method.kind == "literal":
            fields["method"] = F("literal", None, choices=tuple(method.choices) + ("arctic",))
    return Model("ArcticSpeculativeConfig" if arctic else "SpeculativeConfig", fields)


def _value_error(message, data):
    """A model validator's ValueError as pydantic reports it for SpeculativeConfig(**kwargs)."""
    return ValidationError("SpeculativeConfig", [{
        "loc": (), "msg": "Value error, " + message, "type": "value_error",
        "input": _ArgsKwargs(data)}])


class _ArgsKwargs:
    def __init__(self, data):
        self.data = data

    def __repr__(self):
        return "ArgsKwargs((), %r)" % (self.data,)


_ArgsKwargs.__name__ = "ArgsKwargs"


def speculative_model(arctic):
    methods = METHODS + DEPRECATED_MTP + (("arctic",) if arctic else ())
    fields = {
        "model": F("str", None), "num_speculative_tokens": F("int", None),
        "method": F("literal", None, choices=methods), "draft_tensor_parallel_size": F("int", None),
        "quantization": F("str", None), "max_model_len": F("int", None), "revision": F("str", None),
        "code_revision": F("str", None), "prompt_lookup_max": F("int", None), "prompt_lookup_min": F("int", None),
        "speculative_token_tree": F("str", None), "draft_sample_method": F("literal", "greedy",
                                                                           choices=("greedy", "probabilistic")),
        "rejection_sample_method": F("literal", "standard", choices=("standard", "synthetic", "block")),
        "synthetic_acceptance_rates": F("list", None, item=F("float")),
        "synthetic_acceptance_length": F("float", None), "parallel_drafting": F("bool", False),
        "disable_padded_drafter_batch": F("bool", False), "attention_backend": F("str", None),
        "kv_cache_dtype": F("str", None), "moe_backend": F("str", None),
        "suffix_decoding_max_tree_depth": F("int", 24), "suffix_decoding_max_cached_requests": F("int", 10000),
        "suffix_decoding_max_spec_factor": F("float", 1.0), "suffix_decoding_min_token_prob": F("float", 0.1),
    }
    if arctic:
        fields.update(ARCTIC_FIELDS)
    return Model("SpeculativeConfig" if not arctic else "ArcticSpeculativeConfig", fields)


def ray_world(args, env):
    """`--distributed-executor-backend ray`: the world the Ray cluster holds (world.RayWorld, formed at start-up).

    Without Ray installed, vLLM's ParallelConfig refuses the backend (assert_ray_available in its validator,
    wrapped by pydantic). Nothing imports Ray for any other backend."""
    ray, err = import_ray()
    if ray is None:
        data = {"pipeline_parallel_size": args.pipeline_parallel_size,
                "tensor_parallel_size": args.tensor_parallel_size, "data_parallel_size": args.data_parallel_size,
                "distributed_executor_backend": "ray", "_api_process_count": 1, "_api_process_rank": 0}
        raise ValidationError("ParallelConfig", [{
            "loc": (), "msg": "Value error, Failed to import Ray: %s.Please install Ray with `pip install ray`." % err,
            "type": "value_error", "input": _ArgsKwargs(data)}])
    return RayWorld(args.tensor_parallel_size, args.pipeline_parallel_size, env, ray)


def _unexpected(err):
    if err["type"] == "extra_forbidden":
        err["msg"], err["type"] = "Unexpected keyword argument", "unexpected_keyword_argument"
    return err


def speculative_config(data, target_tp, env, warn, table=None):
    """Validate `--speculative-config` like vLLM's SpeculativeConfig (+ArcticInference if enabled).

    With the version's engine table the fields, the method literal and the bounds are the table's, and
    the model validator's ValueErrors come wrapped in pydantic's ValidationError, as upstream's
    pydantic dataclass reports them.
    """
    arctic = env.get("ARCTIC_INFERENCE_ENABLED") == "1"
    model = table_speculative_model(table, arctic) if table else speculative_model(arctic)
    values, errors = model.validate(data)
    if errors:
        raise ValidationError(model.name, [_unexpected(e) for e in errors])
    if table:
        try:
            return _speculative_values(values, target_tp, env, warn, arctic)
        except SpeculativeConfigError as exc:
            raise _value_error(str(exc), data)
    return _speculative_values(values, target_tp, env, warn, arctic)


def _speculative_values(values, target_tp, env, warn, arctic):
    method = values.get("method")
    if method in DEPRECATED_MTP:
        warn("method `%s` is deprecated and replaced with mtp." % method)
        method = "mtp"
    if method is None:
        m = (values.get("model") or "")
        if m == "ngram":
            method = "ngram"
        elif "eagle3" in m.lower():
            method = "eagle3"
        elif "eagle-" in m.lower():
            method = "eagle"
        else:
            method = "draft_model"
    n = values.get("num_speculative_tokens")
    if values.get("model") is None and n is not None and method not in ("ngram", "mtp", "suffix") and not (
            method == "arctic" and values.get("enable_suffix_decoding")):
        raise SpeculativeConfigError("num_speculative_tokens was provided but without speculative model.")
    if method == "suffix" and not (arctic or env.get("SPECDEC_EMU_ARCTIC_INSTALLED") == "1"):
        raise EngineConfigError("ImportError", "Arctic Inference is required for suffix decoding. "
                                "Install via `pip install arctic-inference==0.1.1`.")
    if method == "ngram":
        lo, hi = values.get("prompt_lookup_min"), values.get("prompt_lookup_max")
        if lo is None and hi is None:
            lo = hi = 5
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
        if lo > hi:
            raise SpeculativeConfigError("prompt_lookup_min=%d must be <= prompt_lookup_max=%d" % (lo, hi))
    if n is None:
        if method == "suffix":
            n = values["suffix_decoding_max_tree_depth"]
        elif method == "arctic":
            n = 3
        else:
            raise SpeculativeConfigError("num_speculative_tokens must be provided with speculative model unless "
                                         "the draft model config contains an n_predict parameter.")
    if n <= 0:
        raise SpeculativeConfigError("Expected num_speculative_tokens to be greater than zero (%d)." % n)
    dtp = values.get("draft_tensor_parallel_size")
    if dtp is not None and dtp not in (1, target_tp):
        raise SpeculativeConfigError("draft_tensor_parallel_size=%d cannot be other value than 1 or target model "
                                     "tensor_parallel_size=%d" % (dtp, target_tp))
    values["method"], values["num_speculative_tokens"] = method, n
    return values


class _Parser(argparse.ArgumentParser):
    """Skips the options a version does not have (`skip`)."""

    skip = ()

    def add_argument(self, *names, **kwargs):
        kept = [n for n in names if not n.startswith("-") or n not in self.skip]
        if not kept:
            return None
        return super().add_argument(*kept, **kwargs)


def build_parser(table=None):
    """argparse parser of `vllm serve`; with an engine table, the version's option set: the table's
    EngineArgs options (those this parser does not type are taken with an optional value) plus the
    frontend options."""
    skip = ()
    if table:
        listed = set(table["cli"]["options"])
        skip = set(n for n in _OWN_OPTIONS if n not in listed and n not in FRONTEND_OPTIONS
                   and n.replace("--no-", "--", 1) not in listed)
    p = _build(skip)
    if table:
        own = set(o for a in p._actions for o in a.option_strings)
        for name in sorted(listed - own):
            p.add_argument(name, nargs="?", const="true", default=None, dest="extra_" + name.strip("-"))
    return p


def _build(skip):
    p = _Parser(prog="vllm serve", usage="vllm serve [model_tag] [options]",
                                description="Launch a local OpenAI-compatible API server to serve LLM "
                                            "completions via HTTP.")
    p.skip = skip
    p.add_argument("model_tag", nargs="?", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--max-model-len", type=str, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--speculative-config", "-sc", type=json.loads, default=None)
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--enable-auto-tool-choice", action="store_true")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--quantization", "-q", default=None)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--revision", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--download-dir", default=None)
    p.add_argument("--load-format", default="auto")
    p.add_argument("--chat-template", default=None)
    p.add_argument("--generation-config", default="auto")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--async-scheduling", action="store_true")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--disable-log-requests", action="store_true")
    p.add_argument("--enable-log-requests", action="store_true")
    p.add_argument("--disable-log-stats", action="store_true")
    p.add_argument("--uvicorn-log-level", default="info",
                   choices=["debug", "info", "warning", "error", "critical", "trace"])
    p.add_argument("--swap-space", type=float, default=4)
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--max-logprobs", type=int, default=20)
    p.add_argument("--compilation-config", "-O", default=None)
    p.add_argument("--hf-overrides", type=json.loads, default=None)
    p.add_argument("--distributed-executor-backend", default=None)
    return p


_OWN_OPTIONS = tuple(o for a in _build(())._actions for o in a.option_strings)


def _flexible(argv):
    out = []
    for word in argv:
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word.partition("=")
            word = name.replace("_", "-") + eq + value
        out.append(word)
    return out


def parse_args(argv, table, out):
    """`vllm serve`'s arguments as the release parses them: (namespace, None), or (None, exit code)
    with argparse's message written to out."""
    parser = build_parser(table)
    old_err = sys.stderr
    sys.stderr = out
    try:
        args, unknown = parser.parse_known_args(_flexible(argv))
    except SystemExit as exc:
        return None, exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stderr = old_err
    if unknown:
        # `serve` is a subcommand: its parser leaves what it does not know to the top-level `vllm`
        # parser, whose error names `vllm`
        out.write(TOP_USAGE + "vllm: error: unrecognized arguments: %s\n" % " ".join(unknown))
        return None, 2
    return args, None


def configure(argv, env=None, out=None):
    env = dict(os.environ if env is None else env)
    out = out or sys.stderr
    version = engine_version("vllm", env)
    table = vllm_table(version)
    args, code = parse_args(argv, table, out)
    if args is None:
        return None, code
    log = Logger("vllm", out)
    model_arg = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    warnings = []
    try:
        spec_values = None
        if args.speculative_config is not None:
            if not isinstance(args.speculative_config, dict):
                raise SpeculativeConfigError("--speculative-config must be a JSON object")
            spec_values = speculative_config(args.speculative_config, args.tensor_parallel_size, env,
                                             warnings.append, table)
        model = resolve(model_arg, args.revision, env=env)
        draft = None
        if spec_values and spec_values.get("model") and spec_values["method"] not in ("ngram", "suffix"):
            draft = resolve(spec_values["model"], what="draft", env=env)
        try:
            profile = Profile.load(env, model.emulator_profile, draft.emulator_profile if draft else None)
        except ProfileError as exc:
            raise EngineConfigError("ValueError", "emulator profile: %s" % exc)
        world = ray_world(args, env) if args.distributed_executor_backend == "ray" else None
        max_len = None
        if args.max_model_len:
            text = args.max_model_len.lower()
            mult = 1024 if text.endswith("k") else 1
            max_len = int(float(text.rstrip("k")) * mult)
    except ValidationError as exc:
        log.traceback(exc.qualname, exc.render())
        return None, 1
    except SpeculativeConfigError as exc:
        log.traceback("ValueError", str(exc))
        return None, 1
    except EngineConfigError as exc:
        log.traceback(exc.exc_type, exc.message)
        return None, 1
    except ValueError as exc:
        log.traceback("ValueError", str(exc))
        return None, 1
    spec = SpecSettings()
    if spec_values:
        limit = spec_values.get("disable_by_batch_size")
        if limit is None and spec_values["method"] in ("arctic", "suffix") and env.get("ARCTIC_INFERENCE_ENABLED") == "1":
            limit = 64
        spec = SpecSettings(method=spec_values["method"], max_draft_len=spec_values["num_speculative_tokens"],
                            max_concurrency=limit, two_model=spec_values["method"] == "draft_model")
    names = args.served_model_name or [model_arg]
    cfg = ServeConfig(
        engine="vllm", version=version, model=model, served_name=names[0], host=args.host or "0.0.0.0",
        port=args.port, profile=profile, spec=spec, max_batch_size=args.max_num_seqs or 256, draft=draft,
        memory_fraction=args.gpu_memory_utilization, api_key=args.api_key or env.get("VLLM_API_KEY"),
        max_seq_len=max_len, env=env, warnings=warnings, world=world)
    return cfg, None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--version", "-v"):
        print(engine_version("vllm"))
        return 0
    if not argv or argv[0] != "serve":
        sys.stderr.write("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"
                         "vllm: error: the emulator implements only `vllm serve`\n")
        return 2
    cfg, code = configure(argv[1:])
    if cfg is None:
        return code
    return asyncio.run(serve(cfg, exit_hook=lambda c: os._exit(c), install_signals=True))


if __name__ == "__main__":
    sys.exit(main())
