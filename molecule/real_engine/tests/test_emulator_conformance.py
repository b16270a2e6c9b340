"""Emulator conformance: the real vLLM of this scenario and the vLLM emulator at the same version, asked
the same things (lab/emulator/conformance.py); every difference not on its documented allow-list
(docs/emulator.md, "Conformance with the real engine") fails.

- HTTP (/health, /version, /v1/models, completions and chat, streamed with and without usage, error
  bodies), /metrics families and labels, and the `SpecDecoding metrics:` log line: the running instance
  against the emulator started here, on the controller, with the instance's own arguments. When the
  sweep applied no speculation, a second engine with n-gram speculation serves for the comparison.
- The command line: refused starts (unknown and removed options, --speculative-config with an unknown
  key, a method of a later version, a bad value) as `docker run IMAGE serve ...` on the lab host, each
  beside a sample of valid options, against the emulator's own `vllm serve`.
"""

import ipaddress
import json
import os
import shlex
import sys
import time
from pathlib import Path

import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
sys.path.insert(0, str(PROJECT / "lab" / "emulator"))
import conformance as C  # noqa: E402

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("spark-nodes")

VARS = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())
(INSTANCE,) = VARS["inference_server_instances"]
CONTAINER = "specdec-%s" % INSTANCE["name"]
MODEL_DIR = PROJECT / "lab" / ".cache" / "models" / "tiny-llama"
VERSION = INSTANCE["image"].rsplit(":", 1)[1]
SPARE = "specdec-conformance"
SPARE_PORT = 18601
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}


def inspect(host, name):
    out = host.run("docker inspect %s" % name)
    assert out.rc == 0, out.stderr
    return json.loads(out.stdout)[0]


def lab_address(host):
    """The host's address on the scenario's lab network (not its inner docker bridge's)."""
    address = host.ansible.get_variables().get("lab_ip")
    if not address:
        env = yaml.safe_load((SCENARIO / "molecule.yml").read_text())["provisioner"]["env"]
        subnet = ipaddress.ip_network(os.environ.get("SPECDEC_LAB_SUBNET") or env["SPECDEC_LAB_SUBNET"])
        out = host.run("hostname -I")
        address = [a for a in out.stdout.split() if ipaddress.ip_address(a) in subnet][0]
    return address


def wait_healthy(host, port, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if host.run("curl -sf -m 5 http://127.0.0.1:%d/health" % port).rc == 0:
            return True
        time.sleep(3)
    return False


def docker_options(info):
    """The instance's mounts, engine variables, ulimits and IPC mode, for engines started beside it."""
    opts = []
    for bind in info["HostConfig"].get("Binds") or []:
        opts += ["-v", bind]
    for mount in info.get("Mounts") or []:
        if mount.get("Type") == "bind" and not any(o.startswith(mount["Source"] + ":") for o in opts):
            opts += ["-v", "%s:%s%s" % (mount["Source"], mount["Destination"], "" if mount.get("RW") else ":ro")]
    for var in info["Config"].get("Env") or []:
        if var.split("=", 1)[0].startswith(("VLLM_", "HF_")):
            opts += ["-e", var]
    for limit in info["HostConfig"].get("Ulimits") or []:
        opts += ["--ulimit", "%s=%d:%d" % (limit["Name"], limit["Soft"], limit["Hard"])]
    if info["HostConfig"].get("IpcMode") == "host":
        opts += ["--ipc=host"]
    return opts


def mounts(info):
    opts = docker_options(info)
    return [opts[i + 1] for i, w in enumerate(opts) if w == "-v"]


def engine_args(info):
    args = list(info["Args"])
    if info["Path"] != "vllm" and args and args[0] == "vllm":
        args = args[1:]
    return args


def with_speculation(args):
    """The instance's arguments with n-gram speculation in place of whatever it runs."""
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
            continue
        if word in ("--speculative-config", "-sc"):
            skip = True
            continue
        if word.startswith("--speculative-config="):
            continue
        out.append(word)
    return out + ["--speculative-config", json.dumps(NGRAM)]


def test_the_emulator_conforms_to_the_real_engine(host):
    info = inspect(host, CONTAINER)
    args = engine_args(info)
    assert args[0] == "serve", args
    model = args[1]
    served = args[args.index("--served-model-name") + 1] if "--served-model-name" in args else model
    address = lab_address(host)
    real_url, name = "http://%s:%d" % (address, INSTANCE["port"]), CONTAINER
    spare = None
    if not any(w in ("--speculative-config", "-sc") or w.startswith("--speculative-config=") for w in args):
        args = with_speculation(args)
        words = ["docker", "run", "-d", "--name", SPARE, "-p", "%d:8000" % SPARE_PORT] + docker_options(info) + [
            "--entrypoint", "vllm", INSTANCE["image"], "serve", model] + C.serve_args(args)
        host.run("docker rm -f %s" % SPARE)
        out = host.run(" ".join(shlex.quote(w) for w in words))
        assert out.rc == 0, out.stderr
        spare = SPARE
        assert wait_healthy(host, SPARE_PORT), host.run("docker logs --tail 60 %s" % SPARE).stdout
        real_url, name = "http://%s:%d" % (address, SPARE_PORT), SPARE
    try:
        real, emu = {}, {}
        with C.Emulator(str(MODEL_DIR), C.serve_args(args), version=VERSION) as emulator:
            def real_log():
                out = host.run("docker logs %s" % name)
                return out.stdout + out.stderr

            r, e = C.compare_servers(real_url, emulator.url, served, real_log, emulator.log)
            real.update(r)
            emu.update(e)
        script = C.real_cli_script(INSTANCE["image"], model, mounts=mounts(info),
                                   env=["HF_HUB_OFFLINE=1", "VLLM_CPU_KVCACHE_SPACE=1"])
        out = host.run("bash -c %s" % shlex.quote(script))
        real_cli = C.parse_cli_outputs(out.stdout)
        assert sorted(real_cli) == sorted(C.CLI_CASES), out.stdout[-3000:] + out.stderr[-2000:]
        r, e = C.compare_cli(real_cli, C.emulator_cli(str(MODEL_DIR), version=VERSION))
        real.update(r)
        emu.update(e)
    finally:
        if spare:
            host.run("docker rm -f %s" % spare)
    diffs = C.differences(real, emu)
    print(C.report(diffs))
    # the comparison saw what it is about
    assert real["metrics.spec_decode_present"] and real["log.spec_decoding_line"], C.report(diffs)
    assert real["version.body"] == {"version": VERSION}
    assert not C.unexplained(diffs), C.report(C.unexplained(diffs))
