"""Verify of the monitoring scenario, after converge and idempotence.

The engine host serves the TensorRT-LLM emulator (one-model EAGLE-3, every draft of up to 3 tokens
accepted: 4 tokens per step) with the exporter as the single reader of its /metrics; the monitoring
host runs Prometheus and Alertmanager from Debian's packages. Then playbooks/sweep.yml runs twice with
small settings: once with the exporter scraping (serve_bench reads the engine's iteration stats through
it, Prometheus scrapes it all along) and once with the exporter stopped and its fact away (serve_bench
drains /metrics itself); the engine's figures of every measurement must be equal (the acceptance
profile is deterministic) and what the emulator's design gives. The alert test sends requests from the
controller, lowers the emulator's acceptance at run time (SPECDEC_EMU_ACCEPTANCE_FILE), and waits
for SpeculationStoppedPaying in Alertmanager within the bound the rules promise, then for its
resolution once the file is removed. Tests run in file order.

Prometheus listens on the monitoring host's address with basic authentication over TLS (its web
configuration file: bcrypt'd users, a certificate prepare.yml made), Alertmanager on that host's loopback
with the same web configuration: the tests reach Prometheus directly and Alertmanager through an SSH
tunnel, as the viewer user, and check that a request without credentials, with a wrong password or
in plain HTTP is refused, and that the engine host cannot reach Alertmanager. The exporter listens on the
engine host's inventory address only, where Prometheus scrapes it (the firewall drops anyone else).
"""

import atexit
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
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

sys.path.insert(0, str(PROJECT / "collections"))
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R  # noqa: E402

GV = yaml.safe_load((SCENARIO / "group_vars" / "all.yml").read_text())
SETTINGS = dict((k[len("monitoring_"):], v) for k, v in GV.items() if k.startswith("monitoring_"))
BOUND = R.alert_bound(SETTINGS)
# with the exporter's poll and probe settings of group_vars/all.yml (monitoring_exporter_*), as the role reads them
WEDGED_BOUND = R.wedged_bound(SETTINGS)
ENGINE = yaml.safe_load((SCENARIO / "host_vars" / "monitoring-engine-01.yml").read_text())["monitoring_address"]
MON = yaml.safe_load((SCENARIO / "host_vars" / "monitoring-01.yml").read_text())["monitoring_address"]
EXPORTER = "http://%s:9470" % ENGINE


HV_MON = yaml.safe_load((SCENARIO / "host_vars" / "monitoring-01.yml").read_text())
USERS = HV_MON["monitoring_web_users"]
CLIENT = HV_MON["monitoring_web_client_user"]
# the certificate prepare.yml made, Prometheus's and Alertmanager's, the CA the tests verify them with
CA = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "monitoring-tls" / "web.crt"
TLS = ssl.create_default_context(cafile=str(CA))
VIEWER = ("viewer", USERS["viewer"])


def _tunnel():
    """A local port forwarded, over SSH to the monitoring host, to its 127.0.0.1:9093 (the controller
    is outside the monitoring host, where Alertmanager listens on loopback only)."""
    hv = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_variables("monitoring-01")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "StrictHostKeyChecking=no",
                             "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                             "-i", hv.get("ansible_ssh_private_key_file") or hv["ansible_private_key_file"], "-p", str(hv["ansible_port"]),
                             "-L", "%d:127.0.0.1:9093" % port,
                             "%s@%s" % (hv.get("ansible_user", "root"), hv["ansible_host"])])
    atexit.register(proc.terminate)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    return port


# Prometheus from the controller at the address it listens on; Alertmanager through the tunnel (its
# certificate names 127.0.0.1)
PROM = "https://%s:9090" % MON
AM = "https://127.0.0.1:%d" % _tunnel()
INSTANCE = yaml.safe_load((SCENARIO / "group_vars" / "spark-nodes.yml").read_text())["inference_server_instances"][0]
ACCEPTANCE_FILE = "/var/lib/specdec/models/lab-acceptance"
WEDGE_FILE = "/var/lib/specdec/models/lab-wedge"
# the test's own latency: its polling (0.5 s) and the command that writes the file
GRACE_S = 3.0


