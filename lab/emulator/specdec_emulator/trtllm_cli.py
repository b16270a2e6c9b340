"""`trtllm-serve [serve] MODEL [OPTIONS]` as the emulated TensorRT-LLM version defines it (click).

The serve options (names, aliases, flag or value, choices) are the version's engine table's `cli`
(upstream.py); the emulator adds only the value types and defaults of the options it reads, which the
tables read off a release's trtllm-serve page do not record.
"""

import asyncio
import difflib
import os
import sys

import yaml

from .clock import Profile, ProfileError
from .engine import SpecSettings
from .logs import Logger
from .models import resolve
from .server import ServeConfig, serve
from .trtllm_args import EngineConfigError, build_llm_args, engine_table
from .validation import ValidationError
from .versions import at_least, engine_version
from .world import World, env_world_size

PROG = "trtllm-serve"

# The options the emulator reads, by the name every release accepts (later releases add a longer
# alias), with their click type and default where the table records none: the parsed value's key
# is that name without its dashes.
READ_OPTIONS = {
    "--host": ("str", "localhost"),
    "--port": ("int", 8000),
    "--backend": ("str", "pytorch"),
    "--max_beam_width": ("int", 1),
    "--max_batch_size": ("int", 2048),
    "--max_num_tokens": ("int", 8192),
    "--max_seq_len": ("int", None),
    "--tp_size": ("int", 1),
    "--pp_size": ("int", 1),
    "--cp_size": ("int", 1),
    "--ep_size": ("int", None),
    "--cluster_size": ("int", None),
    "--gpus_per_node": ("int", None),
    "--kv_cache_free_gpu_memory_fraction": ("float", 0.9),
    "--num_postprocess_workers": ("int", 0),
    "--extra_llm_api_options": ("str", None),
}


class Opt:
    def __init__(self, names, dest, kind="str", default=None, choices=None, multiple=False):
        self.names, self.dest, self.kind = names, dest, kind
        self.default, self.choices, self.multiple = default, choices, multiple


def options(version):
    """The options of `trtllm-serve serve` in the version's table."""
    opts = []
    for name, row in engine_table(version)["cli"]["options"].items():
        names = [name] + row.get("aliases", [])
        read = [n for n in names if n in READ_OPTIONS]
        kind, default = READ_OPTIONS[read[0]] if read else (row.get("type", "str"), None)
        if row.get("flag"):
            kind, default = "flag", False
        elif row.get("choices"):
            kind = "choice"
        elif kind not in ("int", "float"):
            kind = "str"
        dest = (read[0] if read else name).lstrip("-").replace("-", "_")
        opts.append(Opt(names, dest, kind, row.get("default", default), tuple(row.get("choices", ())),
                        bool(row.get("multiple"))))
    return opts


class UsageError(Exception):
    pass


def _usage_fail(msg, out):
    out.write("Usage: %s serve [OPTIONS] MODEL\nTry '%s serve --help' for help.\n\nError: %s\n"
              % (PROG, PROG, msg))
    return 2


def _help(version, out):
    out.write("Usage: %s serve [OPTIONS] MODEL\n\n  Running an OpenAI API compatible server\n\n"
              "  MODEL: model name | HF checkpoint path | TensorRT engine path\n\nOptions:\n" % PROG)
    for o in options(version):
        out.write("  %s%s\n" % (", ".join(o.names), "" if o.kind == "flag" else " " + o.kind.upper()))
    out.write("  --help  Show this message and exit.\n")


