"""Verify of the serving scenario: state after converge + idempotence, then changes made by running
the converge playbook again with other instances (a draft length, a bad key, an engine that crashes
at start, an image that lacks a package the spec requires), checking what restarted, what stayed
unchanged and what serves.

The tests run in file order: the first ones read the state that converge and idempotence left.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml
from openai import OpenAI

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

sys.path.insert(0, str(PROJECT / "collections"))
from ansible_collections.specdec.serve.plugins.module_utils.platforms import debian_arch  # noqa: E402
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import render  # noqa: E402

INSTANCES = yaml.safe_load((SCENARIO / "instances.yml").read_text())["inference_server_instances"]
TRT, VLLM = INSTANCES
VALIDATION_TASKS = ("Gathering Facts", "Validating arguments against arg spec 'main' - LLM engines (TensorRT-LLM, vLLM) in "
                    "docker containers under systemd, health-gated, with rollback",
                    "Check the inference_server settings on the controller",
                    # a member of a stack reads its stack's layout (read-only) before the plan; skipped here
                    "Decide the stack of this host (stack_link's layout)",
                    "Check and render every instance on the controller (its planner)")
SECRETS = ("hf_lab_secret_token_0123456789", VLLM["api_key"])


def unit(inst):
    return "specdec-%s.service" % inst["name"]


def conf(inst, name):
    return "/etc/specdec/%s/%s" % (inst["name"], name)


def with_trt(**changes):
    """The scenario's instances with the TensorRT-LLM one changed (deep copies)."""
    trt = json.loads(json.dumps(TRT))
    for key, value in changes.items():
        if key == "max_draft_len":
            trt["speculative"]["max_draft_len"] = value
        else:
            trt[key] = value
    return [trt, json.loads(json.dumps(VLLM))]