def _basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def get_json(url, data=None, auth=VIEWER):
    """A JSON answer of Prometheus or Alertmanager, over HTTPS verified with the lab's CA, as `auth`."""
    headers = {"Content-Type": "application/json", "Authorization": _basic(*auth)}
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None, headers=headers)
    with urllib.request.urlopen(req, timeout=30, context=TLS) as resp:
        return json.load(resp)


def status_of(url, auth=None):
    """The HTTP status a request gets (verified TLS), as `auth` or without credentials."""
    req = urllib.request.Request(url, headers={"Authorization": _basic(*auth)} if auth else {})
    try:
        with urllib.request.urlopen(req, timeout=10, context=TLS) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


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
    out = host.run("curl -sf %s/metrics" % EXPORTER)
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
    assert set(R.SEVERITY) <= names


def listeners(host, port):
    """The local addresses a TCP port is bound on (ss)."""
    out = host.run("ss -Hltn 'sport = :%d'" % port)
    assert out.rc == 0, out.stderr
    return sorted(line.split()[3].rsplit(":", 1)[0] for line in out.stdout.splitlines() if line.strip())


def test_every_listener_is_on_an_address_the_inventory_names(host):
    if role(host) == "engine":
        assert listeners(host, 9470) == [ENGINE]
        # from the engine host, outside the monitoring group: Alertmanager does not listen there, and
        # Prometheus, not among whose clients it is (firewall_allowed_cidrs of monitoring-01), is dropped
        out = host.run("curl -s -o /dev/null --max-time 5 http://%s:9093/" % MON)
        assert out.rc == 7, (out.rc, out.stderr)  # couldn't connect: nothing listens there
        out = host.run("curl -sk -o /dev/null --max-time 5 https://%s:9090/api/v1/targets" % MON)
        assert out.rc == 28, (out.rc, out.stderr)  # timed out: dropped by the firewall, not refused
        assert host.run("curl -s -o /dev/null --max-time 5 http://127.0.0.1:9470/metrics").rc == 7
        # from the controller, outside the monitoring group: the firewall drops the exporter's port
        # (the host-input allow-list), while the engine port, allowed from it, answers
        with pytest.raises(OSError):
            socket.create_connection((ENGINE, 9470), timeout=5).close()
        socket.create_connection((ENGINE, INSTANCE["port"]), timeout=5).close()
        rules = host.run("iptables -w -S SPECDEC-INPUT").stdout
        assert "-s %s/32 -p tcp -m tcp --dport 9470" % MON in rules, rules
    else:
        assert listeners(host, 9090) == [MON] and listeners(host, 9093) == ["127.0.0.1"]
        # the firewall runs here too (playbooks/monitoring.yml): Prometheus's port from its clients only, loaded
        # by a unit bound to docker (the lab host has it) or, on a host without docker, to multi-user.target
        rules = host.run("iptables -w -S SPECDEC-INPUT").stdout
        assert ("-A SPECDEC-INPUT -s 172.29.8.1/32 -p tcp -m tcp --dport 9090 -m comment --comment "
                '"specdec allow prometheus" -j ACCEPT') in rules, rules
        assert "--dport 9090 -m comment --comment \"specdec deny prometheus\" -j DROP" in rules, rules
        assert host.service("specdec-docker-user").is_enabled
        # from the monitoring host: its own Prometheus and Alertmanager (as a user, verifying the certificate
        # Prometheus verifies them with), and the exporter it scrapes
        for url in ("https://%s:9090/-/ready" % MON, "https://127.0.0.1:9093/-/ready"):
            out = host.run("curl -sf --max-time 10 -o /dev/null --cacert /etc/prometheus/web-tls.crt -u %s:%s %s"
                           % (VIEWER[0], VIEWER[1], url))
            assert out.rc == 0, (url, out.stderr)
        assert host.run("curl -sf --max-time 10 -o /dev/null %s/metrics" % EXPORTER).rc == 0