def parse_cli(argv, version, out=None):
    """click-compatible parse. Returns (values dict, exit code or None)."""
    out = out or sys.stderr
    argv = list(argv)
    if argv and argv[0] == "serve":
        argv = argv[1:]
    elif argv and argv[0] in ("disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve"):
        out.write("Error: the emulator implements only `%s serve`\n" % PROG)
        return None, 2
    table = options(version)
    by_name = {n: o for o in table for n in o.names}
    values = {o.dest: ([] if o.multiple else o.default) for o in table}
    positional = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--help":
            _help(version, sys.stdout)
            return None, 0
        if word == "--":
            positional += argv[i + 1:]
            break
        if word.startswith("-") and len(word) > 1:
            name, eq, inline = word.partition("=")
            opt = by_name.get(name)
            if opt is None:
                close = difflib.get_close_matches(name, list(by_name), n=1)
                hint = " Did you mean %s?" % close[0] if close else ""
                return None, _usage_fail("No such option: %s%s" % (name, hint), out)
            if opt.kind == "flag":
                if eq:
                    return None, _usage_fail("Option '%s' does not take a value." % name, out)
                values[opt.dest] = True
                i += 1
                continue
            if eq:
                raw = inline
            else:
                if i + 1 >= len(argv):
                    return None, _usage_fail("Option '%s' requires an argument." % name, out)
                raw = argv[i + 1]
                i += 1
            i += 1
            try:
                val = _convert(opt, raw)
            except UsageError as exc:
                hint = " / ".join("'%s'" % n for n in opt.names)
                return None, _usage_fail("Invalid value for %s: %s" % (hint, exc), out)
            if opt.multiple:
                values[opt.dest].append(val)
            else:
                values[opt.dest] = val
            continue
        positional.append(word)
        i += 1
    if not positional:
        return None, _usage_fail("Missing argument 'MODEL'.", out)
    if len(positional) > 1:
        return None, _usage_fail("Got unexpected extra argument (%s)" % " ".join(positional[1:]), out)
    values["model"] = positional[0]
    return values, None


def _convert(opt, raw):
    if opt.kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise UsageError("%r is not a valid integer." % raw)
    if opt.kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise UsageError("%r is not a valid float." % raw)
    if opt.kind == "choice":
        if raw not in opt.choices:
            words = ", ".join("%r" % c for c in opt.choices)
            raise UsageError("%r is not one of %s." % (raw, words) if len(opt.choices) > 1
                             else "%r is not %r." % (raw, opt.choices[0]))
    return raw


def cli_to_llm_args(values):
    args = {
        "model": values["model"], "tokenizer": values.get("tokenizer"), "backend": values["backend"],
        "max_beam_width": values["max_beam_width"], "max_batch_size": values["max_batch_size"],
        "max_num_tokens": values["max_num_tokens"], "max_seq_len": values.get("max_seq_len"),
        "tensor_parallel_size": values["tp_size"], "pipeline_parallel_size": values["pp_size"],
        "moe_expert_parallel_size": values.get("ep_size"),
        "moe_cluster_parallel_size": values.get("cluster_size"), "gpus_per_node": values.get("gpus_per_node"),
        "kv_cache_config": {"free_gpu_memory_fraction": values["kv_cache_free_gpu_memory_fraction"]},
        "num_postprocess_workers": values["num_postprocess_workers"],
        "trust_remote_code": values["trust_remote_code"], "reasoning_parser": values.get("reasoning_parser"),
    }
    if values.get("enable_chunked_prefill"):
        args["enable_chunked_prefill"] = True
    if values.get("cp_size", 1) != 1:
        args["context_parallel_size"] = values["cp_size"]
    if values.get("revision"):
        args["revision"] = values["revision"]
    return {k: v for k, v in args.items() if v is not None}


def spec_stats_reported(version, spec_cfg, env):
    """Whether /metrics fills specDecodingStats (PR #9855 added it for one-model paths)."""
    mode = env.get("SPECDEC_EMU_ONE_MODEL_SPEC_STATS", "auto")
    two_model = spec_cfg["decoding_type"] in ("DraftTarget", "NGram") or (
        spec_cfg["decoding_type"] in ("Eagle", "Eagle3") and spec_cfg.get("eagle3_one_model") is False)
    if two_model or mode == "on":
        return True
    if mode == "off":
        return False
    return at_least(version, "1.3.0rc0")