def converge(instances, options=(), **extra):
    """Run converge.yml with these instances (and extra variables, as -e gives them; options: more
    ansible-playbook options, e.g. --check); return (rc, parsed json callback output, seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(dict(extra, inference_server_instances=instances), fh)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CALLBACKS_ENABLED="ansible.posix.timer",
               ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / "collections"))
    started = time.monotonic()
    try:
        proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(SCENARIO / "converge.yml"),
                               "-e", "@" + fh.name] + list(options),
                              env=env, capture_output=True, text=True, timeout=240)
    finally:
        os.unlink(fh.name)
    elapsed = time.monotonic() - started
    try:
        out = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    except ValueError:
        pytest.fail("no JSON from ansible-playbook (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, out, elapsed


def task_results(out, host_name):
    for play in out["plays"]:
        for task in play["tasks"]:
            res = task["hosts"].get(host_name)
            if res is not None:
                yield task["task"]["name"].split(" : ", 1)[-1], res


def failed_tasks(out, host_name):
    return [(name, res) for name, res in task_results(out, host_name) if res.get("failed")]


def cursor(host, inst):
    line = host.check_output("journalctl -u %s -n 0 --show-cursor --no-pager" % unit(inst))
    return line.split("cursor: ", 1)[1].strip()


def starts_since(host, inst, after):
    text = host.check_output("journalctl -u %s --after-cursor='%s' -o cat --no-pager" % (unit(inst), after))
    return sum(1 for line in text.splitlines() if line.startswith("Started %s" % unit(inst)))


def starts_since_boot(host, inst):
    text = host.check_output("journalctl -b -u %s -o cat --no-pager" % unit(inst))
    return sum(1 for line in text.splitlines() if line.startswith("Started %s" % unit(inst)))


def container_id(host, inst):
    return host.check_output("docker inspect --format '{{.Id}}' specdec-%s" % inst["name"])


def snapshot(host):
    """What a failed change must leave as it was: file contents, containers, unit states."""
    paths = [conf(TRT, "engine.yaml"), conf(TRT, "engine.env"), conf(VLLM, "engine.env"),
             "/etc/systemd/system/" + unit(TRT), "/etc/systemd/system/" + unit(VLLM)]
    return {
        "files": {p: host.file(p).sha256sum for p in paths},
        "containers": [container_id(host, i) for i in INSTANCES],
        "active": [host.service(unit(i)).is_running for i in INSTANCES],
        "leftovers": host.check_output("ls -A /etc/specdec/%s /etc/specdec/%s /etc/systemd/system | grep '~$' || true"
                                       % (TRT["name"], VLLM["name"])),
        "tree": host.check_output("find /etc/specdec /etc/systemd/system /etc/ansible/facts.d -printf '%p %m %s\\n'"
                                  " | sort | sha256sum"),
        "facts": host.check_output("cat /etc/ansible/facts.d/* /etc/specdec/*/facts.json | sha256sum"),
    }


def chat_stream(host, inst, prompt="Say hello."):
    """A streaming chat completion on the published port, from this machine to the lab host."""
    address = [a for a in host.check_output("hostname -I").split() if a.startswith("172.29.")][0]
    client = OpenAI(base_url="http://%s:%d/v1" % (address, inst["port"]), api_key=inst.get("api_key", "none"),
                    timeout=30, max_retries=0)
    chunks = list(client.chat.completions.create(
        model=inst.get("served_model_name", "gpt-oss-120b"), stream=True, max_tokens=24,
        messages=[{"role": "user", "content": prompt}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return chunks, text


# ------------------------------------------------------------------ state after converge + idempotence

@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i["name"])
def test_unit_active_and_enabled(host, inst):
    svc = host.service(unit(inst))
    assert svc.is_running
    assert svc.is_enabled


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i["name"])
def test_started_once_converge_and_idempotence(host, inst):
    # converge started each engine once; the idempotence run must not have restarted it
    assert starts_since_boot(host, inst) == 1
    assert host.check_output("systemctl show -p NRestarts --value %s" % unit(inst)) == "0"


def test_yaml_on_disk_is_the_filter_output(host):
    want = render(TRT, models_dir="/models", config_path="/etc/specdec/engine.yaml",
                  ignore_keys=["gpus", "state", "api_key"])
    f = host.file(conf(TRT, "engine.yaml"))
    assert f.content_string == want["config_yaml"]
    assert f.mode == 0o644
    assert "max_draft_len: 3" in f.content_string


def test_unit_runs_the_seed_flags_and_the_rendered_command(host):
    text = host.file("/etc/systemd/system/" + unit(TRT)).content_string
    for flag in ("--pull=never", "--ipc=host", "--ulimit=stack=67108864", "--rm",
                 "--env-file /etc/specdec/gpt-oss-120b/engine.env",
                 "--volume /var/lib/specdec/models:/models:ro", "--volume /var/lib/specdec/tiktoken:/tiktoken:ro",
                 "--volume /etc/specdec/gpt-oss-120b/engine.yaml:/etc/specdec/engine.yaml:ro",
                 "--publish 0.0.0.0:8000:8000", "Restart=on-failure", "ExecStop=/usr/bin/docker stop"):
        assert flag in text
    assert "--gpus" not in text and "nvidia.com/gpu" not in text  # the lab asks for no GPU
    cmd = json.loads(host.check_output("docker inspect --format '{{json .Config.Cmd}}' specdec-gpt-oss-120b"))
    want = render(TRT, ignore_keys=["gpus", "state", "api_key"])
    assert cmd == want["command"]
    image = host.check_output("docker inspect --format '{{.Image}}' specdec-gpt-oss-120b")
    assert image == host.check_output("docker image inspect --format '{{.Id}}' %s" % TRT["image"])


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i["name"])
def test_env_file_holds_the_secrets_and_nothing_else_does(host, inst):
    env = host.file(conf(inst, "engine.env"))
    assert env.mode == 0o600 and env.user == "root"
    assert "HF_TOKEN=" + SECRETS[0] in env.content_string
    assert "TIKTOKEN_ENCODINGS_BASE=/tiktoken" in env.content_string
    if inst["engine"] == "vllm":
        assert "VLLM_API_KEY=" + inst["api_key"] in env.content_string
    # the role adds what it owns and the secrets; every engine variable is spec_config's (profile and
    # instance env): TRTLLM_ENABLE_PDL=1 comes from the EAGLE-3 profile of recipe 000, not from the role
    spec_env = render(inst, ignore_keys=["gpus", "state", "api_key"])["env"]
    keys = set(line.split("=", 1)[0] for line in env.content_string.splitlines() if line and line[0] != "#")
    assert keys == ({"TIKTOKEN_ENCODINGS_BASE", "HF_HUB_OFFLINE", "HF_TOKEN"} | set(spec_env)
                    | ({"VLLM_API_KEY"} if inst.get("api_key") else set()))
    assert ("TRTLLM_ENABLE_PDL=1" in env.content_string) == (spec_env.get("TRTLLM_ENABLE_PDL") == "1")
    assert spec_env.get("TRTLLM_ENABLE_PDL") == ("1" if inst["engine"] == "trtllm" else None)
    unit_text = host.file("/etc/systemd/system/" + unit(inst)).content_string
    facts = host.file(conf(inst, "facts.json")).content_string
    for secret in SECRETS:
        assert secret not in unit_text and secret not in facts


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i["name"])
def test_streaming_chat_completion_on_the_published_port(host, inst):
    chunks, text = chat_stream(host, inst)
    assert len(chunks) > 2 and text.strip()


def test_local_facts(host):
    facts = host.ansible("setup", "filter=ansible_local")["ansible_facts"]["ansible_local"]["specdec_serving"]
    trt = facts["instances"]["gpt-oss-120b"]
    assert (trt["engine"], trt["engine_version"], trt["speculative_method"], trt["max_draft_len"], trt["port"]) == \
        ("trtllm", "1.2.0rc6", "eagle3", 3, 8000)
    assert trt["image_id"].startswith("sha256:")
    assert facts["instances"]["gpt-oss-120b-vllm"]["engine"] == "vllm"


# ------------------------------------------------------------------ changes

def test_changed_draft_length_restarts_exactly_once(host):
    marks = {i["name"]: cursor(host, i) for i in INSTANCES}
    vllm_container = container_id(host, VLLM)
    rc, out, _ = converge(with_trt(max_draft_len=4))
    assert rc == 0, failed_tasks(out, host.backend.host)
    assert out["stats"][host.backend.host]["changed"] > 0
    assert starts_since(host, TRT, marks[TRT["name"]]) == 1
    assert starts_since(host, VLLM, marks[VLLM["name"]]) == 0
    assert container_id(host, VLLM) == vllm_container
    assert "max_draft_len: 4" in host.file(conf(TRT, "engine.yaml")).content_string
    chunks, text = chat_stream(host, TRT)
    assert text.strip()

    # the same input again: nothing changes, nothing restarts
    again = cursor(host, TRT)
    rc, out, _ = converge(with_trt(max_draft_len=4))
    assert rc == 0 and out["stats"][host.backend.host]["changed"] == 0
    assert starts_since(host, TRT, again) == 0


# A sample of the bad-input battery (tests/unit/plugins/plugin_utils/test_settings.py, test_serving_plan.py) on a real
# host: each fails in the controller-side checks, naming what is wrong, and the host is unchanged.
BAD_INPUTS = {
    "unknown engine key": (with_trt(max_draft_len=4, llm_api_options={"enable_chunked_prefil": True}), {},
                           ("enable_chunked_prefil", "1.2.0rc6", "gpt-oss-120b")),
    "name .. with state absent": (with_trt() + [{"name": "..", "state": "absent"}], {},
                                  ("inference_server_instances[2].name", "'..'")),
    "path in a name": (with_trt() + [{"name": "../../etc", "state": "absent"}], {},
                       ("inference_server_instances[2].name",)),
    "host networking": (with_trt(docker_args=["--network=host"]), {},
                        ("docker_args", "--network=host", "DOCKER-USER")),
    "a string for an int": (with_trt(), {"inference_server_restart_sec": "soon"},
                            ("inference_server_restart_sec",)),
    "newline in the environment": (with_trt(), {"inference_server_env": {"A": "x\nExecStartPre=/bin/sh"}},
                                   ("inference_server_env", "control character")),
    "an image archive for another architecture only": (
        with_trt(), {"inference_server_image_archive": {"arm64": "/srv/images/engines-arm64.tar"}},
        ("inference_server_image_archive: has no entry for this host's architecture, x86_64 (amd64); it names arm64",)),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_fails_on_the_controller_with_the_host_unchanged(host, case):
    instances, extra, expected = BAD_INPUTS[case]
    before = snapshot(host)
    mark = cursor(host, TRT)
    rc, out, _ = converge(instances, **extra)
    assert rc != 0
    failed = failed_tasks(out, host.backend.host)
    assert len(failed) == 1
    res = failed[0][1]
    msg = " ".join([res.get("msg", "")] + [r.get("msg", "") for r in res.get("results", []) if r.get("failed")])
    # the play stopped in the controller-side validation: no task that touches the host ran
    ran = [name for name, _ in task_results(out, host.backend.host)]
    assert ran[-1] == failed[0][0] and set(ran) <= set(VALIDATION_TASKS), ran
    for text in expected:
        assert text in msg, msg
    assert out["stats"][host.backend.host]["changed"] == 0
    assert snapshot(host) == before
    assert starts_since(host, TRT, mark) == 0


def test_engine_crashing_at_start_is_reported_fast_and_rolled_back(host):
    before = snapshot(host)
    previous_yaml = host.file(conf(TRT, "engine.yaml")).content_string
    assert "max_draft_len: 4" in previous_yaml  # left by the draft length test
    env = dict(TRT["env"], SPECDEC_EMU_FAULT="crash_at_start")
    rc, out, _ = converge(with_trt(max_draft_len=5, env=env))
    assert rc != 0
    results = dict(task_results(out, host.backend.host))
    gate = results["Wait for the engine to serve: gpt-oss-120b"]
    assert gate["failed"]
    # reported when the engine went down, not after the gate's timeout (the emulator loads, then crashes)
    assert "is down while waiting for" in gate["msg"] and "not ready after" not in gate["msg"], gate["msg"]
    assert gate["timings"]["total"] > 0 and gate["timings"]["health"] is None
    assert any("illegal memory access" in line for line in gate["log_lines"])
    assert results["Wait for the previous engine to serve: gpt-oss-120b"].get("failed") is not True
    report = results["Report the failed start of gpt-oss-120b"]["msg"]
    assert "illegal memory access" in report and "previous engine serves again" in report

    after = snapshot(host)
    assert after["files"] == before["files"]  # YAML, env and unit are the previous ones again
    assert after["active"] == [True, True]
    assert after["containers"][1] == before["containers"][1]  # the other instance was not touched
    assert after["leftovers"] == ""  # no backup copies left behind
    assert "SPECDEC_EMU_FAULT" not in host.file(conf(TRT, "engine.env")).content_string
    assert host.file(conf(TRT, "engine.yaml")).content_string == previous_yaml
    chunks, text = chat_stream(host, TRT)
    assert text.strip()


def refused_on_the_host(host, instances, options, task):
    """Converge `instances` and check the play failed at `task` for one instance, with nothing after it run:
    no file, unit, facts script or engine touched, no engine restarted. Returns that instance's message."""
    before = snapshot(host)
    marks = {i["name"]: cursor(host, i) for i in INSTANCES}
    rc, out, _ = converge(instances, options)
    assert rc != 0
    failed = failed_tasks(out, host.backend.host)
    assert [name for name, _ in failed] == [task], failed
    items = [r for r in failed[0][1]["results"] if r.get("failed")]
    assert len(items) == 1
    ran = [name for name, _ in task_results(out, host.backend.host)]
    assert ran[-1] == task, ran
    assert out["stats"][host.backend.host]["changed"] == 0
    assert snapshot(host) == before
    for inst in INSTANCES:
        assert starts_since(host, inst, marks[inst["name"]]) == 0
    return items[0]["msg"]


