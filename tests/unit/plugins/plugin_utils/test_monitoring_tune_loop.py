"""The monitoring_tune_loop role, decided on the controller: its settings refused with the variable named, the
inventory laid over the copied one (each host as the monitoring host reaches it, strict host key checking), the
known hosts from the hosts' facts, Java's home, and Alertmanager's webhook to it with its token read from a file."""

import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as M
from ansible_collections.specdec.serve.plugins.plugin_utils import _tune_loop as T
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import monitoring_tune_loop as P

TOKEN = "tune-loop-Token-5550188-never-shown"
ED = "AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyOfEngine01"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts.yml").write_text("all: {}\n")
    (tmp_path / "id_tune").write_text("key\n")
    (tmp_path / "specdec-serve.tar.gz").write_bytes(b"archive")
    (tmp_path / "wheels").mkdir()
    return {"enabled": True, "inventory": str(tmp_path / "inventory"),
            "ssh_key": str(tmp_path / "id_tune"), "collection": str(tmp_path / "specdec-serve.tar.gz")}


def refused(settings, token=None):
    with pytest.raises(T.TuneLoopError) as err:
        T.check(settings, token)
    return "\n".join(err.value.errors)


def test_off_by_default_and_nothing_of_it_applies():
    s = T.check({})
    loop = s["files"]
    assert loop["enabled"] is False and loop["token_file"] is None
    assert loop["unused"] == [T.TUNE_LOOP_TOKEN_FILE, T.TUNE_LOOP_ETC + "/vault-password"]
    assert M.check({})["packages"] == ["prometheus", "prometheus-alertmanager"]
    assert T.webhook({}) is None and T.webhook({"enabled": False, "port": 5051}) is None
    assert "webhook_configs" not in M.alertmanager_config({}, T.webhook({}))["receivers"][0]


def test_on_it_needs_an_inventory_a_key_and_the_collection():
    msg = refused({"enabled": True})
    for key in ("monitoring_tune_loop_inventory", "monitoring_tune_loop_ssh_key", "monitoring_tune_loop_collection"):
        assert "%s: '' must be set with monitoring_tune_loop" % key in msg, msg
    assert msg.count("must be set with monitoring_tune_loop") == 3


def test_paths_that_are_not_on_the_controller_are_refused(files, tmp_path):
    msg = refused(dict(files, ssh_key=str(tmp_path / "nope"), wheelhouse=str(tmp_path / "nowheels"),
                       collection=str(tmp_path / "wheels")))
    assert "monitoring_tune_loop_ssh_key" in msg and "does not exist on the controller" in msg
    assert "monitoring_tune_loop_wheelhouse" in msg and "is not a directory on the controller" in msg
    assert "monitoring_tune_loop_collection" in msg and "must be a file" in msg


def test_a_token_always_beyond_loopback_and_on_it(files):
    # none given: the role makes one on the host; the listener asks for it wherever it listens
    for listen in ("127.0.0.1", "10.0.8.5"):
        s = T.check(dict(files, listen=listen))
        loop = s["files"]
        assert loop["token_file"] == T.TUNE_LOOP_TOKEN_FILE and loop["token_store"] == T.TUNE_LOOP_ETC + "/token"
        assert loop["rulebook_vars"]["retune_listen_token_file"] == T.TUNE_LOOP_ETC + "/token"
        assert "retune_listen_token" not in loop["rulebook_vars"]
        hook = M.alertmanager_config({}, T.webhook(s))["receivers"][0]["webhook_configs"][-1]
        assert hook["http_config"]["authorization"]["credentials_file"] == T.TUNE_LOOP_TOKEN_FILE
    assert T.check(dict(files, listen="10.0.8.5"))["files"]["url"] == "http://10.0.8.5:5050/alerts"
    assert "0.0.0.0" in refused(dict(files, listen="0.0.0.0"), TOKEN)


