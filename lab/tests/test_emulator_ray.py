"""`vllm serve --distributed-executor-backend ray`: the emulator joins the Ray cluster of a vLLM stack as vLLM's Ray
executor does (world.RayWorld), reports its ranks at /lab/world and dies when a node of its world leaves.

No Ray here: the ray module is replaced by a fake cluster of nodes (the lab's image for vLLM stacks has the real
one, lab/emulator/ray/Dockerfile; docs/emulator.md shows the two-container check)."""

import io
import json
import os
import socket
import sys
import time
import types
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulator_fixtures"))
import emu_helpers as H  # noqa: E402

from specdec_emulator import logs, server, world  # noqa: E402


# ------------------------------------------------------------------ a fake Ray cluster

class Node:
    def __init__(self, node_id, ip, host, gpus=1):
        self.node_id, self.ip, self.host, self.gpus = node_id, ip, host, gpus
        self.alive = True


class Ref:
    def __init__(self, ready, value=None):
        self._ready, self.value = ready, value

    def ready(self):
        return self._ready() if callable(self._ready) else self._ready


class PlacementGroup:
    def __init__(self, cluster, specs, strategy):
        self.cluster, self.bundle_specs, self.strategy = cluster, [dict(s) for s in specs], strategy
        self.id = "pg-0001"

    def placement(self):
        """{bundle index: node} as Ray would place the bundles (PACK), or None while they do not fit."""
        free = dict((n.node_id, n.gpus) for n in self.cluster.nodes if n.alive)
        out = {}
        for index, spec in enumerate(self.bundle_specs):
            pinned = [k[len("node:"):] for k in spec if k.startswith("node:")]
            fits = [n for n in self.cluster.nodes if n.alive and free[n.node_id] >= spec.get("GPU", 0)
                    and (not pinned or n.ip == pinned[0])]
            if not fits:
                return None
            node = next((n for n in fits if out and n is list(out.values())[-1]), fits[0])
            free[node.node_id] -= spec.get("GPU", 0)
            out[index] = node
        return out

    def ready(self):
        return Ref(lambda: self.placement() is not None)


class Strategy:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class RemoteFunction:
    def __init__(self, cluster, fn, options):
        self.cluster, self.fn, self.options_given = cluster, fn, options
        self.strategy = None

    def options(self, scheduling_strategy=None):
        copy = RemoteFunction(self.cluster, self.fn, self.options_given)
        copy.strategy = scheduling_strategy
        return copy

    def remote(self):
        """Runs the task "on" the node of its bundle: what rank_probe would report there."""
        pg = self.strategy.kwargs["placement_group"]
        node = pg.placement()[self.strategy.kwargs["placement_group_bundle_index"]]
        self.cluster.tasks.append((self.fn, self.options_given, dict(self.strategy.kwargs)))
        address = self.cluster.reported_ip.get(node.node_id, node.ip)
        return Ref(True, {"host": node.host, "address": address, "node_id": node.node_id, "pid": 4242})