def test_prometheus_and_alertmanager_ask_for_a_user_over_tls(host):
    """Basic authentication over TLS, from their web configuration file: a request without credentials,
    with a wrong password or in plain HTTP is refused; every user of monitoring_web_users is let in; the
    file holds bcrypt hashes, never a password; Prometheus scrapes itself and Alertmanager as the client
    user (the targets test above finds them up)."""
    if role(host) != "monitoring":
        pytest.skip("monitoring host only")
    for base in (PROM, AM):
        ready = base + "/-/ready"
        assert status_of(ready) == 401
        assert status_of(ready, ("viewer", "wrong-password")) == 401
        assert status_of(ready, ("nobody", USERS["viewer"])) == 401
        for user, password in sorted(USERS.items()):
            assert status_of(ready, (user, password)) == 200, (base, user)
    # plain HTTP to the HTTPS listener gets no answer of Prometheus's
    plain = urllib.request.Request("http://%s:9090/api/v1/targets" % MON, headers={"Authorization": _basic(*VIEWER)})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(plain, timeout=10)
    assert exc.value.code == 400
    web = host.file("/etc/prometheus/web-config.yml")
    assert (web.user, web.group, web.mode) == ("root", "prometheus", 0o640)
    doc = yaml.safe_load(web.content_string)
    assert sorted(doc["basic_auth_users"]) == sorted(USERS)
    assert all(h.startswith("$2b$12$") for h in doc["basic_auth_users"].values())
    assert doc["tls_server_config"]["min_version"] == "TLS12"
    for password in USERS.values():
        assert password not in web.content_string
        assert password not in host.file("/etc/prometheus/prometheus.yml").content_string
    secret = host.file("/etc/prometheus/web-client.password")
    assert (secret.user, secret.group, secret.mode) == ("root", "prometheus", 0o640)
    key = host.file("/etc/prometheus/web-tls.key")
    assert (key.user, key.group, key.mode) == ("root", "prometheus", 0o640)
    for name in ("prometheus", "prometheus-alertmanager"):
        assert "--web.config.file=/etc/prometheus/web-config.yml" in host.file("/etc/default/" + name).content_string
    out = host.run("promtool check web-config /etc/prometheus/web-config.yml")
    assert out.rc == 0, out.stdout + out.stderr


def test_a_burst_of_requests_to_the_exporter_reads_the_engine_no_more(host):
    """The engine's /metrics is counted where it is reached (an iptables rule counting new connections
    to the engine's published port on the engine host): a burst of drains, scrapes and iteration reads
    adds none of its own; what is counted is the exporter's own schedule (its polls of /metrics and
    /health), far fewer than the requests."""
    if role(host) != "engine":
        pytest.skip("engine host only")
    rule = ("OUTPUT -p tcp --syn -m conntrack --ctorigdst 127.0.0.1 --ctorigdstport %d -m comment --comment specdec-burst"
            % INSTANCE["port"])
    assert host.run("iptables -w -I %s" % rule).rc == 0

    def count():
        out = host.run("iptables -w -L OUTPUT -v -n -x | grep specdec-burst")
        return int(out.stdout.split()[0])
    try:
        requests = 200
        before = count()
        paths = ["/engine/%s/metrics?reader=burst%d" % (INSTANCE["name"], i % 4) if i % 2 else "/metrics" for i in range(requests)]
        out = host.run("printf '%%s\\n' %s | xargs -P 50 -I{} curl -sf -o /dev/null '%s{}'"
                       % (" ".join("'%s'" % p for p in paths), EXPORTER))
        assert out.rc == 0, out.stderr
        during = count() - before
    finally:
        host.run("iptables -w -D %s" % rule)
    print("engine connections during a burst of %d requests to the exporter: %d" % (requests, during))
    assert during < requests / 4, during


