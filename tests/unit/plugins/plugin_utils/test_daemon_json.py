"""The docker_host role's daemon.json: the probe (daemon_json_state, run as Ansible runs a module, with fake
systemctl and dockerd on its PATH) and the merge and checks taken from it (the docker_host planner's merge, plugin_utils/_daemon_json.py)."""

import grp
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible.plugins.filter.core import to_nice_json

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import docker_host
from ansible_collections.specdec.serve.plugins.plugin_utils._daemon_json import flag_conflicts, plan

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "daemon_json_state.py"
EXEC_START = ("{ path=/usr/sbin/dockerd ; argv[]=/usr/sbin/dockerd -H fd:// "
              "--containerd=/run/containerd/containerd.sock ; ignore_errors=no }")


def state(fragments=None, preexisting=None, exec_start=EXEC_START):
    return {"fragment_dir_exists": fragments is not None, "fragments": fragments or {}, "preexisting": preexisting,
            "exec_start": exec_start, "validate": True}


def test_fragments_merge_by_name_mappings_recursively_later_winning():
    on_disk = {"10-docker-host": '{"log-driver": "json-file", "log-opts": {"max-size": "10m"}}\n',
               "50-other": '{"log-opts": {"max-file": "3"}, "dns": ["10.0.0.1"]}', "60-empty": "  \n"}
    wanted = {"10-docker-host": {"log-driver": "local", "log-opts": {"max-size": "50m"}},
              "40-nvidia": {"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}, "dns": ["8.8.8.8"]},
              "50-other": None}
    out = plan(state(on_disk), wanted)
    assert out["problems"] == []
    assert out["merged"] == {"log-driver": "local", "log-opts": {"max-size": "50m"}, "dns": ["8.8.8.8"],
                             "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}


def test_a_hand_written_daemon_json_is_adopted_first():
    out = plan(state(None, preexisting='{"data-root": "/raid/docker", "log-driver": "syslog"}'),
               {"10-docker-host": {"log-driver": "json-file"}})
    assert out["merged"] == {"data-root": "/raid/docker", "log-driver": "json-file"} and out["problems"] == []
    assert out["in_place"] is False  # adopting the file is a change


DIR, PATH = "/etc/docker/daemon.json.d", "/etc/docker/daemon.json"
WANTED = {"10-docker_host-logging": {"log-driver": "json-file", "log-opts": {"max-size": "50m"}},
          "20-docker_host-registries": None}


def written(**change):
    """daemon_json_state's result on a host the role has written WANTED to, with CHANGE applied."""
    logging = to_nice_json(WANTED["10-docker_host-logging"], indent=2) + "\n"
    probe = state({"10-docker_host-logging": logging})
    probe["current"] = logging  # one fragment: the merge is that fragment
    probe["modes"] = {DIR: "0755:root:root", PATH: "0644:root:root", DIR + "/10-docker_host-logging.json": "0644:root:root"}
    probe.update(change)
    return probe


def test_a_host_with_exactly_what_the_role_writes_is_in_place_and_the_texts_are_to_nice_jsons():
    out = plan(written(), WANTED, "spark-01", DIR, PATH)
    assert out["problems"] == [] and out["in_place"] is True
    # the texts the tasks write are what ansible-core's to_nice_json(indent=2) and a newline give
    assert out["texts"] == {"10-docker_host-logging": to_nice_json(WANTED["10-docker_host-logging"], indent=2) + "\n"}
    assert out["merged_text"] == to_nice_json(out["merged"], indent=2) + "\n"
    assert out["modes"] == {"dir": "0755", "file": "0644"}
    assert plan(written(), WANTED, "spark-01", DIR)["in_place"] is False  # without daemon.json's path: unknown


@pytest.mark.parametrize("change", [
    {"current": '{"log-driver": "json-file"}\n'},  # daemon.json edited by hand
    {"current": None},  # daemon.json removed
    {"fragments": {"10-docker_host-logging": '{"log-driver": "local"}\n'}},  # a fragment edited
    {"modes": {DIR: "0755:root:root", PATH: "0600:root:root", DIR + "/10-docker_host-logging.json": "0644:root:root"}},
    {"modes": {DIR: "0755:root:root", PATH: "0644:root:root", DIR + "/10-docker_host-logging.json": "0644:alice:root"}},
    {"modes": {DIR: "0700:root:root", PATH: "0644:root:root", DIR + "/10-docker_host-logging.json": "0644:root:root"}},
    {"fragment_dir_exists": False, "fragments": {}},
    {"modes": None},  # a probe that did not report the modes
])
def test_anything_off_on_the_host_is_not_in_place(change):
    assert plan(written(**change), WANTED, "spark-01", DIR, PATH)["in_place"] is False


def test_a_fragment_to_remove_that_is_still_there_is_not_in_place():
    probe = written()
    probe["fragments"]["20-docker_host-registries"] = '{"registry-mirrors": ["https://m"]}\n'
    out = plan(probe, WANTED, "spark-01", DIR, PATH)
    assert out["problems"] == [] and out["in_place"] is False
    # and when it is gone the same wanted set is in place
    assert plan(written(), WANTED, "spark-01", DIR, PATH)["in_place"] is True


@pytest.mark.parametrize("fragments, preexisting, words", [
    ({"20-x": "{not json"}, None, ["fragment /etc/docker/daemon.json.d/20-x.json is not JSON"]),
    (None, "[1, 2]", ["not a JSON object", "00-preexisting: list"]),
    ({"20-x": '{"iptables": false}'}, None, ["the merged daemon.json of spark-01", "DOCKER-USER",
                                               "Remove the key from its fragment"]),
])
def test_problems_name_the_fragment_and_the_reason(fragments, preexisting, words):
    out = plan(state(fragments, preexisting), {}, "spark-01", "/etc/docker/daemon.json.d")
    assert len(out["problems"]) == 1, out
    for word in words:
        assert word in out["problems"][0], out["problems"]


@pytest.mark.parametrize("daemon_json, bypass", [
    ({}, False), ({"iptables": True}, False), ({"log-driver": "json-file"}, False),
    ({"iptables": False}, True), ({"firewall-backend": "nftables"}, True), ({"firewall-backend": "iptables"}, False),
])
def test_firewall_bypass(daemon_json, bypass):
    from ansible_collections.specdec.serve.plugins.plugin_utils._roles.docker_host import no_firewall_bypass
    assert bool(no_firewall_bypass(daemon_json)) is bypass


def test_keys_given_as_dockerd_flags_are_refused():
    start = EXEC_START.replace("-H fd://", "-H fd:// --label from-flag=1 --log-opt max-size=1m")
    out = plan(state({"20-x": '{"labels": ["a=b"], "log-opts": {"max-file": "2"}, "debug": true}'}, exec_start=start),
               {})
    assert len(out["problems"]) == 1
    assert "daemon.json keys labels, log-opts are also set as dockerd flags" in out["problems"][0]
    assert "--label from-flag=1" in out["problems"][0]
    # a key whose flag is spelled as the key, and a service without the unit
    assert flag_conflicts({"debug": True}, "dockerd --debug") == ["debug"]
    assert flag_conflicts({"debug": True}, "") == []


SETTINGS = {"log_driver": "json-file", "log_opts": {"max-size": "100m"}, "registry_mirrors": [],
            "insecure_registries": ["10.0.0.5:5000"], "daemon_options": {}, "daemon_json_fragments": {},
            "daemon_json_dir": "/etc/docker/daemon.json.d", "daemon_json_path": "/etc/docker/daemon.json"}


def test_the_planner_refuses_what_is_not_the_probe_result():
    with pytest.raises(PlanRefusal, match="daemon_json_state"):
        docker_host.PLANNERS["own_fragments"](SETTINGS, None, {"reported": {"stdout": ""}})


def test_the_planner_merges_the_roles_own_fragments_or_the_given_ones_and_names_what_to_write_and_remove():
    own = docker_host.PLANNERS["own_fragments"](SETTINGS, None, {"host": "spark-01", "reported": state({})})
    assert own["problems"] == [] and not own["in_place"]
    # logging and the registries are written; no daemon options: that fragment file is removed
    assert own["write"] == ["10-docker_host-logging", "20-docker_host-registries"]
    assert own["remove"] == ["90-docker_host-options"]
    assert json.loads(own["merged_text"]) == {"log-driver": "json-file", "log-opts": {"max-size": "100m"},
                                              "insecure-registries": ["10.0.0.5:5000"]}
    given = docker_host.PLANNERS["given_fragments"](
        dict(SETTINGS, daemon_json_fragments={"30-toolkit": {"runtimes": {"nvidia": {"path": "x"}}}, "40-old": None}),
        None, {"reported": state({})})
    assert (given["write"], given["remove"]) == (["30-toolkit"], ["40-old"])
    assert docker_host.PLANNERS["main"](SETTINGS, None, {"facts": {"architecture": "aarch64"}}) == {
        "apt_architecture": "arm64"}


def run_module(args, tmp, path_dirs):
    args_file = Path(tmp) / ("args-%d.json" % time.monotonic_ns())
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"), PATH=os.pathsep.join(path_dirs))
    proc = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env,
                          timeout=60)
    return json.loads(proc.stdout[proc.stdout.find("{"):])


@pytest.fixture
def fakes(tmp_path):
    """A bin directory with systemctl and dockerd that answer as docker 24's do."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\n[ \"$2\" = docker ] && echo 'ExecStart=%s'\n" % EXEC_START)
    (bin_dir / "dockerd").write_text("#!/bin/sh\necho 'Options:'\necho '      --validate   Validate daemon "
                                     "configuration and exit'\n")
    for name in ("systemctl", "dockerd"):
        os.chmod(bin_dir / name, 0o755)
    return bin_dir


def test_probe_reads_fragments_service_and_dockerd(tmp_path, fakes):
    frag_dir = tmp_path / "daemon.json.d"
    frag_dir.mkdir()
    (frag_dir / "10-docker-host.json").write_text('{"log-driver": "json-file"}\n')
    (frag_dir / "notes.txt").write_text("not a fragment")
    (frag_dir / "sub.json").mkdir()
    os.symlink(str(tmp_path / "elsewhere.json"), str(frag_dir / "20-link.json"))
    (tmp_path / "daemon.json").write_text('{"merged": true}')
    out = run_module({"path": str(tmp_path / "daemon.json"), "fragment_dir": str(frag_dir)}, tmp_path,
                     [str(fakes), "/usr/bin", "/bin"])
    assert out["changed"] is False and "failed" not in out, out
    assert out["fragment_dir_exists"] is True and out["preexisting"] is None  # adopted only before the directory
    assert out["fragments"] == {"10-docker-host": '{"log-driver": "json-file"}\n'}
    assert out["exec_start"] == EXEC_START and out["validate"] is True
    # daemon.json's text, and the mode and owner of daemon.json, the directory and each fragment read
    assert out["current"] == '{"merged": true}'
    os.chmod(frag_dir, 0o750)
    os.chmod(tmp_path / "daemon.json", 0o644)
    os.chmod(frag_dir / "10-docker-host.json", 0o600)
    out = run_module({"path": str(tmp_path / "daemon.json"), "fragment_dir": str(frag_dir)}, tmp_path,
                     [str(fakes), "/usr/bin", "/bin"])
    me = "%s:%s" % (pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name)
    assert out["modes"] == {str(tmp_path / "daemon.json"): "0644:" + me, str(frag_dir): "0750:" + me,
                            str(frag_dir / "10-docker-host.json"): "0600:" + me}


def test_probe_on_a_host_before_the_role_with_an_older_docker(tmp_path):
    """No fragment directory yet: the hand-written file is read for adoption. Docker 20.10's dockerd has no
    --validate, and systemctl shows an empty ExecStart for a unit it does not have."""
    (tmp_path / "daemon.json").write_text('{"data-root": "/raid"}')
    bin_dir = tmp_path / "old-bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'ExecStart='\n")
    (bin_dir / "dockerd").write_text("#!/bin/sh\necho 'Usage: dockerd [OPTIONS]'\necho '      --debug'\n")
    for name in ("systemctl", "dockerd"):
        os.chmod(bin_dir / name, 0o755)
    out = run_module({"path": str(tmp_path / "daemon.json"), "fragment_dir": str(tmp_path / "daemon.json.d")},
                     tmp_path, [str(bin_dir), "/usr/bin", "/bin"])
    assert out["fragment_dir_exists"] is False and out["fragments"] == {}
    assert out["preexisting"] == '{"data-root": "/raid"}'
    assert out["exec_start"] == "" and out["validate"] is False
