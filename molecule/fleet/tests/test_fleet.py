"""Rollouts on the three-host fleet, with a probe sending requests to every engine meanwhile.

1. A draft-length change reaches every host, a canary first, one batch at a time; a request fails
   only on a host inside its own restart window.
2. A change whose engine crashes at start stops at the canary: the canary is back on its previous
   configuration and serving, the other hosts were never touched, and not one request to them failed.
3. Through the front door (fleet-gw, HAProxy): streamed requests during both rollouts all complete, since
   each host is drained at the gateway before its engine restarts and back only after its health gate;
   no request reached a host while it was drained; keys, unknown models and TLS are checked at the edge.
4. Near the end (it leaves the swept host's sweep fact behind): a small draft sweep of one host behind the front
   door. The gateway's view of that host is sampled while it runs: drained before its first restart, drained through
   every restart, ready and UP once the instance that stays serves again; the streams through the front door all
   complete, and the other hosts serve them meanwhile.
5. Last (it leaves every host on a new engine): an engine upgrade under a recorded sweep. The canary is swept again
   on the new engine before any other host changes, and the other hosts serve its winner with the upgrade; no
   stream through the front door fails. Then the tune loop's play (playbooks/retune.yml, what the rulebook runs when
   speculation stops paying on a host): its guards let it re-tune one host, the host is swept again and its new
   winner rolled out to the class, canary first, with no failed stream; a second alert within the cool-down is
   refused.
"""

import calendar
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
import urllib.error
import urllib.request

import http.client
import ssl

import pytest
import testinfra
import yaml

PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
sys.path.insert(0, os.path.join(PROJECT, "lab"))
import lab  # noqa: E402
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
HOSTS = ["fleet-01", "fleet-02", "fleet-03"]
NETWORK = "molecule-fleet"
PORT = 8000
INSTANCE = "gpt-oss-120b"
CLASS_VARS = os.path.join(PROJECT, "inventories", "lab", "group_vars", "b200-nodes", "host_class.yml")
# The probe is bounded: it stops when the rollout ends, and in any case after this long.
PROBE_LIMIT_S = 300
PROBE_INTERVAL_S = 0.25
SECRET = "hf_fleet_secret_token_5550123"
GATEWAY = "fleet-gw"
GATEWAY_PORT = 8443
GATEWAY_SECRETS = os.path.join(PROJECT, "lab", ".cache", "gateway")
GATEWAY_THREADS = 4
GATEWAY_SOCKET = "/run/haproxy/specdec-admin.sock"
# srv_admin_state bits of `show servers state`: forced and inherited drain (HAProxy's SRV_ADMF_FDRAIN, _IDRAIN)
ADMIN_DRAIN_BITS = 0x08 | 0x10
# how often the gateway's view of a server is sampled while a play runs
WATCH_INTERVAL_S = 0.5
# the gateway probes of both rollouts, kept for the tests that read them
GATEWAY_PROBES = {}


def host(name):
    # Lab hosts are containers on this machine: docker exec is the quickest way in.
    return testinfra.get_host("docker://%s" % name)


def lab_ip(name):
    out = lab.lab_ip(name, NETWORK)
    assert out.startswith("172.29.6."), out
    return out


class Probe:
    """One thread per host: a short completion every PROBE_INTERVAL_S, each outcome timed."""

    def __init__(self, hosts):
        self.targets = {h: "http://%s:%d/v1/completions" % (lab_ip(h), PORT) for h in hosts}
        self.records = {h: [] for h in hosts}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(h,), daemon=True) for h in hosts]

    def _run(self, name):
        body = json.dumps({"model": INSTANCE, "prompt": "fleet probe", "max_tokens": 2}).encode()
        deadline = time.monotonic() + PROBE_LIMIT_S
        while not self.stop.is_set() and time.monotonic() < deadline:
            start = time.time()
            try:
                req = urllib.request.Request(self.targets[name], data=body,
                                             headers={"Content-Type": "application/json"})
                # generous: a slow answer on a loaded machine is not a failed request
                with urllib.request.urlopen(req, timeout=30) as resp:
                    ok, err = resp.status == 200 and bool(json.load(resp).get("choices")), None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                ok, err = False, repr(exc)
            self.records[name].append((start, time.time(), ok, err))
            self.stop.wait(PROBE_INTERVAL_S)

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def failures(self, name):
        return [r for r in self.records[name] if not r[2]]


def api_key():
    with open(os.path.join(GATEWAY_SECRETS, "api-key"), encoding="utf-8") as fh:
        return fh.read().strip()


def gateway_call(method, path, body=None, key=None, context=None, stream=False):
    """One request to the front door over TLS verified with the lab CA: (status, headers, body text)."""
    ctx = context or ssl.create_default_context(cafile=os.path.join(GATEWAY_SECRETS, "ca.crt"))
    conn = http.client.HTTPSConnection(lab_ip(GATEWAY), GATEWAY_PORT, context=ctx, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = "Bearer %s" % key
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        resp = conn.getresponse()
        # HAProxy sends header names in lower case: resp.headers looks them up in any case
        return resp.status, resp.headers, resp.read().decode()
    finally:
        conn.close()


class GatewayProbe:
    """GATEWAY_THREADS threads streaming chat completions through the gateway back to back: each stream is
    read to its end; a failed status, a broken connection or a stream without its last chunk and [DONE] fail."""

    def __init__(self, limit_s=PROBE_LIMIT_S):
        self.limit_s = limit_s
        self.key = api_key()
        # once, not per request: the address is a `docker inspect`, and the CA a file to parse
        self.address = lab_ip(GATEWAY)
        self.context = ssl.create_default_context(cafile=os.path.join(GATEWAY_SECRETS, "ca.crt"))
        self.records = []  # (start, end, ok, err, server)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(GATEWAY_THREADS)]

    def _one(self):
        body = {"model": INSTANCE, "messages": [{"role": "user", "content": "gateway probe"}], "max_tokens": 48,
                "stream": True}
        conn = http.client.HTTPSConnection(self.address, GATEWAY_PORT, context=self.context, timeout=60)
        try:
            conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json", "Authorization": "Bearer %s" % self.key})
            resp = conn.getresponse()
            server = resp.getheader("X-Gateway-Server")
            if resp.status != 200:
                return False, "status %d: %s" % (resp.status, resp.read()[:200]), server
            finish, done, chunks = None, False, 0
            try:
                for raw in resp:
                    line = raw.decode().strip()
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: "):
                        chunks += 1
                        for choice in json.loads(line[6:]).get("choices") or []:
                            finish = choice.get("finish_reason") or finish
            except Exception as exc:  # pylint: disable=broad-except  # a stream cut or stalled: failed, its server known
                return False, "stream broken after %d chunk(s): %r" % (chunks, exc), server
            if not done or finish is None:
                return False, "truncated stream: %d chunk(s), finish %r, [DONE] %s" % (chunks, finish, done), server
            return True, None, server
        finally:
            conn.close()

    def _run(self):
        deadline = time.monotonic() + self.limit_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            start = time.time()
            try:
                ok, err, server = self._one()
            except Exception as exc:  # pylint: disable=broad-except  # every failure is a record, never a dead thread
                ok, err, server = False, repr(exc), None
            with self.lock:
                self.records.append((start, time.time(), ok, err, server))
            self.stop.wait(0.05)

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def failures(self):
        return [r for r in self.records if not r[2]]


def instances(**changes):
    with open(CLASS_VARS, encoding="utf-8") as fh:
        inst = yaml.safe_load(fh)["inference_server_instances"]
    assert [i["name"] for i in inst] == [INSTANCE]
    inst[0].update(changes)
    return inst


def rollout(tmp_path, run_id, inst, flags=(), **extra_vars):
    extra = tmp_path / ("%s.yml" % run_id)
    extra.write_text(yaml.safe_dump(dict(extra_vars, inference_server_instances=inst)))
    proc = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, os.path.join(PROJECT, "playbooks", "rollout.yml"),
         "-e", "@%s" % extra, "-e", "rollout_run_id=%s" % run_id, "-e", "fleet_report_dir=%s" % tmp_path]
        + list(flags), capture_output=True, text=True, timeout=600, check=False)
    summary = tmp_path / ("rollout-%s.json" % run_id)
    assert summary.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads(summary.read_text())


def engine_files(h):
    """What a restart would change on a host: the files' checksums and the container's start."""
    out = h.check_output(
        "sha256sum /etc/specdec/{0}/engine.yaml /etc/specdec/{0}/engine.env /etc/systemd/system/specdec-{0}.service"
        " | cut -d' ' -f1; docker inspect --format '{{{{.State.StartedAt}}}}' specdec-{0}".format(INSTANCE))
    return dict(zip(["yaml", "env", "unit", "started"], out.split()))


def draft_len(h):
    cfg = yaml.safe_load(h.file("/etc/specdec/%s/engine.yaml" % INSTANCE).content_string)
    return cfg["speculative_config"]["max_draft_len"]


@pytest.fixture(scope="module")
def tmp_path(tmp_path_factory):
    return tmp_path_factory.mktemp("fleet")


def input_rules(name):
    return host(name).run("iptables -w -S SPECDEC-INPUT").stdout


