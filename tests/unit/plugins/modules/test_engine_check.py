# -*- coding: utf-8 -*-
"""module_utils/engine_check and the engine_check module: the probes that let the engine in an image
judge an instance's configuration, the verdict, the cache, and the module with a docker that runs the
probe against the lab emulator's stand-ins of the engines' modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import engine_check as ec
from ansible_collections.specdec.serve.plugins.module_utils.platforms import debian_arch
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_config as sc

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "engine_check.py"
STANDINS = REPO / "lab" / "emulator" / "standins"
IMAGE = "specdec-lab/tensorrt-llm-emulator:1.2.1"
IMAGE_ID = "sha256:" + "5d" * 32


# --------------------------------------------------------------------------- pure parts

def test_digest_depends_on_everything_the_verdict_depends_on():
    base = ("trtllm", ["trtllm-serve", "/models/m"], "a: 1\n", ["--volume", "/m:/models:ro"], {"A": "1"})
    d = ec.digest(*base)
    assert d == ec.digest(*base) and len(d) == 64
    for i, other in enumerate([("vllm",), (["trtllm-serve", "/models/n"],), ("a: 2\n",), (["--gpus", "all"],),
                               ({"A": "2"},)]):
        changed = list(base)
        changed[i] = other[0]
        assert ec.digest(*changed) != d


def test_cache_name_takes_only_an_image_id_and_a_digest():
    digest = "ab" * 32
    assert ec.cache_name(IMAGE_ID, digest) == "%s-%s.json" % ("5d" * 32, digest)
    for bad_id, bad_digest in (("../../etc/x", digest), (IMAGE_ID, "../x"), ("sha256:XYZ", digest)):
        with pytest.raises(ValueError):
            ec.cache_name(bad_id, bad_digest)


def test_parse_verdict_reads_the_last_marker_line():
    out = "engine log\n%s{\"ok\": false, \"error\": \"first\"}\nmore\n%s{\"ok\": true, \"error\": null}\n" % (
        ec.MARKER, ec.MARKER)
    assert ec.parse_verdict(out) == (True, None)
    assert ec.parse_verdict(ec.MARKER + '{"ok": null, "error": "no module"}') == (None, "no module")
    for bad in ("", "no marker here", ec.MARKER + '{"ok": "yes"}', ec.MARKER + "[1]"):
        with pytest.raises(ValueError):
            ec.parse_verdict(bad)


def test_probe_argv_keeps_the_units_mounts_and_gpus_and_adds_no_network_and_no_pull():
    argv = ec.probe_argv("/usr/bin/docker", IMAGE_ID, "trtllm", ["--ipc=host", "--gpus", "all"], {"B": "2", "A": "1"},
                         name="specdec-engine-check-x-1", config_mount=("/tmp/c", "/etc/specdec/engine.yaml"))
    assert argv[:6] == ["/usr/bin/docker", "run", "--rm", "--interactive", "--pull=never", "--network=none"]
    assert argv[argv.index("--gpus") + 1] == "all" and "--ipc=host" in argv
    assert "/tmp/c:/etc/specdec/engine.yaml:ro" in argv
    assert argv.index("A=1") < argv.index("B=2")
    assert argv[-5:] == ["--entrypoint", "python3", IMAGE_ID, "-c", ec.TRTLLM_PROBE]


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_probe_argv_carries_the_limits_after_the_units_options(engine):
    """Memory without swap, a pids limit and the OOM killer's first choice, after the unit's options (the
    last of a repeated docker option wins), with the defaults or the values given."""
    run_args = ["--ipc=host", "--memory=1t", "--gpus", "all"]
    argv = ec.probe_argv("docker", IMAGE_ID, engine, run_args, {})
    limits = ["--memory=8g", "--memory-swap=8g", "--pids-limit=4096", "--oom-score-adj=1000"]
    at = argv.index(limits[0])
    assert argv[at:at + 4] == limits and at > argv.index("--memory=1t")
    argv = ec.probe_argv("docker", IMAGE_ID, engine, run_args, {}, memory="12288m", pids_limit=512)
    at = argv.index("--memory=12288m")
    assert argv[at:at + 4] == ["--memory=12288m", "--memory-swap=12288m", "--pids-limit=512", "--oom-score-adj=1000"]


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_the_gpu_request_is_kept_for_both_engines_whose_parse_needs_a_gpu(engine):
    """trtllm-serve counts the devices (none: 'No GPU devices found on the node') and TensorRT-LLM links the
    driver; vLLM's platform is detected by NVML ('Failed to infer device type' without a device)."""
    assert ec.GPU_TO_PARSE[engine] is True
    for gpu in (["--gpus", "all"], ["--gpus", '"device=0,1"'], ["--device", "nvidia.com/gpu=all"], ["--device=nvidia.com/gpu=1"]):
        argv = ec.probe_argv("docker", IMAGE_ID, engine, ["--ipc=host"] + gpu, {"NVIDIA_VISIBLE_DEVICES": "0"})
        at = argv.index(gpu[0])
        assert argv[at:at + len(gpu)] == gpu and "NVIDIA_VISIBLE_DEVICES=0" in argv
        assert "NVIDIA_VISIBLE_DEVICES=void" not in argv


