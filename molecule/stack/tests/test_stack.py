"""One instance served across a stack of two lab hosts (molecule/stack): the head's mpirun reaches the worker's
sshd over the link, the emulator's ranks join one MPI world and the head serves; the stack's ports are closed to
everyone else; a change rolls out to the stack as one member behind the front door with no failed request;
stopping the worker's engine takes the stack down and the next converge brings it back; a worker with another
image, another NCCL library mounted from the host, or a link that is down, is refused by the preflight with the stack
still serving."""

import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
sys.path.insert(0, str(PROJECT / "lab"))
import lab  # noqa: E402
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)
HEAD, WORKER = sorted(RUNNER.get_hosts("stack_a"))  # the head is the first member by name
SINGLE = RUNNER.get_hosts("single")[0]
GATEWAY = RUNNER.get_hosts("gateways")[0]
LAB = "molecule-" + os.environ.get("MOLECULE_SCENARIO_NAME", "stack")
INVENTORY_VARS = yaml.safe_load((SCENARIO / "molecule.yml").read_text())["provisioner"]["inventory"]["group_vars"]
INSTANCE = INVENTORY_VARS["stack_a"]["inference_server_instances"][0]
RAY = INVENTORY_VARS["stack_a"]["inference_server_instances"][1]  # vLLM on Ray across the same members
RAY_UNIT = "specdec-%s.service" % RAY["name"]
RAY_PORT = 6379
SECRETS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "gateway"  # lab/gateway_tls.py in prepare
GATEWAY_PORT = 8443
UNIT = "specdec-%s.service" % INSTANCE["name"]
PORT = INSTANCE["port"]
LINK = {HEAD: "172.29.103.10", WORKER: "172.29.103.11"}  # molecule.yml's stack_link_address
SSH_PORT = 2233


def host(name):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def lab_ip(name):
    """The host's address on the lab network (the management network, not the link)."""
    return lab.lab_ip(name, LAB)


def get(path, timeout=5, port=PORT):
    """JSON from the head's engine port, asked from the controller (the one allowed client)."""
    with urllib.request.urlopen(f"http://{lab_ip(HEAD)}:{port}{path}", timeout=timeout) as resp:
        return json.loads(resp.read())


def world(timeout=5, port=PORT):
    try:
        return get("/lab/world", timeout, port)
    except (OSError, urllib.error.URLError, ValueError):
        return None


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(2)
    pytest.fail(f"after {seconds} s: {what}")


def playbook(path, *options, extra=None):
    """ansible-playbook on the scenario's inventory; (rc, stdout + stderr)."""
    args = ["ansible-playbook", "-i", INVENTORY, str(path)] + list(options)
    fh = None
    if extra is not None:
        fh = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(extra, fh)
        fh.close()
        args += ["-e", "@" + fh.name]
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / "collections"))
    try:
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    finally:
        if fh:
            os.unlink(fh.name)
    return proc.returncode, proc.stdout + proc.stderr


def converge(*options, extra=None):
    return playbook(SCENARIO / "converge.yml", *options, extra=extra)


def hostname(name):
    return host(name).check_output("hostname")


def test_the_ranks_of_both_hosts_joined_one_world_and_the_head_serves():
    found = world()
    assert found is not None, "the head does not answer /lab/world"
    assert found["world_size"] == 2
    assert [r["host"] for r in found["ranks"]] == [hostname(HEAD), hostname(WORKER)]
    with urllib.request.urlopen(urllib.request.Request(
            f"http://{lab_ip(HEAD)}:{PORT}/v1/completions", method="POST",
            data=json.dumps({"model": "gpt-oss-120b", "prompt": "Hello", "max_tokens": 8}).encode(),
            headers={"Content-Type": "application/json"}), timeout=30) as resp:
        body = json.loads(resp.read())
    assert body["usage"]["completion_tokens"] > 0