def test_a_run_limited_to_the_seed_changes_nothing_and_keeps_its_peers_rules():
    """`site.yml -l fleet-01` (the model cache's peer seed) after the full converge: nothing changes, and the seed's
    rules still let in the peers that copy from it, which are not in the play (the rules come from the inventory).
    The full play after it changes nothing either: the next test runs it (in check mode, from an installed
    collection) and finds nothing to change on any host."""
    seed = HOSTS[0]
    before = {n: engine_files(host(n)) for n in HOSTS}
    rules = input_rules(seed)
    # the recap read as printed without colour (molecule forces colour on every ansible-playbook under it)
    env = dict({k: v for k, v in os.environ.items() if k != "ANSIBLE_FORCE_COLOR"}, ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(PROJECT, "site.yml"), "-l", seed],
                          capture_output=True, text=True, timeout=900, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M))
    # the limited play reaches other hosts only to read them (the rollout's preflight, the peers' facts)
    assert recap.get(seed) == "0" and set(recap.values()) == {"0"}, proc.stdout[-4000:]
    assert input_rules(seed) == rules
    for peer in HOSTS[1:]:
        assert ('-A SPECDEC-INPUT -s %s/32 -p tcp -m tcp --dport' % lab_ip(peer)) in rules, (peer, rules)
    assert "specdec allow model-cache-peer" in rules, rules
    assert {n: engine_files(host(n)) for n in HOSTS} == before


def test_the_front_door_and_the_monitoring_host_are_firewalled():
    """The gateway's front door from its clients only (firewall_allowed_cidrs: the lab network), the rest of the
    port dropped; the monitoring host, whose listeners all keep loopback, gets its chain too; both load it from
    the firewall's unit."""
    rules = input_rules(GATEWAY)
    assert ('-A SPECDEC-INPUT -s 172.29.6.0/24 -p tcp -m tcp --dport %d -m comment --comment "specdec allow gateway" '
            '-j ACCEPT' % GATEWAY_PORT) in rules, rules
    assert '--dport %d -m comment --comment "specdec deny gateway" -j DROP' % GATEWAY_PORT in rules, rules
    assert input_rules("fleet-mon").splitlines()[-1] == "-A SPECDEC-INPUT -j RETURN"
    for name in (GATEWAY, "fleet-mon"):
        h = host(name)
        assert h.service("specdec-docker-user").is_enabled and h.service("specdec-docker-user").is_running, name
        assert h.run("iptables -w -S INPUT").stdout.count("-A INPUT -j SPECDEC-INPUT") == 1, name


def test_an_installed_collection_runs_site_in_check_mode_from_a_users_directory(tmp_path_factory):
    """As a user who installed the built tarball: ansible-core alone (no other collection on the search
    path), their own directory, ansible.cfg and playbook importing specdec.serve.site, in check mode
    against the converged fleet. Nothing would change, nothing restarts, and the reports are written
    under that directory, none inside the installed collection."""
    work = tmp_path_factory.mktemp("installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    subprocess.run(["ansible-galaxy", "collection", "build", PROJECT, "--output-path", str(work / "dist")],
                   check=True, capture_output=True, text=True, env=env, cwd=work)
    (tarball,) = (work / "dist").glob("specdec-serve-*.tar.gz")
    subprocess.run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(work / "collections"),
                    str(tarball)], check=True, capture_output=True, text=True, env=env, cwd=work)
    installed = work / "collections" / "ansible_collections" / "specdec" / "serve"
    shipped = sorted(str(p.relative_to(installed)) for p in installed.rglob("*"))
    user = work / "user"
    user.mkdir()
    # a user's settings, and the lab's: its hosts get new SSH host keys whenever they are made again
    (user / "ansible.cfg").write_text(
        "[defaults]\ncollections_path = %s\ncollections_scan_sys_path = False\n"
        "force_valid_group_names = ignore\nhost_key_checking = False\ninterpreter_python = auto_silent\n"
        "[ssh_connection]\npipelining = True\n"
        "ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null\n"
        % (work / "collections"))
    (user / "site.yml").write_text("---\n- name: Serve with speculative decoding\n"
                                   "  ansible.builtin.import_playbook: specdec.serve.site\n")
    env["ANSIBLE_CONFIG"] = str(user / "ansible.cfg")
    listed = json.loads(subprocess.run(["ansible-galaxy", "collection", "list", "--format", "json"], check=True,
                                       capture_output=True, text=True, env=env, cwd=user).stdout)
    visible = {name for path in listed.values() for name in path if not name.startswith("ansible._")}
    assert visible == {"specdec.serve"}, listed
    before = {n: engine_files(host(n)) for n in HOSTS}
    # the scenario's inventory has a vaulted file: the user gives their vault password as any user would
    vault = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vault-password")
    proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, "site.yml", "--check", "--vault-password-file", vault],
                          capture_output=True,
                          text=True, env=env, cwd=user, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M))
    assert sorted(recap) == sorted(HOSTS + [GATEWAY]) and set(recap.values()) == {"0"}, proc.stdout[-4000:]
    assert "0 of 3 host(s) to change" in proc.stdout
    assert {n: engine_files(host(n)) for n in HOSTS} == before
    (summary,) = (user / "reports").glob("rollout-*.json")
    assert sorted(json.loads(summary.read_text())["hosts"]) == HOSTS
    assert sorted(str(p.relative_to(installed)) for p in installed.rglob("*")) == shipped


@pytest.fixture(scope="module")
def draft_change(tmp_path):
    before = {n: draft_len(host(n)) for n in HOSTS}
    assert len(set(before.values())) == 1, before  # after converge: the profile's 3 everywhere
    new = before[HOSTS[0]] % 6 + 1
    with Probe(HOSTS) as probe, GatewayProbe() as GATEWAY_PROBES["draft"]:
        proc, summary = rollout(tmp_path, "draft%d" % new, instances(speculative={
            "method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": new}))
    return proc, summary, probe, new


def test_draft_change_reaches_every_host(draft_change):
    proc, summary, _, new = draft_change
    assert proc.returncode == 0, proc.stdout[-4000:]
    for n in HOSTS:
        assert summary["hosts"][n]["status"]["status"] == "updated"
        (inst,) = summary["hosts"][n]["instances"]
        assert inst["health"] == "ready" and int(inst["max_draft_len"]) == new
        assert draft_len(host(n)) == new


def test_canary_first_then_one_batch_at_a_time(draft_change):
    _, summary, _, _ = draft_change
    windows = sorted((float(summary["hosts"][n]["status"]["started"]), float(summary["hosts"][n]["status"]["finished"]), n)
                     for n in HOSTS)
    assert windows[0][2] == "fleet-01"
    for (_, end, _), (start, _, _) in zip(windows, windows[1:]):
        assert end <= start  # 25% of three hosts: batches of one, never two hosts restarting at once


def test_requests_fail_only_inside_the_restarting_hosts_window(draft_change):
    _, summary, probe, _ = draft_change
    for n in HOSTS:
        st = summary["hosts"][n]["status"]
        start, end = float(st["started"]), float(st["finished"])
        outside = [r for r in probe.failures(n) if r[1] < start or r[0] > end]
        assert outside == [], (n, outside[:3])
        assert sum(1 for r in probe.records[n] if r[2]) >= 10, n  # the probe really ran


def test_the_table_is_printed(draft_change):
    proc, _, _, new = draft_change
    assert "Rollout draft%d done" % new in proc.stdout
    assert "HOST" in proc.stdout and "STATUS" in proc.stdout and "updated" in proc.stdout


def served_by(name):
    return "%s:%s" % (name, INSTANCE)


def check_no_request_while_drained(gw, windows):
    """No request that started after a host was drained and ended before it was back was served by it
    (windows: {host: (drained, ready)}), and each host did serve outside its window. Returns the requests inside."""
    inside_all = []
    for n, (drained, ready) in windows.items():
        inside = [r for r in gw.records if r[0] > drained and r[1] < ready]
        inside_all += inside
        assert [r for r in inside if r[4] == served_by(n)] == [], (n, [r for r in inside if r[4] == served_by(n)][:3])
        assert [r for r in gw.records if r[4] == served_by(n)], n  # it did serve, outside its drain
    assert inside_all  # the probe really sent requests while hosts were drained
    return inside_all


def check_drained_hosts_took_no_request(summary, gw, names):
    """The rollout summary's drain and ready times of each host, checked against the probe's requests."""
    windows = {}
    for n in names:
        record = summary["hosts"][n]["status"].get("gateway")
        assert record and record["drained_at"] and record["ready_at"], (n, summary["hosts"][n]["status"])
        drained, ready = float(record["drained_at"]), float(record["ready_at"])
        assert drained < ready and record["drain_timed_out"] == [], (n, record)
        windows[n] = (drained, ready)
    check_no_request_while_drained(gw, windows)


def test_front_door_dropped_no_request_in_the_draft_rollout(draft_change):
    gw = GATEWAY_PROBES["draft"]
    assert gw.failures() == [], (len(gw.failures()), gw.failures()[:3])
    assert len(gw.records) >= 20, len(gw.records)


def test_each_drained_host_took_no_new_request_until_it_was_back(draft_change):
    check_drained_hosts_took_no_request(draft_change[1], GATEWAY_PROBES["draft"], HOSTS)


@pytest.fixture(scope="module")
def poisoned(draft_change, tmp_path):
    assert draft_change[0].returncode == 0
    before = {n: engine_files(host(n)) for n in HOSTS}
    inst = instances(speculative={"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3",
                                  "max_draft_len": draft_change[3] % 6 + 1},
                     env={"SPECDEC_EMU_FAULT": "crash_at_start"})
    # at -vvvv with --diff and a secret in the environment: the failure path must not show it
    with Probe(HOSTS) as probe, GatewayProbe() as GATEWAY_PROBES["poisoned"]:
        proc, summary = rollout(tmp_path, "poisoned", inst, flags=("-vvvv", "--diff"),
                                inference_server_secret_env={"HF_TOKEN": SECRET})
    after = {n: engine_files(host(n)) for n in HOSTS}
    return proc, summary, probe, before, after, draft_change[3]