def test_an_engine_whose_parse_needs_no_gpu_gets_none(monkeypatch):
    """Should an engine's parse need no GPU (GPU_TO_PARSE false), every form of the request is dropped and
    the NVIDIA runtime is told to add none (an NGC image's own NVIDIA_VISIBLE_DEVICES=all would add all)."""
    monkeypatch.setitem(ec.GPU_TO_PARSE, "vllm", False)
    run_args = ["--ipc=host", "--gpus", '"device=0,1"', "--gpus=all", "--device", "nvidia.com/gpu=all",
                "--device=/dev/nvidia0", "--device", "/dev/dri", "--runtime", "nvidia", "--runtime=nvidia",
                "-e", "NVIDIA_VISIBLE_DEVICES=all", "--env=NVIDIA_VISIBLE_DEVICES=0", "--env", "A=1",
                "--volume=/srv/models:/models:ro"]
    assert ec.strip_gpu_request(run_args) == ["--ipc=host", "--device", "/dev/dri", "--env", "A=1",
                                              "--volume=/srv/models:/models:ro"]
    argv = ec.probe_argv("docker", IMAGE_ID, "vllm", run_args, {"NVIDIA_VISIBLE_DEVICES": "all", "B": "2"})
    assert "--gpus" not in argv and "--runtime" not in argv and "nvidia.com/gpu=all" not in argv
    assert [w for w in argv if w.startswith("NVIDIA_VISIBLE_DEVICES")] == ["NVIDIA_VISIBLE_DEVICES=void"]
    assert "B=2" in argv and "/dev/dri" in argv
    assert "--gpus" in ec.probe_argv("docker", IMAGE_ID, "trtllm", run_args, {})


def test_the_limits_are_not_part_of_the_digest():
    """The digest takes what the verdict depends on; the limits decide whether the check runs, not its answer."""
    import inspect
    assert set(inspect.signature(ec.digest).parameters) == {"engine", "command", "config", "run_args", "env"}


def test_refusal_names_the_instance_engine_image_and_says_nothing_changed():
    text = ec.refusal("tiny", "vLLM 0.32.0", "specdec-lab/vllm-cpu:0.32.0", IMAGE_ID, "unrecognized arguments: --x")
    assert text.startswith("instance 'tiny': vLLM 0.32.0 in image specdec-lab/vllm-cpu:0.32.0 (sha256:5d5d5d5d5d5d")
    assert "unrecognized arguments: --x" in text and "the running engine keeps serving" in text


# --------------------------------------------------------------------------- the probes, against the stand-ins

