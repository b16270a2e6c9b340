"""The monitoring role's decisions (plugins/plugin_utils/_monitoring.py): settings, the scrape config
from the inventory, the exporter's config; the rules and their promtool tests (_monitoring_rules.py), the
live view (_monitoring_live.py).

promtool (Debian's `prometheus` package) checks and tests the rules where it is installed
(`promtool` on PATH or SPECDEC_PROMTOOL); the monitoring role runs the same checks on the monitoring
host before it replaces a file, and the molecule `monitoring` scenario runs them there."""

import os
import shutil
import subprocess

import bcrypt
import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as M
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_live as L
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import monitoring as P


def planned_scrape(hostvars, groups, host):
    """prometheus.yml as the role's planner decides it, from the inventory as the settings action gives it."""
    return P.PLANNERS["main"]({}, None, {"hostvars": hostvars, "groups": groups, "host": host})["scrape"]

PROMTOOL = os.environ.get("SPECDEC_PROMTOOL") or shutil.which("promtool")
LAB = {"scrape_interval": "2s", "evaluation_interval": "2s", "acceptance_window": "20s", "acceptance_for": "20s",
       "engine_down_for": "10s", "engine_wedged_for": "20s", "kv_cache_for": "10s", "queue_for": "10s",
       "exporter_poll_interval": 0.5}
LAB_WEDGED_FOR_S = 20
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool is not installed (Debian package prometheus)")

HOSTVARS = {
    "engine-01": {"ansible_host": "10.0.0.11", "inference_server_instances": [
        {"name": "gpt-oss-120b", "engine": "trtllm", "port": 8000},
        {"name": "qwen", "engine": "vllm", "port": 8001},
        {"name": "old", "engine": "vllm", "port": 8002, "state": "absent"}]},
    "engine-02": {"monitoring_address": "172.29.8.12", "ansible_host": "127.0.0.1",
                  "inference_server_instances": [{"name": "gpt-oss-120b", "engine": "trtllm", "port": 8000}]},
    "mon-01": {},
    "gw-01": {"ansible_host": "fd00::5", "gateway_stats_address": "fd00::5"},
    "gw-02": {"ansible_host": "10.0.0.20", "gateway_stats_port": 9101, "gateway_stats_address": "10.0.0.20"},
}


def jobs(cfg):
    return dict((j["job_name"], j) for j in cfg["scrape_configs"])


def test_scrape_config_follows_the_inventory():
    groups = {"spark-nodes": ["engine-02", "engine-01"], "monitoring": ["mon-01"], "all": list(HOSTVARS)}
    cfg = M.scrape_config(HOSTVARS, groups, "mon-01", {})
    j = jobs(cfg)
    assert sorted(j) == ["alertmanager", "prometheus", "specdec-exporter", "specdec-vllm"]
    assert j["specdec-exporter"]["static_configs"] == [
        {"targets": ["10.0.0.11:9470"], "labels": {"host": "engine-01"}},
        {"targets": ["172.29.8.12:9470"], "labels": {"host": "engine-02"}}]
    assert j["specdec-vllm"]["static_configs"] == [
        {"targets": ["10.0.0.11:8001"], "labels": {"host": "engine-01", "engine_instance": "qwen", "engine": "vllm"}}]
    assert j["prometheus"]["static_configs"][0]["labels"] == {"host": "mon-01"}
    assert cfg["rule_files"] == [M.RULES_PATH]
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9093"]


def test_adding_a_host_adds_its_targets_and_gateways_appear_with_their_group():
    groups = {"spark-nodes": ["engine-01"], "gateways": ["gw-01", "gw-02"]}
    before = jobs(M.scrape_config(HOSTVARS, {"spark-nodes": ["engine-01"]}, "mon-01", {}))
    assert "specdec-gateway" not in before
    after = jobs(M.scrape_config(HOSTVARS, dict(groups, **{"spark-nodes": ["engine-01", "engine-02"]}), "mon-01",
                                 {}))
    assert len(after["specdec-exporter"]["static_configs"]) == 2
    assert after["specdec-gateway"]["static_configs"] == [{"targets": ["[fd00::5]:8404"], "labels": {"host": "gw-01"}},
                                                           {"targets": ["10.0.0.20:9101"], "labels": {"host": "gw-02"}}]