REQUIREMENT_CHECK = "Check the images hold the Python packages their instances require"


def test_image_lacking_a_required_package_is_refused_and_the_previous_engine_keeps_serving(host):
    """The vLLM instance changed to the Arctic speculator needs the ArcticInference plugin in its image
    (spec_config's image_requirements); the emulator image, like vllm/vllm-openai, lacks it. The
    deploy is refused on the host, after the images are present and before any file or unit changes,
    naming the instance, the image, the package and the requirement; the running engine keeps serving.
    Check mode refuses it the same way."""
    arctic = json.loads(json.dumps(VLLM))
    arctic["speculative"] = {"method": "arctic", "draft_model": "Snowflake/Arctic-LSTM-Speculator-gpt-oss-120b",
                             "max_draft_len": 3}
    assert render(arctic, ignore_keys=["gpus", "state", "api_key"])["image_requirements"] == ["arctic-inference==0.1.2"]
    image_id = host.check_output("docker image inspect --format '{{.Id}}' %s" % VLLM["image"])
    instances = [with_trt(max_draft_len=4)[0], arctic]  # the TensorRT-LLM instance as the tests above left it
    command = host.check_output("docker inspect --format '{{json .Config.Cmd}}' specdec-%s" % VLLM["name"])
    assert "arctic" not in command
    for options in ((), ("--check",)):
        msg = refused_on_the_host(host, instances, options, REQUIREMENT_CHECK)
        for text in ("instance 'gpt-oss-120b-vllm'", "image %s (%s)" % (VLLM["image"], image_id[:19]),
                     "arctic-inference is not installed (required: arctic-inference==0.1.2)",
                     "pip install 'arctic-inference==0.1.2'"):
            assert text in msg, msg
        assert host.check_output("docker inspect --format '{{json .Config.Cmd}}' specdec-%s" % VLLM["name"]) == command
        chunks, text = chat_stream(host, VLLM)
        assert text.strip()


