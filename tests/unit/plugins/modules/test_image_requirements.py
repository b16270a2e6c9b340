# -*- coding: utf-8 -*-
"""module_utils/image_requirements and the image_requirements module: the probe that reads the
installed distributions inside an image, the verdict, and the module's behaviour with a fake docker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import image_requirements as ir

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "image_requirements.py"
IMAGE = "specdec-lab/vllm-emulator:0.11.0"
IMAGE_ID = "sha256:" + "4c" * 32


# --------------------------------------------------------------------------- requirements and versions

@pytest.mark.parametrize("text,expected", [
    ("arctic-inference==0.1.0", ("arctic-inference", "arctic-inference", "0.1.0")),
    ("arctic-inference", ("arctic-inference", "arctic-inference", None)),
    ("Arctic_Inference == 0.1.2", ("Arctic_Inference", "arctic-inference", "0.1.2")),
    ("arctic-inference[vllm]==0.1.0", ("arctic-inference", "arctic-inference", "0.1.0")),
    ("vllm==0.10.1+cu128", ("vllm", "vllm", "0.10.1+cu128")),
])
def test_parse_requirement(text, expected):
    assert ir.parse_requirement(text) == expected


@pytest.mark.parametrize("text", ["arctic-inference>=0.1.0", "", "-x", "a==", "a==1.*", "a; python_version>'3'", 3])
def test_requirements_the_check_cannot_read_are_refused(text):
    with pytest.raises(ir.RequirementError):
        ir.parse_requirement(text)


@pytest.mark.parametrize("required,installed,ok", [
    ("0.1.0", "0.1.0", True), ("0.1", "0.1.0", True), ("0.1.0", "0.1", True), ("v0.1.0", "0.1.0", True),
    ("0.1.0", "0.1.2", False), ("0.1.0", "0.1.0rc1", False), ("0.10.1", "0.10.1+cu128", False),
    ("0.10.1+cu128", "0.10.1+cu128", True), ("1.0", "10", False),
])
def test_version_matches_is_pep440_equality(required, installed, ok):
    assert ir.version_matches(required, installed) is ok


def test_check_names_missing_and_other_version():
    found = {"arctic-inference": ("arctic_inference", "0.1.0"), "vllm": None, "pyyaml": ("PyYAML", "6.0")}
    problems = ir.check(["arctic-inference==0.1.2", "vllm", "PyYAML", "pyyaml==6"], found)
    assert problems == [
        {"requirement": "arctic-inference==0.1.2", "package": "arctic-inference", "required": "0.1.2",
         "installed": "0.1.0", "problem": "version"},
        {"requirement": "vllm", "package": "vllm", "required": None, "installed": None, "problem": "missing"},
    ]
    assert ir.check(["arctic-inference==0.1", "pyyaml"], found) == []


def test_failure_message_names_instance_image_package_and_requirement():
    problems = ir.check(["arctic-inference==0.1.2"], {"arctic-inference": None})
    msg = ir.failure_message("gpt-oss-120b-arctic", IMAGE, IMAGE_ID, problems)
    assert msg.startswith("instance 'gpt-oss-120b-arctic': image %s (%s) lacks" % (IMAGE, IMAGE_ID[:19]))
    assert "arctic-inference is not installed (required: arctic-inference==0.1.2)" in msg
    assert "pip install 'arctic-inference==0.1.2'" in msg
    problems = ir.check(["arctic-inference==0.1.2"], {"arctic-inference": ("arctic_inference", "0.1.0")})
    msg = ir.failure_message("a", IMAGE, IMAGE, problems)
    assert "image %s lacks" % IMAGE in msg
    assert "arctic-inference 0.1.0 is installed, but arctic-inference==0.1.2 is required" in msg


# --------------------------------------------------------------------------- the probe, run by a real Python

def _dist(site, name, version):
    info = site / ("%s-%s.dist-info" % (name, version))
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))


def test_probe_reads_installed_distributions_with_normalized_names(tmp_path):
    _dist(tmp_path, "arctic_inference", "0.1.0")
    _dist(tmp_path, "Some.Package", "2.0")
    argv = ir.probe_argv("docker", "img", ["arctic-inference", "some-package", "absent-one"])
    script = argv[argv.index("-c") + 1]
    proc = subprocess.run([sys.executable, "-S", "-c", script] + argv[argv.index("-c") + 2:], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(tmp_path)), check=True)
    found = ir.parse_probe(proc.stdout)
    assert found == {"arctic-inference": ("arctic_inference", "0.1.0"), "some-package": ("Some.Package", "2.0"),
                     "absent-one": None}


def test_probe_argv_runs_the_image_python_isolated():
    argv = ir.probe_argv("/usr/bin/docker", IMAGE_ID, ["arctic-inference"], name="specdec-requirements-x-1")
    assert argv[:3] == ["/usr/bin/docker", "run", "--rm"]
    for flag in ("--pull=never", "--network=none", "NVIDIA_VISIBLE_DEVICES=void"):
        assert flag in argv
    assert argv[argv.index("--entrypoint") + 1] == "python3" and argv[argv.index("--entrypoint") + 2] == IMAGE_ID
    assert argv[argv.index("--name") + 1] == "specdec-requirements-x-1"
    assert argv[-1] == "arctic-inference"
    assert ir.probe_name("a/b c", 7) == "specdec-requirements-a-b-c-7"


@pytest.mark.parametrize("stdout", ["", "banner\nnot json", "[1, 2]", '{"a": [1, 2]}', '{"a": "x"}'])
def test_parse_probe_refuses_what_it_cannot_read(stdout):
    with pytest.raises(ValueError):
        ir.parse_probe(stdout)


def test_parse_probe_reads_the_last_line():
    assert ir.parse_probe('== NVIDIA banner ==\n{"a": null, "b": ["B", "1"]}\n') == {"a": None, "b": ("B", "1")}


# --------------------------------------------------------------------------- the module, with a fake docker

FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$FAKE_STATE/calls"
case "$1" in
  image) [ -f "$FAKE_STATE/present" ] || { echo "Error: No such image: $5" >&2; exit 1; }
         echo "%s" ;;
  run) [ -f "$FAKE_STATE/run_rc" ] && { echo "exec: python3: not found" >&2; exit $(cat "$FAKE_STATE/run_rc"); }
       [ -f "$FAKE_STATE/run_sleep" ] && sleep "$(cat "$FAKE_STATE/run_sleep")"
       cat "$FAKE_STATE/probe_out" ;;
  rm) ;;
  *) exit 1 ;;
esac
""" % IMAGE_ID