def test_a_gateway_whose_metrics_listen_on_loopback_is_scraped_only_from_itself():
    groups = {"spark-nodes": ["engine-01"], "gateways": ["gw-03"]}
    hostvars = dict(HOSTVARS, **{"gw-03": {"ansible_host": "10.0.0.30"}})  # the gateway role's default: 127.0.0.1
    with pytest.raises(M.MonitoringError) as err:
        M.scrape_config(hostvars, groups, "mon-01", {})
    assert ("gw-03: gateway_stats_address=127.0.0.1: HAProxy's metrics listen on loopback there, which mon-01 cannot "
            "scrape; set gateway_stats_address to the address mon-01 scrapes the gateway at (10.0.0.30)") in str(err.value)
    # through the role's planner too (it reads the gateway's own setting from hostvars)
    with pytest.raises(PlanRefusal) as err:
        planned_scrape(hostvars, groups, "mon-01")
    assert "gw-03: gateway_stats_address=127.0.0.1" in str(err.value)
    hostvars["gw-03"] = dict(hostvars["gw-03"], gateway_stats_address="10.0.0.30")
    assert jobs(planned_scrape(hostvars, groups, "mon-01"))["specdec-gateway"]["static_configs"][0][
        "targets"] == ["10.0.0.30:8404"]
    hostvars["gw-03"] = {"ansible_host": "10.0.0.30"}
    # a Prometheus on the gateway itself scrapes it there
    cfg = M.scrape_config(hostvars, groups, "gw-03", {})
    assert jobs(cfg)["specdec-gateway"]["static_configs"] == [{"targets": ["127.0.0.1:8404"], "labels": {"host": "gw-03"}}]


def test_the_planner_reads_only_what_it_needs_from_hostvars():
    class LazyHostvars(dict):
        def __getitem__(self, key):
            value = dict.__getitem__(self, key)
            return dict(value, secret_thing=object())
    cfg = planned_scrape(LazyHostvars(HOSTVARS), {"spark-nodes": ["engine-01"]}, "mon-01")
    assert jobs(cfg)["specdec-exporter"]["static_configs"][0]["targets"] == ["10.0.0.11:9470"]


def test_exporter_config_lists_served_instances():
    cfg = M.exporter_config(HOSTVARS["engine-01"]["inference_server_instances"], {"poll_interval": 0.5}, "10.0.0.11")
    assert cfg["instances"] == [{"name": "gpt-oss-120b", "engine": "trtllm", "url": "http://127.0.0.1:8000"},
                                {"name": "qwen", "engine": "vllm", "url": "http://127.0.0.1:8001"}]
    assert cfg["poll_interval"] == 0.5 and cfg["port"] == 9470
    # on the host's inventory address, the one Prometheus scrapes, not on every interface
    assert cfg["listen"] == "10.0.0.11"


@pytest.mark.parametrize("instances,word", [
    ([{"name": "a", "engine": "tgi", "port": 1}], "engine: 'tgi' must be trtllm or vllm"),
    ([{"name": "a", "engine": "vllm", "port": 0}], "port: 0 must be a port number"),
    (["x"], "mapping"),
])
def test_exporter_config_refuses_bad_instances(instances, word):
    with pytest.raises(M.MonitoringError, match=word):
        M.exporter_config(instances, {}, "10.0.0.11")


# The settings are checked as the role's settings check does (plugin_utils/_settings.py), in its wording.
@pytest.mark.parametrize("settings,word", [
    ({"acceptance_window": "5 minutes"}, "monitoring_acceptance_window: '5 minutes' must be a Prometheus duration"),
    ({"acceptance_for": "0s"}, "monitoring_acceptance_for"),
    ({"acceptance_margin": 1.5}, "monitoring_acceptance_margin: 1.5 must be from 0 to 0.99"),
    ({"kv_cache_threshold": "high"}, "monitoring_kv_cache_threshold"),
    ({"exporter_port": 70000}, "monitoring_exporter_port: 70000 must be a port number from 1 to 65535"),
    ({"tools_dir": "relative/dir"}, "monitoring_tools_dir"),
    ({"engine_group": "a b"}, "monitoring_engine_group"),
    ({"alertmanager_webhooks": ["ftp://x"]}, "monitoring_alertmanager_webhooks"),
    ({"acceptance_window": "3s", "scrape_interval": "2s"}, "at least two scrape intervals"),
])
def test_settings_errors_name_the_variable_value_and_what_is_allowed(settings, word):
    with pytest.raises(M.MonitoringError) as exc:
        M.check(settings)
    assert word in str(exc.value)


def test_the_planner_refuses_naming_the_variable():
    with pytest.raises(PlanRefusal, match="monitoring_acceptance_margin"):
        P.PLANNERS["main"]({"acceptance_margin": -1}, None, {})