def configure(argv, env=None, out=None, world=None):
    """Parse and validate like trtllm-serve. Returns (ServeConfig, None) or (None, exit code).

    `world`: the MPI world rank 0 joined (world.World) when mpirun started it; its size must be the
    engine's ranks (tensor x pipeline parallel)."""
    env = dict(os.environ if env is None else env)
    out = out or sys.stderr
    version = engine_version("trtllm", env)
    values, code = parse_cli(argv, version, out)
    if values is None:
        return None, code
    log = Logger("trtllm", out)
    warnings = []
    try:
        extra = None
        path = values.get("extra_llm_api_options")
        if path:
            try:
                with open(path, encoding="utf-8") as fh:
                    extra = yaml.safe_load(fh)
            except FileNotFoundError:
                raise EngineConfigError("FileNotFoundError",
                                        "[Errno 2] No such file or directory: '%s'" % path)
            except yaml.YAMLError as exc:
                raise EngineConfigError("yaml.scanner.ScannerError", str(exc))
        llm = build_llm_args(version, cli_to_llm_args(values), extra, warn=warnings.append)
        if world is not None:
            world.check(llm)
        model = resolve(values["model"], values.get("revision"), env=env)
        spec_cfg = llm.get("speculative_config")
        draft = None
        if spec_cfg and spec_cfg.get("speculative_model_dir"):
            draft = resolve(spec_cfg["speculative_model_dir"], what="draft", env=env)
        try:
            profile = Profile.load(env, model.emulator_profile, draft.emulator_profile if draft else None)
        except ProfileError as exc:
            raise EngineConfigError("ValueError", "emulator profile: %s" % exc)
        spec = SpecSettings()
        if spec_cfg:
            dt = spec_cfg["decoding_type"]
            mdl = spec_cfg.get("max_draft_len")
            if dt == "MTP" and mdl is None:
                mdl = spec_cfg.get("num_nextn_predict_layers", 1)
            if dt == "AUTO" and mdl is None:
                mdl = 5 if (llm.get("max_batch_size") or 2048) <= 4 else 3
            spec = SpecSettings(method=dt, max_draft_len=mdl or 0,
                                max_concurrency=spec_cfg.get("max_concurrency") or (32 if dt == "AUTO" else None),
                                draft_len_schedule=spec_cfg.get("draft_len_schedule"),
                                two_model=dt in ("DraftTarget",) or spec_cfg.get("eagle3_one_model") is False)
            spec.stats_reported = spec_stats_reported(version, spec_cfg, env)
    except ValidationError as exc:
        log.traceback(exc.qualname, exc.render())
        return None, 1
    except EngineConfigError as exc:
        log.traceback(exc.exc_type, exc.message)
        return None, 1
    kv = llm.get("kv_cache_config") or {}
    fraction = kv.get("free_gpu_memory_fraction")
    cfg = ServeConfig(
        engine="trtllm", version=version, model=model, served_name=model.basename if os.path.isdir(model.arg)
        else model.arg, host=values["host"], port=values["port"], profile=profile, spec=spec,
        max_batch_size=llm.get("max_batch_size") or 2048, draft=draft,
        memory_fraction=0.9 if fraction is None else fraction,
        iter_perf_stats=bool(llm.get("enable_iter_perf_stats")), stream_interval=llm.get("stream_interval") or 1,
        max_seq_len=llm.get("max_seq_len"), env=env,
        perf_metrics=bool(llm.get("return_perf_metrics")) and (llm.get("perf_metrics_max_requests") or 0) > 0,
        iter_stats_max=llm.get("iter_stats_max_iterations") or 1000, warnings=warnings, world=world)
    return cfg, None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # under mpirun (trtllm-llmapi-launch): rank 0 joins the world first, and ends it however it exits
    world = World.join() if env_world_size() > 1 else None
    try:
        if argv and argv[0] in ("--version", "-v"):
            print("%s, version %s" % (PROG, engine_version("trtllm")))
            return 0
        cfg, code = configure(argv, world=world)
        if cfg is None:
            return code
        return asyncio.run(serve(cfg, exit_hook=lambda c: os._exit(c), install_signals=True))
    finally:
        if world is not None and not world.end():
            Logger("trtllm").warning("the MPI world did not end: not every worker rank answered rank 0")


if __name__ == "__main__":
    sys.exit(main())