def test_the_vault_password_reaches_the_service_only_when_given(files, tmp_path):
    unit = T.tune_loop_unit(T.check(files)["files"], "/usr/lib/jvm/java-17")
    assert not any("VAULT" in e for e in unit["environment"])
    (tmp_path / "vault-pass").write_text("vault-password-5550199\n")
    vaulted = T.check(dict(files, vault_password_file=str(tmp_path / "vault-pass")))["files"]
    assert vaulted["vault_store"] == T.TUNE_LOOP_ETC + "/vault-password"
    assert vaulted["unused"] == []
    unit = T.tune_loop_unit(vaulted, "/usr/lib/jvm/java-17")
    assert "ANSIBLE_VAULT_PASSWORD_FILE=/etc/specdec/tune-loop/vault-password" in unit["environment"]
    msg = refused(dict(files, vault_password_file=str(tmp_path / "missing")))
    assert "monitoring_tune_loop_vault_password_file" in msg and "is not a file on the controller" in msg


def test_the_service_user_writes_only_its_own_directories(files):
    loop = T.check(files)["files"]
    writable = loop["writable"]
    assert writable == ["/var/lib/specdec/tune-loop/.ssh", "/var/lib/specdec/tune-loop/.ansible",
                        "/var/lib/specdec/tune-loop/reports", T.RETUNE_STATE_DIR]
    # what root runs (the venv's programs, the collection, its archive) is under none of them
    for key in ("venv", "collections", "archive", "wheels", "inventory", "dir"):
        assert not any(loop[key] == w or loop[key].startswith(w + "/") for w in writable), key


def test_a_short_or_spaced_token_is_refused_without_showing_it(files):
    for bad in ("short", "a token with spaces in it!"):
        msg = refused(files, bad)
        assert "monitoring_tune_loop_token: (value hidden)" in msg and bad not in msg


def test_the_token_never_enters_the_settings_and_alertmanager_reads_it_from_a_file(files):
    s = T.check(files, TOKEN)
    assert TOKEN not in repr(s)
    assert s["token_set"] is True and s["files"]["token_file"] == T.TUNE_LOOP_TOKEN_FILE
    # the monitoring role's Alertmanager posts to it with the token read from a file
    cfg = M.alertmanager_config({}, T.webhook(s))
    hook = cfg["receivers"][0]["webhook_configs"][-1]
    assert hook == {"url": "http://127.0.0.1:5050/alerts", "send_resolved": True,
                    "http_config": {"authorization": {"type": "Bearer", "credentials_file": T.TUNE_LOOP_TOKEN_FILE}}}
    assert TOKEN not in yaml.safe_dump(cfg)
    # without a token given, one is made on the host: Alertmanager still sends one, the same file
    plain = T.check(files)
    assert plain["token_set"] is False
    assert M.alertmanager_config({}, T.webhook(plain)) == cfg
    assert plain["files"]["unused"] == [T.TUNE_LOOP_ETC + "/vault-password"]
    assert plain["packages"] == ["openjdk-17-jre-headless", "python3-venv"]


def test_the_inventory_is_copied_whole_a_directory_by_its_contents(files, tmp_path):
    assert T.check(files)["files"]["inventory_src"] == str(tmp_path / "inventory") + "/"
    one = dict(files, inventory=str(tmp_path / "inventory" / "hosts.yml"))
    assert T.check(one)["files"]["inventory_src"] == str(tmp_path / "inventory" / "hosts.yml")