def test_durations():
    assert M.seconds("500ms") == 0.5 and M.seconds("5m") == 300 and M.seconds("2h") == 7200
    for bad in ("5", "1m30s", "", None, 5):
        with pytest.raises(ValueError):
            M.seconds(bad)


def test_alert_bound_adds_up_its_terms():
    b = R.alert_bound(LAB)
    assert b["terms"] == {"poll": 0.5, "scrape": 2, "window": 20, "evaluation": 4, "for": 20}
    assert b["fire_s"] == 46.5 and b["resolve_s"] == 26.5
    assert R.alert_bound({})["fire_s"] == 1 + 15 + 300 + 30 + 600


def test_rules_name_every_alert_and_use_the_settings():
    r = R.rules({"acceptance_margin": 0.25, "acceptance_window": "1m", "acceptance_for": "3m"})
    rec, alerts = r["groups"]
    names = [a["alert"] for a in alerts["rules"]]
    assert names == ["SpeculationStoppedPaying", "SpecdecEngineDown", "SpecdecEngineWedged", "SpecdecEngineNotReady",
                     "SpecdecExporterDown", "SpecdecKVCacheNearFull", "SpecdecRequestsQueueing"]
    spec = alerts["rules"][0]
    assert spec["for"] == "3m" and "* 0.75" in spec["expr"]
    assert all("[1m]" in x["expr"] for x in rec["rules"] if "rate(" in x["expr"])
    recorded = set(x["record"] for x in rec["rules"])
    assert {"specdec:acceptance_length:rate", "specdec:acceptance_rate:rate", "specdec:acceptance_rate_per_position:rate",
            "specdec:generated_tokens:rate", "specdec:queued_requests", "specdec:kv_cache_usage:ratio"} <= recorded


def test_a_wedged_engine_is_judged_by_progress_and_its_bound_is_stated():
    """In flight and no token over the window, for monitoring_engine_wedged_for: not /health, not being up."""
    r = R.rules({"engine_wedged_for": "4m"})
    wedged = next(a for a in r["groups"][1]["rules"] if a["alert"] == "SpecdecEngineWedged")
    assert wedged["for"] == "4m" and wedged["labels"] == {"severity": "critical"}
    assert wedged["expr"] == ("specdec:generated_tokens:rate == 0 and on (host, engine_instance) "
                              "((specdec:running_requests + on (host, engine_instance) specdec:queued_requests) > 0 "
                              "or on (host, engine_instance) max by (host, engine_instance) (specdec_engine_progress == 0))")
    assert "without generating a token for 4m" in wedged["annotations"]["description"]
    # the lab probes every 2 s with a 5 s deadline: the window (20 s) is the longer term
    b = R.wedged_bound(dict(LAB, exporter_probe_interval=2.0, exporter_probe_deadline=5.0))
    assert b["terms"] == {"poll": 0.5, "scrape": 2, "window_or_probe": 20, "evaluation": 4, "for": LAB_WEDGED_FOR_S}
    assert b["fire_s"] == 26.5 + LAB_WEDGED_FOR_S
    # a probe slower than the window sets the bound; without probes the window does
    assert R.wedged_bound(dict(LAB, exporter_probe_interval=30.0, exporter_probe_deadline=30.0))["terms"]["window_or_probe"] == 90
    assert R.wedged_bound(dict(LAB, exporter_probe_interval=0))["terms"]["window_or_probe"] == 20
    assert R.wedged_bound({})["fire_s"] == 1 + 15 + max(300, 2 * 30 + 30) + 30 + 300
    with pytest.raises(M.MonitoringError, match="monitoring_engine_wedged_for"):
        R.rules({"engine_wedged_for": "soon"})


def test_alert_tests_cover_every_alert():
    for settings in ({}, LAB):
        tests = R.alert_tests(settings)
        covered = set(t["alertname"] for case in tests["tests"] for t in case["alert_rule_test"] if t["exp_alerts"])
        assert covered == set(R.SEVERITY)


def test_alertmanager_config():
    assert "webhook_configs" not in M.alertmanager_config({})["receivers"][0]
    cfg = M.alertmanager_config({"alertmanager_webhooks": ["https://hooks.example/a"], "alertmanager_group_wait": "1s"})
    assert cfg["receivers"][0]["webhook_configs"] == [{"url": "https://hooks.example/a", "send_resolved": True}]
    assert cfg["route"]["group_wait"] == "1s"


