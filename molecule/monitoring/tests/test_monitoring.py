"""Verify of the monitoring scenario, after converge and idempotence.

The engine host serves the TensorRT-LLM emulator (one-model EAGLE-3, every draft of up to 3 tokens
accepted: 4 tokens per step) with the exporter as the single reader of its /metrics; the monitoring
host runs Prometheus and Alertmanager from Debian's packages. The last test sends requests from the
controller, lowers the emulator's acceptance at run time (SPECDEC_EMU_ACCEPTANCE_FILE), and waits
for SpeculationStoppedPaying in Alertmanager within the bound the rules promise, then for its
resolution once the file is removed. Tests run in file order.
"""

import importlib.util
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("all")

_spec = importlib.util.spec_from_file_location("monitoring", PROJECT / "plugins" / "plugin_utils" / "monitoring.py")
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)

GV = yaml.safe_load((SCENARIO / "group_vars" / "all.yml").read_text())
SETTINGS = dict((k[len("monitoring_"):], v) for k, v in GV.items() if k.startswith("monitoring_"))
BOUND = M.alert_bound(SETTINGS)
ENGINE = yaml.safe_load((SCENARIO / "host_vars" / "monitoring-engine-01.yml").read_text())["monitoring_address"]
MON = yaml.safe_load((SCENARIO / "host_vars" / "monitoring-01.yml").read_text())["monitoring_address"]
PROM = "http://%s:9090" % MON
AM = "http://%s:9093" % MON
INSTANCE = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())["inference_server_instances"][0]
ACCEPTANCE_FILE = "/var/lib/specdec/models/lab-acceptance"
# the test's own latency: its polling (0.5 s) and the command that writes the file
GRACE_S = 3.0