ENGINE_CHECK = "Ask the engine in each image whether it accepts its instance's configuration"
# An image built for another platform than the host's, as `docker save` writes one (molecule/shared)
OTHER_PLATFORM_IMAGE = (PROJECT / "molecule" / "shared" / "other_platform_image.py").read_text()


def test_an_image_of_another_platform_is_refused_and_the_previous_engine_keeps_serving(host):
    """A DGX Spark or a GB200 host is aarch64, an HGX B200 host x86_64: an image built for the other
    fails only when its engine starts. The deploy is refused on the host before any file or unit
    changes, naming the instance, the image, its platform and the host's; the running engine keeps
    serving. Check mode refuses it the same way."""
    machine = host.check_output("uname -m")
    here = debian_arch(machine)
    other = "arm64" if here == "amd64" else "amd64"
    tag = "%s-%s" % (TRT["image"], other)
    host.check_output("python3 -c %s %s %s /var/tmp/other-platform.tar && docker load -q -i /var/tmp/other-platform.tar "
                      "&& rm /var/tmp/other-platform.tar" % (shlex.quote(OTHER_PLATFORM_IMAGE), tag, other))
    try:
        assert host.check_output("docker image inspect --format '{{.Os}}/{{.Architecture}}' %s" % tag) == "linux/" + other
        image_id = host.check_output("docker image inspect --format '{{.Id}}' %s" % tag)
        instances = with_trt(max_draft_len=4, image=tag)  # the TensorRT-LLM instance as the tests above left it
        for options in ((), ("--check",)):
            msg = refused_on_the_host(host, instances, options, ENGINE_CHECK)
            assert msg.startswith("instance '%s': image %s (%s) is built for linux/%s, and this host is linux/%s (%s)"
                                  % (TRT["name"], tag, image_id[:19], other, here, machine)), msg
            assert "the running engine keeps serving" in msg
            chunks, text = chat_stream(host, TRT)
            assert text.strip()
    finally:
        host.run("docker rmi %s" % tag)