@pytest.fixture
def docker(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "docker"
    path.write_text(FAKE_DOCKER)
    path.chmod(0o755)

    class Docker:
        bin = str(path)
        env = dict(os.environ, FAKE_STATE=str(state))

        def image(self, present=True, probe=None, run_rc=None, run_sleep=None):
            for name, value in (("present", "" if present else None), ("run_rc", run_rc), ("run_sleep", run_sleep),
                                ("probe_out", json.dumps(probe) if probe is not None else None)):
                if value is None:
                    (state / name).unlink(missing_ok=True)
                else:
                    (state / name).write_text(str(value))

        def calls(self):
            p = state / "calls"
            return p.read_text().splitlines() if p.exists() else []

    return Docker()


def run_module(args, docker, tmp):
    args = dict({"instance": "gpt-oss-120b-arctic", "image": IMAGE, "docker_bin": docker.bin}, **args)
    path = Path(tmp) / ("args-%d.json" % time.monotonic_ns())
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(docker.env, PYTHONPATH=str(REPO / "collections"))
    proc = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, env=env,
                          timeout=60)
    start = proc.stdout.find("{")
    assert start >= 0, "no JSON from the module: %s %s" % (proc.stdout, proc.stderr)
    return json.loads(proc.stdout[start:])


def test_missing_package_fails_with_the_clear_message(docker, tmp_path):
    docker.image(probe={"arctic-inference": None})
    out = run_module({"image_id": IMAGE_ID, "requirements": ["arctic-inference==0.1.2"]}, docker, tmp_path)
    assert out["failed"] is True and out["changed"] is False and out["checked"] is True
    assert out["msg"] == ir.failure_message("gpt-oss-120b-arctic", IMAGE, IMAGE_ID, out["problems"])
    assert "instance 'gpt-oss-120b-arctic'" in out["msg"] and IMAGE in out["msg"]
    assert "arctic-inference is not installed (required: arctic-inference==0.1.2)" in out["msg"]
    assert out["installed"] == {"arctic-inference": None}
    run = [c for c in docker.calls() if c.startswith("run ")]
    assert len(run) == 1 and (" %s -c " % IMAGE_ID) in run[0], "the probe must run the image by its ID"