def get_json(url, data=None):
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def prom(query):
    out = get_json(PROM + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    assert out["status"] == "success", out
    return out["data"]["result"]


def alerts(name):
    return [a for a in get_json(AM + "/api/v2/alerts") if a["labels"].get("alertname") == name]


def wait(predicate, timeout, step=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def role(host):
    return "monitoring" if "monitoring" in host.ansible.get_variables().get("group_names", []) else "engine"


def test_exporter_serves_the_engine_and_the_sweep_expectation(host):
    if role(host) != "engine":
        pytest.skip("engine host only")
    svc = host.service("specdec-exporter")
    assert svc.is_running and svc.is_enabled
    out = host.run("curl -sf http://127.0.0.1:9470/metrics")
    assert out.rc == 0, out.stderr
    assert 'specdec_sweep_expected_acceptance_length{engine_instance="gpt-oss-120b",engine="trtllm"} 4' in out.stdout
    assert 'specdec_engine_ready{engine_instance="gpt-oss-120b",engine="trtllm"} 1' in out.stdout


def test_prometheus_and_alertmanager_run_with_checked_configs(host):
    if role(host) != "monitoring":
        pytest.skip("monitoring host only")
    for name in ("prometheus", "prometheus-alertmanager"):
        assert host.service(name).is_running and host.service(name).is_enabled
    for cmd in ("promtool check config /etc/prometheus/prometheus.yml",
                "cd /etc/prometheus/specdec && promtool test rules rules.test.yml",
                "amtool check-config /etc/prometheus/alertmanager.yml"):
        out = host.run(cmd)
        assert out.rc == 0, cmd + "\n" + out.stdout + out.stderr


def test_targets_generated_from_the_inventory_are_up(host):
    if role(host) != "monitoring":
        pytest.skip("monitoring host only")

    def targets():
        active = get_json(PROM + "/api/v1/targets")["data"]["activeTargets"]
        jobs = dict((t["labels"]["job"], t) for t in active)
        if sorted(jobs) == ["alertmanager", "prometheus", "specdec-exporter"] and all(t["health"] == "up" for t in active):
            return jobs
        return None

    jobs = wait(targets, 60)
    assert jobs, get_json(PROM + "/api/v1/targets")["data"]["activeTargets"]
    assert jobs["specdec-exporter"]["labels"]["host"] == "monitoring-engine-01"
    assert jobs["specdec-exporter"]["scrapeUrl"] == "http://%s:9470/metrics" % ENGINE
    rules = get_json(PROM + "/api/v1/rules")["data"]["groups"]
    names = set(r["name"] for g in rules for r in g["rules"])
    assert set(M.SEVERITY) <= names


def fleet_view_row():
    """The engine's row of the fleet view (playbooks/health.yml) with the live columns from Prometheus."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        argv = ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "health.yml"), "-l", "spark-nodes",
                "-e", "fleet_view_prometheus_url=" + PROM, "-e", "fleet_view_report_dir=" + out]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        assert "LIVE VS SWEEP" in proc.stdout
        report = json.loads((Path(out) / "fleet.json").read_text())
    (row,) = [r for r in report["rows"] if r.get("instance") == INSTANCE["name"]]
    return row


class Load(object):
    """Requests in two threads from the controller until stopped (bounded: each one 48 tokens)."""

    def __init__(self, url):
        self.url, self.stop, self.done, self.errors = url, threading.Event(), 0, []
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(2)]

    def run(self):
        body = {"model": INSTANCE["model"].split("/")[-1], "prompt": "monitoring", "max_tokens": 48}
        while not self.stop.is_set():
            try:
                get_json(self.url + "/v1/completions", body)
                self.done += 1
            except OSError as exc:
                self.errors.append(str(exc))
                time.sleep(0.5)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)


def test_speculation_stopped_paying_fires_within_the_bound_and_resolves(host):
    if role(host) != "engine":
        pytest.skip("driven from the engine host's entry")
    host.run("rm -f %s" % ACCEPTANCE_FILE)
    live = 'specdec:acceptance_length:rate{engine_instance="gpt-oss-120b"}'
    with Load("http://%s:%d" % (ENGINE, INSTANCE["port"])) as load:
        # live acceptance as the sweep measured it: 4 tokens per step, no alert
        assert wait(lambda: [r for r in prom(live) if abs(float(r["value"][1]) - 4.0) < 0.05], 90), prom(live)
        assert not alerts("SpeculationStoppedPaying")
        out = host.run("printf '0.3,0.1\\n' > %s.tmp && mv %s.tmp %s" % ((ACCEPTANCE_FILE,) * 3))
        assert out.rc == 0, out.stderr
        t0 = time.monotonic()
        fired = wait(lambda: alerts("SpeculationStoppedPaying"), BOUND["fire_s"] + GRACE_S)
        fired_after = time.monotonic() - t0
        print("SpeculationStoppedPaying fired %.1f s after the drop (bound %.1f s)" % (fired_after, BOUND["fire_s"]))
        assert fired, "no alert within %.1f s; live acceptance %s" % (BOUND["fire_s"] + GRACE_S, prom(live))
        labels = fired[0]["labels"]
        assert (labels["host"], labels["engine_instance"], labels["severity"]) == \
            ("monitoring-engine-01", "gpt-oss-120b", "warning")
        low = float(prom(live)[0]["value"][1])
        assert low < 4.0 * (1 - SETTINGS["acceptance_margin"])
        # the fleet view says so too: live acceptance and tokens/s beside the sweep's, and the verdict
        row = fleet_view_row()
        assert row["live_vs_sweep"] == "below sweep", row
        assert row["live_acceptance_length"] < 3.2 and row["live_tokens_per_s"] > 0
        assert row["live_expected_acceptance_length"] == 4.0
        out = host.run("rm -f %s" % ACCEPTANCE_FILE)
        t1 = time.monotonic()
        resolved = wait(lambda: not alerts("SpeculationStoppedPaying"), BOUND["resolve_s"] + GRACE_S)
        resolved_after = time.monotonic() - t1
        print("resolved %.1f s after the recovery (bound %.1f s)" % (resolved_after, BOUND["resolve_s"]))
        assert resolved, "still firing %.1f s after the recovery" % (BOUND["resolve_s"] + GRACE_S)
    assert load.done > 0
    # the exporter was the only reader: no iteration went missing from its numbering
    missed = prom('specdec_engine_iterations_missed_total{engine_instance="gpt-oss-120b"}')
    assert missed and float(missed[0]["value"][1]) == 0


def test_every_dashboard_query_runs_against_the_lab_prometheus(host):
    """Every query of the shipped Grafana dashboard, with its variables at All, is accepted by the lab's
    Prometheus; those about the served instance return its series."""
    if role(host) != "monitoring":
        pytest.skip("monitoring host only")
    out = host.run("cat /usr/local/share/specdec/grafana/specdec-dashboard.json")
    assert out.rc == 0, out.stderr
    dash = json.loads(out.stdout)
    assert dash == json.loads((PROJECT / "roles" / "monitoring" / "files" / "grafana" / "specdec-dashboard.json").read_text())
    for var in dash["templating"]["list"]:
        match = var["definition"].replace('{host=~"$host"}', "")
        metric, label = match[len("label_values("):-1].split(", ")
        values = get_json(PROM + "/api/v1/label/%s/values?%s" % (label, urllib.parse.urlencode({"match[]": metric})))
        assert values["status"] == "success" and values["data"], var["name"]
    # series that exist whenever the instance is served and was sweeped (the acceptance series need
    # traffic within the window: the alert test sent it)
    must = ("specdec:acceptance_length:expected", "specdec:running_requests", "specdec:kv_cache_usage:ratio",
            "specdec_engine_ready", "specdec_sweep_output_tokens_per_second")
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$host", ".*").replace("$instance", ".*")
            result = prom(expr)
            if any(name in expr for name in must):
                assert result, (panel["title"], expr)