def run_probe(engine, command, config="", config_path="", version="1.2.1"):
    """Run a probe with the local Python against the lab's stand-ins of the engine modules, as the
    emulator image runs it (the config written where the command says it is)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(STANDINS), str(REPO / "lab" / "emulator")]),
               SPECDEC_EMU_VERSION=version)
    if config:
        Path(config_path).write_text(config)
    proc = subprocess.run([sys.executable, "-c", ec.PROBES[engine]], input=json.dumps({"command": command}),
                          capture_output=True, text=True, env=env, timeout=120)
    return ec.parse_verdict(proc.stdout)


def render(version, config_path, **over):
    inst = dict({"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": version}, **over)
    return sc.render(inst, models_dir="/models", config_path=str(config_path))


@pytest.mark.parametrize("version", ["1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.1", "1.3.0rc3"])
def test_trtllm_probe_accepts_what_the_controller_renders(version, tmp_path):
    out = render(version, tmp_path / "engine.yaml")
    assert run_probe("trtllm", out["command"], out["config_yaml"], out["config_path"], version) == (True, None)


def test_trtllm_probe_reports_the_engines_refusal_of_the_yaml_and_of_the_cli(tmp_path):
    out = render("1.2.1", tmp_path / "engine.yaml")
    bad = out["config_yaml"] + "no_such_key: 1\n"
    ok, error = run_probe("trtllm", out["command"], bad, out["config_path"], "1.2.1")
    assert ok is False and "no_such_key" in error
    ok, error = run_probe("trtllm", out["command"] + ["--no_such_option"], out["config_yaml"], out["config_path"],
                          "1.2.1")
    assert ok is False and "No such option: --no_such_option" in error


def test_vllm_probe_accepts_and_refuses_as_vllm_does(tmp_path):
    inst = {"name": "t", "engine": "vllm", "engine_version": "0.11.0", "model": "a/b",
            "speculative": {"method": "ngram", "max_draft_len": 2}}
    out = sc.render(inst, models_dir="/models")
    command = out["command"][1:]
    assert run_probe("vllm", command, version="0.11.0") == (True, None)
    ok, error = run_probe("vllm", command + ["--no-such-flag"], version="0.11.0")
    assert ok is False and "unrecognized arguments: --no-such-flag" in error


def test_a_probe_in_an_image_without_the_engine_says_it_cannot_ask(tmp_path):
    proc = subprocess.run([sys.executable, "-c", ec.TRTLLM_PROBE], input=json.dumps({"command": ["trtllm-serve"]}),
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""), timeout=60)
    ok, error = ec.parse_verdict(proc.stdout)
    assert ok is None and "cannot import trtllm-serve from the image" in error


# --------------------------------------------------------------------------- the module, with a docker that runs the probe

FAKE_DOCKER = """#!/bin/sh
echo "$*" | head -n 1 >> "$FAKE_STATE/calls"  # the probe itself spans lines
case "$1" in
  image) [ -f "$FAKE_STATE/present" ] || { echo "Error: No such image: $5" >&2; exit 1; }
         echo "%s linux/$(cat "$FAKE_STATE/arch")" ;;
  info) cat "$FAKE_STATE/info" 2>/dev/null || echo "true true true" ;;
  run) if [ -f "$FAKE_STATE/run_exit" ]; then
         [ -f "$FAKE_STATE/run_stdout" ] && cat "$FAKE_STATE/run_stdout"
         [ -f "$FAKE_STATE/run_stderr" ] && cat "$FAKE_STATE/run_stderr" >&2
         exit "$(cat "$FAKE_STATE/run_exit")"
       fi
       probe=""; take=""
       for word in "$@"; do
         # the config mount: copy the file where the command reads it (the test renders a local path)
         [ "$take" = v ] && case "$word" in *:ro) src="${word%%%%:*}"; rest="${word#*:}"; cp "$src" "${rest%%:ro}" ;; esac
         [ "$take" = c ] && probe="$word"
         take=""; [ "$word" = "-c" ] && take=c; [ "$word" = "--volume" ] && take=v
       done
       exec "$FAKE_PYTHON" -c "$probe" ;;
  rm) ;;
  *) exit 1 ;;