def _write(tmp_path, settings):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(R.rules(settings)))
    (tmp_path / "rules.test.yml").write_text(yaml.safe_dump(R.alert_tests(settings, "rules.yml")))


@needs_promtool
@pytest.mark.parametrize("settings", [{}, LAB, dict(LAB, acceptance_margin=0.3, queue_threshold=4)],
                         ids=["defaults", "lab", "lab-margin"])
def test_promtool_checks_and_tests_the_rules(tmp_path, settings):
    _write(tmp_path, settings)
    check = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([PROMTOOL, "test", "rules", "rules.test.yml"], cwd=str(tmp_path), capture_output=True, text=True)
    assert test.returncode == 0, test.stdout + test.stderr


@needs_promtool
def test_promtool_tests_fail_when_an_alert_is_broken(tmp_path):
    """The tests can fail: a rule file whose speculation alert compares the wrong way fails them."""
    _write(tmp_path, LAB)
    rules = yaml.safe_load((tmp_path / "rules.yml").read_text())
    rules["groups"][1]["rules"][0]["expr"] = rules["groups"][1]["rules"][0]["expr"].replace(" < on", " > on")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    test = subprocess.run([PROMTOOL, "test", "rules", "rules.test.yml"], cwd=str(tmp_path), capture_output=True, text=True)
    assert test.returncode != 0


@needs_promtool
@pytest.mark.parametrize("broken", [("specdec:generated_tokens:rate == 0", "specdec:generated_tokens:rate >= 0"),
                                    ("specdec:queued_requests) > 0", "specdec:queued_requests) >= 0"),
                                    ("(specdec_engine_progress == 0)", "(specdec_engine_progress == 2)")],
                         ids=["tokens-flowing-fires", "idle-fires", "probe-ignored"])
def test_promtool_tests_fail_when_the_wedged_alert_is_broken(tmp_path, broken):
    """An alert that fires while tokens flow, or on an idle engine, fails the tests."""
    _write(tmp_path, LAB)
    rules = yaml.safe_load((tmp_path / "rules.yml").read_text())
    wedged = next(a for a in rules["groups"][1]["rules"] if a["alert"] == "SpecdecEngineWedged")
    wedged["expr"] = wedged["expr"].replace(*broken)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    test = subprocess.run([PROMTOOL, "test", "rules", "rules.test.yml"], cwd=str(tmp_path), capture_output=True, text=True)
    assert test.returncode != 0 and "SpecdecEngineWedged" in test.stdout + test.stderr


@needs_promtool
def test_promtool_checks_the_scrape_config(tmp_path):
    _write(tmp_path, LAB)
    cfg = M.scrape_config(HOSTVARS, {"spark-nodes": ["engine-01", "engine-02"], "gateways": ["gw-01"]}, "mon-01", LAB)
    cfg["rule_files"] = [str(tmp_path / "rules.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    check = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


AMTOOL = os.environ.get("SPECDEC_AMTOOL") or shutil.which("amtool")


@pytest.mark.skipif(not AMTOOL, reason="amtool is not installed (Debian package prometheus-alertmanager)")
@pytest.mark.parametrize("settings", [{}, {"alertmanager_webhooks": ["http://127.0.0.1:9/hook"]}])
def test_amtool_checks_the_alertmanager_config(tmp_path, settings):
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(M.alertmanager_config(settings)))
    check = subprocess.run([AMTOOL, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def _resp(*samples):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"host": h, "engine_instance": i}, "value": [0, v]} for h, i, v in samples]}}


def test_live_view_says_when_live_and_sweep_disagree():
    rows = [{"host": "a", "instance": "x", "sweep_acceptance_length": None, "sweep_acceptance_estimate": 4.0},
            {"host": "a", "instance": "y", "sweep_acceptance_length": 3.0},
            {"host": "b", "instance": "x", "sweep_acceptance_estimate": 2.0},
            {"host": "c", "instance": "z"},
            {"host": "d", "health": "not checked"}]
    responses = {"acceptance": _resp(("a", "x", "1.5"), ("a", "y", "2.9"), ("c", "z", "3")),
                 "tokens": _resp(("a", "x", "123.456"), ("a", "y", "NaN")),
                 "expected": _resp(("a", "x", "4"))}
    out = L.live_view(rows, responses, 0.2)
    assert [r.get("live_vs_sweep") for r in out] == ["below sweep", "agrees", "no traffic", "no sweep", None]
    assert out[0]["live_acceptance_length"] == 1.5 and out[0]["live_tokens_per_s"] == 123.5
    assert out[1]["live_tokens_per_s"] is None
    assert L.live_view([{"host": "a", "instance": "x", "sweep_acceptance_length": 2.0}],
                       {"acceptance": _resp(("a", "x", "3"))})[0]["live_vs_sweep"] == "above sweep"