# The sweep beside monitoring: TensorRT-LLM's /metrics is drained on read, so with the exporter on the
# host the sweep's serve_bench reads the engine's iteration stats through it (docs/draft_sweep.md).
# Small settings: draft lengths 3 and 4 (both 4 tokens per step on this profile, the sweep fact's
# expectation, so the live acceptance the alert watches never drops), no baseline, no equivalence
# probe, concurrency 1, 3 repetitions of 4 requests of 49 tokens (the context step's token and 48, a
# whole number of 4-token steps), apply off.
SWEEP = {"draft_sweep_draft_lens": [3, 4], "draft_sweep_baseline": False, "draft_sweep_equivalence": False,
         "draft_sweep_concurrency": [1], "draft_sweep_repetitions": 3, "draft_sweep_requests_per_worker": 4,
         "draft_sweep_warmup_requests_per_worker": 1, "draft_sweep_max_tokens": 49, "draft_sweep_ignore_eos": True,
         "draft_sweep_request_timeout": 30, "draft_sweep_apply": False, "draft_sweep_force": True}
SWEEP_FACT = "/etc/ansible/facts.d/specdec_sweep.fact"
EXPORTER_FACT = "/etc/ansible/facts.d/specdec_exporter.fact"
EXPORTER_FACT_AWAY = "/var/tmp/specdec_exporter.fact.away"
SWEEP_FACT_KEPT = "/var/tmp/specdec_sweep.fact.kept"
ITERATIONS = 'specdec_engine_iterations_total{engine_instance="%s"}' % INSTANCE["name"]
MISSED = 'specdec_engine_iterations_missed_total{engine_instance="%s"}' % INSTANCE["name"]