esac
""" % IMAGE_ID


@pytest.fixture
def docker(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "present").write_text("")
    (state / "arch").write_text(debian_arch(os.uname()[4]))
    path = tmp_path / "docker"
    path.write_text(FAKE_DOCKER)
    path.chmod(0o755)
    # a systemctl (and another docker) first on PATH that record any call: the module must make none
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("systemctl", "docker"):
        (bin_dir / tool).write_text('#!/bin/sh\necho "%s $*" >> "%s/units"\nexit 1\n' % (tool, state))
        (bin_dir / tool).chmod(0o755)

    class Docker:
        bin = str(path)
        env = dict(os.environ, FAKE_STATE=str(state), FAKE_PYTHON=sys.executable, SPECDEC_EMU_VERSION="1.2.1",
                   PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
                   PYTHONPATH=os.pathsep.join([str(REPO / "collections"), str(STANDINS), str(REPO / "lab" / "emulator")]))

        def calls(self):
            p = state / "calls"
            return p.read_text().splitlines() if p.exists() else []

        def unit_calls(self):
            p = state / "units"
            return p.read_text().splitlines() if p.exists() else []

        def info(self, text):
            (state / "info").write_text(text + "\n")

        def run_ends(self, code, stdout="", stderr=""):
            (state / "run_exit").write_text(str(code))
            (state / "run_stdout").write_text(stdout)
            (state / "run_stderr").write_text(stderr)

        def absent(self):
            (state / "present").unlink()

        def built_for(self, arch):
            (state / "arch").write_text(arch)

    return Docker()


def run_module(args, docker, tmp, check_mode=False):
    args = dict(args, docker_bin=docker.bin, cache_dir=str(Path(tmp) / "cache"))
    if check_mode:
        args["_ansible_check_mode"] = True
    path = Path(tmp) / ("args-%d.json" % time.monotonic_ns())
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, env=docker.env,
                          timeout=180)
    start = proc.stdout.find("{")
    assert start >= 0, "no JSON from the module: %s %s" % (proc.stdout, proc.stderr)
    return json.loads(proc.stdout[start:])


def module_args(tmp, config_extra=""):
    out = render("1.2.1", Path(tmp) / "engine.yaml")
    return {"instance": "gpt-oss-120b", "engine": "trtllm", "engine_version": "1.2.1", "table_version": "1.2.1",
            "image": IMAGE, "command": out["command"], "config": out["config_yaml"] + config_extra,
            "config_path": out["config_path"], "run_args": ["--ipc=host"], "env": {"HF_HUB_OFFLINE": "1"}}


def test_module_checks_once_then_answers_from_the_cache(docker, tmp_path):
    first = run_module(module_args(tmp_path), docker, tmp_path)
    assert first.get("failed") is not True, first
    assert first["changed"] is True and first["checked"] is True and first["cached"] is False
    assert first["image_ref"] == IMAGE_ID and "accepts this configuration" in first["msg"]
    runs = [c for c in docker.calls() if c.startswith("run ")]
    assert len(runs) == 1 and "--network=none" in runs[0] and "--pull=never" in runs[0]
    second = run_module(module_args(tmp_path), docker, tmp_path)
    assert second["changed"] is False and second["cached"] is True and "cache hit" in second["msg"]
    assert len([c for c in docker.calls() if c.startswith("run ")]) == 1


def test_module_fails_with_the_engines_message_and_caches_no_refusal(docker, tmp_path):
    for _ in range(2):
        out = run_module(module_args(tmp_path, "no_such_key: 1\n"), docker, tmp_path)
        assert out["failed"] is True and out["cached"] is False
        assert out["msg"].startswith("instance 'gpt-oss-120b': TensorRT-LLM 1.2.1 in image %s" % IMAGE)
        assert "no_such_key" in out["msg"] and "the running engine keeps serving" in out["msg"]
    assert len([c for c in docker.calls() if c.startswith("run ")]) == 2
    assert not list((tmp_path / "cache").glob("*")) if (tmp_path / "cache").exists() else True


def test_module_in_check_mode_checks_but_records_nothing(docker, tmp_path):
    out = run_module(module_args(tmp_path), docker, tmp_path, check_mode=True)
    assert out["checked"] is True and not (tmp_path / "cache").exists()
    docker.absent()
    out = run_module(module_args(tmp_path), docker, tmp_path, check_mode=True)
    assert out["checked"] is False and "is not on the host yet" in json.dumps(out["warnings"])


def test_module_warns_when_the_release_has_no_table_of_its_own(docker, tmp_path):
    args = dict(module_args(tmp_path), engine_version="1.3.0rc12", table_version="1.3.0rc3")
    out = run_module(args, docker, tmp_path)
    assert out.get("failed") is not True, out
    assert "has no engine table of its own" in json.dumps(out["warnings"])
    assert "this check in the image is its only exact one" in json.dumps(out["warnings"])


def test_an_image_built_for_another_platform_is_refused_before_its_engine_is_asked(docker, tmp_path):
    """A DGX Spark is aarch64: an amd64 image there (or an arm64 one on an x86_64 host) would fail only
    when its engine starts, after the running one stopped. It is refused here, in check mode too, and
    before the cache could answer for an image ID checked before."""
    here = debian_arch(os.uname()[4])
    other = "arm64" if here == "amd64" else "amd64"
    assert run_module(module_args(tmp_path), docker, tmp_path).get("failed") is not True  # cached now
    docker.built_for(other)
    for check_mode in (False, True):
        out = run_module(module_args(tmp_path), docker, tmp_path, check_mode=check_mode)
        assert out["failed"] is True and out["cached"] is False, out
        assert out["platform"] == "linux/" + other and out["host_platform"] == "linux/" + here
        assert out["msg"].startswith("instance 'gpt-oss-120b': image %s (%s) is built for linux/%s, and this host is "
                                     "linux/%s (%s)" % (IMAGE, IMAGE_ID[:19], other, here, os.uname()[4])), out["msg"]
        assert "the running engine keeps serving" in out["msg"]
    assert len([c for c in docker.calls() if c.startswith("run ")]) == 1


# --------------------------------------------------------------------------- limits, fallback, the serving unit untouched

def runs(docker):
    return [c for c in docker.calls() if c.startswith("run ")]


def assert_nothing_touched_a_serving_engine(docker):
    """Only the image, docker's limits, the probe's own run and the removal of the probe's own container."""
    assert docker.unit_calls() == []
    for call in docker.calls():
        words = call.split()
        assert words[0] in ("image", "info", "run", "rm"), call
        assert not {"stop", "restart", "kill", "systemctl", "pause"} & set(words[:2]), call
        if words[0] == "rm":
            assert words[1] == "--force" and words[2].startswith("specdec-engine-check-gpt-oss-120b-"), call
            assert len(words) == 3, call