def test_live_view_refuses_a_prometheus_error():
    with pytest.raises(ValueError, match="bad_data"):
        L.live_view([{"host": "a", "instance": "x"}], {"acceptance": {"status": "error", "error": "bad_data"}})
    with pytest.raises(ValueError, match="margin"):
        L.live_view([], {}, 1.5)


# --------------------------------------------------------------------------- listeners

@pytest.mark.parametrize("settings,address,listen", [
    ({}, "10.0.0.11", "10.0.0.11"),
    ({}, "fd00::5", "fd00::5"),
    ({"listen": "127.0.0.1"}, "engine-01", "127.0.0.1"),
    ({"listen": "10.0.0.12"}, "10.0.0.11", "10.0.0.12"),
])
def test_the_exporter_listens_where_the_inventory_says(settings, address, listen):
    assert M.exporter_listen(settings, address) == listen
    assert M.exporter_config([], settings, address)["listen"] == listen


def test_the_exporter_url_is_where_it_listens():
    assert M.exporter_url({}, "10.0.0.11") == "http://10.0.0.11:9470"
    assert M.exporter_url({"port": 9471}, "fd00::5") == "http://[fd00::5]:9471"


@pytest.mark.parametrize("settings,address,word", [
    ({}, "engine-01", "monitoring_exporter_listen: '' leaves the exporter on the host's inventory address, and 'engine-01'"),
    ({}, "0.0.0.0", "is not an IP address of the host"),
    ({}, None, "monitoring_exporter_listen"),
    ({"listen": "0.0.0.0"}, "10.0.0.11", "monitoring_exporter_listen: '0.0.0.0' listens on every interface"),
    ({"listen": "::"}, "10.0.0.11", "monitoring_exporter_listen: '::' listens on every interface"),
    ({"listen": "my host"}, "10.0.0.11", "monitoring_exporter_listen: 'my host' must be an IP address"),
])
def test_the_exporter_never_listens_on_every_interface(settings, address, word):
    with pytest.raises(M.MonitoringError) as exc:
        M.exporter_config([], settings, address)
    assert word in str(exc.value)


def test_the_scrape_target_of_an_exporter_is_where_it_listens():
    hostvars = dict(HOSTVARS, **{"engine-01": dict(HOSTVARS["engine-01"], monitoring_exporter_listen="10.0.1.11")})
    cfg = M.scrape_config(hostvars, {"spark-nodes": ["engine-01", "engine-02"]}, "mon-01", {})
    assert [c["targets"] for c in jobs(cfg)["specdec-exporter"]["static_configs"]] == [["10.0.1.11:9470"], ["172.29.8.12:9470"]]


def test_each_exporter_is_scraped_on_its_own_hosts_port_else_the_one_the_monitoring_host_sees():
    hostvars = dict(HOSTVARS, **{"engine-01": dict(HOSTVARS["engine-01"], monitoring_exporter_port=9999)})
    cfg = M.scrape_config(hostvars, {"spark-nodes": ["engine-01", "engine-02"]}, "mon-01", {})
    assert [c["targets"] for c in jobs(cfg)["specdec-exporter"]["static_configs"]] == [["10.0.0.11:9999"], ["172.29.8.12:9470"]]
    cfg = M.scrape_config(HOSTVARS, {"spark-nodes": ["engine-02"]}, "mon-01", M.check({}, {"port": 9480}))
    assert jobs(cfg)["specdec-exporter"]["static_configs"][0]["targets"] == ["172.29.8.12:9480"]
    hostvars = dict(HOSTVARS, **{"engine-01": dict(HOSTVARS["engine-01"], monitoring_exporter_port="http")})
    with pytest.raises(M.MonitoringError, match="monitoring_exporter_port: 'http' must be"):
        M.scrape_config(hostvars, {"spark-nodes": ["engine-01"]}, "mon-01", {})


def test_the_server_reads_the_exporters_poll_interval_for_its_alert_bound():
    slow, fast = R.alert_bound(M.check({}, {"poll_interval": 30})), R.alert_bound(M.check({}, {"poll_interval": 0.5}))
    assert slow["terms"]["poll"] == 30 and fast["terms"]["poll"] == 0.5 and slow["fire_s"] - fast["fire_s"] == 29.5
    with pytest.raises(M.MonitoringError, match="monitoring_exporter_poll_interval: 100"):
        M.check({}, {"poll_interval": 100})


