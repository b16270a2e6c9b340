# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine judges its own configuration: a throw-away container of the image an instance is about to
run parses the instance's command line and configuration with the engine's own code, and stops just
before it would load a model. Standard library only (it runs on the engine hosts).

* TensorRT-LLM: ``trtllm-serve``'s own click command (``tensorrt_llm.commands.serve:main``) parses the
  command line, reads the YAML and merges it as it does when it serves. Every launcher of the serve
  module (each callable named ``launch_*`` or ``_launch_*``, so one a new release adds too) is replaced
  by a stop: one that is handed ``llm_args`` (``launch_server``; ``launch_grpc_server``, which ``--grpc``
  takes from 1.3) builds ``TorchLlmArgs`` from them (``from_kwargs``, as the LLM class does, with
  ``build_config`` dropped as the launchers drop it on the pytorch backend) and stops; the others (the
  multimodal encoder's, visual generation's, the disaggregated worker's) stop unjudged.
* vLLM: ``vllm.entrypoints.cli.main:main`` (the ``vllm`` command) parses and validates ``vllm serve``'s
  arguments; ``EngineArgs.create_engine_config`` builds the whole engine configuration (the speculative
  config included: ``SpeculativeConfig`` and its checks) and the probe stops right after it, on every
  path that builds it (one API server, several, headless, gRPC).
* The backstop, for a path the probe does not know: constructing the engines' LLM, engine, engine client,
  executor, MPI session or server classes (and any subclass), ``torch.cuda.set_device``, starting a
  ``multiprocessing`` child (which would run without these stops) or a subprocess of an engine's command
  stops the probe unjudged. Every stop is a ``BaseException``, so no ``except Exception`` of the
  engine's swallows it and goes on to load the model.

The probe prints one line, ``MARKER`` followed by JSON: ``{"ok": true}``, or ``{"ok": false, "error":
...}`` with the engine's own message, or ``{"ok": null, "error": ...}`` when the image cannot be asked
(no such module: not an image of that engine), or ``{"ok": null, "judged": false, "error": ...}`` when it
stopped before a model load on a path where the configuration was not judged; then it exits at once
(``os._exit``: no engine thread, child or exit handler outlives the verdict).

The container runs with limits (``limit_args``): a memory limit without swap, a process limit, and
``--oom-score-adj=1000``, so that the kernel's OOM killer takes the probe, never a serving engine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

MARKER = 'SPECDEC-ENGINE-CHECK '

# The probe's limits (module options memory and pids_limit document why these defaults).
DEFAULT_MEMORY = '8g'
DEFAULT_PIDS_LIMIT = 4096
# The kernel's OOM killer picks the process with the highest score first: the probe, never an engine.
OOM_SCORE_ADJ = 1000
MEMORY_RE = re.compile(r'^[1-9][0-9]*[bkmg]?\Z', re.IGNORECASE)

# Whether the engine's own parse needs a visible NVIDIA GPU (else the probe drops the GPU request):
# * trtllm: get_llm_args counts the devices (torch.cuda.device_count) when --gpus_per_node is not given
#   and raises "No GPU devices found on the node" at 0; BaseLlmArgs' dtype validator reads
#   torch.cuda.get_device_properties(0); and libtensorrt_llm / its bindings link the driver library
#   (libcuda.so.1), which the NVIDIA runtime mounts only into a container that requests a GPU.
# * vllm: the platform is detected by NVML (cuda_platform_plugin: nvmlDeviceGetCount() > 0); without a
#   device it is UnspecifiedPlatform and DeviceConfig(device='auto') raises "Failed to infer device
#   type" while the engine configuration is built (a CPU build of vLLM needs none, and has none given).
GPU_TO_PARSE = {'trtllm': True, 'vllm': True}

_COMMON = r"""import io, json, os, sys, traceback
MARKER = %r
NOT_JUDGED = ("stopped at %%s, before it loaded a model, on a path where this check does not judge "
              "the configuration")


def report(ok, error=None, judged=True):
    verdict = {"ok": ok, "error": error}
    if not judged:
        verdict["judged"] = False
    sys.stdout.write("\n" + MARKER + json.dumps(verdict) + "\n")
    sys.stdout.flush()


def finish():
    # at once: no thread, child or exit handler of the engine's outlives the verdict
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class Checked(BaseException):
    # the engine judged the configuration and accepted it; raised where it would go on to load a model
    pass


class Stopped(BaseException):
    # stopped before a model load, where the configuration was not judged
    def __init__(self, where):
        BaseException.__init__(self, where)
        self.where = where


def last_lines(text, n=6):
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def stop_constructing(cls, where):
    # every instance of cls or of a subclass (one defined later too) stops in __new__, before __init__
    def __new__(klass, *args, **kwargs):
        raise Stopped("%%s (%%s)" %% (where, klass.__name__))
    try:
        cls.__new__ = staticmethod(__new__)
    except (TypeError, AttributeError):  # an extension type
        pass


def stop_calling(owner, name, where):
    def stopped(*args, **kwargs):
        raise Stopped(where)
    setattr(owner, name, stopped)


def backstop(targets):
    # (module, attribute) of what loads a model or starts an engine: constructing or calling it stops
    import importlib
    for module_name, attribute in targets:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not in this release
            continue
        target = getattr(module, attribute, None)
        where = "%%s.%%s" %% (module_name, attribute)
        if isinstance(target, type):
            stop_constructing(target, where)
        elif callable(target):
            stop_calling(module, attribute, where)


ENGINE_COMMANDS = ("trtllm-serve", "trtllm-llmapi-launch", "mpirun", "mpiexec", "vllm", "ray")


def stop_children():
    # a child would run without these stops: a multiprocessing child, or a subprocess of an engine's
    # command, stops the probe (vLLM's model registry runs `python -m ...registry` and may go on)
    import multiprocessing.process
    import subprocess

    def start(self):
        raise Stopped("the start of a child process (%%s)" %% getattr(self, "name", "multiprocessing"))
    multiprocessing.process.BaseProcess.start = start
    popen_init = subprocess.Popen.__init__

    def init(self, args, *more, **kwargs):
        words = [args] if isinstance(args, (str, bytes)) else list(args or [])
        for text in words:
            for word in (text.decode() if isinstance(text, bytes) else str(text)).split():
                if os.path.basename(word) in ENGINE_COMMANDS:
                    raise Stopped("a subprocess of %%s" %% word)
        popen_init(self, args, *more, **kwargs)
    subprocess.Popen.__init__ = init
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None:
        stop_calling(torch.cuda, "set_device", "torch.cuda.set_device (a CUDA context)")


request = json.loads(sys.stdin.read())
""" % MARKER

TRTLLM_BACKSTOP = [(module, attribute) for module, attributes in (
    ('tensorrt_llm', ('LLM', 'AsyncLLM', 'MultimodalEncoder', 'VisualGen')),
    ('tensorrt_llm.llmapi', ('LLM', 'AsyncLLM', 'MultimodalEncoder', 'VisualGen')),
    ('tensorrt_llm.llmapi.llm', ('BaseLLM', '_TorchLLM', '_TrtLLM', 'LLM')),
    ('tensorrt_llm._tensorrt_engine', ('LLM',)),
    ('tensorrt_llm._torch.llm', ('LLM',)),
    ('tensorrt_llm.executor', ('GenerationExecutor',)),
    ('tensorrt_llm.llmapi.mpi_session', ('MpiSession', 'MpiPoolSession', 'MpiCommSession')),
    ('tensorrt_llm.serve', ('OpenAIServer', 'OpenAIDisaggServer')),
) for attribute in attributes]

VLLM_BACKSTOP = [
    ('vllm.v1.engine.async_llm', 'AsyncLLM'),
    ('vllm.v1.engine.llm_engine', 'LLMEngine'),
    ('vllm.engine.async_llm_engine', 'AsyncLLMEngine'),
    ('vllm.engine.llm_engine', 'LLMEngine'),
    ('vllm.v1.engine.core_client', 'EngineCoreClient'),
    ('vllm.v1.engine.core', 'EngineCore'),
    ('vllm.v1.executor.abstract', 'Executor'),
    ('vllm.executor.executor_base', 'ExecutorBase'),
    ('vllm.v1.engine.utils', 'CoreEngineProcManager'),
    ('vllm.v1.engine.utils', 'launch_core_engines'),
    ('vllm.entrypoints.openai.dp_supervisor', 'DPSupervisor'),
    ('vllm.entrypoints.openai.dp_supervisor', 'run_dp_supervisor'),
]

TRTLLM_PROBE = _COMMON + r"""
try:
    from tensorrt_llm.commands import serve
    from tensorrt_llm.llmapi.llm_args import TorchLlmArgs
except Exception as exc:
    report(None, "cannot import trtllm-serve from the image: %%s: %%s" %% (type(exc).__name__, exc))
    finish()
import inspect
import re


def judge(where, llm_args):
    # what the launcher would hand the LLM class, validated as the class validates it
    llm_args = dict(llm_args)
    backend = llm_args.get("backend") or "pytorch"
    if backend != "pytorch":
        raise Stopped("%%s with backend %%s (this check builds the pytorch backend's TorchLlmArgs)" %% (where, backend))
    llm_args.pop("build_config", None)
    build = getattr(TorchLlmArgs, "from_kwargs", None) or TorchLlmArgs
    build(**llm_args)
    raise Checked()


def launcher(name, original):
    try:
        params = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        params = []
    where = "trtllm-serve's " + name

    def stopped(*args, **kwargs):
        given = dict(zip(params, args))
        given.update(kwargs)
        if isinstance(given.get("llm_args"), dict):
            judge(where, given["llm_args"])
        raise Stopped(where)
    return stopped


for name, value in list(vars(serve).items()):
    if re.match(r"_?launch_", name) and callable(value) and not inspect.isclass(value):
        setattr(serve, name, launcher(name, value))
backstop(%r)
stop_children()
argv = request["command"][1:]
try:
    serve.main.main(args=argv, prog_name="trtllm-serve", standalone_mode=False)
    report(False, "trtllm-serve returned without starting a server")
except Checked:
    report(True)
except Stopped as stop:
    report(None, "trtllm-serve " + NOT_JUDGED %% stop.where, judged=False)
except SystemExit as exc:
    report(False, "trtllm-serve exited with %%s" %% (exc.code,))
except Exception as exc:
    message = getattr(exc, "format_message", None)
    report(False, "%%s: %%s" %% (type(exc).__name__, message() if message else exc))
finish()
""" % (TRTLLM_BACKSTOP,)

VLLM_PROBE = _COMMON + r"""
try:
    from vllm.engine import arg_utils
    from vllm.entrypoints.cli import main as cli
except Exception as exc:
    report(None, "cannot import the vllm command from the image: %%s: %%s" %% (type(exc).__name__, exc))
    finish()


def judged(original):
    def create_engine_config(self, *args, **kwargs):
        original(self, *args, **kwargs)
        raise Checked()
    return create_engine_config


for cls in (getattr(arg_utils, name, None) for name in ("EngineArgs", "AsyncEngineArgs")):
    if isinstance(cls, type) and "create_engine_config" in vars(cls):
        cls.create_engine_config = judged(vars(cls)["create_engine_config"])
backstop(%r)
stop_children()
sys.argv = ["vllm"] + list(request["command"])
errors = io.StringIO()
saved = sys.stderr
sys.stderr = errors
try:
    cli.main()
    sys.stderr = saved
    report(False, "vllm serve returned without building its engine configuration")
except Checked:
    sys.stderr = saved
    report(True)
except Stopped as stop:
    sys.stderr = saved
    report(None, "vllm serve " + NOT_JUDGED %% stop.where, judged=False)
except SystemExit as exc:
    sys.stderr = saved
    report(False, last_lines(errors.getvalue()) or "vllm exited with %%s" %% (exc.code,))
except Exception as exc:
    sys.stderr = saved
    report(False, "%%s: %%s" %% (type(exc).__name__, exc))
finish()
""" % (VLLM_BACKSTOP,)

PROBES = {'trtllm': TRTLLM_PROBE, 'vllm': VLLM_PROBE}


def digest(engine, command, config, run_args, env):
    """What the verdict depends on besides the image: sha256 of the canonical JSON."""
    text = json.dumps({'engine': engine, 'command': list(command), 'config': config or '',
                       'run_args': list(run_args), 'env': dict(env or {})}, sort_keys=True)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def cache_name(image_id, config_digest):
    """The cache file of a verdict: the image ID's hex and the digest (both [0-9a-f])."""
    hex_id = image_id.split(':', 1)[-1]
    if not re.match(r'^[0-9a-f]{12,64}$', hex_id) or not re.match(r'^[0-9a-f]{64}$', config_digest):
        raise ValueError('not an image ID and a digest: %r %r' % (image_id, config_digest))
    return '%s-%s.json' % (hex_id, config_digest)


def probe_name(instance, pid):
    safe = re.sub(r'[^A-Za-z0-9_.-]', '-', instance or 'x')[:64]
    return 'specdec-engine-check-%s-%d' % (safe, pid)


def limit_args(memory=DEFAULT_MEMORY, pids_limit=DEFAULT_PIDS_LIMIT):
    """The probe's limits: memory without swap (--memory-swap equal to --memory), processes and threads,
    and the OOM killer's first choice."""
    return ['--memory=%s' % memory, '--memory-swap=%s' % memory, '--pids-limit=%d' % pids_limit,
            '--oom-score-adj=%d' % OOM_SCORE_ADJ]


_GPU_DEVICE = re.compile(r'^(/dev/nvidia|nvidia\.com/gpu)')
_VALUED = ('--gpus', '--device', '--runtime', '--env', '-e')


def strip_gpu_request(run_args):
    """run_args without a GPU request: --gpus, an NVIDIA --device (a node or a CDI name), --runtime nvidia,
    an NVIDIA_VISIBLE_DEVICES environment entry; each in its `--flag value` and `--flag=value` forms."""
    words, out, i = list(run_args), [], 0
    while i < len(words):
        flag, eq, value = words[i].partition('=')
        step = 2 if flag in _VALUED and not eq and i + 1 < len(words) else 1
        if step == 2:
            value = words[i + 1]
        if not (flag == '--gpus' or flag == '--device' and _GPU_DEVICE.match(value)
                or flag == '--runtime' and value == 'nvidia'
                or flag in ('--env', '-e') and value.split('=', 1)[0] == 'NVIDIA_VISIBLE_DEVICES'):
            out.extend(words[i:i + step])
        i += step
    return out


def probe_argv(docker_bin, image_ref, engine, run_args, env, name=None, config_mount=None, python='python3',
               memory=DEFAULT_MEMORY, pids_limit=DEFAULT_PIDS_LIMIT):
    """`docker run` of the image's Python with the engine's probe: no network, nothing pulled, removed
    when it exits, the instance's mounts and GPU request (run_args; the GPU request only where the
    engine's parse needs a GPU, GPU_TO_PARSE), its non-secret environment, and the probe's limits after
    the unit's options (the last of a repeated option wins)."""
    gpu = GPU_TO_PARSE[engine]
    argv = [docker_bin, 'run', '--rm', '--interactive', '--pull=never', '--network=none']
    if name:
        argv += ['--name', name]
    argv += list(run_args) if gpu else strip_gpu_request(run_args)
    argv += limit_args(memory, pids_limit)
    if config_mount:
        argv += ['--volume', '%s:%s:ro' % config_mount]
    for key in sorted(env or {}):
        if gpu or key != 'NVIDIA_VISIBLE_DEVICES':
            argv += ['--env', '%s=%s' % (key, env[key])]
    if not gpu:  # an image's own NVIDIA_VISIBLE_DEVICES=all would have the NVIDIA runtime add every GPU
        argv += ['--env', 'NVIDIA_VISIBLE_DEVICES=void']
    return argv + ['--entrypoint', python, image_ref, '-c', PROBES[engine]]


def read_verdict(stdout):
    """The probe's verdict line -> {'ok': True, False or None, 'error': ..., 'judged': bool}. ok None is
    an image that cannot be asked (judged true) or a probe stopped before a model load on a path where
    the configuration was not judged (judged false). ValueError when there is no verdict line."""
    for line in reversed((stdout or '').splitlines()):
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER):])
            if not isinstance(data, dict) or data.get('ok') not in (True, False, None) \
                    or data.get('judged', True) not in (True, False):
                raise ValueError('not a verdict: %r' % line[:200])
            return {'ok': data['ok'], 'error': data.get('error'), 'judged': data.get('judged', True)}
    raise ValueError('no verdict line')


def parse_verdict(stdout):
    """The probe's verdict line -> (ok, error): ok True, False, or None (the image cannot be asked, or
    the configuration was not judged: read_verdict tells which). ValueError when there is no verdict line."""
    verdict = read_verdict(stdout)
    return verdict['ok'], verdict['error']


def image_label(image, image_id):
    return '%s (%s)' % (image, image_id[:19]) if image_id and image_id != image else image


def refusal(instance, engine_title, image, image_id, error):
    return ("instance '%s': %s in image %s refuses this configuration: %s. Nothing was changed: the running "
            "engine keeps serving." % (instance, engine_title, image_label(image, image_id), error))