HOSTVARS = {
    "engine-01": {"monitoring_address": "10.0.8.11", "ansible_host": "127.0.0.1", "ansible_facts": {
        "ssh_host_key_ed25519_public": ED, "ssh_host_key_ed25519_public_keytype": "ssh-ed25519"}},
    "engine-02": {"ansible_host": "10.0.8.12", "monitoring_ssh_port": 2222, "ansible_facts": {
        "ssh_host_key_ecdsa_public": "AAAAE2VjZHNh", "ssh_host_key_ecdsa_public_keytype": "ecdsa-sha2-nistp256"}},
    "gw-01": {"monitoring_address": "10.0.8.20"},
    "mon-01": {"monitoring_address": "10.0.8.30"},
}
GROUPS = {"all": ["engine-01", "engine-02", "gw-01", "mon-01"], "spark-nodes": ["engine-01", "engine-02"],
          "gateways": ["gw-01"], "monitoring": ["mon-01"]}


def test_the_laid_over_inventory_connects_as_the_monitoring_host_reaches_each_host(files):
    s = T.check(dict(files, vars={"retune_cooldown": "2h", "draft_sweep_draft_lens": [3, 4]}))
    plan = T.tune_loop(s, HOSTVARS, GROUPS, "monitoring")
    assert plan["hosts"] == ["engine-01", "engine-02", "gw-01"]
    inv = plan["inventory"]["all"]
    assert inv["vars"] == {"retune_cooldown": "2h", "draft_sweep_draft_lens": [3, 4]}
    e1, e2 = inv["hosts"]["engine-01"], inv["hosts"]["engine-02"]
    assert (e1["ansible_host"], e1["ansible_port"]) == ("10.0.8.11", 22)
    assert (e2["ansible_host"], e2["ansible_port"]) == ("10.0.8.12", 2222)
    assert e1["ansible_ssh_private_key_file"] == "/var/lib/specdec/tune-loop/.ssh/id_tune_loop"
    assert "StrictHostKeyChecking=yes" in e1["ansible_ssh_common_args"]
    assert "UserKnownHostsFile=/var/lib/specdec/tune-loop/.ssh/known_hosts" in e1["ansible_ssh_common_args"]
    # the plays' settings reach the hosts above their groups' variables (host variables of an inventory file)
    assert e1["retune_cooldown"] == "2h"
    # every host but the monitoring group's (a host in no group the monitoring role names still gets one)
    assert "mon-01" not in inv["hosts"]
    other = T.tune_loop(s, HOSTVARS, dict(GROUPS, all=GROUPS["all"] + ["b200-01"]), "monitoring")
    assert other["hosts"][-1] == "b200-01" and other["inventory"]["all"]["hosts"]["b200-01"]["ansible_host"] == "b200-01"
    # the rulebook gives the plays the tune loop's report directory
    assert s["files"]["rulebook_vars"]["retune_report_dir"] == "/var/lib/specdec/tune-loop/reports"


def test_known_hosts_come_from_the_facts_and_hosts_without_keys_are_named(files):
    plan = T.tune_loop(T.check(files), HOSTVARS, GROUPS, "monitoring")
    assert plan["known_hosts"] == ("10.0.8.11 ssh-ed25519 %s\n[10.0.8.12]:2222 ecdsa-sha2-nistp256 AAAAE2VjZHNh\n" % ED)
    assert plan["missing"] == ["gw-01"]
    with pytest.raises(T.TuneLoopError, match="monitoring_ssh_port"):
        T.tune_loop(T.check(files), dict(HOSTVARS, **{"gw-01": {"monitoring_ssh_port": "ssh"}}), GROUPS, "monitoring")