def test_the_vllm_instance_serves_on_one_ray_cluster_across_both_hosts():
    head, worker = host(HEAD), host(WORKER)
    found = world(port=RAY["port"])
    assert found is not None, "the vLLM head does not answer /lab/world"
    # the emulator's vllm serve placed one rank on each node of the Ray cluster and asked each its host
    assert found["backend"] == "ray" and found["world_size"] == 2, found
    assert [(r["host"], r["address"]) for r in found["ranks"]] == [(hostname(HEAD), LINK[HEAD]),
                                                                   (hostname(WORKER), LINK[WORKER])], found
    with urllib.request.urlopen(urllib.request.Request(
            f"http://{lab_ip(HEAD)}:{RAY['port']}/v1/completions", method="POST",
            data=json.dumps({"model": RAY["served_model_name"], "prompt": "Hello", "max_tokens": 8}).encode(),
            headers={"Content-Type": "application/json"}), timeout=30) as resp:
        assert json.loads(resp.read())["usage"]["completion_tokens"] > 0
    # the unit files' words (an ExecStart continues over lines)
    head_unit = " ".join(head.file("/etc/systemd/system/" + RAY_UNIT).content_string.replace("\\\n", " ").split())
    worker_unit = " ".join(worker.file("/etc/systemd/system/" + RAY_UNIT).content_string.replace("\\\n", " ").split())
    assert "--distributed-executor-backend ray" in head_unit and "--head --port=%d" % RAY_PORT in head_unit
    assert f"--address={LINK[HEAD]}:{RAY_PORT} --block" in worker_unit
    # the worker waits for the head's Ray port on the link before it joins
    assert f"{LINK[HEAD]}/{RAY_PORT}" in worker_unit
    for name, node in ((HEAD, head), (WORKER, worker)):
        assert node.service(RAY_UNIT).is_running
        started = node.check_output(f"journalctl --no-pager -o cat _PID=1 UNIT={RAY_UNIT} | grep -c '^Started ' || true")
        assert started == "1", started
        env = node.file(f"/etc/specdec/{RAY['name']}/engine.env").content_string
        assert "GLOO_SOCKET_IFNAME=enp1s0f0np0" in env and f"VLLM_HOST_IP={LINK[name]}" in env
    # the head's Ray port: the worker's link address only
    rules = head.check_output("iptables -S SPECDEC-INPUT")
    assert f"-s {LINK[WORKER]}/32 -p tcp -m tcp --dport {RAY_PORT}" in rules, rules


def test_every_listener_of_the_members_beyond_loopback_and_the_link_is_guarded():
    """Both engines run on the host's network: every port a member listens on beyond loopback and its link address
    (Ray's raylet, agents and workers included, which Ray opens on every address) is one the firewall drops from all
    but its sources, or SSH's."""
    for name in (HEAD, WORKER):
        node = host(name)
        rules = node.check_output("iptables -S SPECDEC-INPUT")
        guarded = {int(p) for p in re.findall(r"--dport (\d+) -m comment --comment \"specdec deny [^\"]+\" -j DROP", rules)}
        listening = [line.split()[3] for line in node.check_output("ss -ltnH").splitlines() if line.strip()]
        assert listening, name
        open_ports = []
        for local in listening:
            address, port = local.rsplit(":", 1)
            if address.startswith("127.") or address in ("[::1]", LINK[name]) or int(port) == 22:
                continue
            if int(port) not in guarded:
                open_ports.append(local)
        assert open_ports == [], f"{name} listens on ports the firewall leaves open: {open_ports}"


def test_each_node_runs_its_part_on_the_host_network():
    head, worker = host(HEAD), host(WORKER)
    for node in (head, worker):
        assert node.service(UNIT).is_running and node.service(UNIT).is_enabled
        # started once by converge, not again by the idempotence run
        started = node.check_output(f"journalctl --no-pager -o cat _PID=1 UNIT={UNIT} | grep -c '^Started ' || true")
        assert started == "1", started
    head_unit = head.file("/etc/systemd/system/" + UNIT).content_string
    worker_unit = worker.file("/etc/systemd/system/" + UNIT).content_string
    assert "--network=host" in head_unit and "--network=host" in worker_unit and "--publish" not in head_unit
    # the head waits for its worker's sshd on the link before mpirun; the worker waits for nothing
    assert f"{LINK[WORKER]}/{SSH_PORT}" in head_unit and "/dev/tcp" not in worker_unit
    assert "mpirun" in head_unit and "trtllm-llmapi-launch" in head_unit and "/usr/sbin/sshd" in worker_unit
    assert head.file(f"/etc/specdec/{INSTANCE['name']}/hostfile").content_string == \
        f"{LINK[HEAD]} slots=1\n{LINK[WORKER]} slots=1\n"
    # the engines' collectives and transports on the link
    env = worker.file(f"/etc/specdec/{INSTANCE['name']}/engine.env").content_string
    assert "NCCL_SOCKET_IFNAME=enp1s0f0np0" in env and "OMPI_MCA_btl_tcp_if_include=enp1s0f0np0" in env