class Cluster:
    """The nodes (the first is the driver's), the clock the waits advance, and what the driver asked for."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.now = 1000.0
        self.initialized = False
        self.init_calls = []
        self.placement_groups = []
        self.tasks = []
        self.reported_ip = {}
        self.on_wait = None  # called at each wait (a node joining meanwhile)

    # the ray module's functions
    def init(self, address="unset", **kwargs):
        self.init_calls.append(address)
        self.initialized = True

    def is_initialized(self):
        return self.initialized

    def cluster_resources(self):
        return {"GPU": float(sum(n.gpus for n in self.nodes if n.alive)), "CPU": 2.0 * len(self.nodes)}

    def get_runtime_context(self):
        return types.SimpleNamespace(get_node_id=lambda: self.nodes[0].node_id)

    def wait(self, refs, num_returns=1, timeout=None):
        if self.on_wait:
            self.on_wait(self)
        ready = [r for r in refs if r.ready()]
        if len(ready) < num_returns:
            self.now += timeout or 0
        return ready, [r for r in refs if r not in ready]

    def get(self, refs):
        return [r.value for r in refs]

    def remote(self, **options):
        return lambda fn: RemoteFunction(self, fn, options)

    def ray_nodes(self):
        return [{"NodeID": n.node_id, "Alive": n.alive, "NodeManagerAddress": n.ip} for n in self.nodes]

    # ray.util, ray._private.state
    def placement_group(self, specs, strategy="PACK"):
        pg = PlacementGroup(self, specs, strategy)
        self.placement_groups.append(pg)
        return pg

    def placement_group_table(self, pg):
        placed = pg.placement()
        return {"bundles": dict(enumerate(pg.bundle_specs)),
                "bundles_to_node_id": dict((i, n.node_id) for i, n in placed.items())}

    def available_resources_per_node(self):
        return dict((n.node_id, {"GPU": float(n.gpus), "CPU": 2.0}) for n in self.nodes if n.alive)


def two_nodes():
    return [Node("aa" * 28, "10.0.0.1", "spark-head"), Node("bb" * 28, "10.0.0.2", "spark-worker")]


@pytest.fixture
def cluster(monkeypatch):
    """A Ray cluster of two one-GPU nodes, the driver on the first (VLLM_HOST_IP 10.0.0.1), time its own."""
    c = Cluster(two_nodes())
    ray = types.ModuleType("ray")
    for name in ("init", "is_initialized", "cluster_resources", "get_runtime_context", "wait", "get", "remote"):
        setattr(ray, name, getattr(c, name))
    ray.nodes = c.ray_nodes
    util = types.ModuleType("ray.util")
    util.placement_group, util.placement_group_table = c.placement_group, c.placement_group_table
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.PlacementGroupSchedulingStrategy = Strategy
    private = types.ModuleType("ray._private")
    state = types.ModuleType("ray._private.state")
    state.available_resources_per_node = c.available_resources_per_node
    ray.util, util.scheduling_strategies, ray._private, private.state = util, strategies, private, state
    for name, module in (("ray", ray), ("ray.util", util), ("ray.util.scheduling_strategies", strategies),
                         ("ray._private", private), ("ray._private.state", state)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(world, "_now", lambda: c.now)
    monkeypatch.setattr(world, "RAY_POLL_S", 1.0)
    c.ray = ray
    return c


@pytest.fixture
def model(tmp_path):
    return H.make_model(tmp_path, "Qwen3-0.6B", model_type="qwen3")


def configure(model, args, **env):
    env = H.base_env(VLLM_HOST_IP="10.0.0.1", **env)
    return H.configure("vllm", [model] + args, env)


def form(cluster, tp=2, pp=1, **env):
    """A RayWorld formed on the fake cluster; (world, log text)."""
    out = io.StringIO()
    w = world.RayWorld(tp, pp, dict({"VLLM_HOST_IP": "10.0.0.1"}, **env))
    w.form(logs.Logger("vllm", out))
    return w, out.getvalue()


# ------------------------------------------------------------------ the arguments

def test_ray_backend_without_ray_installed_is_refused_as_vllm_refuses_it(model, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # not installed (the plain vllm-emulator image)
    cfg, code, text = configure(model, ["--tensor-parallel-size", "2", "--distributed-executor-backend", "ray"])
    assert cfg is None and code == 1
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig" in text
    assert "  Value error, Failed to import Ray: " in text
    assert ".Please install Ray with `pip install ray`. [type=value_error, input_value=ArgsKwargs((), " in text


@pytest.mark.parametrize("args", [[], ["--tensor-parallel-size", "2"], ["--distributed-executor-backend", "mp"],
                                  ["--distributed_executor_backend=uni"]])
def test_other_backends_never_import_ray(model, monkeypatch, args):
    monkeypatch.setitem(sys.modules, "ray", None)  # an import would raise
    cfg, code, text = configure(model, args)
    assert cfg is not None, text
    assert cfg.world.backend is None and cfg.world.formed and cfg.world.size == 1


def test_ray_backend_makes_a_ray_world_formed_at_start_up(model, cluster):
    cfg, code, text = configure(model, ["-tp", "2", "-pp", "2", "--distributed_executor_backend", "ray"])
    assert cfg is not None, text
    assert cfg.world.backend == "ray" and not cfg.world.formed and cfg.world.wanted == 4
    assert cluster.init_calls == []  # nothing joined before the server starts


def test_a_bad_placement_group_timeout_is_refused(model, cluster):
    cfg, code, text = configure(model, ["--distributed-executor-backend", "ray"], SPECDEC_EMU_RAY_PG_TIMEOUT_S="soon")
    assert cfg is None and code == 1
    assert "ValueError: SPECDEC_EMU_RAY_PG_TIMEOUT_S must be a number of seconds, got 'soon'" in text


# ------------------------------------------------------------------ forming the world

def test_the_world_is_learnt_through_ray(cluster):
    w, text = form(cluster)
    assert cluster.init_calls == [None]  # vLLM's ray.init: no address, the cluster `ray start` made here
    pg = cluster.placement_groups[0]
    assert pg.strategy == "PACK"
    assert pg.bundle_specs == [{"GPU": 1.0, "node:10.0.0.1": 0.001}, {"GPU": 1.0}]
    assert w.size == 2 and w.formed
    assert w.describe() == "world size 2: rank 0 on spark-head, rank 1 on spark-worker"
    assert w.as_json() == {"world_size": 2, "backend": "ray", "ranks": [
        {"rank": 0, "host": "spark-head", "address": "10.0.0.1"},
        {"rank": 1, "host": "spark-worker", "address": "10.0.0.2"}]}
    # one task per bundle, no CPU asked, its worker gone after it
    assert [t[1] for t in cluster.tasks] == [{"num_cpus": 0, "num_gpus": 1, "max_calls": 1}] * 2
    assert [t[2]["placement_group_bundle_index"] for t in cluster.tasks] == [0, 1]
    assert all(t[0] is world.rank_probe and t[2]["placement_group"] is pg for t in cluster.tasks)
    # vLLM's warning for tensor parallel ranks spread over nodes, once per node
    assert text.count("tensor_parallel_size=2 is bigger than a reserved number of GPUs (1 GPUs) in a node ") == 2
    assert "No current placement group found. Creating a new placement group." in text
    assert "exceeds the total number" not in text


def test_the_driver_node_ranks_first_whatever_its_address(cluster):
    cluster.nodes = [Node("cc" * 28, "10.0.0.9", "spark-head"), Node("dd" * 28, "10.0.0.2", "spark-worker")]
    w, _ = form(cluster, VLLM_HOST_IP="10.0.0.9")
    assert [(r["rank"], r["host"]) for r in w.ranks] == [(0, "spark-head"), (1, "spark-worker")]


def test_pipeline_parallel_counts_in_the_world(cluster):
    w, text = form(cluster, tp=1, pp=2)
    assert w.size == 2 and "is bigger than a reserved number" not in text


def test_a_worker_joining_while_vllm_waits(cluster):
    late = cluster.nodes.pop()

    def join(c):
        if c.now >= 1012 and late not in c.nodes:
            c.nodes.append(late)
    cluster.on_wait = join
    w, text = form(cluster)
    assert w.size == 2
    assert "WARNING" in text and ("The number of required GPUs exceeds the total number of available GPUs in the "
                                  "placement group.") in text
    assert "Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0, " \
           "'node:10.0.0.1': 0.001}, {'GPU': 1.0}]. Check `ray status`" in text


def test_more_ranks_than_gpus_refused_after_the_wait(cluster):
    with pytest.raises(world.EngineConfigError) as exc:
        form(cluster, tp=4, SPECDEC_EMU_RAY_PG_TIMEOUT_S="75")
    assert exc.value.exc_type == "ValueError"
    assert exc.value.message == (
        "Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, 'node:10.0.0.1': 0.001}, "
        "{'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}] within 75 seconds. See `ray status` and `ray list nodes` to make "
        "sure the cluster has enough resources.")
    assert cluster.now == 1075


def test_the_wait_logs_as_vllm_does(cluster):
    out = io.StringIO()
    with pytest.raises(world.EngineConfigError):
        world.RayWorld(4, 1, {"VLLM_HOST_IP": "10.0.0.1"}).form(logs.Logger("vllm", out))
    waits = [line.split("specs for ")[1].split(" seconds")[0] for line in out.getvalue().splitlines()
             if "Waiting for creating a placement group" in line]
    assert waits == ["10", "30", "70", "150", "310", "630", "1270"]  # vLLM's 10 s, doubling, until 1800 s


def test_vllm_host_ip_must_be_a_ray_node_address(cluster):
    """VLLM_HOST_IP other than the address `ray start --node-ip-address` gave the node: the first bundle, pinned to
    it, never fits (vLLM's hint in the wait's log line)."""
    with pytest.raises(world.EngineConfigError) as exc:
        form(cluster, VLLM_HOST_IP="192.168.1.1", SPECDEC_EMU_RAY_PG_TIMEOUT_S="5")
    assert "'node:192.168.1.1': 0.001" in exc.value.message


def test_a_driver_node_without_a_gpu_is_refused(cluster):
    cluster.nodes[0].gpus = 0
    with pytest.raises(world.EngineConfigError) as exc:
        form(cluster)
    assert exc.value.exc_type == "ValueError"
    assert exc.value.message.startswith("Current node has no GPU available. current_node_resource={'GPU': 0.0, "
                                        "'CPU': 2.0}. vLLM engine cannot start without GPU. Make sure you have at "
                                        "least 1 GPU available in a node current_node_id='aaaa")
    assert exc.value.message.endswith(" current_ip='10.0.0.1'.")


def test_nodes_reporting_one_address_are_refused(cluster):
    cluster.reported_ip[cluster.nodes[1].node_id] = "10.0.0.1"  # both nodes with VLLM_HOST_IP=10.0.0.1
    with pytest.raises(world.EngineConfigError) as exc:
        form(cluster)
    assert exc.value.exc_type == "RuntimeError"
    assert exc.value.message.startswith("Every node should have a unique IP address. Got 2 nodes with node ids [")
    assert "and 1 unique IP addresses {'10.0.0.1'}. Please check your network configuration." in exc.value.message


def test_lost_names_the_ranks_whose_node_left(cluster):
    w, _ = form(cluster)
    assert w.lost() == []
    cluster.nodes[1].alive = False
    assert w.lost() == ["rank 1 on spark-worker (Ray node %s)" % ("bb" * 28)]

    def gone():
        raise ConnectionError("GCS unreachable")
    cluster.ray.nodes = gone
    assert w.lost() == ["the Ray cluster does not answer (ConnectionError: GCS unreachable)"]


def test_rank_probe_reports_where_it_runs(cluster, monkeypatch):
    monkeypatch.setenv("VLLM_HOST_IP", "10.0.0.7")
    found = world.rank_probe()
    assert found == {"host": socket.gethostname(), "address": "10.0.0.7", "node_id": "aa" * 28, "pid": os.getpid()}


def test_vllm_host_ip():
    assert world.vllm_host_ip({"VLLM_HOST_IP": "10.9.8.7"}) == "10.9.8.7"
    found = world.vllm_host_ip({})
    assert isinstance(found, str) and found


# ------------------------------------------------------------------ serving

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def serve_args(tp):
    return ["--host", "127.0.0.1", "--port", "0", "--tensor-parallel-size", str(tp),
            "--distributed-executor-backend", "ray"]


def test_lab_world_and_health_until_a_node_leaves(model, cluster, capsys):
    cfg, code, text = configure(model, serve_args(2), SPECDEC_EMU_RAY_WATCH_S="0.05")
    assert cfg is not None, text
    srv = server.ThreadedServer(cfg).start()
    try:
        assert srv.port, "the server did not start"
        status, body = get(srv.base_url + "/lab/world")
        assert status == 200 and json.loads(body) == {"world_size": 2, "backend": "ray", "ranks": [
            {"rank": 0, "host": "spark-head", "address": "10.0.0.1"},
            {"rank": 1, "host": "spark-worker", "address": "10.0.0.2"}]}
        assert get(srv.base_url + "/health")[0] == 200
        cluster.nodes[1].alive = False
        deadline = time.time() + 5
        while get(srv.base_url + "/health")[0] == 200 and time.time() < deadline:
            time.sleep(0.05)
        assert get(srv.base_url + "/health")[0] == 503
    finally:
        assert srv.stop() == 0
    err = capsys.readouterr().err
    assert "world size 2: rank 0 on spark-head, rank 1 on spark-worker" in err
    assert "A node of the world left the Ray cluster: rank 1 on spark-worker" in err
    # the world formed before the model loaded
    assert err.index("world size 2:") < err.index("Starting to load model")


def test_no_lab_world_without_ray(model):
    srv = H.start("vllm", [model, "--host", "127.0.0.1", "--port", "0"], H.base_env())
    try:
        assert get(srv.base_url + "/lab/world") == (404, '{"detail": "Not Found"}')
    finally:
        srv.stop()


def test_a_refused_world_ends_the_start_up(model, cluster, capsys):
    cfg, code, text = configure(model, serve_args(4), SPECDEC_EMU_RAY_PG_TIMEOUT_S="30")
    assert cfg is not None, text
    srv = server.ThreadedServer(cfg).start()
    assert srv.stop() == 1 and srv.port is None
    err = capsys.readouterr().err
    assert err.rstrip().endswith("ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, "
                                 "'node:10.0.0.1': 0.001}, {'GPU': 1.0}, {'GPU': 1.0}, {'GPU': 1.0}] within 30 "
                                 "seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough "
                                 "resources.")


def test_stopped_while_waiting_for_the_placement_group(model, cluster, monkeypatch):
    monkeypatch.setattr(world, "RAY_POLL_S", 0.01)
    real_wait = cluster.wait

    def slow_wait(refs, num_returns=1, timeout=None):
        time.sleep(0.01)
        return real_wait(refs, num_returns, 0)  # the fake clock stands still: it would wait for ever
    cluster.ray.wait = slow_wait
    cfg, code, text = configure(model, serve_args(4))
    srv = server.ThreadedServer(cfg).start(timeout=0.3)
    started = time.monotonic()
    assert srv.stop() == 0
    assert time.monotonic() - started < 5 and srv.port is None
