# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine judges its own configuration: a throw-away container of the image an instance is about to
run parses the instance's command line and configuration with the engine's own code, and stops just
before it would load a model. Standard library only (it runs on the engine hosts).

* TensorRT-LLM: ``trtllm-serve``'s own click command (``tensorrt_llm.commands.serve:main``) parses the
  command line, reads the YAML and merges it as it does when it serves; its ``launch_server`` is
  replaced by one that builds ``TorchLlmArgs`` from that merged dict (``from_kwargs``, as the LLM class
  does, with ``build_config`` dropped as ``launch_server`` drops it on the pytorch backend) and stops.
* vLLM: ``vllm.entrypoints.cli.main:main`` (the ``vllm`` command) parses and validates ``vllm serve``'s
  arguments; ``EngineArgs.create_engine_config`` builds the whole engine configuration (the speculative
  config included: ``SpeculativeConfig`` and its checks) and the probe stops right after it.

The probe prints one line, ``MARKER`` followed by JSON: ``{"ok": true}``, or ``{"ok": false, "error":
...}`` with the engine's own message, or ``{"ok": null, "error": ...}`` when the image cannot be asked
(no such module: not an image of that engine).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

MARKER = 'SPECDEC-ENGINE-CHECK '

_COMMON = r'''import io, json, sys, traceback
MARKER = %r


def report(ok, error=None):
    sys.stdout.write("\n" + MARKER + json.dumps({"ok": ok, "error": error}) + "\n")
    sys.stdout.flush()


class Checked(Exception):
    pass


def last_lines(text, n=6):
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-n:])


request = json.loads(sys.stdin.read())
''' % MARKER

TRTLLM_PROBE = _COMMON + r'''
try:
    from tensorrt_llm.commands import serve
    from tensorrt_llm.llmapi.llm_args import TorchLlmArgs
except Exception as exc:
    report(None, "cannot import trtllm-serve from the image: %s: %s" % (type(exc).__name__, exc))
    sys.exit(0)


def launch_server(host, port, llm_args, *args, **kwargs):
    llm_args = dict(llm_args)
    llm_args.pop("build_config", None)
    build = getattr(TorchLlmArgs, "from_kwargs", None) or TorchLlmArgs
    build(**llm_args)
    raise Checked()


serve.launch_server = launch_server
argv = request["command"][1:]
try:
    serve.main.main(args=argv, prog_name="trtllm-serve", standalone_mode=False)
    report(False, "trtllm-serve returned without starting a server")
except Checked:
    report(True)
except SystemExit as exc:
    report(False, "trtllm-serve exited with %s" % (exc.code,))
except Exception as exc:
    message = getattr(exc, "format_message", None)
    report(False, "%s: %s" % (type(exc).__name__, message() if message else exc))
'''

VLLM_PROBE = _COMMON + r'''
try:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.cli import main as cli
except Exception as exc:
    report(None, "cannot import the vllm command from the image: %s: %s" % (type(exc).__name__, exc))
    sys.exit(0)

original = EngineArgs.create_engine_config


def create_engine_config(self, *args, **kwargs):
    original(self, *args, **kwargs)
    raise Checked()


EngineArgs.create_engine_config = create_engine_config
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
except SystemExit as exc:
    sys.stderr = saved
    report(False, last_lines(errors.getvalue()) or "vllm exited with %s" % (exc.code,))
except Exception as exc:
    sys.stderr = saved
    report(False, "%s: %s" % (type(exc).__name__, exc))
'''

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


def probe_argv(docker_bin, image_ref, engine, run_args, env, name=None, config_mount=None, python='python3'):
    """`docker run` of the image's Python with the engine's probe: no network, nothing pulled, removed
    when it exits, the instance's mounts and GPU request (run_args), its non-secret environment."""
    argv = [docker_bin, 'run', '--rm', '--interactive', '--pull=never', '--network=none']
    if name:
        argv += ['--name', name]
    argv += list(run_args)
    if config_mount:
        argv += ['--volume', '%s:%s:ro' % config_mount]
    for key in sorted(env or {}):
        argv += ['--env', '%s=%s' % (key, env[key])]
    return argv + ['--entrypoint', python, image_ref, '-c', PROBES[engine]]


def parse_verdict(stdout):
    """The probe's verdict line -> (ok, error): ok True, False, or None (the image cannot be asked).
    ValueError when there is no verdict line."""
    for line in reversed((stdout or '').splitlines()):
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER):])
            if not isinstance(data, dict) or data.get('ok') not in (True, False, None):
                raise ValueError('not a verdict: %r' % line[:200])
            return data['ok'], data.get('error')
    raise ValueError('no verdict line')


def image_label(image, image_id):
    return '%s (%s)' % (image, image_id[:19]) if image_id and image_id != image else image


def refusal(instance, engine_title, image, image_id, error):
    return ("instance '%s': %s in image %s refuses this configuration: %s. Nothing was changed: the running "
            "engine keeps serving." % (instance, engine_title, image_label(image, image_id), error))
