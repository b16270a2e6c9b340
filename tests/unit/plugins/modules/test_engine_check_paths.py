# -*- coding: utf-8 -*-
"""The engine check's probes never load a model, whatever path the command takes.

The probes run here against fakes of the engines' modules, written for each test: each fake follows the
flow of its upstream command (trtllm-serve's serve module of TensorRT-LLM 1.3: launch_server,
launch_grpc_server of --grpc, launch_mm_encoder_server of mm_embedding_serve, launch_visual_gen_server for a
diffusion model, the disaggregated server; `vllm serve`'s one API server, --grpc, --headless and the
multi-port data-parallel supervisor, which spawns its ranks), and each load path writes a marker file. The
fakes load when run without the probe (so the tests are not vacuous); under the probe the marker never
appears, and the verdict says whether the configuration was judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import engine_check as ec

LOAD = '''
import os


def load(what):
    """The load path of the fake engine: the probe must never get here."""
    with open(os.environ["FAKE_ENGINE_MARKER"], "a") as handle:
        handle.write(what + "\\n")
'''

TRTLLM = {
    "tensorrt_llm/__init__.py": "from tensorrt_llm.llmapi import LLM, MultimodalEncoder, VisualGen  # noqa: F401\n",
    "tensorrt_llm/_load.py": LOAD,
    "tensorrt_llm/llmapi/__init__.py": '''
        from tensorrt_llm.llmapi.llm import LLM, MultimodalEncoder  # noqa: F401
        from tensorrt_llm.llmapi.visual_gen import VisualGen  # noqa: F401
    ''',
    "tensorrt_llm/llmapi/llm_args.py": '''
        KNOWN = {"model", "backend", "tensor_parallel_size", "max_batch_size", "speculative_config"}


        class TorchLlmArgs:
            def __init__(self, **kwargs):
                extra = sorted(set(kwargs) - KNOWN)
                if extra:
                    raise ValueError("Extra inputs are not permitted: %s" % ", ".join(extra))

            @classmethod
            def from_kwargs(cls, **kwargs):
                return cls(**kwargs)
    ''',
    "tensorrt_llm/llmapi/llm.py": '''
        from tensorrt_llm._load import load
        from tensorrt_llm.llmapi.llm_args import TorchLlmArgs


        class BaseLLM:
            def __init__(self, **kwargs):
                self.args = TorchLlmArgs.from_kwargs(**kwargs)
                load("the model of " + type(self).__name__)


        class _TorchLLM(BaseLLM):
            pass


        class LLM(_TorchLLM):
            pass


        class MultimodalEncoder(_TorchLLM):
            pass
    ''',
    "tensorrt_llm/llmapi/visual_gen.py": '''
        from tensorrt_llm._load import load


        class VisualGen:
            def __init__(self, model_path, diffusion_args=None):
                load("the diffusion model " + model_path)
    ''',
    "tensorrt_llm/serve/__init__.py": '''
        from tensorrt_llm._load import load


        class OpenAIServer:
            def __init__(self, generator, **kwargs):
                self.generator = generator


        class OpenAIDisaggServer:
            def __init__(self, **kwargs):
                load("the disaggregated router's servers")
    ''',
    "tensorrt_llm/commands/__init__.py": "",
    "tensorrt_llm/commands/serve.py": '''
        """The flow of trtllm-serve 1.3's serve module: the names bound at import, as upstream binds them."""
        import multiprocessing
        import os

        import yaml

        from tensorrt_llm import LLM as PyTorchLLM
        from tensorrt_llm import MultimodalEncoder
        from tensorrt_llm._load import load
        from tensorrt_llm.llmapi import VisualGen
        from tensorrt_llm.serve import OpenAIDisaggServer, OpenAIServer


        def launch_server(host, port, llm_args, tool_parser=None, chat_template=None):
            llm_args.pop("build_config", None)
            OpenAIServer(generator=PyTorchLLM(**llm_args))


        def launch_grpc_server(host, port, llm_args, served_model_name=None):
            llm_args.pop("build_config", None)
            PyTorchLLM(**llm_args)


        def launch_mm_encoder_server(host, port, encoder_args, metadata_server_cfg=None):
            encoder_args.pop("build_config", None)
            MultimodalEncoder(**encoder_args)


        def launch_visual_gen_server(host, port, model, diffusion_args=None, metadata_server_cfg=None):
            VisualGen(model_path=model, diffusion_args=diffusion_args)


        def serve_by_a_new_path(llm_args):
            """A path of a later release that the probe does not know by name."""
            llm_args.pop("build_config", None)
            PyTorchLLM(**llm_args)


        def spawned_rank():
            load("a spawned rank's model")


        def get_llm_args(model, backend="pytorch", tensor_parallel_size=1):
            return {"model": model, "backend": backend, "tensor_parallel_size": tensor_parallel_size,
                    "build_config": object()}


        class Main:
            def main(self, args=None, prog_name="trtllm-serve", standalone_mode=True):
                args = list(args)
                if args[0] == "disaggregated":
                    OpenAIDisaggServer(config=args[1:])
                    return 0
                if args[0] == "mm_embedding_serve":
                    launch_mm_encoder_server("localhost", 8000, get_llm_args(args[1]))
                    return 0
                model, opts, flags, i = args[0], {}, set(), 1
                while i < len(args):
                    if args[i] in ("--grpc", "--new_path", "--spawn"):
                        flags.add(args[i])
                        i += 1
                    else:
                        opts[args[i]] = args[i + 1]
                        i += 2
                llm_args = get_llm_args(model, opts.get("--backend", "pytorch"), int(opts.get("--tp_size", 1)))
                if "--extra_llm_api_options" in opts:
                    with open(opts["--extra_llm_api_options"]) as handle:
                        llm_args.update(yaml.safe_load(handle) or {})
                host, port = opts.get("--host", "localhost"), int(opts.get("--port", 8000))
                if os.path.exists(os.path.join(model, "model_index.json")):  # upstream's get_is_diffusion_model
                    launch_visual_gen_server(host, port, model)
                elif "--grpc" in flags:
                    launch_grpc_server(host, port, llm_args)
                elif "--new_path" in flags:
                    serve_by_a_new_path(llm_args)
                elif "--spawn" in flags:
                    rank = multiprocessing.get_context("spawn").Process(target=spawned_rank)
                    rank.start()
                    rank.join()
                else:
                    launch_server(host, port, llm_args)
                return 0


        main = Main()
    ''',
}

VLLM = {
    "vllm/__init__.py": "",
    "vllm/_load.py": LOAD,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": '''
        import json


        class EngineArgs:
            def __init__(self, args):
                self.args = args

            @classmethod
            def from_cli_args(cls, args):
                return cls(args)

            def create_engine_config(self, usage_context=None, headless=False):
                spec = self.args.speculative_config
                if spec is not None and "method" not in json.loads(spec):
                    raise ValueError("speculative_config: method is required")
                return {"model": self.args.model_tag}


        class AsyncEngineArgs(EngineArgs):
            pass
    ''',
    "vllm/v1/__init__.py": "",
    "vllm/v1/engine/__init__.py": "",
    "vllm/v1/engine/async_llm.py": '''
        from vllm._load import load


        class AsyncLLM:
            def __init__(self, vllm_config):
                load("the model of AsyncLLM")

            @classmethod
            def from_vllm_config(cls, vllm_config, **kwargs):
                return cls(vllm_config)
    ''',
    "vllm/v1/engine/utils.py": '''
        from vllm._load import load


        class CoreEngineProcManager:
            def __init__(self, vllm_config, **kwargs):
                load("the headless engine cores' model")
    ''',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/api_server.py": '''
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM


        async def run_server(args):
            config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
            AsyncLLM.from_vllm_config(config)
    ''',
    "vllm/entrypoints/grpc_server.py": '''
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM


        async def serve_grpc(args):
            config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
            AsyncLLM.from_vllm_config(config)
    ''',
    "vllm/entrypoints/openai/dp_supervisor.py": '''
        """Upstream's multi-port data-parallel supervisor: it spawns each rank, a fresh interpreter that
        runs the API server (and so builds its config and loads its model) without the probe's stops."""
        import asyncio
        import multiprocessing


        def run_rank(args):
            from vllm.entrypoints.openai.api_server import run_server
            asyncio.run(run_server(args))


        class DPSupervisor:
            def __init__(self, args):
                self.args = args

            def run(self):
                rank = multiprocessing.get_context("spawn").Process(target=run_rank, args=(self.args,))
                rank.start()
                rank.join()


        def run_dp_supervisor(args):
            DPSupervisor(args).run()
    ''',
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": '''
        """The dispatch of upstream's ServeSubcommand.cmd."""
        import asyncio
        import multiprocessing

        from vllm.engine.arg_utils import AsyncEngineArgs


        def run_headless(args):
            config = AsyncEngineArgs.from_cli_args(args).create_engine_config(headless=True)
            from vllm.v1.engine.utils import CoreEngineProcManager
            CoreEngineProcManager(config)


        def spawned(args):
            from vllm.entrypoints.openai.api_server import run_server
            asyncio.run(run_server(args))


        def cmd(args):
            if args.grpc:
                from vllm.entrypoints.grpc_server import serve_grpc
                asyncio.run(serve_grpc(args))
            elif args.data_parallel_multi_port_external_lb:
                from vllm.entrypoints.openai.dp_supervisor import run_dp_supervisor
                run_dp_supervisor(args)
            elif args.headless:
                run_headless(args)
            elif args.new_path:  # a later release's path the probe does not know by name
                from vllm.v1.engine.async_llm import AsyncLLM
                AsyncLLM({})
            elif args.spawn:
                child = multiprocessing.get_context("spawn").Process(target=spawned, args=(args,))
                child.start()
                child.join()
            else:
                from vllm.entrypoints.openai.api_server import run_server
                asyncio.run(run_server(args))
    ''',
    "vllm/entrypoints/cli/main.py": '''
        import argparse
        import sys


        def main():
            parser = argparse.ArgumentParser(prog="vllm")
            serve = parser.add_subparsers(dest="subcommand").add_parser("serve")
            serve.add_argument("model_tag")
            serve.add_argument("--port", type=int, default=8000)
            serve.add_argument("--speculative-config")
            for flag in ("--grpc", "--headless", "--data-parallel-multi-port-external-lb", "--new-path", "--spawn"):
                serve.add_argument(flag, action="store_true")
            args = parser.parse_args(sys.argv[1:])
            from vllm.entrypoints.cli.serve import cmd
            cmd(args)
    ''',
}


@pytest.fixture
def fakes(tmp_path):
    root = tmp_path / "engines"
    for path, text in list(TRTLLM.items()) + list(VLLM.items()):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"))
    marker = tmp_path / "loaded"
    env = dict(os.environ, PYTHONPATH=str(root), FAKE_ENGINE_MARKER=str(marker))
    return env, marker


def probe(engine, command, env):
    proc = subprocess.run([sys.executable, "-c", ec.PROBES[engine]], input=json.dumps({"command": command}),
                          capture_output=True, text=True, env=env, timeout=120)
    return ec.read_verdict(proc.stdout)


# Without the probe, each path of a fake loads (the marker appears): the tests below are not vacuous.
UNSTOPPED = {
    "trtllm": "import sys\nfrom tensorrt_llm.commands import serve\nserve.main.main(args=sys.argv[1:])\n",
    "vllm": "import sys\nfrom vllm.entrypoints.cli.main import main\nsys.argv[0] = 'vllm'\nmain()\n",
}


def unstopped(engine, command, env):
    words = command[1:] if engine == "trtllm" else command
    subprocess.run([sys.executable, "-c", UNSTOPPED[engine]] + words, capture_output=True, text=True, env=env,
                   timeout=120, check=True)


def diffusion_model(tmp_path):
    model = tmp_path / "wan"
    model.mkdir()
    (model / "model_index.json").write_text("{}")
    return str(model)


# (engine, command, judged): judged paths end in a verdict on the configuration, the others in ok None
PATHS = {
    "trtllm-serve default (launch_server)": ("trtllm", ["trtllm-serve", "/models/m", "--port", "8000"], True),
    "trtllm-serve --grpc (launch_grpc_server)": ("trtllm", ["trtllm-serve", "/models/m", "--grpc", "--port", "50051"], True),
    "trtllm-serve mm_embedding_serve (launch_mm_encoder_server)": ("trtllm", ["trtllm-serve", "mm_embedding_serve", "/models/m"],
                                                                   False),
    "trtllm-serve disaggregated (OpenAIDisaggServer)": ("trtllm", ["trtllm-serve", "disaggregated", "-c", "d.yaml"], False),
    "trtllm-serve, a path of a later release": ("trtllm", ["trtllm-serve", "/models/m", "--new_path"], False),
    "trtllm-serve, a spawned rank": ("trtllm", ["trtllm-serve", "/models/m", "--spawn"], False),
    "vllm serve (one API server)": ("vllm", ["serve", "/models/m"], True),
    "vllm serve --grpc": ("vllm", ["serve", "/models/m", "--grpc"], True),
    "vllm serve --headless": ("vllm", ["serve", "/models/m", "--headless"], True),
    "vllm serve --data-parallel-multi-port-external-lb (spawned ranks)": (
        "vllm", ["serve", "/models/m", "--data-parallel-multi-port-external-lb"], False),
    "vllm serve, a path of a later release": ("vllm", ["serve", "/models/m", "--new-path"], False),
    "vllm serve, a spawned child": ("vllm", ["serve", "/models/m", "--spawn"], False),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_stops_before_the_model_loads(path, fakes, tmp_path):
    env, marker = fakes
    engine, command, judged = PATHS[path]
    unstopped(engine, command, env)
    assert marker.exists(), "the fake of %s does not load without the probe" % path
    marker.unlink()
    verdict = probe(engine, command, env)
    assert not marker.exists(), "%s loaded under the probe: %s" % (path, marker.read_text())
    if judged:
        assert verdict == {"ok": True, "error": None, "judged": True}, verdict
    else:
        assert verdict["ok"] is None and verdict["judged"] is False, verdict
        assert "before it loaded a model, on a path where this check does not judge" in verdict["error"]


def test_trtllm_visual_generation_stops_unjudged(fakes, tmp_path):
    """A diffusion model's directory (model_index.json) takes launch_visual_gen_server (1.3.x)."""
    env, marker = fakes
    command = ["trtllm-serve", diffusion_model(tmp_path), "--port", "8000"]
    unstopped("trtllm", command, env)
    assert marker.exists()
    marker.unlink()
    verdict = probe("trtllm", command, env)
    assert not marker.exists()
    assert verdict["ok"] is None and verdict["judged"] is False
    assert "trtllm-serve's launch_visual_gen_server" in verdict["error"]


@pytest.mark.parametrize("grpc", [[], ["--grpc"]], ids=["launch_server", "launch_grpc_server"])
def test_trtllm_judges_the_yaml_on_the_http_and_the_grpc_path(grpc, fakes, tmp_path):
    env, marker = fakes
    config = tmp_path / "engine.yaml"
    command = ["trtllm-serve", "/models/m", "--extra_llm_api_options", str(config)] + grpc
    config.write_text("max_batch_size: 8\n")
    assert probe("trtllm", command, env)["ok"] is True
    config.write_text("no_such_key: 1\n")
    verdict = probe("trtllm", command, env)
    assert verdict["ok"] is False and "Extra inputs are not permitted: no_such_key" in verdict["error"]
    assert not marker.exists()


def test_trtllm_another_backend_is_not_judged_with_the_pytorch_args(fakes):
    env, marker = fakes
    verdict = probe("trtllm", ["trtllm-serve", "/models/m", "--backend", "tensorrt"], env)
    assert verdict["ok"] is None and verdict["judged"] is False and "backend tensorrt" in verdict["error"]
    assert not marker.exists()


def test_trtllm_the_stop_names_where_it_stopped(fakes):
    env, marker = fakes
    verdict = probe("trtllm", ["trtllm-serve", "mm_embedding_serve", "/models/m"], env)
    assert "trtllm-serve's launch_mm_encoder_server" in verdict["error"]
    verdict = probe("trtllm", ["trtllm-serve", "/models/m", "--new_path"], env)
    assert "(LLM)" in verdict["error"]  # the LLM class's constructor, through the name the module bound at import
    verdict = probe("trtllm", ["trtllm-serve", "/models/m", "--spawn"], env)
    assert "the start of a child process" in verdict["error"]


def test_vllm_refusals_on_every_judged_path(fakes):
    env, marker = fakes
    for extra in ([], ["--grpc"], ["--headless"]):
        verdict = probe("vllm", ["serve", "/models/m", "--speculative-config", '{"num_speculative_tokens": 2}'] + extra, env)
        assert verdict["ok"] is False and "method is required" in verdict["error"], (extra, verdict)
    verdict = probe("vllm", ["serve", "/models/m", "--no-such-flag"], env)
    assert verdict["ok"] is False and "unrecognized arguments: --no-such-flag" in verdict["error"]
    assert not marker.exists()


def test_vllm_the_data_parallel_supervisor_stops_before_its_ranks_start(fakes):
    env, marker = fakes
    verdict = probe("vllm", ["serve", "/models/m", "--data-parallel-multi-port-external-lb"], env)
    assert "vllm.entrypoints.openai.dp_supervisor.run_dp_supervisor" in verdict["error"]
    assert not marker.exists()


def test_the_probe_exits_at_once_after_its_verdict(fakes):
    """No thread of the engine's keeps the container alive after the verdict (os._exit)."""
    env, dummy = fakes
    hang = "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\n"
    root = Path(env["PYTHONPATH"])
    init = root / "tensorrt_llm" / "__init__.py"
    init.write_text(init.read_text() + hang)
    proc = subprocess.run([sys.executable, "-c", ec.TRTLLM_PROBE], input=json.dumps({"command": ["trtllm-serve", "/models/m"]}),
                          capture_output=True, text=True, env=env, timeout=60)
    assert ec.parse_verdict(proc.stdout) == (True, None) and proc.returncode == 0