def test_image_archive_is_loaded_only_when_a_tag_is_missing_or_stale(host):
    """A converge with every image in place reads no archive; a tag moved to another image by hand
    is put back by loading the archive, and the engine keeps running (same image ID, same unit)."""
    archive_copy = "/var/lib/specdec/images/engine-emulators.tar"
    mark = cursor(host, TRT)
    rc, out, _ = converge(with_trt(max_draft_len=4))
    assert rc == 0 and out["stats"][host.backend.host]["changed"] == 0
    results = dict(task_results(out, host.backend.host))
    assert results["Copy the image archive to the host"].get("skipped") is True
    assert not host.file(archive_copy).exists  # removed after the first load

    want = host.check_output("docker image inspect --format '{{.Id}}' %s" % TRT["image"])
    host.check_output("docker tag %s %s" % (VLLM["image"], TRT["image"]))  # the tag now names another image
    rc, out, _ = converge(with_trt(max_draft_len=4))
    assert rc == 0, failed_tasks(out, host.backend.host)
    results = dict(task_results(out, host.backend.host))
    assert results["Load the image archive"]["changed"] is True
    assert host.check_output("docker image inspect --format '{{.Id}}' %s" % TRT["image"]) == want
    assert not host.file(archive_copy).exists
    assert starts_since(host, TRT, mark) == 0  # the unit runs the image by ID: nothing to restart