def test_no_secret_in_the_failed_rollout_nor_on_any_host(poisoned, tmp_path):
    """The canary's env file held the secret and was rolled back: no output, report or file keeps it."""
    proc = poisoned[0]
    assert len(proc.stdout) > 100000  # -vvvv did print the tasks' arguments and results
    assert SECRET not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):  # the reports; poisoned.yml is the input that carried the secret
        if path.is_file() and path.name != "poisoned.yml":
            assert SECRET.encode() not in path.read_bytes(), path
    for n in HOSTS:
        h = host(n)
        found = h.run("grep -rlsF %s /etc/specdec /etc/ansible/facts.d /etc/systemd/system /var/lib/specdec /root /tmp"
                      % SECRET).stdout.split()
        assert found == [], (n, found)
        assert SECRET not in h.check_output("ps -eo args"), n


def test_poisoned_change_stops_after_the_canary(poisoned):
    proc, summary, _, _, _, _ = poisoned
    assert proc.returncode != 0
    assert "stopped at fleet-01" in proc.stdout + proc.stderr  # the failure goes to stderr
    assert summary["hosts"]["fleet-01"]["status"]["status"] == "rolled back"
    assert summary["hosts"]["fleet-01"]["status"]["serving"] is True
    assert "crash" in summary["hosts"]["fleet-01"]["status"]["error"].lower() or \
        "illegal memory access" in summary["hosts"]["fleet-01"]["status"]["error"]
    for n in HOSTS[1:]:
        assert summary["hosts"][n]["status"]["status"] == "untouched"


def test_canary_is_back_on_its_previous_configuration_and_serving(poisoned):
    _, _, _, before, after, running = poisoned
    canary = host("fleet-01")
    for key in ("yaml", "env", "unit"):
        assert after["fleet-01"][key] == before["fleet-01"][key], key
    assert after["fleet-01"]["started"] != before["fleet-01"]["started"]  # it was restarted, twice
    assert draft_len(canary) == running
    assert "SPECDEC_EMU_FAULT" not in canary.file("/etc/specdec/%s/engine.env" % INSTANCE).content_string
    assert canary.service("specdec-%s" % INSTANCE).is_running
    assert canary.run("curl -fsS http://127.0.0.1:%d/health" % PORT).rc == 0


def test_other_hosts_were_never_touched(poisoned):
    _, _, _, before, after, _ = poisoned
    for n in HOSTS[1:]:
        assert after[n] == before[n], n


def test_no_failed_request_on_hosts_that_were_not_restarted(poisoned):
    _, _, probe, _, _, _ = poisoned
    for n in HOSTS[1:]:
        assert probe.failures(n) == [], (n, probe.failures(n)[:3])
        assert sum(1 for r in probe.records[n] if r[2]) >= 10, n


def test_front_door_dropped_no_request_in_the_poisoned_rollout(poisoned):
    """The canary was drained before its poisoned restart and stayed drained until its rollback served."""
    gw = GATEWAY_PROBES["poisoned"]
    assert gw.failures() == [], (len(gw.failures()), gw.failures()[:3])
    assert len(gw.records) >= 20, len(gw.records)
    check_drained_hosts_took_no_request(poisoned[1], gw, ["fleet-01"])
    for n in HOSTS[1:]:
        assert "gateway" not in poisoned[1]["hosts"][n]["status"], n  # never drained


# One command to the gateway's runtime API, on the gateway host: its answer (gateway_runtime and GatewayWatch's sampler).
ASK_SCRIPT = """\
import socket
def ask(cmd):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(%r); s.sendall(cmd.encode() + b'\\n')
        return b''.join(iter(lambda: s.recv(65536), b'')).decode()
    finally:
        s.close()
""" % GATEWAY_SOCKET


def gateway_runtime(*commands):
    """Commands on the gateway's runtime API, sent on the gateway host: their answers, in order."""
    script = ASK_SCRIPT + "import sys\nfor cmd in sys.argv[1:]:\n    sys.stdout.write(ask(cmd) + '\\0')\n"
    out = subprocess.run(["docker", "exec", GATEWAY, "python3", "-c", script] + list(commands),
                         check=True, capture_output=True, text=True, timeout=60).stdout
    answers = out.split("\0")[:len(commands)]
    assert len(answers) == len(commands), out[-500:]
    return answers


def parse_stat(text):
    """show stat: {server: (status, sessions, total)}."""
    lines = text.splitlines()
    head = lines[0][2:].split(",")
    rows = [dict(zip(head, line.split(","))) for line in lines[1:] if line]
    return dict((r["svname"], (r["status"], int(r["scur"] or 0), int(r["stot"] or 0)))
                for r in rows if r.get("type") == "2")


def parse_admin(text):
    """show servers state: {server: 'drain' or 'ready' (or the other admin flags, as a number)}."""
    header, out = None, {}
    for line in text.splitlines():
        if line.startswith("# "):
            header = line[2:].split()
        elif header and len(line.split()) >= len(header) - 2:
            row = dict(zip(header, line.split()))
            flags = int(row["srv_admin_state"])
            out[row["srv_name"]] = "drain" if flags & ADMIN_DRAIN_BITS else "ready" if flags == 0 else "admin %d" % flags
    return out


def gateway_servers():
    """The gateway's runtime API (show stat), read on the gateway host: {server: (status, sessions, total)}."""
    return parse_stat(gateway_runtime("show stat")[0])


# GatewayWatch's sampler, run on the gateway host by one `docker exec` for the whole watch (one exec per sample, three
# watches at two samples a second, took most of a core of the 2-core lab machine): each sample is a JSON line of both
# runtime API answers and the sample's start and end (the gateway shares the lab machine's clock); it stops at its
# limit or when its stdin closes (the watch ended).
WATCH_SCRIPT = ASK_SCRIPT + """\
import json, os, sys, threading, time
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
interval, deadline = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    start = time.time()
    try:
        out = {'stat': ask('show stat'), 'state': ask('show servers state')}
    except Exception as exc:
        out = {'error': repr(exc)}
    out.update(start=start, end=time.time())
    sys.stdout.write(json.dumps(out) + '\\n')
    sys.stdout.flush()
    time.sleep(interval)
"""