def test_the_workers_sshd_listens_on_the_link_only():
    listening = host(WORKER).check_output("ss -ltnH")
    assert f"{LINK[WORKER]}:{SSH_PORT}" in listening
    assert f"0.0.0.0:{SSH_PORT}" not in listening and f"*:{SSH_PORT}" not in listening


def test_the_engine_port_is_closed_to_all_but_the_allowed_clients():
    # the worker, on the management network, is not a client of the engine: its packets are dropped
    res = host(WORKER).run(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 http://{lab_ip(HEAD)}:{PORT}/health")
    assert res.rc == 28, f"the head's engine port answered the worker on the lab network: {res.stdout}"
    # the controller (firewall_allowed_cidrs) is
    assert world() is not None
    rules = host(HEAD).check_output("iptables -S SPECDEC-INPUT")
    assert f"--dport {PORT}" in rules and "specdec deny engine-gpt-oss-120b" in rules
    rules = host(WORKER).check_output("iptables -S SPECDEC-INPUT")
    assert f"-s {LINK[HEAD]}/32 -p tcp -m tcp --dport {SSH_PORT}" in rules


def test_check_mode_shows_the_change_to_the_stack_and_changes_nothing():
    before = {name: (files(name), started_at(name)) for name in (HEAD, WORKER)}
    rc, out = converge("--check", "--diff", extra={"stack_draft_len": 2})
    assert rc == 0, out[-3000:]
    assert "-  max_draft_len: 3" in out and "+  max_draft_len: 2" in out, out[-3000:]
    assert {name: (files(name), started_at(name)) for name in (HEAD, WORKER)} == before
    assert (world() or {}).get("world_size") == 2


def test_a_worker_with_another_image_is_refused_and_the_stack_keeps_serving():
    worker = host(WORKER)
    image = INSTANCE["image"]
    worker.check_output(f"docker tag {image} specdec-test/kept:stack")
    try:
        # another image behind the worker's tag (the head keeps the archive's), and no archive to put it back
        worker.check_output(f"printf 'FROM {image}\\nLABEL specdec.test=another\\n' | docker build -q -t {image} -")
        rc, out = converge(extra={"inference_server_image_archive": ""})
        assert rc != 0
        assert f"node {WORKER} runs image" in out and "every node of a stack runs the same image" in out, out[-3000:]
        assert (world() or {}).get("world_size") == 2
    finally:
        worker.check_output(f"docker tag specdec-test/kept:stack {image} && docker rmi specdec-test/kept:stack")


def test_a_worker_whose_mounted_nccl_differs_is_refused_and_the_stack_keeps_serving():
    """The same NCCL version string, another build: a library mounted from the host is compared by its checksum."""
    libdir = "/opt/specdec-test-nccl"
    before = {name: (files(name), started_at(name)) for name in (HEAD, WORKER)}
    for name, build in ((HEAD, "A"), (WORKER, "B")):
        host(name).check_output(f"mkdir -p {libdir} && printf 'NCCL 2.27.7 build {build}' > {libdir}/libnccl.so.2")
    try:
        rc, out = converge(extra={"stack_volumes": [f"{libdir}:/usr/local/nccl-host:ro"]})
        assert rc != 0
        assert (f"node {WORKER}: the NCCL library {libdir}/libnccl.so.2 its engine mounts from the host differs from "
                f"the head's") in out and "every node of a stack loads the same NCCL build" in out, out[-3000:]
        assert {name: (files(name), started_at(name)) for name in (HEAD, WORKER)} == before
        assert (world() or {}).get("world_size") == 2
    finally:
        for name in (HEAD, WORKER):
            host(name).check_output(f"rm -rf {libdir}")


def test_a_link_down_is_refused_and_the_stack_keeps_serving():
    worker = host(WORKER)
    before = worker.check_output(f"systemctl show -p InvocationID --value {UNIT}")
    worker.check_output("ip link set enp1s0f0np0 down")
    try:
        # the preflight reads the link before any engine changes (stack_link is not run here, or it would fix it)
        rc, out = playbook(SCENARIO / "converge.yml", "--skip-tags", "stack_link", extra={})
        assert rc != 0
        assert f"node {WORKER}: the link is not ready" in out, out[-3000:]
    finally:
        worker.check_output("ip link set enp1s0f0np0 up")
    wait_for(lambda: (world() or {}).get("world_size") == 2, 120, "the stack serves again once its link is up")
    assert worker.check_output(f"systemctl show -p InvocationID --value {UNIT}") == before


def files(name):
    """The checksums of the stack instance's files on a member."""
    return host(name).check_output(f"sha256sum /etc/specdec/{INSTANCE['name']}/engine.env "
                                   f"/etc/systemd/system/{UNIT} | cut -d' ' -f1")


def test_a_change_that_fails_at_start_rolls_every_member_back_and_the_stack_serves_again():
    before = {name: files(name) for name in (HEAD, WORKER)}
    rc, out = converge(extra={"stack_fault": "crash_at_start"})
    assert rc != 0
    assert f"{UNIT} did not become healthy with the new configuration" in out, out[-3000:]
    # the worker failed with its head, and both put their previous files back
    assert f"the head of stack stack_a, {HEAD}, did not become healthy" in out, out[-3000:]
    assert {name: files(name) for name in (HEAD, WORKER)} == before
    # on failure, the head's own message says what the rollback found
    said = [line for line in out.splitlines() if "with the new configuration" in line]
    said += [line for line in out.splitlines() if "did not become healthy" in line and line not in said]
    assert "The previous files are back and the previous engine serves again" in out, "\n".join(said) or out[-3000:]
    found = world()
    assert found and found["world_size"] == 2


def test_stopping_the_workers_engine_takes_the_stack_down_and_converge_restores_it():
    # both engines of the worker: its sshd (mpirun's rank there ends) and its Ray node (the head's Ray cluster
    # loses the node of a rank)
    host(WORKER).check_output(f"systemctl stop {UNIT} {RAY_UNIT}")
    wait_for(lambda: world(timeout=3) is None, 90, "the head still serves without its worker's rank")
    wait_for(lambda: not health_ok(RAY["port"]), 90, "the vLLM head is healthy without its worker's Ray node")
    with tempfile.TemporaryDirectory() as reports:
        rc, out = playbook(PROJECT / "playbooks" / "health.yml", "-e", "fleet_view_report_dir=" + reports)
        report = json.loads((Path(reports) / "fleet.json").read_text())
    health = {(r["host"], r.get("instance")): r.get("health") for r in report["rows"]}
    for name in (INSTANCE["name"], RAY["name"]):
        assert health[(HEAD, name)] == "down" and health[(WORKER, name)] == "down", report
    rc, out = converge()
    assert rc == 0, out[-3000:]
    found = world()
    assert found and found["world_size"] == 2
    found = world(port=RAY["port"])
    assert found and found["world_size"] == 2 and health_ok(RAY["port"])


WEDGE_FILE = "/var/lib/specdec/models/lab-wedge"  # the instance's SPECDEC_EMU_WEDGE_FILE, as the host sees it


def instant(stamp):
    """docker's StartedAt (RFC 3339, nanoseconds with trailing zeros trimmed) as a number to compare."""
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def completes(timeout=10):
    """Whether the head's engine answers a completion with tokens within timeout."""
    try:
        with urllib.request.urlopen(urllib.request.Request(
                f"http://{lab_ip(HEAD)}:{PORT}/v1/completions", method="POST",
                data=json.dumps({"model": "gpt-oss-120b", "prompt": "Hello", "max_tokens": 4}).encode(),
                headers={"Content-Type": "application/json"}), timeout=timeout) as resp:
            return json.loads(resp.read())["usage"]["completion_tokens"] > 0
    except (OSError, urllib.error.URLError, ValueError, KeyError):
        return False


def test_a_wedged_worker_rank_is_healed_as_one_engine_every_rank_restarted_workers_first(tmp_path):
    """The worker's rank wedges (its host's wedge file: the rank tells rank 0, as a rank stuck in a collective holds
    the world): the head still answers /health, and no token comes out. The heal (playbooks/heal.yml, as the tune
    loop runs it for SpecdecEngineWedged on the head) restarts every rank, the worker's first, then the head's, in one
    heal; the stack serves again, and the vLLM instance on the same members is not touched."""
    before = {name: started_at(name) for name in (HEAD, WORKER)}
    ray_before = {name: host(name).check_output("systemctl show -p ActiveEnterTimestamp --value %s" % RAY_UNIT)
                  for name in (HEAD, WORKER)}
    assert completes(30)
    host(WORKER).check_output(f"touch {WEDGE_FILE}")
    try:
        wait_for(lambda: not completes(5), 90, "the stack still generates with its worker's rank wedged")
    finally:
        host(WORKER).check_output(f"rm -f {WEDGE_FILE}")
    assert health_ok(PORT), "a wedge keeps /health at 200"
    assert f"rank 1 on {hostname(WORKER)} wedged" in host(HEAD).check_output(f"journalctl -u {UNIT} --no-pager -n 300 -o cat")
    state = tmp_path / "heal.json"
    # the lab's spark-nodes class is this stack and one host: a floor below a third lets the stack's heal through
    rc, out = playbook(PROJECT / "playbooks" / "heal.yml", "-e", f"heal_host={HEAD}", "-e", f"heal_instance={INSTANCE['name']}",
                       "-e", f"heal_state_file={state}", "-e", "heal_capacity_floor=0.3")
    assert rc == 0, out[-4000:]
    assert f"Healing {HEAD}/{INSTANCE['name']} on {WORKER}, {HEAD} (class spark-nodes): all guards pass" in out, out[-3000:]
    after = {name: started_at(name) for name in (HEAD, WORKER)}
    assert after[HEAD] != before[HEAD] and after[WORKER] != before[WORKER], (before, after)
    # the worker's rank first, then the head's (which waits for it)
    assert instant(after[WORKER]) < instant(after[HEAD]), after
    recorded = json.loads(state.read_text())
    engine = recorded["engines"][f"{HEAD}/{INSTANCE['name']}"]
    assert len(engine["restarts"]) == 1 and engine["hosts"] == [WORKER, HEAD] and not engine["drained"], recorded
    assert recorded["classes"]["spark-nodes"]["in_progress"] is None
    assert completes(30)
    found = world()
    assert found and found["world_size"] == 2
    assert {name: host(name).check_output("systemctl show -p ActiveEnterTimestamp --value %s" % RAY_UNIT)
            for name in (HEAD, WORKER)} == ray_before
    # both members record it, for the fleet view
    for name in (HEAD, WORKER):
        fact = json.loads(host(name).file("/etc/ansible/facts.d/specdec_heal.fact").content_string)[INSTANCE["name"]]
        assert fact["restarts"] == 1 and fact["last_heal"]["outcome"] == "restarted", (name, fact)


def health_ok(port):
    try:
        with urllib.request.urlopen(f"http://{lab_ip(HEAD)}:{port}/health", timeout=3) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


class FrontDoorProbe:
    """Completions through the front door back to back (TLS verified with this scenario's CA, its API key), each
    outcome recorded with the engine that served it (X-Gateway-Server)."""

    def __init__(self, threads=2):
        self.key = (SECRETS / "api-key").read_text().strip()
        self.context = ssl.create_default_context(cafile=str(SECRETS / "ca.crt"))
        self.address = lab_ip(GATEWAY)
        self.records = []  # (ok, error, server)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _one(self):
        conn = http.client.HTTPSConnection(self.address, GATEWAY_PORT, context=self.context, timeout=60)
        try:
            conn.request("POST", "/v1/completions", headers={"Content-Type": "application/json",
                                                             "Authorization": "Bearer " + self.key},
                         body=json.dumps({"model": "gpt-oss-120b", "prompt": "stack probe", "max_tokens": 16}))
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200 or not json.loads(body).get("choices"):
                return False, "status %d: %s" % (resp.status, body[:200]), resp.getheader("X-Gateway-Server")
            return True, None, resp.getheader("X-Gateway-Server")
        finally:
            conn.close()

    def _run(self):
        deadline = time.monotonic() + 540
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                record = self._one()
            except Exception as exc:  # pylint: disable=broad-except  # every failure is a record, never a dead thread
                record = (False, repr(exc), None)
            with self.lock:
                self.records.append(record)
            self.stop.wait(0.05)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        time.sleep(1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def started_at(name):
    return host(name).check_output("docker inspect --format '{{.State.StartedAt}}' specdec-%s" % INSTANCE["name"])


def test_a_wedge_during_the_canarys_soak_rolls_the_stack_back_and_the_next_batch_never_starts(tmp_path):
    """A change to every host (an environment variable of every engine): the stack is the canary, then the single host.
    Once the stack serves the change, its worker's rank wedges, during the canary's soak (20 s under load here,
    rollout_soak_seconds_stack): the soak's round fails, both members are put back on their previous files and serve,
    and the single host's batch never starts."""
    before = {name: files(name) for name in (HEAD, WORKER, SINGLE)}
    started = {name: started_at(name) for name in (HEAD, WORKER, SINGLE)}
    extra = tmp_path / "soak.json"
    extra.write_text(json.dumps({"inference_server_env": {"SPECDEC_LAB_SOAK_CHANGE": "1"}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / "collections"))
    with open(tmp_path / "rollout.out", "w") as log:
        proc = subprocess.Popen(["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / "rollout.yml"),
                                 "-e", "@%s" % extra, "-e", "rollout_run_id=soak", "-e", "fleet_report_dir=%s" % tmp_path],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: started_at(HEAD) != started[HEAD] and completes(5), 400, "the stack serving the change")
            host(WORKER).check_output(f"touch {WEDGE_FILE}")
            try:
                wait_for(lambda: not completes(3), 90, "the stack still generates with its worker's rank wedged")
            finally:
                host(WORKER).check_output(f"rm -f {WEDGE_FILE}")
            rc = proc.wait(600)
        finally:
            if proc.poll() is None:
                proc.kill()
    out = (tmp_path / "rollout.out").read_text()
    assert rc != 0, out[-4000:]
    assert "soak of %s" % INSTANCE["name"] in out and "requests failed (at most" in out, out[-4000:]
    assert "Rollout soak stopped at" in out, out[-3000:]
    summary = json.loads((tmp_path / "rollout-soak.json").read_text())
    status = {row["host"]: row["status"] for row in summary["rows"]}
    assert (status[HEAD], status[WORKER]) == ("rolled back", "rolled back"), status
    assert status[SINGLE] in ("untouched", None), status
    # both members on their previous files and serving; the single host never touched
    assert {name: files(name) for name in (HEAD, WORKER)} == {HEAD: before[HEAD], WORKER: before[WORKER]}
    assert files(SINGLE) == before[SINGLE] and started_at(SINGLE) == started[SINGLE]
    assert completes(30)
    found = world()
    assert found and found["world_size"] == 2
    assert not host(HEAD).run("ls /etc/specdec/%s/*~" % INSTANCE["name"]).stdout.strip(), "a kept copy left behind"


def test_a_change_rolls_out_to_the_stack_as_one_member_behind_the_front_door_with_no_failed_request(tmp_path):
    before = {name: started_at(name) for name in (HEAD, WORKER, SINGLE)}
    with FrontDoorProbe() as probe:
        rc, out = playbook(PROJECT / "playbooks" / "rollout.yml", "-e", "rollout_run_id=stack-draft",
                           "-e", "fleet_report_dir=%s" % tmp_path, extra={"stack_draft_len": 2})
        time.sleep(2)
    assert rc == 0, out[-4000:]
    summary = json.loads((tmp_path / "rollout-stack-draft.json").read_text())
    status = {row["host"]: row["status"] for row in summary["rows"]}
    # the stack restarted as one (its two hosts in the canary batch); the single host had nothing to change
    assert (status[HEAD], status[WORKER], status[SINGLE]) == ("updated", "updated", "unchanged"), status
    assert started_at(HEAD) != before[HEAD] and started_at(WORKER) != before[WORKER]
    assert started_at(SINGLE) == before[SINGLE]
    config = yaml.safe_load(host(HEAD).file("/etc/specdec/%s/engine.yaml" % INSTANCE["name"]).content_string)
    assert config["speculative_config"]["max_draft_len"] == 2
    failures = [r for r in probe.records if not r[0]]
    assert probe.records and not failures, failures[:5]
    # while the stack restarted, the single host served; before and after, both did
    assert {r[2] for r in probe.records} >= {"%s:%s" % (SINGLE, INSTANCE["name"]), "%s:%s" % (HEAD, INSTANCE["name"])}
    # the front door never routes to a worker: it serves through its head
    assert "%s:%s" % (WORKER, INSTANCE["name"]) not in {r[2] for r in probe.records}
    assert (world() or {}).get("world_size") == 2


def sweep_fact(name):
    """The sweep's record of the stack's instance in a member's local fact."""
    return json.loads(host(name).file("/etc/ansible/facts.d/specdec_sweep.fact").content_string)[INSTANCE["name"]]


def test_a_sweep_of_the_stack_serves_each_candidate_on_both_members_measures_at_the_head_and_applies_on_both(tmp_path):
    """The draft-length sweep of the stack's instance: every candidate (no speculation for the output-equivalence
    gate and the speedup, then draft length 2) served by the whole stack, probed and measured at the head, the
    winner applied to both members and recorded alike on both; the head drained at the front door meanwhile, with
    no failed request (the single host serves)."""
    extra = {"draft_sweep_instance": INSTANCE["name"], "draft_sweep_draft_lens": [2], "draft_sweep_baseline": True,
             "draft_sweep_equivalence": True, "draft_sweep_concurrency": [1], "draft_sweep_repetitions": 1,
             "draft_sweep_min_runs": 1, "draft_sweep_requests_per_worker": 2,
             "draft_sweep_warmup_requests_per_worker": 0, "draft_sweep_max_tokens": 16, "draft_sweep_apply": True,
             "draft_sweep_run_id": "stack-sweep", "draft_sweep_report_dir": str(tmp_path)}
    with FrontDoorProbe() as probe:
        rc, out = playbook(PROJECT / "playbooks" / "sweep.yml", "-l", "stack_a", extra=extra)
    assert rc == 0, out[-4000:]
    # one report, the head's: it measured; the worker served every candidate with it
    reports = sorted(p.name for p in (tmp_path / "stack-sweep").glob("*.json"))
    assert reports == ["%s-%s.json" % (HEAD, INSTANCE["name"])], reports
    report = json.loads((tmp_path / "stack-sweep" / reports[0]).read_text())
    assert report["stack"] == {"group": "stack_a", "members": [HEAD, WORKER], "head": HEAD, "role": "head"}
    assert report["equivalence"]["status"] == "passed", report["equivalence"]
    winner = report["selection"]["winner"]["draft_len"]
    assert report["applied"] is True and winner in (0, 2), report["selection"]["winner"]
    assert [p["step"] for p in report["phases"]] == ["candidate", "candidate", "apply"], report["phases"]
    # both members record the same sweep and the same applied winner (what the fleet playbooks serve from now on)
    head_fact, worker_fact = sweep_fact(HEAD), sweep_fact(WORKER)
    assert head_fact["last_sweep"]["run_id"] == "stack-sweep" and head_fact == worker_fact
    assert head_fact["applied"]["max_draft_len"] == winner
    for name in (HEAD, WORKER):
        config = yaml.safe_load(host(name).file("/etc/specdec/%s/engine.yaml" % INSTANCE["name"]).content_string)
        assert (config.get("speculative_config") or {}).get("max_draft_len", 0) == winner, (name, config)
    assert (world() or {}).get("world_size") == 2
    failures = [r for r in probe.records if not r[0]]
    assert probe.records and not failures, failures[:5]
    # drained while the stack served candidates: the single host answered meanwhile
    assert "%s:%s" % (SINGLE, INSTANCE["name"]) in {r[2] for r in probe.records}