def test_the_probe_runs_with_the_limits_given_and_they_do_not_change_the_cache_key(docker, tmp_path):
    first = run_module(dict(module_args(tmp_path), memory="12g", pids_limit=2048), docker, tmp_path)
    assert first.get("failed") is not True and first["verdict"] == "accepted", first
    (run,) = runs(docker)
    assert "--memory=12g --memory-swap=12g --pids-limit=2048 --oom-score-adj=1000" in run
    second = run_module(module_args(tmp_path), docker, tmp_path)  # the defaults: the same verdict, from the cache
    assert second["cached"] is True and second["digest"] == first["digest"] and second["verdict"] == "accepted"
    assert len(runs(docker)) == 1
    assert_nothing_touched_a_serving_engine(docker)


def test_the_defaults_are_the_documented_ones(docker, tmp_path):
    assert run_module(module_args(tmp_path), docker, tmp_path).get("failed") is not True
    (run,) = runs(docker)
    assert "--memory=8g --memory-swap=8g --pids-limit=4096 --oom-score-adj=1000" in run
    doc = MODULE.read_text()
    assert "    type: str\n    default: 8g\n" in doc and "    type: int\n    default: 4096\n" in doc


def test_an_oom_killed_probe_is_a_warning_and_not_judged_never_a_failure(docker, tmp_path):
    docker.run_ends(137)
    out = run_module(module_args(tmp_path), docker, tmp_path)
    assert out.get("failed") is not True, out
    assert out["verdict"] == "not judged" and out["checked"] is False and out["changed"] is False
    warning = json.dumps(out["warnings"])
    assert "killed (exit 137)" in warning and "memory limit of 8g" in warning and "--oom-score-adj=1000" in warning
    assert "the controller's engine tables did" in warning and "Nothing ran against a serving engine or its unit" in warning
    assert not (tmp_path / "cache").exists()
    assert_nothing_touched_a_serving_engine(docker)


def test_docker_refusing_the_limits_is_a_warning_and_not_judged(docker, tmp_path):
    docker.run_ends(125, stderr="docker: Error response from daemon: Minimum memory limit allowed is 6MB.\n")
    out = run_module(dict(module_args(tmp_path), memory="1m"), docker, tmp_path)
    assert out.get("failed") is not True and out["verdict"] == "not judged", out
    assert "docker refused the engine check's limits" in json.dumps(out["warnings"])
    assert_nothing_touched_a_serving_engine(docker)


@pytest.mark.parametrize("info", ["false true true", "true false true", "true true false", ""])
def test_a_docker_that_cannot_enforce_the_limits_runs_no_probe(docker, tmp_path, info):
    docker.info(info)
    out = run_module(module_args(tmp_path), docker, tmp_path)
    assert out.get("failed") is not True and out["verdict"] == "not judged", out
    assert runs(docker) == [] and "The engine did not judge this configuration" in json.dumps(out["warnings"])
    assert_nothing_touched_a_serving_engine(docker)