def test_java_home_from_its_package_files(files):
    listing = ["/usr/lib/jvm/java-17-openjdk-arm64/lib", "/usr/lib/jvm/java-17-openjdk-arm64/bin/java",
               "/usr/share/doc/openjdk-17-jre-headless"]
    assert T.tune_loop(T.check(files), HOSTVARS, GROUPS, "monitoring", listing)["java_home"] == "/usr/lib/jvm/java-17-openjdk-arm64"
    with pytest.raises(T.TuneLoopError, match="monitoring_tune_loop_java_package"):
        T.java_home(["/usr/bin/jshell"])
    # what reaches the unit goes through the one quoting rule: a home with a space stays one assignment
    unit = T.tune_loop(T.check(dict(files, dir="/srv/tune loop")), HOSTVARS, GROUPS, "monitoring",
                       ["/usr/lib/jvm/odd home/bin/java"])["unit"]
    assert '"JAVA_HOME=/usr/lib/jvm/odd home"' in unit["environment"]
    assert unit["exec"].startswith('"/srv/tune loop/venv/bin/ansible-rulebook" --rulebook specdec.serve.retune -i ')
    plain = T.tune_loop(T.check(files), HOSTVARS, GROUPS, "monitoring", listing)["unit"]
    assert plain["environment"][1] == "JAVA_HOME=/usr/lib/jvm/java-17-openjdk-arm64"


def test_the_planner_reads_only_what_it_needs_of_hostvars(files):
    class Lazy(dict):
        def __getitem__(self, key):
            if key == "secret":
                raise AssertionError("read a variable it does not need")
            return dict.__getitem__(self, key)
    hv = dict((h, Lazy(v, secret="x")) for h, v in HOSTVARS.items())
    plan = P.PLANNERS["main"](files, None, {"hostvars": hv, "groups": GROUPS})
    assert plan["hosts"] == plan["loop"]["hosts"] == ["engine-01", "engine-02", "gw-01"]
    assert plan["loop"]["missing"] == ["gw-01"] and "java_home" not in plan["loop"]


AMTOOL = os.environ.get("SPECDEC_AMTOOL") or shutil.which("amtool")