def test_no_secret_in_any_output_at_vvvv_with_diff_nor_anywhere_on_the_host(host):
    """A secret rotated and back, at -vvvv with --diff (the env file is rewritten and the engines restart):
    no secret value in the output, in a file other than the 0600 env files, or on a command line."""
    rotated = "hf_rotated_secret_token_9876543210"
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / "collections"))
    output = []
    for token in (rotated, SECRETS[0]):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump({"inference_server_instances": with_trt(max_draft_len=4),
                       "inference_server_secret_env": {"HF_TOKEN": token}}, fh)
        try:
            proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(SCENARIO / "converge.yml"),
                                   "-e", "@" + fh.name, "-vvvv", "--diff"],
                                  env=env, capture_output=True, text=True, timeout=300)
        finally:
            os.unlink(fh.name)
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "engine.env" in proc.stdout  # the env file task ran and was reported
        output.append(proc.stdout + proc.stderr)
    text = "\n".join(output)
    for secret in SECRETS + (rotated,):
        assert secret not in text
    holders = set(host.run("grep -rlsF -e %s -e %s -e %s /etc /var/lib/specdec /var/lib/docker /root /tmp /run"
                           % (SECRETS[0], SECRETS[1], rotated)).stdout.split())
    # Docker itself keeps a running container's environment in its state (what `docker inspect` shows):
    # the container's config under /var/lib/docker/containers/<id>/ and its OCI spec under /run/containerd.
    # Both are root-only, like the env file; nothing else may hold a secret.
    ids = [container_id(host, inst) for inst in INSTANCES]
    runtime = set(p for p in holders if any(("/%s/" % i) in p for i in ids))
    assert holders - runtime == {conf(TRT, "engine.env"), conf(VLLM, "engine.env")}
    for path in runtime | {conf(TRT, "engine.env"), conf(VLLM, "engine.env")}:
        assert host.run("runuser -u nobody -- cat %s" % path).rc != 0, path  # root only
    args = host.check_output("ps -eo args")
    for secret in SECRETS + (rotated,):
        assert secret not in args