def test_a_probe_stopped_on_a_path_it_does_not_judge_is_a_warning_and_not_cached(docker, tmp_path):
    line = ec.MARKER + json.dumps({"ok": None, "judged": False, "error": "stopped at trtllm-serve's launch_visual_gen_server"})
    docker.run_ends(0, stdout="log\n" + line + "\n")
    out = run_module(module_args(tmp_path), docker, tmp_path)
    assert out.get("failed") is not True and out["verdict"] == "not judged", out
    assert "launch_visual_gen_server" in json.dumps(out["warnings"]) and not (tmp_path / "cache").exists()


def test_a_timeout_still_fails_and_removes_only_the_probe(docker, tmp_path):
    docker.run_ends(124)
    out = run_module(module_args(tmp_path), docker, tmp_path)
    assert out["failed"] is True and "did not finish checking the configuration within 600s" in out["msg"]
    assert [c.split()[:2] for c in docker.calls() if c.startswith("rm ")] == [["rm", "--force"]]
    assert_nothing_touched_a_serving_engine(docker)


def test_an_image_without_the_engine_still_fails(docker, tmp_path):
    docker.run_ends(0, stdout=ec.MARKER + json.dumps({"ok": None, "error": "cannot import trtllm-serve from the image: x"}))
    out = run_module(module_args(tmp_path), docker, tmp_path)
    assert out["failed"] is True and "cannot check a TensorRT-LLM configuration" in out["msg"]


@pytest.mark.parametrize("memory", ["8gb", "-1g", "lots", "0g", "8 g"])
def test_a_memory_limit_docker_cannot_read_fails_the_task(docker, tmp_path, memory):
    out = run_module(dict(module_args(tmp_path), memory=memory), docker, tmp_path)
    assert out["failed"] is True and "memory must be a docker memory size" in out["msg"]
    assert runs(docker) == []


def test_the_module_runs_nothing_against_the_serving_unit_on_any_outcome(docker, tmp_path):
    """Accepted, cached, refused, not judged: no systemctl, no docker stop/restart/kill of anything."""
    run_module(module_args(tmp_path), docker, tmp_path)
    run_module(module_args(tmp_path), docker, tmp_path)
    run_module(module_args(tmp_path, "no_such_key: 1\n"), docker, tmp_path)
    docker.run_ends(137)
    run_module(module_args(tmp_path, "other: 1\n"), docker, tmp_path)
    assert len(runs(docker)) == 3
    assert_nothing_touched_a_serving_engine(docker)
    code = MODULE.read_text().split("RETURN = r'''")[1].split("'''", 1)[1]  # the code, past the documentation
    assert "systemctl" not in code and "'stop'" not in code and "'restart'" not in code


def test_the_role_passes_its_limits_and_the_policy_bounds_them():
    """inference_server_engine_check_memory / _pids_limit: the role's defaults are the module's, the task
    passes them, and the settings check refuses what docker cannot read or a limit out of range."""
    import yaml

    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_settings

    options = role_spec.load_options("inference_server")
    assert options["inference_server_engine_check_memory"]["default"] == ec.DEFAULT_MEMORY
    assert options["inference_server_engine_check_pids_limit"]["default"] == ec.DEFAULT_PIDS_LIMIT
    tasks = yaml.safe_load((REPO / "roles" / "inference_server" / "tasks" / "main.yml").read_text())
    (task,) = [t for t in tasks if "specdec.serve.engine_check" in t]
    assert task["specdec.serve.engine_check"]["memory"] == "{{ _inference_server_settings.engine_check_memory }}"
    assert task["specdec.serve.engine_check"]["pids_limit"] == "{{ _inference_server_settings.engine_check_pids_limit }}"
    typed = check_settings(options, {"inference_server_engine_check_memory": "12288m",
                                     "inference_server_engine_check_pids_limit": 1024})
    assert typed["inference_server_engine_check_memory"] == "12288m"
    for var, bad in (("inference_server_engine_check_memory", "8gb"), ("inference_server_engine_check_memory", "0"),
                     ("inference_server_engine_check_pids_limit", 10), ("inference_server_engine_check_pids_limit", 2 ** 23)):
        with pytest.raises(SettingsError) as err:
            check_settings(options, {var: bad})
        assert str(err.value).startswith(var), err.value