class GatewayWatch:
    """The gateway's view of one server, sampled every WATCH_INTERVAL_S on the gateway host: (start, end, admin,
    status), admin from show servers state ('drain', 'ready'), status from show stat (UP, DRAIN, DOWN...); a failed
    read is admin None."""

    def __init__(self, server, limit_s=PROBE_LIMIT_S):
        self.limit_s = limit_s
        self.server = server
        self.samples = []
        self.proc = None
        self.first = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, line):
        try:
            out = json.loads(line)
        except ValueError:
            return None
        if "error" in out:
            return (out["start"], out["end"], None, out["error"])
        try:
            admin, status = parse_admin(out["state"]).get(self.server), parse_stat(out["stat"])[self.server][0]
        except Exception as exc:  # pylint: disable=broad-except  # a failed read is a sample, never a dead thread
            admin, status = None, repr(exc)
        return (out["start"], out["end"], admin, status)

    def _run(self):
        for line in self.proc.stdout:
            sample = self._sample(line)
            if sample is not None:
                self.samples.append(sample)
                self.first.set()
        self.first.set()

    def __enter__(self):
        self.proc = subprocess.Popen(["docker", "exec", "-i", GATEWAY, "python3", "-c", WATCH_SCRIPT,
                                      str(WATCH_INTERVAL_S), str(self.limit_s)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.thread.start()
        assert self.first.wait(60) and self.samples, "the gateway watch of %s took no sample in 60 s" % self.server
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.thread.join(60)

    def read(self):
        return [s for s in self.samples if s[2] is not None]


def test_every_engine_is_back_up_at_the_gateway(poisoned):
    servers = gateway_servers()
    assert sorted(servers) == sorted(served_by(n) for n in HOSTS), servers
    assert all(row[0] == "UP" for row in servers.values()), servers


def test_fleet_view_after_the_stopped_rollout(poisoned, tmp_path):
    proc = subprocess.run(
        ["ansible-playbook", "-i", INVENTORY, os.path.join(PROJECT, "playbooks", "health.yml"),
         "-e", "fleet_view_report_dir=%s" % tmp_path],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    view = json.loads((tmp_path / "fleet.json").read_text())
    assert sorted(view["hosts"]) == HOSTS
    for row in view["rows"]:
        assert row["health"] == "ready", row
        assert int(row["draft_len"]) == poisoned[5] and row["speculative"] == "eagle3"
        assert row["image"] == "specdec-lab/tensorrt-llm-emulator:1.1.0rc0"
        assert row["engine"] == "trtllm 1.1.0rc0"
        assert row["gateway"] == "fleet-gw: UP (0 in flight)", row
    assert [s["server"] for s in view["gateways"]["fleet-gw"]["servers"]] == [served_by(n) for n in HOSTS]
    for name in ("HOST", "INSTANCE", "IMAGE", "ENGINE", "MODEL", "SPEC", "DRAFT", "HEALTH", "LAST SWEEP", "GATEWAY"):
        assert name in proc.stdout


@pytest.fixture(scope="module")
def rerun(poisoned, tmp_path):
    """The draft change again, now that every host runs it: nothing to change anywhere."""
    before = {n: engine_files(host(n)) for n in HOSTS}
    running = poisoned[5]
    proc, summary = rollout(tmp_path, "rerun", instances(speculative={
        "method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": running}))
    return proc, summary, before, {n: engine_files(host(n)) for n in HOSTS}


def test_a_rollout_with_nothing_to_change_runs_no_batch(rerun):
    proc, summary, before, after = rerun
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "0 of 3 host(s) to change" in proc.stdout
    assert "Roll out in health-gated batches" in proc.stdout and "skipping: no hosts matched" in proc.stdout
    for n in HOSTS:
        assert summary["hosts"][n]["status"]["status"] == "unchanged", n
        assert summary["hosts"][n]["status"]["serving"] is True, n
        assert after[n] == before[n], n  # same files, same container start: nothing restarted


def test_a_drifted_host_is_the_only_one_rolled(rerun, poisoned, tmp_path):
    """A host whose engine file was edited by hand is found by the preflight and rolled alone."""
    drifted = host("fleet-03")
    drifted.run("sh -c 'echo SPECDEC_HAND_EDIT=1 >> /etc/specdec/%s/engine.env'" % INSTANCE)
    proc, summary = rollout(tmp_path, "drift", instances(speculative={
        "method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": poisoned[5]}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "1 of 3 host(s) to change" in proc.stdout and "fleet-03: %s (engine.env differs)" % INSTANCE in proc.stdout
    assert summary["hosts"]["fleet-03"]["status"]["status"] == "updated"
    assert summary["hosts"]["fleet-03"]["status"]["changes"] == [{"instance": INSTANCE, "reasons": ["engine.env differs"]}]
    for n in ("fleet-01", "fleet-02"):
        assert summary["hosts"][n]["status"]["status"] == "unchanged", n
    assert "SPECDEC_HAND_EDIT" not in drifted.file("/etc/specdec/%s/engine.env" % INSTANCE).content_string


def test_no_key_or_a_wrong_key_gets_401_and_reaches_no_engine():
    body = {"model": INSTANCE, "prompt": "no key", "max_tokens": 2}
    before = gateway_servers()
    for key in (None, "sk-wrong-0123456789abcdef", api_key() + "x"):
        status, headers, text = gateway_call("POST", "/v1/completions", body, key=key)
        assert status == 401, (key is None, status, text)
        assert json.loads(text)["error"]["code"] == "invalid_api_key"
        assert headers.get("Content-Type") == "application/json" and "X-Gateway-Server" not in headers
    status, _, text = gateway_call("GET", "/v1/models", key=None)
    assert status == 401, text
    # the engines saw none of them: no server's session total moved
    assert dict((k, v[2]) for k, v in gateway_servers().items()) == dict((k, v[2]) for k, v in before.items())


def test_unknown_model_gets_404_with_an_openai_error_body():
    status, headers, text = gateway_call("POST", "/v1/chat/completions",
                                         {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]},
                                         key=api_key())
    assert status == 404 and headers.get("Content-Type") == "application/json", (status, text)
    err = json.loads(text)["error"]
    assert err["code"] == "model_not_found" and err["type"] == "invalid_request_error" and "message" in err


def test_models_and_a_completion_through_the_gateway():
    status, _, text = gateway_call("GET", "/v1/models", key=api_key())
    assert status == 200 and [m["id"] for m in json.loads(text)["data"]] == [INSTANCE], text
    status, headers, text = gateway_call("POST", "/v1/completions",
                                         {"model": INSTANCE, "prompt": "hi", "max_tokens": 3}, key=api_key())
    assert status == 200 and json.loads(text)["choices"], text
    assert headers["X-Gateway-Server"] in [served_by(n) for n in HOSTS]


def test_tls_is_verified_with_the_lab_ca_only():
    with pytest.raises(ssl.SSLCertVerificationError):
        gateway_call("GET", "/v1/models", key=api_key(), context=ssl.create_default_context())
    status, _, _ = gateway_call("GET", "/v1/models", key=api_key())  # the lab CA: verified, host name included
    assert status == 200


def test_the_gateway_keeps_no_key_and_its_secrets_are_root_only():
    gw = host(GATEWAY)
    key = api_key()
    assert gw.run("grep -rlsF %s /etc /var/lib/haproxy /root /tmp" % key).stdout.split() == []
    digest = __import__("hashlib").sha256(key.encode()).hexdigest()
    keymap = gw.file("/etc/haproxy/specdec/api-keys.map")
    assert keymap.mode == 0o600 and keymap.user == "root" and digest in keymap.content_string
    pem = gw.file("/etc/haproxy/specdec/gateway.pem")
    assert pem.mode == 0o600 and pem.user == "root"
    sock = gw.file("/run/haproxy/specdec-admin.sock")
    assert sock.is_socket and sock.mode == 0o600 and sock.user == "root"


def test_the_gateway_runs_haproxy_from_debian_with_its_prometheus_endpoint():
    gw = host(GATEWAY)
    assert gw.package("haproxy").is_installed and gw.package("haproxy").version.startswith("2.6")
    metrics = gw.check_output("curl -fsS http://127.0.0.1:8404/metrics")
    assert "haproxy_backend_active_servers" in metrics and 'proxy="model_%s"' % INSTANCE in metrics


def _wait(predicate, limit_s, step_s=1.0):
    """Poll until predicate() is true or limit_s passes; return its last value (bounded, no clock asserted)."""
    deadline = time.monotonic() + limit_s
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(step_s)
        value = predicate()
    return value


def test_an_engine_does_not_start_at_boot_while_its_firewall_rules_failed():
    """Fails closed: rules that cannot load, then a reboot: the engine stays down and its port closed."""
    name, client = "fleet-03", host("fleet-01")
    target = host(name)
    rules = "/etc/specdec/firewall/docker-user.v4"
    unit = "specdec-%s.service" % INSTANCE
    good = target.file(rules).content_string
    target.run("sh -c 'echo this-is-not-a-rule > %s'" % rules)
    try:
        subprocess.run(["docker", "restart", name], check=True, capture_output=True, timeout=120)
        target = host(name)
        assert _wait(lambda: target.run("systemctl is-active specdec-docker-user.service").stdout.strip() == "failed", 120)
        # the engine's start is attempted (it is enabled) and refused by its ExecStartPre, every time
        assert _wait(lambda: re.search(r"status=[1-9]", target.run("systemctl show -p ExecStartPre %s" % unit).stdout), 60)
        for _ in range(5):
            assert target.run("systemctl is-active %s" % unit).stdout.strip() != "active"
            assert client.run("curl -s -m 2 http://%s:%d/health" % (lab_ip(name), PORT)).rc != 0
            time.sleep(1)
        assert target.run("docker ps -q --filter name=specdec-%s" % INSTANCE).stdout.strip() == ""
    finally:
        subprocess.run(["docker", "exec", "-i", name, "sh", "-c", "cat > %s" % rules], input=good, text=True,
                       check=True, timeout=60)
        target.run("systemctl restart specdec-docker-user.service")
        target.run("systemctl reset-failed %s; systemctl start --no-block %s" % (unit, unit))
    # with its rules back, the engine starts and serves again
    assert _wait(lambda: client.run("curl -sf -m 2 http://%s:%d/health" % (lab_ip(name), PORT)).rc == 0, 120)


# Last in the file: the sweep leaves its fact (last sweep) on the swept host, which no test above expects.
SWEPT = "fleet-02"


def docker_time(stamp):
    """docker's StartedAt (RFC 3339 in UTC, nanoseconds) as a Unix time."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def record_sweep_evidence(path, watch, gw, after):
    """What the sweep's checks read, counted, next to its report (read when a check fails, or for figures)."""
    samples = watch.read()
    drained = [s for s in samples if s[2] == "drain"]
    window = (drained[0][1], drained[-1][0]) if drained else None
    inside = [r for r in gw.records if window and r[0] > window[0] and r[1] < window[1]]

    def count(rows, key):
        return dict(sorted(Counter(key(r) for r in rows).items()))

    path.write_text(json.dumps({
        "requests": len(gw.records), "failed": len(gw.failures()),
        "truncated": sum(1 for r in gw.failures() if (r[3] or "").startswith("truncated")),
        "by_server": count(gw.records, lambda r: str(r[4])), "samples": len(samples),
        "failed_samples": len(watch.samples) - len(samples),
        "gateway_view": count(samples, lambda s: "%s/%s" % (s[2], s[3])),
        "drained_window": window, "drained_window_s": window and round(window[1] - window[0], 3),
        "restored_engine_started": after["started"],
        "inside_window": len(inside), "inside_by_server": count(inside, lambda r: str(r[4]))}, indent=1))


@pytest.fixture(scope="module")
def swept(tmp_path):
    """A small sweep of one host behind the gateway (the running draft length and the next, one short request per
    repetition, no output-equivalence gate, no apply: the running instance is restored) while the gateway probe
    streams and the gateway's view of the host is sampled."""
    # the test above rebooted fleet-03: every engine UP at the gateway before the sweep starts
    assert _wait(lambda: all(s[0] == "UP" for s in gateway_servers().values()), 60), gateway_servers()
    h = host(SWEPT)
    running, before = draft_len(h), engine_files(h)
    extra = tmp_path / "sweep.yml"
    extra.write_text(yaml.safe_dump({
        # the definition every host runs now (the rollouts'), so the sweep restores exactly that; as
        # draft_sweep_instances: an inference_server_instances extra var would outrank every candidate's
        "draft_sweep_instances": instances(speculative={
            "method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": running}),
        "draft_sweep_draft_lens": [running, running % 6 + 1], "draft_sweep_baseline": False,
        "draft_sweep_equivalence": False, "draft_sweep_concurrency": [1], "draft_sweep_repetitions": 1,
        "draft_sweep_min_runs": 1, "draft_sweep_requests_per_worker": 2, "draft_sweep_warmup_requests_per_worker": 0,
        "draft_sweep_max_tokens": 16, "draft_sweep_apply": False, "draft_sweep_run_id": "fleet-sweep",
        "draft_sweep_report_dir": str(tmp_path / "sweeps")}))
    with GatewayWatch(served_by(SWEPT)) as watch, GatewayProbe() as gw:
        proc = subprocess.run(
            ["ansible-playbook", "-i", INVENTORY, os.path.join(PROJECT, "playbooks", "sweep.yml"), "-l", SWEPT,
             "-e", "@%s" % extra], capture_output=True, text=True, timeout=600, check=False)
    report = tmp_path / "sweeps" / "fleet-sweep" / ("%s-%s.json" % (SWEPT, INSTANCE))
    assert report.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc, json.loads(report.read_text()), watch, gw, running, before, engine_files(h)


def test_a_sweep_behind_the_gateway_restores_the_running_instance(swept):
    proc, report, _, _, running, before, after = swept
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert report["applied"] is False and report["candidates"] == [running, running % 6 + 1], report["candidates"]
    assert [p["step"] for p in report["phases"]][-1] == "restore", report["phases"]
    for key in ("yaml", "env", "unit"):
        assert after[key] == before[key], key  # byte for byte what the rollouts left
    assert after["started"] != before["started"]  # restarted by the sweep
    assert draft_len(host(SWEPT)) == running


def test_front_door_dropped_no_request_during_the_sweep(swept):
    gw = swept[3]
    assert gw.failures() == [], (len(gw.failures()), gw.failures()[:3])
    assert len(gw.records) >= 20, len(gw.records)


def test_the_swept_host_stayed_drained_through_its_restarts_and_is_back(swept, tmp_path):
    """The gateway's samples: ready, then drained from before the first restart until the restored engine
    serves, then ready and UP; no stream reached the host in between, and the other hosts served them all."""
    _, _, watch, gw, _, _, after = swept
    samples = watch.read()
    record_sweep_evidence(tmp_path / "sweep-gateway.json", watch, gw, after)
    assert len(samples) >= 20 and len(samples) >= len(watch.samples) - 3, watch.samples[-3:]
    drained = [s for s in samples if s[2] == "drain"]
    assert drained, samples[:3]
    first, last = drained[0], drained[-1]
    assert samples[0][2:] == ("ready", "UP"), samples[0]  # in rotation before the sweep drained it
    between = [s for s in samples if first[0] <= s[0] <= last[0]]
    assert [s for s in between if s[2] != "drain"] == [], [s for s in between if s[2] != "drain"][:3]
    # the restored engine was started while the host was drained, and the host was set ready only after it
    assert first[1] < docker_time(after["started"]) < last[0], (first, after["started"], last)
    assert samples[-1][2:] == ("ready", "UP"), samples[-1]  # back in rotation after the sweep
    inside = check_no_request_while_drained(gw, {SWEPT: (first[1], last[0])})
    assert set(r[4] for r in inside) == set(served_by(n) for n in HOSTS if n != SWEPT), len(inside)
    assert all(s[0] == "UP" for s in gateway_servers().values()), gateway_servers()


# Last in the file: an engine upgrade under each host's recorded sweep.
UPGRADE = "specdec-lab/tensorrt-llm-emulator:1.2.0rc1"
SWEEP_FACT = "/etc/ansible/facts.d/specdec_sweep.fact"


def sweep_fact(h):
    return json.loads(h.file(SWEEP_FACT).content_string)


@pytest.fixture(scope="module")
def upgraded(tmp_path):
    """Every host records a sweep of what it runs now (as draft_sweep leaves it: measured on the running image,
    its length applied); then a rollout upgrades the engine image, with a small sweep's settings for the canary."""
    assert _wait(lambda: all(s[0] == "UP" for s in gateway_servers().values()), 60), gateway_servers()
    for n in HOSTS:
        h = host(n)
        serving = json.loads(h.file("/etc/specdec/%s/facts.json" % INSTANCE).content_string)
        running = draft_len(h)
        measured = dict((k, serving.get(k) or None) for k in
                        ("engine", "engine_version", "image", "image_id", "model", "draft_model"))
        spec = {"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3", "max_draft_len": running}
        fact = {INSTANCE: {
            "last_sweep": {"run_id": "before-upgrade", "winner": {"draft_len": running, "concurrency": 1},
                           "measured_on": dict(measured, host_groups=["b200-nodes"]),
                           "finished_at": "2026-11-28T00:00:00Z"},
            "applied": {"run_id": "before-upgrade", "max_draft_len": running, "speculative": spec,
                        "swept": {"method": "eagle3", "draft_model": "nvidia/gpt-oss-120b-Eagle3"}}}}
        subprocess.run(["docker", "exec", "-i", n, "sh", "-c", "mkdir -p /etc/ansible/facts.d && cat > %s" % SWEEP_FACT],
                       input=json.dumps(fact), text=True, check=True, timeout=60)
    before = {n: (draft_len(host(n)), engine_files(host(n))) for n in HOSTS}
    with GatewayProbe() as gw:
        proc, summary = rollout(
            tmp_path, "upgrade", instances(image=UPGRADE), draft_sweep_draft_lens=[1, 2],
            draft_sweep_concurrency=[1], draft_sweep_repetitions=2, draft_sweep_min_runs=2,
            draft_sweep_requests_per_worker=2, draft_sweep_warmup_requests_per_worker=0, draft_sweep_max_tokens=16,
            draft_sweep_max_rel_mad=1.0)
    return proc, summary, gw, before


def test_an_engine_upgrade_sweeps_the_canary_again_before_the_class(upgraded):
    proc, summary, _, _ = upgraded
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    canary, rest = HOSTS[0], HOSTS[1:]
    statuses = dict((n, summary["hosts"][n]["status"]) for n in HOSTS)
    assert all(st["status"] == "updated" for st in statuses.values()), statuses
    assert statuses[canary]["resweep"] == [INSTANCE]
    assert all(statuses[n]["resweep"] == [] for n in rest), statuses
    mine = sweep_fact(host(canary))[INSTANCE]
    last = mine["last_sweep"]
    # the canary's new sweep: on the new engine, output-equivalence gate passed, its winner applied
    assert last["run_id"] == "upgrade-%s" % INSTANCE
    assert last["measured_on"]["image"] == UPGRADE and last["measured_on"]["engine_version"] == "1.2.0rc1"
    image_id = host(canary).check_output("docker inspect --format '{{.Image}}' specdec-%s" % INSTANCE)
    assert last["measured_on"]["image_id"] == image_id
    assert last["equivalence"]["status"] == "passed", last["equivalence"]
    winner = mine["applied"]["max_draft_len"]
    assert winner == last["winner"]["draft_len"] and winner in (1, 2)
    # the canary was swept before any other host changed
    swept_at = calendar.timegm(time.strptime(last["finished_at"], "%Y-%m-%dT%H:%M:%SZ"))
    for n in rest:
        assert float(statuses[n]["started"]) >= swept_at - 1, (n, statuses[n], last["finished_at"])


def test_the_class_serves_the_canarys_winner_with_the_upgrade(upgraded):
    _, summary, _, before = upgraded
    canary = HOSTS[0]
    theirs = sweep_fact(host(canary))[INSTANCE]
    for n in HOSTS:
        h = host(n)
        assert draft_len(h) == theirs["applied"]["max_draft_len"], n
        serving = json.loads(h.file("/etc/specdec/%s/facts.json" % INSTANCE).content_string)
        assert serving["image"] == UPGRADE and serving["engine_version"] == "1.2.0rc1", serving
        assert engine_files(h)["started"] != before[n][1]["started"]
        if n != canary:
            assert sweep_fact(h)[INSTANCE] == dict(theirs, adopted_from=canary), n
    # the summary's fleet view: every host serves what its (adopted) sweep measured
    rows = dict((r["host"], r) for r in summary["rows"])
    assert all(rows[n]["tuned_on"] == "as serving" for n in HOSTS), rows


def test_front_door_dropped_no_request_in_the_upgrade(upgraded):
    gw = upgraded[2]
    assert gw.failures() == [], (len(gw.failures()), gw.failures()[:3])
    assert len(gw.records) >= 20, len(gw.records)


RETUNED = "fleet-02"
MONITOR = "fleet-mon"
TUNE_LOOP_UNIT = "specdec-tune-loop"
TUNE_LOOP_REPORTS = "/var/lib/specdec/tune-loop/reports"
RETUNE_STATE = "/var/lib/specdec/retune/state.json"
# the emulator's fault knob (docs/emulator.md), in the model directory the engine sees under /models (host_vars)
ACCEPTANCE_FILE = "/var/lib/specdec/models/lab-acceptance"
# the token the role made on fleet-mon (none is given), readable by the service's user only
TUNE_LOOP_TOKEN_STORE = "/etc/specdec/tune-loop/token"
TUNE_LOOP_DIR = "/var/lib/specdec/tune-loop"
TUNE_LOOP_USER = "specdec-tune"
# the plaintext of host_vars/fleet-03/vault.yml, a vaulted file of the inventory
VAULTED_CANARY = "lab-vaulted-canary-7f3a91c2"
# bounds of the waits (never asserted as times): the alert, then the whole re-tune (172.6 s idle; it passed 900 s
# beside the aarch64 lane's emulated VM, bench/HISTORY.md, so the bound leaves a busy machine room)
ALERT_LIMIT_S = 240
RETUNE_LIMIT_S = 1800
# what the tune loop's test measured, for bench/tune_loop/report.py
TIMELINE = os.path.join(PROJECT, "lab", ".state", "molecule", "fleet-tune-loop.json")


def on_monitor(code):
    """Run Python on the monitoring host (the tune loop, Alertmanager and Prometheus listen on its loopback)."""
    out = subprocess.run(["docker", "exec", "-i", MONITOR, "python3", "-"], input=code, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def firing(alertname, host_name):
    alerts = json.loads(on_monitor(
        "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9093/api/v2/alerts?active=true').read().decode())"))
    return [a for a in alerts if a["labels"].get("alertname") == alertname and a["labels"].get("host") == host_name]


def tune_loop_token():
    return host(MONITOR).file(TUNE_LOOP_TOKEN_STORE).content_string.strip()


def an_alert(host_name, status="firing", fingerprint=None, starts="2026-11-29T00:00:00Z"):
    return {"status": status, "labels": {"alertname": "SpeculationStoppedPaying", "host": host_name,
                                         "engine_instance": INSTANCE, "severity": "warning"},
            "annotations": {}, "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "", "fingerprint": fingerprint or "%x" % int(time.time() * 1000)}


def listener_answers():
    """Whether the tune loop's listener accepts a connection on fleet-mon's loopback."""
    return subprocess.run(["docker", "exec", MONITOR, "python3", "-c",
                           "import socket; socket.create_connection(('127.0.0.1', 5050), timeout=5).close()"],
                          capture_output=True, timeout=60, check=False).returncode == 0


def post_body(body, token):
    """POST a body to the tune loop's listener: (HTTP status, the answer's text)."""
    code = """
import json, sys, urllib.error, urllib.request
req = urllib.request.Request('http://127.0.0.1:5050/alerts', data=sys.stdin.buffer.read(), method='POST',
                             headers=dict({'Content-Type': 'application/json'}, **%r))
try:
    answer = urllib.request.urlopen(req)
    print(answer.status, answer.read().decode().strip())
except urllib.error.HTTPError as err:
    print(err.code, err.read().decode().strip())
""" % ({"Authorization": "Bearer %s" % token} if token else {},)
    out = subprocess.run(["docker", "exec", "-i", MONITOR, "python3", "-c", code], input=body.encode(),
                         capture_output=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    status, _, text = out.stdout.decode().strip().partition(" ")
    return int(status), text


def post_alert(host_name, token, *alerts):
    """POST one notification (Alertmanager's webhook payload version 4; one firing SpeculationStoppedPaying for
    host_name unless alerts are given) to the tune loop's listener: its HTTP status."""
    payload = {"version": "4", "status": "firing", "receiver": "specdec", "groupKey": "test", "groupLabels": {},
               "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
               "alerts": list(alerts) or [an_alert(host_name)]}
    return post_body(json.dumps(payload), token)[0]


def retune_state():
    f = host(MONITOR).file(RETUNE_STATE)
    return json.loads(f.content_string) if f.exists else {}


def tune_loop_journal(since):
    return host(MONITOR).check_output("journalctl -u %s --since @%d --no-pager -o cat" % (TUNE_LOOP_UNIT, int(since)))


MARKER = TUNE_LOOP_DIR + "/reports/alert-was-code"


@pytest.fixture(scope="module")
def hostile(upgraded):
    """What anyone who reaches the listener could send, sent before the valid re-tune (which must still happen):
    each refused or capped at the event source, or by the play's guard before any other use; nothing re-tuned."""
    token = tune_loop_token()
    # the listener answers once ansible-rulebook (a JVM) has started: systemd restarts it after a failure, and on a
    # busy machine its start takes minutes
    assert _wait(listener_answers, 300, 2), host(MONITOR).check_output(
        "systemctl status --no-pager %s; journalctl -u %s -n 40 --no-pager" % (TUNE_LOOP_UNIT, TUNE_LOOP_UNIT))
    before = {n: engine_files(host(n)) for n in HOSTS}
    state_before = retune_state()
    since = time.time() - 1
    notification = {"version": "4", "status": "firing", "receiver": "specdec", "groupKey": "hostile", "groupLabels": {},
                    "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093"}
    template = an_alert("{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % MARKER)
    resolved = an_alert("fleet-03", "resolved", fingerprint="replayed")
    answers = {
        "template": post_body(json.dumps(dict(notification, alerts=[template])), token),
        "unknown": post_body(json.dumps(dict(notification, alerts=[an_alert("fleet-99")])), token),
        "first": post_body(json.dumps(dict(notification, alerts=[resolved])), token),
        "replay": post_body(json.dumps(dict(notification, alerts=[resolved])), token),
        "many": post_body(json.dumps(dict(notification, alerts=[
            an_alert("fleet-01", "resolved", fingerprint="many-%d" % i) for i in range(2000)])), token),
        "nested": post_body("[" * 50000 + "]" * 50000, token),
        "no-token": post_body(json.dumps(dict(notification, alerts=[an_alert("fleet-01")])), None),
    }
    refusal = "retune_host: 'fleet-99' is not a host of the inventory"
    assert _wait(lambda: refusal in tune_loop_journal(since), 180, 2.0), tune_loop_journal(since)[-4000:]
    # the resolved alerts each print a line and run nothing; wait for the last of them
    assert _wait(lambda: tune_loop_journal(since).count("nothing to run") >= 17, 180, 2.0), tune_loop_journal(since)[-4000:]
    return {"answers": answers, "journal": tune_loop_journal(since), "before": before, "state_before": state_before}


def test_an_alert_is_data_and_the_listener_holds_its_bounds(hostile):
    answers = hostile["answers"]
    assert answers["template"][0] == 202 and "0 taken, 1 dropped" in answers["template"][1], answers
    assert answers["unknown"][0] == 202 and "1 taken" in answers["unknown"][1], answers
    assert answers["first"][0] == 202 and "1 taken" in answers["first"][1], answers
    assert answers["replay"][0] == 202 and "0 taken, 0 dropped, 1 repeated" in answers["replay"][1], answers
    assert answers["many"][0] == 202 and "16 taken" in answers["many"][1] and "1984 over the cap" in answers["many"][1]
    assert answers["nested"][0] == 400 and "nests deeper" in answers["nested"][1], answers
    assert answers["no-token"][0] == 401, answers
    journal = hostile["journal"]
    assert "Traceback" not in journal
    # the template was never evaluated, nothing was re-tuned, and the guards' state is as it was
    assert not host(MONITOR).file(MARKER).exists
    assert "Re-tuning" not in journal
    assert {n: engine_files(host(n)) for n in HOSTS} == hostile["before"]
    assert retune_state() == hostile["state_before"]


@pytest.fixture(scope="module")
def retuned(upgraded, hostile):
    """The tune loop end to end, while streams run through the front door: the emulator's acceptance is lowered on
    RETUNED; Prometheus fires SpeculationStoppedPaying, Alertmanager posts it to the rulebook on fleet-mon, and the
    rulebook runs the re-tune play there: RETUNED is swept again (its small sweep of two lengths other than the one
    every host serves, host_vars/fleet-mon.yml) and its new winner rolled out to the class, canary first."""
    mon = host(MONITOR)
    assert mon.service(TUNE_LOOP_UNIT).is_running and mon.service(TUNE_LOOP_UNIT).is_enabled
    served = draft_len(host(RETUNED))
    before = {n: engine_files(host(n)) for n in HOSTS}
    state_before = retune_state()
    assert not firing("SpeculationStoppedPaying", RETUNED)
    since = time.time() - 1
    watches = [GatewayWatch(served_by(n), limit_s=RETUNE_LIMIT_S + ALERT_LIMIT_S) for n in HOSTS]
    with GatewayProbe(limit_s=RETUNE_LIMIT_S + ALERT_LIMIT_S) as gw:
        for w in watches:
            w.__enter__()
        try:
            out = host(RETUNED).run("printf '0.05\\n' > %s.tmp && mv %s.tmp %s" % ((ACCEPTANCE_FILE,) * 3))
            assert out.rc == 0, out.stderr
            dropped = time.time()
            fired = _wait(lambda: firing("SpeculationStoppedPaying", RETUNED), ALERT_LIMIT_S)
            fired_at = time.time()
            done = _wait(lambda: ((retune_state().get("b200-nodes") or {}).get("last_retune") or 0) >= dropped
                         and (retune_state().get("b200-nodes") or {}).get("in_progress") is None, RETUNE_LIMIT_S, 2.0)
            done_at = time.time()
        finally:
            for w in watches:
                w.__exit__()
    journal = tune_loop_journal(since)
    timeline = {"dropped": dropped, "fired": fired_at if fired else None, "retuned": done_at if done else None,
                "drained_s": dict((n, drained_seconds(w.read())) for n, w in zip(HOSTS, watches)),
                "window_s": done_at - dropped, "hosts": len(HOSTS), "requests": len(gw.records),
                "failed": len(gw.failures())}
    os.makedirs(os.path.dirname(TIMELINE), exist_ok=True)
    with open(TIMELINE, "w", encoding="utf-8") as fh:
        json.dump(timeline, fh, indent=2)
    print("tune loop: alert %.1f s after the drop, re-tuned class %.1f s after it; drained host-seconds %s"
          % ((fired_at - dropped) if fired else -1, (done_at - dropped) if done else -1, timeline["drained_s"]))
    return {"fired": fired, "done": done, "journal": journal, "gw": gw, "served": served, "before": before,
            "state_before": state_before, "dropped": dropped}


def drained_seconds(samples):
    """Seconds a server was out of rotation at the gateway (drained, or not UP), from GatewayWatch samples."""
    out = 0.0
    for start, end, admin, status in samples:
        if admin != "ready" or not str(status).startswith("UP"):
            out += end - start + WATCH_INTERVAL_S
    return round(out, 1)


def test_the_alert_reaches_the_rulebook_which_re_tunes_the_host(retuned):
    assert retuned["fired"], "SpeculationStoppedPaying did not fire for %s" % RETUNED
    labels = retuned["fired"][0]["labels"]
    assert (labels["host"], labels["engine_instance"]) == (RETUNED, INSTANCE)
    journal = retuned["journal"]
    assert retuned["done"], "the re-tune did not end; the tune loop said:\n%s" % journal[-6000:]
    mine = sweep_fact(host(RETUNED))[INSTANCE]
    winner = mine["applied"]["max_draft_len"]
    assert winner != retuned["served"] and winner in (3, 4) and mine["last_sweep"]["run_id"].startswith("retune-")
    assert mine["last_sweep"]["equivalence"]["status"] == "passed"
    assert ("Re-tune of %s: sweep %s chose draft length %d where draft length %d was served"
            % (RETUNED, mine["last_sweep"]["run_id"], winner, retuned["served"])) in journal, journal[-6000:]
    assert "rolled out to the class" in journal


def test_the_tune_loop_rolls_the_winner_out_to_the_class_canary_first(retuned):
    assert retuned["done"]
    mine = sweep_fact(host(RETUNED))[INSTANCE]
    winner = mine["applied"]["max_draft_len"]
    names = host(MONITOR).check_output("ls -t %s" % TUNE_LOOP_REPORTS).split()
    newest = [n for n in names if n.startswith("rollout-") and n.endswith(".json")][0]
    summary = json.loads(host(MONITOR).file("%s/%s" % (TUNE_LOOP_REPORTS, newest)).content_string)
    statuses = dict((n, summary["hosts"][n]["status"]["status"]) for n in HOSTS)
    assert statuses == {"fleet-01": "updated", RETUNED: "unchanged", "fleet-03": "updated"}, statuses
    for n in HOSTS:
        assert draft_len(host(n)) == winner, n
        if n != RETUNED:
            theirs = sweep_fact(host(n))[INSTANCE]
            assert theirs["adopted_from"] == RETUNED and theirs["applied"] == mine["applied"], (n, theirs, mine)
            differ = dict((k, (theirs["last_sweep"].get(k), mine["last_sweep"].get(k)))
                          for k in set(theirs["last_sweep"]) | set(mine["last_sweep"])
                          if theirs["last_sweep"].get(k) != mine["last_sweep"].get(k))
            assert not differ, (n, differ)
            assert engine_files(host(n))["started"] != retuned["before"][n]["started"]
            # the class keeps the engine it was upgraded to
            serving = json.loads(host(n).file("/etc/specdec/%s/facts.json" % INSTANCE).content_string)
            assert serving["image"] == UPGRADE, serving
    recorded = retune_state()["b200-nodes"]
    assert recorded["in_progress"] is None and recorded["last_retune"] >= retuned["dropped"]


def test_the_tune_loop_drops_no_request_at_the_front_door(retuned):
    gw = retuned["gw"]
    assert gw.failures() == [], (len(gw.failures()), gw.failures()[:3])
    assert len(gw.records) >= 20, len(gw.records)


def test_the_tune_loop_listens_on_loopback_and_asks_for_its_token(retuned):
    listening = host(MONITOR).check_output("ss -Hltn 'sport = :5050'")
    assert [line.split()[3] for line in listening.splitlines()] == ["127.0.0.1:5050"], listening
    token = tune_loop_token()
    assert len(token) >= 32  # none was given: the role made one
    assert post_alert("fleet-03", None) == 401
    assert post_alert("fleet-03", "not-" + token) == 401
    # the token: where only the service's user reads it, and in Alertmanager's file; nowhere else
    mon = host(MONITOR)
    for path, mode, user, group in ((TUNE_LOOP_TOKEN_STORE, 0o400, TUNE_LOOP_USER, TUNE_LOOP_USER),
                                    ("/etc/prometheus/tune-loop.token", 0o640, "root", "prometheus")):
        f = mon.file(path)
        assert (f.mode, f.user, f.group) == (mode, user, group), path
    etc = mon.file("/etc/specdec/tune-loop")
    assert (etc.mode, etc.user, etc.group) == (0o750, "root", TUNE_LOOP_USER)
    assert token not in mon.file("/etc/specdec/tune-loop/vars.yml").content_string
    assert token not in mon.file("/etc/prometheus/alertmanager.yml").content_string
    assert "credentials_file: /etc/prometheus/tune-loop.token" in mon.file("/etc/prometheus/alertmanager.yml").content_string
    assert mon.check_output("systemctl show -p User --value %s" % TUNE_LOOP_UNIT) == TUNE_LOOP_USER
    assert mon.file(TUNE_LOOP_DIR + "/.ssh/id_tune_loop").mode == 0o600


def test_the_loops_key_is_its_own_and_accepted_only_from_the_monitoring_host(retuned):
    """It re-tuned above, connecting from fleet-mon with its key; the same key from this controller (another source
    address) is refused by every host, and each host's authorized_keys names fleet-mon's address for it."""
    assert retuned["done"]
    key = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "id_tune_loop")
    inventory = json.loads(subprocess.run(["ansible-inventory", "-i", INVENTORY, "--list"], capture_output=True, text=True,
                                          check=True, timeout=120).stdout)
    for name in HOSTS + [GATEWAY]:
        line = [k for k in host(name).file("/root/.ssh/authorized_keys").content_string.splitlines()
                if k.endswith(" specdec-tune-loop")]
        assert len(line) == 1 and line[0].startswith('from="172.29.6.15",'), (name, line)
        hv = inventory["_meta"]["hostvars"][name]
        out = subprocess.run(["ssh", "-i", key, "-p", str(hv["ansible_port"]), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                              "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                              "%s@%s" % (hv.get("ansible_user", "root"), hv["ansible_host"]), "true"],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 255 and "Permission denied" in out.stderr, (name, out.returncode, out.stderr)


def test_no_plaintext_of_a_vaulted_secret_on_the_monitoring_host(retuned):
    """The copied inventory keeps its vaulted file encrypted; the service decrypts it in memory with the vault
    password (it re-tuned above, reading that inventory). The canary's plaintext is on no file of the host."""
    assert retuned["done"]
    mon = host(MONITOR)
    copied = mon.file(TUNE_LOOP_DIR + "/inventory/host_vars/fleet-03/vault.yml")
    assert copied.exists and copied.content_string.startswith("$ANSIBLE_VAULT;1.1;AES256"), copied.content_string[:80]
    vault = mon.file("/etc/specdec/tune-loop/vault-password")
    assert (vault.mode, vault.user, vault.group) == (0o400, TUNE_LOOP_USER, TUNE_LOOP_USER)
    found = mon.run("find / -xdev -type f -size -64M -print0 2>/dev/null | xargs -0 grep -lF -- %s 2>/dev/null" % VAULTED_CANARY)
    assert found.stdout.strip() == "", found.stdout


def test_nothing_root_runs_for_the_tune_loop_is_writable_by_its_user(retuned):
    """Every path the loop's unit and the role execute as root (the venv, the collection, its archive, the unit,
    the tune loop's home and configuration, the system's programs): none writable by the service user, whose own
    directories are .ssh, .ansible, reports and the guards' state."""
    own = [TUNE_LOOP_DIR + "/.ssh", TUNE_LOOP_DIR + "/.ansible", TUNE_LOOP_DIR + "/reports", os.path.dirname(RETUNE_STATE)]
    prune = " -o ".join("-path %s" % p for p in own)
    roots = [TUNE_LOOP_DIR, "/etc/specdec/tune-loop", "/etc/systemd/system/%s.service" % TUNE_LOOP_UNIT, "/usr",
             "/etc/systemd", "/lib/systemd"]
    out = host(MONITOR).run("runuser -u %s -- find %s \\( %s \\) -prune -o \\( -type f -o -type d \\) -writable -print 2>/dev/null"
                            % (TUNE_LOOP_USER, " ".join(roots), prune))
    assert out.stdout.strip() == "", out.stdout[:2000]
    # and the walk saw them: the venv's programs are there, root's
    venv_python = host(MONITOR).file(TUNE_LOOP_DIR + "/venv/bin/ansible-rulebook")
    assert venv_python.exists and venv_python.user == "root"
    home = host(MONITOR).file(TUNE_LOOP_DIR)
    assert (home.user, home.mode) == ("root", 0o750)


def test_a_second_alert_within_the_cool_down_is_refused(retuned):
    assert retuned["done"]
    since = time.time() - 1
    before = {n: engine_files(host(n)) for n in HOSTS}
    assert post_alert("fleet-03", tune_loop_token(), an_alert("fleet-03", fingerprint="second")) == 202
    refusal = "Not re-tuning fleet-03 (%s, class b200-nodes): cool-down" % INSTANCE
    assert _wait(lambda: refusal in tune_loop_journal(since), 180, 2.0), tune_loop_journal(since)[-4000:]
    # nothing changed anywhere
    assert {n: engine_files(host(n)) for n in HOSTS} == before


# ----------------------------------------------------------------------------------------------------- the heal
HEALED = "fleet-01"
HEAL_ENGINE = "%s/%s" % (HEALED, INSTANCE)
# the emulator's wedge knob (docs/emulator.md), in the model directory the engine sees under /models (host_vars):
# once it exists the engine wedges at its next iteration (health 200, requests accepted, no token) until a restart
WEDGE_FILE = "/var/lib/specdec/models/lab-wedge"
HEAL_STATE = "/var/lib/specdec/retune/heal.json"
HEAL_FACT = "/etc/ansible/facts.d/specdec_heal.fact"
# bounds of the waits (never asserted as times): the alert, then the heal's play on the monitoring host
HEAL_LIMIT_S = 900
# what the heal's test measured, for bench/heal/report.py
HEAL_TIMELINE = os.path.join(PROJECT, "lab", ".state", "molecule", "fleet-heal.json")


def wedged_bound():
    """What the rules promise from a wedge to SpecdecEngineWedged firing, with fleet-mon's monitoring settings and the
    engine hosts' exporter settings (host_vars), as the roles read them (plugin_utils/_monitoring_rules.py)."""
    sys.path.insert(0, os.path.join(PROJECT, "collections"))
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as rules  # noqa: E402
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host_vars")
    with open(os.path.join(here, "fleet-mon.yml"), encoding="utf-8") as fh:
        found = yaml.safe_load(fh)
    with open(os.path.join(here, "%s.yml" % HEALED), encoding="utf-8") as fh:
        found.update((k, v) for k, v in yaml.safe_load(fh).items() if k.startswith("monitoring_exporter_"))
    return rules.wedged_bound(dict((k[len("monitoring_"):], v) for k, v in found.items()
                                   if k.startswith("monitoring_") and not k.startswith("monitoring_tune_loop")))


def heal_record():
    f = host(MONITOR).file(HEAL_STATE)
    return ((json.loads(f.content_string) if f.exists else {}).get("engines") or {}).get(HEAL_ENGINE) or {}


def admin_state(name):
    """The gateway's admin state of a host's engine: 'drain' or 'ready'."""
    return parse_admin(gateway_runtime("show servers state")[0]).get(served_by(name))


def wedge(gw, expect_heal):
    """Wedge HEALED's engine under the front door's streams and wait for SpecdecEngineWedged; take the wedge file away
    (the wedge holds until a restart), then wait for the heal's record: its time after the wedge. Returns what it saw."""
    h = host(HEALED)
    started = engine_files(h)["started"]
    assert not firing("SpecdecEngineWedged", HEALED)
    wedged_at = time.time()
    out = h.run("touch %s" % WEDGE_FILE)
    assert out.rc == 0, out.stderr
    try:
        fired = _wait(lambda: firing("SpecdecEngineWedged", HEALED), ALERT_LIMIT_S)
        fired_at = time.time()
    finally:
        h.run("rm -f %s" % WEDGE_FILE)
    assert fired, "SpecdecEngineWedged did not fire for %s" % HEALED
    done = _wait(lambda: (heal_record().get("last_heal") or {}).get("at", 0) >= wedged_at, HEAL_LIMIT_S, 2.0)
    done_at = time.time()
    assert done, "no heal recorded for %s: %s; the tune loop said:\n%s" % (
        HEAL_ENGINE, heal_record(), tune_loop_journal(wedged_at)[-6000:])
    record = heal_record()
    restarted = engine_files(host(HEALED))["started"] != started
    served = None
    if expect_heal:
        # it serves again: the alert resolves (a new wedge is a new alert), and streams it serves through the front
        # door complete
        assert _wait(lambda: not firing("SpecdecEngineWedged", HEALED), ALERT_LIMIT_S), "the alert did not resolve"
        mark = time.time()
        assert _wait(lambda: [r for r in gw.records if r[0] > mark and r[4] == served_by(HEALED) and r[2]], 120), \
            "no stream served by %s after its heal" % HEALED
        served = time.time()
    return {"wedged": wedged_at, "fired": fired_at, "recorded": done_at, "served": served, "record": record,
            "restarted": restarted, "journal": tune_loop_journal(wedged_at)}


@pytest.fixture(scope="module")
def healed(retuned):
    """The heal end to end, while streams run through the front door: HEALED's engine is wedged three times; each
    time SpecdecEngineWedged fires, Alertmanager posts it to the tune loop on fleet-mon, and the rulebook runs the heal
    there. The first two restart it (heal_restart_limit 2 in heal_window 1h, host_vars/fleet-mon.yml); the third is
    past the limit: not restarted, drained, and it stays so with its alert firing."""
    watch = GatewayWatch(served_by(HEALED), limit_s=4 * HEAL_LIMIT_S)
    with GatewayProbe(limit_s=4 * HEAL_LIMIT_S) as gw:
        watch.__enter__()
        try:
            rounds = [wedge(gw, True), wedge(gw, True), wedge(gw, False)]
            # past the limit it stays as it is: drained, wedged, its alert firing, for a person
            time.sleep(20)
            third = rounds[2]
            third.update(still_firing=bool(firing("SpecdecEngineWedged", HEALED)), admin=admin_state(HEALED),
                         started_after=engine_files(host(HEALED))["started"])
        finally:
            watch.__exit__()
    timeline = {"rounds": [dict((k, r[k]) for k in ("wedged", "fired", "recorded", "served")) for r in rounds],
                "requests": len(gw.records), "failed": len(gw.failures()), "alert_bound_s": wedged_bound()["fire_s"]}
    os.makedirs(os.path.dirname(HEAL_TIMELINE), exist_ok=True)
    with open(HEAL_TIMELINE, "w", encoding="utf-8") as fh:
        json.dump(timeline, fh, indent=2)
    for i, r in enumerate(rounds):
        print("heal %d: alert %.1f s after the wedge, heal recorded %.1f s after it%s" % (
            i + 1, r["fired"] - r["wedged"], r["recorded"] - r["wedged"],
            ", serving again %.1f s after it" % (r["served"] - r["wedged"]) if r["served"] else ""))
    return {"rounds": rounds, "gw": gw, "watch": watch.read()}


def test_a_wedged_engine_is_healed_through_the_tune_loop_and_serves_again(healed):
    first, second = healed["rounds"][:2]
    for n, r in enumerate((first, second), 1):
        assert r["restarted"], (n, r["journal"][-4000:])
        assert r["record"]["restarts"] == [int(t) for t in r["record"]["restarts"]] and len(r["record"]["restarts"]) == n
        assert r["record"]["drained"] is False and r["record"]["last_heal"]["outcome"] == "restarted", r["record"]
        assert "Healing %s on %s (class b200-nodes): all guards pass" % (HEAL_ENGINE, HEALED) in r["journal"]
        assert r["served"], n
    # drained at the gateway while it restarted, ready again after each heal
    admins = [s[2] for s in healed["watch"]]
    assert "drain" in admins and "ready" in admins, Counter(admins)


def test_only_streams_on_the_wedged_engine_fail_and_they_are_counted(healed):
    gw = healed["gw"]
    failed = gw.failures()
    # every failure is a stream the wedged engine held (it took the first chunk, then nothing until its restart)
    assert failed, "no stream failed: the wedge held none"
    assert [r for r in failed if r[4] != served_by(HEALED)] == [], [r for r in failed if r[4] != served_by(HEALED)][:3]
    windows = [(r["wedged"], r["recorded"]) for r in healed["rounds"]]
    assert [r for r in failed if not any(a - 1 <= r[0] <= b for a, b in windows)] == [], failed[:3]
    others = [r for r in gw.records if r[4] != served_by(HEALED)]
    assert others and all(r[2] for r in others)
    print("front door: %d streams, %d failed (all on the wedged %s), %d served by the other hosts"
          % (len(gw.records), len(failed), HEALED, len(others)))


def test_a_third_wedge_within_the_window_is_not_restarted_and_stays_drained(healed):
    third = healed["rounds"][2]
    assert not third["restarted"] and third["started_after"] == engine_files(host(HEALED))["started"]
    record = third["record"]
    assert record["drained"] is True and len(record["restarts"]) == 2, record
    assert record["last_heal"]["outcome"] == "left drained", record
    assert ("Not healing %s (class b200-nodes): restart limit: %s was restarted 2 times within 3600 s"
            % (HEAL_ENGINE, HEALED)) in third["journal"], third["journal"][-4000:]
    assert third["admin"] == "drain" and admin_state(HEALED) == "drain"
    assert third["still_firing"] and firing("SpecdecEngineWedged", HEALED)
    # the hosts' record, which the fleet view shows (HEALS)
    fact = json.loads(host(HEALED).file(HEAL_FACT).content_string)[INSTANCE]
    assert (fact["restarts"], fact["drained"], fact["last_heal"]["outcome"]) == (2, True, "left drained"), fact


def test_a_person_heals_the_drained_engine_where_the_loop_keeps_its_state_and_the_fleet_view_shows_it(healed, tmp_path):
    """A person heals the engine left drained (heal_by_hand: past the limit) where the tune loop keeps the guards'
    state: on fleet-mon, as the loop's user, with its inventory and environment. Restarted, it serves at the front
    door again, the state says so, and the fleet view shows its heals (HEALS)."""
    mon = host(MONITOR)
    env = mon.check_output("systemctl show -p Environment --value %s" % TUNE_LOOP_UNIT)
    out = mon.run("cd %s && runuser -u %s -- env %s ansible-playbook -i inventory specdec.serve.heal -e heal_host=%s "
                  "-e heal_instance=%s -e heal_by_hand=true" % (TUNE_LOOP_DIR, TUNE_LOOP_USER, env, HEALED, INSTANCE))
    assert out.rc == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "Healing %s on %s" % (HEAL_ENGINE, HEALED) in out.stdout and "by hand" in out.stdout, out.stdout[-4000:]
    record = heal_record()
    assert record["drained"] is False and len(record["restarts"]) == 3 and record["last_heal"]["outcome"] == "restarted"
    assert admin_state(HEALED) == "ready"
    assert _wait(lambda: not firing("SpecdecEngineWedged", HEALED), ALERT_LIMIT_S)
    status, _, _ = gateway_call("POST", "/v1/completions", {"model": INSTANCE, "prompt": "back", "max_tokens": 4},
                                key=api_key())
    assert status == 200
    view = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(PROJECT, "playbooks", "health.yml"),
                           "-e", "fleet_view_report_dir=%s" % tmp_path], capture_output=True, text=True, timeout=600,
                          check=False)
    assert view.returncode == 0, view.stdout[-4000:]
    assert "HEALS" in view.stdout, view.stdout[-4000:]
    rows = [r for r in json.loads((tmp_path / "fleet.json").read_text())["rows"] if r.get("host") == HEALED]
    assert rows and rows[0]["heals"].startswith("3 in 1h (last ") and rows[0]["heals"].endswith(": restarted)"), rows