def test_prometheus_scrapes_itself_and_alertmanager_where_they_listen():
    s = {"allow_unauthenticated_listen": True, "prometheus_listen": "10.0.0.5", "alertmanager_listen": "fd00::5"}
    cfg = M.scrape_config(HOSTVARS, {}, "mon-01", s)
    assert jobs(cfg)["prometheus"]["static_configs"][0]["targets"] == ["10.0.0.5:9090"]
    assert jobs(cfg)["alertmanager"]["static_configs"][0]["targets"] == ["[fd00::5]:9093"]
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["[fd00::5]:9093"]


def test_prometheus_and_alertmanager_listen_on_loopback_by_default():
    s = M.check({})
    assert dict(M.daemon_args(s, "prometheus"))["monitoring_prometheus_listen"] == "--web.listen-address=127.0.0.1:9090"
    assert dict(M.daemon_args(s, "alertmanager"))["monitoring_alertmanager_listen"] == "--web.listen-address=127.0.0.1:9093"


@pytest.mark.parametrize("key", ["prometheus_listen", "alertmanager_listen"])
@pytest.mark.parametrize("value,word", [
    ("0.0.0.0", "listens on every interface"),
    ("::", "listens on every interface"),
    ("", "must not be empty"),
    ("localhost", "must be an IP address"),
    ("10.0.0.5", "is beyond loopback"),
])
def test_a_listener_beyond_loopback_or_on_every_interface_is_refused(key, value, word):
    with pytest.raises(M.MonitoringError) as exc:
        M.check({key: value})
    assert str(exc.value).startswith("monitoring_%s: %r" % (key, value)) and word in str(exc.value)


@pytest.mark.parametrize("key", ["prometheus_listen", "alertmanager_listen"])
def test_beyond_loopback_with_the_acknowledgement(key):
    s = M.check({key: "10.0.0.5", "allow_unauthenticated_listen": True})
    assert s[key] == "10.0.0.5"
    with pytest.raises(M.MonitoringError, match="listens on every interface"):
        M.check({key: "0.0.0.0", "allow_unauthenticated_listen": True})


# --------------------------------------------------------------------------- command lines

def _args(env_text):
    """The argv Debian's unit gives the daemon: the ARGS value as systemd reads the env file, split at
    whitespace (an unbraced $ARGS)."""
    line = [ln for ln in env_text.splitlines() if ln.startswith("ARGS=")]
    assert len(line) == 1
    value = line[0][len("ARGS="):]
    assert value.startswith('"') and value.endswith('"') and '\\' not in value
    return value[1:-1].split()


def test_the_prometheus_command_line_has_one_word_per_flag():
    assert _args(M.daemon_env({"prometheus_retention": "30d"}, "prometheus")) == [
        "--config.file=/etc/prometheus/prometheus.yml", "--web.listen-address=127.0.0.1:9090",
        "--storage.tsdb.retention.time=30d"]
    assert _args(M.daemon_env({"alertmanager_listen": "::1", "alertmanager_port": 9094}, "alertmanager")) == [
        "--config.file=/etc/prometheus/alertmanager.yml", "--web.listen-address=[::1]:9094", "--cluster.listen-address="]


# Every setting that reaches ARGS, with what would smuggle a flag in: each is refused, naming the variable.
@pytest.mark.parametrize("key,value", [
    ("prometheus_retention", "15d --web.enable-admin-api"),
    ("prometheus_retention", "15d\t--web.enable-admin-api"),
    ("prometheus_retention", '"15d"'),
    ("prometheus_retention", "15d\n--web.enable-admin-api"),
    ("prometheus_retention", "$X"),
    ("prometheus_listen", "127.0.0.1 --web.enable-admin-api"),
    ("prometheus_listen", "127.0.0.1:1"),
    ("prometheus_port", "9090 --web.enable-lifecycle"),
    ("alertmanager_listen", "127.0.0.1 --cluster.peer=x"),
    ("alertmanager_port", "9093 --x"),
])
def test_no_setting_adds_a_flag_to_a_command_line(key, value):
    with pytest.raises(M.MonitoringError) as exc:
        M.daemon_env({key: value}, "prometheus" if key.startswith("prometheus") else "alertmanager")
    assert str(exc.value).startswith("monitoring_%s: " % key)