def sweep(run_id, report_dir):
    """Run playbooks/sweep.yml on the engine host; its JSON report."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    settings = dict(SWEEP, draft_sweep_run_id=run_id, draft_sweep_report_dir=report_dir)
    argv = ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "sweep.yml"), "-l", "spark-nodes",
            "-e", json.dumps(settings)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    path = Path(report_dir) / run_id / ("monitoring-engine-01-%s.json" % INSTANCE["name"])
    return json.loads(path.read_text())


def engine_figures(report):
    """{(draft length, concurrency, repetition): what the engine's iteration stats gave that run}, and
    the metrics URLs serve_bench read them from. Only figures from the engine's iteration stats: the
    throughput and latencies are wall-clock, noise between two runs, and not compared. (The mean
    iteration latency is the engine's iterLatencyMS, which the emulator takes from its step-time model.)"""
    figures, urls = {}, set()
    for m in report["selection"]["measurements"]:
        stats = dict(m["engine_stats"])
        assert "error" not in stats, m
        urls.add(stats.pop("metrics_url"))
        stats["acceptance_length"] = m["acceptance_length"]
        figures[(m["draft_len"], m["concurrency"], m["repetition"])] = stats
    return figures, urls


def exporter_serves(host):
    out = host.run("curl -sf %s/metrics" % EXPORTER)
    return out.rc == 0 and 'specdec_engine_ready{engine_instance="gpt-oss-120b",engine="trtllm"} 1' in out.stdout


def test_a_sweep_reports_the_same_engine_figures_with_the_exporter_scraping_as_without(host):
    if role(host) != "engine":
        pytest.skip("driven from the engine host's entry")
    sys.path.insert(0, str(PROJECT / "lab" / "emulator"))
    from specdec_emulator.clock import Profile

    host.run("rm -f %s" % ACCEPTANCE_FILE)
    profile = Profile.load({k: str(v) for k, v in INSTANCE["env"].items() if k != "SPECDEC_EMU_ACCEPTANCE_FILE"})
    # every draft position is accepted with probability 0 or 1: the emulator's acceptance draws are
    # deterministic, so the engine's figures of two sweeps must be equal, not merely close
    assert all(p in (0.0, 1.0) for p in profile.acceptance), profile.acceptance
    fact_before = host.file(SWEEP_FACT).content_string
    kept = host.run("cp %s %s" % (SWEEP_FACT, SWEEP_FACT_KEPT))
    assert kept.rc == 0, kept.stderr
    assert host.service("specdec-exporter").is_running and host.file(EXPORTER_FACT).exists
    try:
        with tempfile.TemporaryDirectory() as out:
            # 1. the exporter reads the engine and Prometheus scrapes it
            iterations0 = float(prom(ITERATIONS)[0]["value"][1])
            missed0 = float(prom(MISSED)[0]["value"][1])
            t0 = time.monotonic()
            with_exporter = sweep("monitoring-with-exporter", out)
            took = time.monotonic() - t0
            print("sweep with the exporter scraping: %.1f s" % took)
            figures_with, urls_with = engine_figures(with_exporter)
            # serve_bench read the engine's stats through the exporter, as the draft_sweep reader
            assert urls_with == {"%s/engine/%s/metrics?reader=draft_sweep" % (EXPORTER, INSTANCE["name"])}
            measured = sum(f["iterations"] for f in figures_with.values())
            # the exporter read every iteration too (the sweep's, and its warm-ups): monitoring really
            # read the engine while the sweep ran, Prometheus scraped it all along, and no iteration
            # went to another reader
            assert wait(lambda: float(prom(ITERATIONS)[0]["value"][1]) >= iterations0 + measured, 30), \
                (prom(ITERATIONS), iterations0, measured)
            window = "%ds" % (int(time.monotonic() - t0) + 1)
            scrapes = prom('count_over_time(up{job="specdec-exporter"}[%s])' % window)
            assert scrapes and float(scrapes[0]["value"][1]) >= 2, scrapes
            assert float(prom('min_over_time(up{job="specdec-exporter"}[%s])' % window)[0]["value"][1]) == 1
            assert float(prom(MISSED)[0]["value"][1]) == missed0

            # 2. no exporter and no exporter fact: serve_bench drains the engine's /metrics itself
            off = host.run("systemctl stop specdec-exporter && mv %s %s" % (EXPORTER_FACT, EXPORTER_FACT_AWAY))
            assert off.rc == 0, off.stderr
            alone = sweep("monitoring-alone", out)
            figures_alone, urls_alone = engine_figures(alone)
            assert urls_alone == {"http://127.0.0.1:%d/metrics" % INSTANCE["port"]}
    finally:
        host.run("test -f %s && mv %s %s" % (EXPORTER_FACT_AWAY, EXPORTER_FACT_AWAY, EXPORTER_FACT))
        host.run("systemctl start specdec-exporter")
        # the sweep fact as prepare.yml wrote it: the expectation the alert test compares with
        host.run("cp %s %s && rm -f %s" % (SWEEP_FACT_KEPT, SWEEP_FACT, SWEEP_FACT_KEPT))
    print("engine figures with the exporter: %s" % json.dumps(sorted(figures_with.items())))
    print("engine figures alone:             %s" % json.dumps(sorted(figures_alone.items())))
    assert figures_with == figures_alone
    # and they are what the emulator's design gives: per request one context step and then
    # (max_tokens - 1) / tokens-per-step generation steps, at every draft length and repetition
    expected = {}
    for k in SWEEP["draft_sweep_draft_lens"]:
        per_step = profile.expected_tokens(k)
        assert (SWEEP["draft_sweep_max_tokens"] - 1) % per_step == 0, (k, per_step)
        per_request = 1 + int((SWEEP["draft_sweep_max_tokens"] - 1) // per_step)
        for rep in range(SWEEP["draft_sweep_repetitions"]):
            expected[(k, 1, rep)] = SWEEP["draft_sweep_requests_per_worker"] * per_request
    assert dict((key, f["iterations"]) for key, f in figures_alone.items()) == expected
    # TensorRT-LLM 1.2.0rc6 one-model EAGLE-3: no specDecodingStats in any iteration
    assert all(f["iterations_without_spec_stats"] == f["iterations"] and f["acceptance_length"] is None
               for f in figures_alone.values())
    # the exporter serves again, as the single reader, and Prometheus scrapes it
    assert wait(lambda: exporter_serves(host), 30)
    assert host.service("specdec-exporter").is_running
    assert host.file(EXPORTER_FACT).exists and host.file(SWEEP_FACT).content_string == fact_before
    assert wait(lambda: [r for r in prom('up{job="specdec-exporter"}') if r["value"][1] == "1"], 30)


def fleet_view_row():
    """The engine's row of the fleet view (playbooks/health.yml) with the live columns from Prometheus."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        # the view asks Prometheus as the viewer, verifying its certificate (the password in a file, as from Vault)
        extra = Path(out) / "prometheus.json"
        extra.write_text(json.dumps({"fleet_view_prometheus_url": PROM, "fleet_view_prometheus_user": VIEWER[0],
                                     "fleet_view_prometheus_password": VIEWER[1], "fleet_view_prometheus_ca": str(CA),
                                     "fleet_view_report_dir": out}))
        argv = ["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "health.yml"), "-l", "spark-nodes",
                "-e", "@%s" % extra]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        assert "LIVE VS SWEEP" in proc.stdout
        assert VIEWER[1] not in proc.stdout + proc.stderr
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


def test_a_wedged_engine_fires_its_alert_within_the_bound_and_a_restart_serves_again(host):
    """Last, as it restarts the engine: under load the engine wedges (SPECDEC_EMU_WEDGE_FILE: /health still 200,
    requests accepted, no token); SpecdecEngineWedged fires within wedged_bound() of the wedge, which the exporter's
    progress probe shows (TensorRT-LLM's iteration stats of a wedged engine are as empty as an idle one's); only a
    restart serves again, and the alert resolves."""
    if role(host) != "engine":
        pytest.skip("driven from the engine host's entry")
    host.run("rm -f %s" % WEDGE_FILE)
    assert not alerts("SpecdecEngineWedged")
    tokens = 'specdec:generated_tokens:rate{engine_instance="gpt-oss-120b"}'
    url = "http://%s:%d" % (ENGINE, INSTANCE["port"])
    try:
        with Load(url):
            assert wait(lambda: [r for r in prom(tokens) if float(r["value"][1]) > 0], 90), prom(tokens)
            out = host.run("touch %s" % WEDGE_FILE)
            assert out.rc == 0, out.stderr
            t0 = time.monotonic()
            fired = wait(lambda: alerts("SpecdecEngineWedged"), WEDGED_BOUND["fire_s"] + GRACE_S)
            fired_after = time.monotonic() - t0
            print("SpecdecEngineWedged fired %.1f s after the wedge (bound %.1f s)" % (fired_after, WEDGED_BOUND["fire_s"]))
            assert fired, "no alert within %.1f s: %s" % (WEDGED_BOUND["fire_s"] + GRACE_S, {
                q: prom(q) for q in (tokens, "specdec_engine_progress", "specdec:running_requests")})
            labels = fired[0]["labels"]
            assert (labels["host"], labels["engine_instance"], labels["severity"]) == \
                ("monitoring-engine-01", "gpt-oss-120b", "critical")
            # what makes it a wedge, not a crash: the engine is up and ready, and answers /health
            assert host.run("curl -fsS -o /dev/null http://127.0.0.1:%d/health" % INSTANCE["port"]).rc == 0
            assert [r for r in prom('specdec_engine_ready{engine_instance="gpt-oss-120b"}') if r["value"][1] == "1"]
            assert not alerts("SpecdecEngineDown") and not alerts("SpecdecEngineNotReady")
    finally:
        out = host.run("rm -f %s && systemctl restart specdec-%s" % (WEDGE_FILE, INSTANCE["name"]))
        assert out.rc == 0, out.stderr
    # restarted: it serves again, and with tokens flowing the alert resolves
    assert wait(lambda: host.run("curl -fsS -o /dev/null http://127.0.0.1:%d/health" % INSTANCE["port"]).rc == 0, 120)
    with Load(url) as load:
        resolved = wait(lambda: not alerts("SpecdecEngineWedged"), WEDGED_BOUND["fire_s"] + 60)
    assert resolved, "still firing after the restart"
    assert load.done > 0