@pytest.mark.skipif(not AMTOOL, reason="amtool is not installed (Debian package prometheus-alertmanager)")
def test_amtool_accepts_the_webhook_with_its_token_file(files, tmp_path):
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(M.alertmanager_config({}, T.webhook(T.check(files, TOKEN)))))
    check = subprocess.run([AMTOOL, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_exporter_serves_an_instance_of_a_profile_by_the_profiles_engine():
    """A host class's instance names a profile (inventories/*/group_vars/*/host_class.yml), not its engine."""
    inst = [{"name": "gpt-oss-120b", "profile": "trtllm-gpt-oss-120b-eagle3-b200", "image": "x", "port": 8001}]
    assert M.engine_instances(inst) == [("gpt-oss-120b", "trtllm", 8001)]
    with pytest.raises(M.MonitoringError, match=r"monitoring_exporter_instances\[0\].profile: 'nope'"):
        M.engine_instances([{"name": "a", "profile": "nope", "port": 1}], "monitoring_exporter_instances")


def test_the_guards_state_file_has_one_default_which_the_tune_loop_makes_room_for():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
    assert retune.state_path(None) == retune.STATE_FILE == "/var/lib/specdec/retune/state.json"
    assert retune.state_path("/srv/retune.json") == "/srv/retune.json"
    with pytest.raises(retune.RetuneError, match="retune_state_file: 'state.json'"):
        retune.state_path("state.json")
    assert T.check({})["files"]["state_dir"] == "/var/lib/specdec/retune"


def test_the_hosts_accept_the_loops_key_from_the_monitoring_hosts_address_only(files):
    s = T.check(files)
    assert T.tune_loop(s, HOSTVARS, GROUPS, "monitoring", monitoring_host="mon-01")["key_from"] == "10.0.8.30"
    assert "key_from" not in T.tune_loop(s, HOSTVARS, GROUPS, "monitoring")
    named = dict(HOSTVARS, **{"mon-01": {"ansible_host": "mon.example.net"}})
    msg = "\n".join(pytest.raises(T.TuneLoopError, T.tune_loop, s, named, GROUPS, "monitoring", None, "mon-01").value.errors)
    assert "monitoring_address: 'mon.example.net' of mon-01 must be an IP address" in msg


def test_the_switch_is_the_role_s_own_name_and_python_reads_it_as_enabled():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import typed_settings
    assert role_spec.role_of("monitoring_tune_loop") == role_spec.role_of("monitoring_tune_loop_port") == T.ROLE
    assert role_spec.short_name(T.ROLE, "monitoring_tune_loop") == "enabled"
    assert role_spec.full_name(T.ROLE, "enabled") == "monitoring_tune_loop"
    # a role without a switch keeps a setting that ends in enabled as it is named
    assert role_spec.full_name("docker_host", "service_enabled") == "docker_host_service_enabled"
    assert role_spec.full_name("gateway", "enabled") == "gateway_enabled"
    assert typed_settings(T.ROLE, {"monitoring_tune_loop": True, "monitoring_tune_loop_port": 5051}) == {
        "enabled": True, "port": 5051}
    assert role_spec.defaults(T.ROLE, ("enabled", "port")) == {"enabled": False, "port": 5050}


def test_through_the_action_the_token_is_never_returned_and_a_refusal_names_the_setting(files):
    from settings_action import run  # tests/unit, on the test path
    given = dict(("monitoring_tune_loop" if k == "enabled" else "monitoring_tune_loop_" + k, v) for k, v in files.items())
    out = run(T.ROLE, own=T.ROLE, monitoring_tune_loop_token=TOKEN, hostvars=HOSTVARS, groups=GROUPS,
              inventory_hostname="mon-01", **given)
    assert not out.get("failed"), out.get("msg")
    assert TOKEN not in repr(out) and out["plan"]["cfg"]["token_set"] is True
    assert out["enabled"] is True and out["plan"]["loop"]["key_from"] == "10.0.8.30"
    assert out["plan"]["hosts"] == ["engine-01", "engine-02", "gw-01"]
    # the monitoring group the loop leaves out is the monitoring role's setting
    other = run(T.ROLE, own=T.ROLE, hostvars=HOSTVARS, groups=dict(GROUPS, watchers=["gw-01"]),
                monitoring_server_group="watchers", **dict(given, monitoring_tune_loop=False))
    assert other["plan"]["hosts"] == ["engine-01", "engine-02", "mon-01"] and other["plan"]["loop"] is None
    bad = run(T.ROLE, own=T.ROLE, monitoring_tune_loop_token="short " + TOKEN, **dict(given, monitoring_tune_loop_port=70000))
    assert bad["failed"] and "monitoring_tune_loop_port: 70000" in bad["msg"] and "short" not in bad["msg"]
    assert "monitoring_tune_loop_token: (value hidden)" in run(T.ROLE, own=T.ROLE, monitoring_tune_loop_token="short",
                                                               **given)["msg"]


def test_the_monitoring_role_posts_to_the_loop_as_its_settings_say():
    from settings_action import run  # tests/unit, on the test path
    seen = run(T.ROLE, own="monitoring", monitoring_tune_loop=True, monitoring_tune_loop_listen="10.0.8.30")
    assert "plan" not in seen and seen["enabled"] is True
    groups = dict((k, v) for k, v in GROUPS.items() if k != "gateways")
    out = run("monitoring", own="monitoring", _monitoring_tune_loop_seen=seen, _monitoring_exporter_seen={},
              hostvars=HOSTVARS, groups=groups, inventory_hostname="mon-01")
    assert not out.get("failed"), out.get("msg")
    hooks = out["plan"]["alertmanager"]["receivers"][0]["webhook_configs"]
    assert hooks == [{"url": "http://10.0.8.30:5050/alerts", "send_resolved": True,
                      "http_config": {"authorization": {"type": "Bearer", "credentials_file": T.TUNE_LOOP_TOKEN_FILE}}}]
    off = run("monitoring", own="monitoring", _monitoring_tune_loop_seen=run(T.ROLE, own="monitoring"),
              hostvars=HOSTVARS, groups=groups, inventory_hostname="mon-01")
    assert "webhook_configs" not in off["plan"]["alertmanager"]["receivers"][0]