def test_the_flag_words_are_checked_even_past_the_settings_policy(monkeypatch):
    """Were a value to pass its own pattern with a space, the command-line check still refuses it."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as settings
    monkeypatch.setitem(settings.POLICY, "monitoring_prometheus_retention", [])
    with pytest.raises(M.MonitoringError) as exc:
        M.check({"prometheus_retention": "15d --web.enable-admin-api"})
    assert "monitoring_prometheus_retention: '15d --web.enable-admin-api' has whitespace" in str(exc.value)


def test_the_exporter_unit_quotes_its_paths():
    assert M.exporter_exec({}) == "/usr/bin/python3 /usr/local/lib/specdec/specdec_exporter.py --config /etc/specdec/exporter.json"
    assert M.exporter_exec({"dir": "/opt/spec dec", "config_file": "/etc/x%i.json"}) == (
        '/usr/bin/python3 "/opt/spec dec/specdec_exporter.py" --config "/etc/x%%i.json"')


# --------------------------------------------------------------------------- basic authentication and TLS

USERS = {"specdec": "pr0m-Secret-1", "viewer": "v1ew-Secret-2"}


@pytest.fixture()
def tls(tmp_path):
    """A certificate and key path on the controller (the check asks that they exist; the host's promtool
    reads them)."""
    cert, key = tmp_path / "web.crt", tmp_path / "web.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    return {"web_tls_cert": str(cert), "web_tls_key": str(key)}


def secured(tls, **extra):
    return dict(dict(tls, web_client_user="specdec", prometheus_listen="10.0.0.5"), **extra)


def test_without_users_or_tls_there_is_no_web_configuration():
    s = M.check({})
    assert s["web"]["enabled"] is False and s["web_users"] == []
    assert not any("--web.config.file" in flag for var, flag in M.daemon_args(s, "prometheus"))
    assert sorted(s["web"]["unused"]) == sorted([M.WEB_CONFIG, M.WEB_TLS_CERT, M.WEB_TLS_KEY, M.WEB_CLIENT_PASSWORD])
    cfg = M.scrape_config(HOSTVARS, {}, "mon-01", s)
    assert "basic_auth" not in jobs(cfg)["prometheus"] and "scheme" not in cfg["alerting"]["alertmanagers"][0]


def test_beyond_loopback_prometheus_asks_for_basic_authentication_over_tls(tls):
    s = M.check(secured(tls), None, USERS)
    assert s["web_users"] == ["specdec", "viewer"] and s["web_client_user"] == "specdec"
    assert "pr0m-Secret-1" not in repr(s) and s["web"]["unused"] == []
    for daemon in ("prometheus", "alertmanager"):
        assert (None, "--web.config.file=" + M.WEB_CONFIG) in M.daemon_args(s, daemon)
    assert "--web.config.file=/etc/prometheus/web-config.yml" in M.daemon_env(s, "alertmanager")
    # Prometheus reaches itself and Alertmanager over https, as the client user, its password in a file
    cfg = M.scrape_config(HOSTVARS, {}, "mon-01", s)
    client = {"scheme": "https", "tls_config": {"ca_file": M.WEB_TLS_CERT},
              "basic_auth": {"username": "specdec", "password_file": M.WEB_CLIENT_PASSWORD}}
    for where in (jobs(cfg)["prometheus"], jobs(cfg)["alertmanager"], cfg["alerting"]["alertmanagers"][0]):
        assert dict((k, where[k]) for k in client) == client
    assert jobs(cfg)["prometheus"]["static_configs"][0]["targets"] == ["10.0.0.5:9090"]
    assert "Secret" not in yaml.safe_dump(cfg)


def test_the_web_configuration_holds_bcrypt_hashes_that_a_second_run_keeps(tls):
    s = M.check(secured(tls), None, USERS)
    text = M.web_config(s, USERS, "")
    doc = yaml.safe_load(text)
    assert doc["tls_server_config"] == {"cert_file": M.WEB_TLS_CERT, "key_file": M.WEB_TLS_KEY, "min_version": "TLS12"}
    assert sorted(doc["basic_auth_users"]) == ["specdec", "viewer"]
    for name, password in USERS.items():
        assert bcrypt.checkpw(password.encode(), doc["basic_auth_users"][name].encode())
        assert password not in text
    # the installed file's hashes are kept while their passwords match: a second run changes nothing
    assert M.web_config(s, USERS, text) == text
    # a changed password gets a new hash; the other user's is kept
    changed = yaml.safe_load(M.web_config(s, dict(USERS, viewer="n3w-Secret"), text))["basic_auth_users"]
    assert changed["specdec"] == doc["basic_auth_users"]["specdec"]
    assert bcrypt.checkpw(b"n3w-Secret", changed["viewer"].encode()) and changed["viewer"] != doc["basic_auth_users"]["viewer"]
    # an unreadable installed file, or a hash of something else, is made again
    for current in ("{{ not yaml", "basic_auth_users: {specdec: plain}", "basic_auth_users: [1]"):
        again = yaml.safe_load(M.web_config(s, USERS, current))["basic_auth_users"]
        assert bcrypt.checkpw(USERS["specdec"].encode(), again["specdec"].encode())


class Tagged(str):
    """A string as a play passes it (ansible-core's tagged and unsafe strings are str subclasses)."""


def test_the_users_of_a_play_are_written_as_plain_strings(tls):
    users = dict((Tagged(k), Tagged(v)) for k, v in USERS.items())
    text = M.web_config(M.check(secured(tls), None, users), users, Tagged(""))
    assert sorted(yaml.safe_load(text)["basic_auth_users"]) == sorted(USERS)


def test_loopback_users_without_tls_and_tls_without_users(tls):
    s = M.check({"web_client_user": "specdec"}, None, USERS)
    assert s["web"]["auth"] and not s["web"]["tls"] and sorted(s["web"]["unused"]) == [M.WEB_TLS_CERT, M.WEB_TLS_KEY]
    assert "tls_server_config" not in yaml.safe_load(M.web_config(s, USERS, ""))
    s = M.check(dict(tls))
    assert s["web"]["tls"] and not s["web"]["auth"] and s["web"]["unused"] == [M.WEB_CLIENT_PASSWORD]
    assert yaml.safe_load(M.web_config(s, {}, "")) == {
        "tls_server_config": {"cert_file": M.WEB_TLS_CERT, "key_file": M.WEB_TLS_KEY, "min_version": "TLS12"}}
    cfg = M.scrape_config(HOSTVARS, {}, "mon-01", s)
    assert jobs(cfg)["prometheus"]["scheme"] == "https" and "basic_auth" not in jobs(cfg)["prometheus"]


@pytest.mark.parametrize("settings,users,word", [
    ({"prometheus_listen": "10.0.0.5", "web_client_user": "specdec"}, USERS, "would answer with passwords in clear text"),
    ({"alertmanager_listen": "10.0.0.5"}, None, "Alertmanager would answer anyone without authentication"),
    ({"web_client_user": ""}, USERS, "monitoring_web_client_user: '' must name one of monitoring_web_users (specdec, viewer)"),
    ({"web_client_user": "admin"}, USERS, "monitoring_web_client_user: 'admin' must name one of"),
    ({"web_client_user": "admin"}, None, "monitoring_web_client_user: 'admin' is set while monitoring_web_users is empty"),
    ({}, {"a b": "x"}, "monitoring_web_users: has user names that are not"),
    ({}, {"a": 12345}, "monitoring_web_users: has passwords (values hidden) that are not strings of 1 to 72 bytes: a"),
    ({}, {"a": "x" * 73}, "that are not strings of 1 to 72 bytes: a"),
    ({}, {"a": ""}, "that are not strings of 1 to 72 bytes: a"),
    ({}, "specdec:secret", "monitoring_web_users"),
])
def test_the_web_settings_are_refused_naming_the_variable(settings, users, word):
    with pytest.raises(M.MonitoringError) as exc:
        M.check(settings, None, users)
    assert word in str(exc.value)
    assert "x" * 73 not in str(exc.value) and "12345" not in str(exc.value) and "specdec:secret" not in str(exc.value)


def test_the_certificate_and_key_must_be_files_on_the_controller(tmp_path):
    with pytest.raises(M.MonitoringError) as exc:
        M.check({"web_tls_cert": str(tmp_path / "none.crt"), "web_tls_key": str(tmp_path / "none.key")})
    assert "monitoring_web_tls_cert: '%s' is not a file on the controller" % (tmp_path / "none.crt") in str(exc.value)
    assert "monitoring_web_tls_key" in str(exc.value)
    with pytest.raises(M.MonitoringError, match="monitoring_web_tls_key: '' .*give both or neither|monitoring_web_tls_cert"):
        M.check({"web_tls_cert": str(tmp_path)})


def test_the_only_user_is_the_client_and_a_checked_mapping_checks_again(tls):
    s = M.check(secured(tls, web_client_user=""), None, {"only": "0nly-Secret"})
    assert s["web_client_user"] == "only"
    # the filters take the checked settings again: the names stand for the users
    assert M.check(s) == s
