"""Shared helpers of the emulator tests (imported by lab/tests/test_emulator_*.py)."""

import io
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EMULATOR = os.path.join(ROOT, "lab", "emulator")
FIXTURES = os.path.dirname(os.path.abspath(__file__))
if EMULATOR not in sys.path:
    sys.path.insert(0, EMULATOR)

from specdec_emulator import server, trtllm_cli, vllm_cli  # noqa: E402

SEED_YAMLS = {
    "seed000_low_latency_1.2.0rc1.yaml": "1.2.0rc1",
    "seed000_eagle3_1.2.0rc1.yaml": "1.2.0rc1",
    "seed002_spark_eagle3_1.2.0rc6.yaml": "1.2.0rc6",
    "seed002_spark_draft_target_1.2.0rc6.yaml": "1.2.0rc6",
    "seed004_b200_eagle3_1.1.0rc0.yaml": "1.1.0rc0",
}


def make_model(base, name, model_type="llama", profile=None):
    path = os.path.join(str(base), name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump({"model_type": model_type, "max_position_embeddings": 131072}, fh)
    if profile is not None:
        with open(os.path.join(path, "emulator.json"), "w") as fh:
            json.dump(profile, fh)
    return path


def make_hf_cache_model(hf_home, repo_id, model_type="llama", commit="0123456789abcdef0123456789abcdef01234567"):
    base = os.path.join(str(hf_home), "hub", "models--" + repo_id.replace("/", "--"))
    os.makedirs(os.path.join(base, "refs"), exist_ok=True)
    with open(os.path.join(base, "refs", "main"), "w") as fh:
        fh.write(commit)
    return make_model(os.path.join(base, "snapshots"), commit, model_type)


def make_tiktoken(base):
    path = os.path.join(str(base), "tiktoken")
    os.makedirs(path, exist_ok=True)
    for name in ("o200k_base.tiktoken", "cl100k_base.tiktoken"):
        with open(os.path.join(path, name), "w") as fh:
            fh.write("aGVsbG8= 0\n")
    return path


def write_yaml(base, text, name="extra.yaml"):
    path = os.path.join(str(base), name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


def configure(engine, argv, env):
    """Returns (cfg or None, exit code or None, captured stderr text)."""
    out = io.StringIO()
    mod = trtllm_cli if engine == "trtllm" else vllm_cli
    cfg, code = mod.configure(argv, env=env, out=out)
    return cfg, code, out.getvalue()


def base_env(**extra):
    env = {"SPECDEC_EMU_TARGET_STEP_MS": "2", "PATH": os.environ.get("PATH", "")}
    env.update(extra)
    return env


def start(engine, argv, env):
    cfg, code, text = configure(engine, argv, env)
    assert cfg is not None, "configure failed (%s): %s" % (code, text)
    return server.ThreadedServer(cfg).start()