def test_other_version_fails_and_the_right_one_passes(docker, tmp_path):
    docker.image(probe={"arctic-inference": ["arctic_inference", "0.1.0"]})
    out = run_module({"requirements": ["arctic-inference==0.1.2"]}, docker, tmp_path)
    assert out["failed"] is True
    assert "arctic-inference 0.1.0 is installed, but arctic-inference==0.1.2 is required" in out["msg"]
    out = run_module({"requirements": ["arctic-inference==0.1.0"]}, docker, tmp_path)
    assert "failed" not in out, out
    assert out["changed"] is False and out["checked"] is True and out["problems"] == []
    assert out["installed"] == {"arctic-inference": {"name": "arctic_inference", "version": "0.1.0"}}


def test_no_requirements_runs_nothing(docker, tmp_path):
    out = run_module({"requirements": []}, docker, tmp_path)
    assert "failed" not in out and out["checked"] is False and docker.calls() == []


def test_image_not_on_the_host(docker, tmp_path):
    docker.image(present=False)
    out = run_module({"image_id": IMAGE_ID, "requirements": ["arctic-inference"]}, docker, tmp_path)
    assert out["failed"] is True and "is not on the host" in out["msg"] and "arctic-inference" in out["msg"]
    # check mode: a run would load or pull it first, and check it then
    out = run_module({"image_id": IMAGE_ID, "requirements": ["arctic-inference"], "_ansible_check_mode": True},
                     docker, tmp_path)
    assert "failed" not in out and out["checked"] is False and out["changed"] is False
    assert "not on the host yet" in json.dumps(out["warnings"])
    assert not [c for c in docker.calls() if c.startswith("run ")]


def test_check_mode_runs_the_probe(docker, tmp_path):
    docker.image(probe={"arctic-inference": None})
    out = run_module({"requirements": ["arctic-inference"], "_ansible_check_mode": True}, docker, tmp_path)
    assert out["failed"] is True and "arctic-inference is not installed" in out["msg"]


def test_probe_failures_are_reported(docker, tmp_path):
    docker.image(run_rc=127)
    out = run_module({"requirements": ["arctic-inference"]}, docker, tmp_path)
    assert out["failed"] is True
    assert "cannot read the Python packages of image %s" % IMAGE in out["msg"]
    assert "exited with 127" in out["msg"] and "python3: not found" in out["msg"]
    docker.image(probe=["not", "a", "mapping"])
    out = run_module({"requirements": ["arctic-inference"]}, docker, tmp_path)
    assert out["failed"] is True and "the probe's output is not a JSON object" in out["msg"]


def test_probe_past_its_time_is_stopped_and_removed(docker, tmp_path):
    # a probe that would run for 5 minutes: a module that waited for it would exceed run_module's own
    # 60 s limit (no bound on elapsed time here, which a busy machine could break)
    docker.image(probe={"arctic-inference": None}, run_sleep=300)
    out = run_module({"requirements": ["arctic-inference"], "timeout": 1}, docker, tmp_path)
    assert out["failed"] is True and "did not finish within 1s" in out["msg"]
    assert any(c.startswith("rm --force specdec-requirements-gpt-oss-120b-arctic-") for c in docker.calls())


def test_bad_requirement_is_refused_before_docker_runs(docker, tmp_path):
    out = run_module({"requirements": ["arctic-inference>=0.1"]}, docker, tmp_path)
    assert out["failed"] is True and "requirements:" in out["msg"] and "'name==version'" in out["msg"]
    assert docker.calls() == []


# --------------------------------------------------------------------------- the lab's emulator image

def _emulator_image():
    docker = shutil.which("docker")
    if not docker:
        return None
    try:
        rc = subprocess.run([docker, "image", "inspect", IMAGE], capture_output=True, timeout=20).returncode
    except (OSError, subprocess.SubprocessError):
        return None
    return docker if rc == 0 else None


def test_the_emulator_image_lacks_arctic_inference(tmp_path):
    """As the real vllm/vllm-openai images do: the check refuses the Arctic plugin's methods there."""
    docker = _emulator_image()
    if docker is None:
        # `make unit` on a machine without the lab images (make test builds them before the unit tests
        # start); molecule/serving asserts the same refusal against the image
        # (test_image_lacking_a_required_package_...)
        pytest.skip("no docker or no %s here yet (lab/lab.py images builds it; molecule serving asserts "
                    "the same refusal against it)" % IMAGE)

    class Real:
        bin = docker
        env = dict(os.environ)
    out = run_module({"requirements": ["arctic-inference==0.1.2", "PyYAML"]}, Real, tmp_path)
    assert out["failed"] is True and out["checked"] is True
    assert out["installed"]["arctic-inference"] is None and out["installed"]["pyyaml"]["name"] == "PyYAML"
    assert [p["package"] for p in out["problems"]] == ["arctic-inference"]
