"""The MPI world of a multi-node `trtllm-serve` (lab only).

NVIDIA's multi-node recipe starts every rank with `mpirun ... trtllm-llmapi-launch trtllm-serve ...`:
rank 0 runs trtllm-serve, the others `python3 -m tensorrt_llm.llmapi.mgmn_worker_node`. The emulator's
ranks compute nothing; they make the world real. Every rank joins it (mpi4py) and takes part in one
handshake, an allgather of {rank, host, pid}; rank 0 checks the engine's parallel size against it and
serves, the workers wait until rank 0 ends the world at its shutdown (a barrier), so mpirun exits 0.
A worker whose SPECDEC_EMU_WEDGE_FILE appears tells rank 0 it hangs (one message, WEDGE_TAG), and rank 0's
engine wedges: one rank stuck in a collective stops the whole world's iterations.

Without MPI in the environment nothing here imports mpi4py: the single-node images do not have it.

A vLLM stack runs on Ray (RayWorld): each node runs `ray start` (the head `--head`, the workers `--address
HEAD:6379 --block`), and the head's `vllm serve ... --distributed-executor-backend ray` joins that cluster as
vLLM's Ray executor does (vllm/executor/ray_utils.py, initialize_ray_cluster): a placement group of one
{"GPU": 1} bundle per rank, then one task in each bundle, which reports the host it ran on. Ray is real (the
lab's image with it: lab/emulator/ray); only `vllm serve` imports it, and only with that backend.
"""

import os
import socket
import time
from collections import defaultdict

from .trtllm_args import EngineConfigError

# The world size as mpirun (OpenMPI), a PMI launcher (MPICH's hydra, srun --mpi=pmi2) and srun set it.
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
POLL_S = 0.2
# The tag of a worker's message "this rank hangs" to rank 0 (wait_end, wedged): a tag of its own, so that no
# other point-to-point message of the world could be taken for it. MPI guarantees tags up to 32767.
WEDGE_TAG = 7207
# How long a worker that told rank 0 it hangs waits, once the world ended, for that message to leave: a small
# message is sent eagerly (the request completes at once, received or not), and a send never taken must not
# keep mpirun from ending.
WEDGE_SEND_GRACE_S = 2.0


def env_world_size(env=None):
    """The world size the launcher put in the environment; 1 outside MPI."""
    env = os.environ if env is None else env
    for name in SIZE_VARS:
        value = (env.get(name) or "").strip()
        if value.isdigit():
            return int(value)
    return 1


class World:
    """The ranks of the world, {rank, host, pid} each, and this process's rank in it."""

    backend = None  # RayWorld: "ray"
    formed = True  # RayWorld: False until form() placed its ranks

    def __init__(self, ranks, rank=0, comm=None):
        self.ranks = ranks
        self.rank = rank
        self.comm = comm

    @property
    def size(self):
        return len(self.ranks)

    @classmethod
    def single(cls):
        """A process started without MPI: a world of one."""
        return cls([{"rank": 0, "host": socket.gethostname(), "pid": os.getpid()}])

    @classmethod
    def join(cls):
        """MPI_Init (importing mpi4py's MPI does it) and the handshake every rank takes part in."""
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        me = {"rank": comm.Get_rank(), "host": MPI.Get_processor_name(), "pid": os.getpid()}
        return cls(comm.allgather(me), me["rank"], comm)

    def describe(self):
        return "world size %d: %s" % (self.size, ", ".join("rank %d on %s" % (r["rank"], r["host"])
                                                            for r in self.ranks))

    def as_json(self):
        """GET /lab/world."""
        return {"world_size": self.size, "ranks": [{"rank": r["rank"], "host": r["host"]} for r in self.ranks]}

    def check(self, llm):
        """Upstream's MpiCommSession: trtllm-serve runs on rank 0, and the engine's ranks (tensor x pipeline
        parallel) are MPI's world. Raises EngineConfigError as upstream words it."""
        if self.rank != 0:
            raise EngineConfigError("RuntimeError", "only rank 0 can start multi-node session, got %d" % self.rank)
        wanted = (llm.get("tensor_parallel_size") or 1) * (llm.get("pipeline_parallel_size") or 1)
        if wanted != self.size:
            raise EngineConfigError("ValueError", "n_workers must be equal to the number of processes in MPI, "
                                    "got %d vs %d" % (wanted, self.size))

    def end(self, timeout=30.0):
        """Rank 0: release the workers waiting in wait_end. Returns whether they all arrived in time.
        Any other rank (trtllm-serve started there, refused by check) aborts the job, as a failed rank does."""
        if self.comm is None:
            return True
        comm, self.comm = self.comm, None
        if self.rank != 0:
            comm.Abort(1)  # does not return
        return _wait(comm.Ibarrier(), timeout)

    def wait_end(self, wedge_file=None, log=None):
        """A worker: block until rank 0 ends the world.

        `wedge_file` (SPECDEC_EMU_WEDGE_FILE as this rank sees it, a path on its own host), looked at as often as
        the barrier: once it exists, this rank hangs as a rank stuck in a collective does. It tells rank 0 once
        (a non-blocking send, WEDGE_TAG; rank 0's engine wedges on it, see wedged()) and `log`s it, then waits
        for the end as before: the world still ends, and mpirun with it, when rank 0 stops."""
        sent = []

        def look():
            if not sent and wedge_file and os.path.exists(wedge_file):
                me = self.ranks[self.rank]
                sent.append(self.comm.isend({"rank": self.rank, "host": me["host"], "file": wedge_file},
                                            dest=0, tag=WEDGE_TAG))
                if log:
                    log("rank %d on %s wedged (SPECDEC_EMU_WEDGE_FILE %s exists): it hangs in the world's "
                        "collectives from now on; rank 0 told" % (self.rank, me["host"], wedge_file))

        _wait(self.comm.Ibarrier(), None, look)
        # rank 0 may have ended without taking the message (it was stopping): quit anyway, bounded
        if sent and not _wait(sent[0], WEDGE_SEND_GRACE_S) and log:
            log("rank %d: the wedge message to rank 0 did not leave in time; quitting without it" % self.rank)

    def wedged(self):
        """Rank 0: the worker ranks that told it they hang (wait_end), in words ("rank 1 on HOST"), each once;
        [] while none did. Non-blocking (Iprobe before each receive, any source), so a loop can ask it often."""
        found = []
        while self.comm is not None and self.comm.Iprobe(tag=WEDGE_TAG):
            msg = self.comm.recv(tag=WEDGE_TAG)
            found.append("rank %d on %s" % (msg["rank"], msg["host"]))
        return found


def _wait(request, timeout, each=None):
    """Test a request until it completes (not Wait: a blocking MPI call spins a CPU core for as long as it
    waits), calling `each` between tests. A non-blocking barrier matches only another non-blocking barrier:
    both sides use Ibarrier."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            return False
        if each is not None:
            each()
        time.sleep(POLL_S)
    return True


# ------------------------------------------------------------------ Ray: vLLM's ray executor

# vllm/executor/ray_utils.py: how long vLLM waits for its placement group (the workers' nodes may join the
# cluster after the head started `vllm serve`). SPECDEC_EMU_RAY_PG_TIMEOUT_S (seconds) shortens it in the lab.
PG_WAIT_TIMEOUT = 1800
DEVICE = "GPU"  # vLLM's current_platform.ray_device_key on CUDA
RAY_POLL_S = 1.0  # how often a wait looks at the stop flag


def _now():
    """The clock of the Ray waits (tests replace it)."""
    return time.monotonic()


class RayStopped(Exception):
    """The server was told to stop while the world was forming (SIGTERM during the placement group's wait)."""


def import_ray():
    """(ray, None), or (None, the ImportError) where Ray is not installed, as vllm/executor/ray_utils.py imports it."""
    try:
        import ray
    except ImportError as exc:
        return None, exc
    return ray, None


def vllm_host_ip(env=None):
    """vLLM's get_ip(): VLLM_HOST_IP, else the address this host reaches the internet from (connecting a UDP
    socket sends nothing), IPv4 then IPv6, else 0.0.0.0."""
    env = os.environ if env is None else env
    if env.get("VLLM_HOST_IP"):
        return env["VLLM_HOST_IP"]
    for family, target in ((socket.AF_INET, ("8.8.8.8", 80)), (socket.AF_INET6, ("2001:4860:4860::8888", 80))):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect(target)
                return sock.getsockname()[0]
        except OSError:
            pass
    return "0.0.0.0"


def rank_probe():
    """The task of one bundle, in a Ray worker process on the bundle's node: where it runs, as vLLM's workers
    report it (get_ip() and the Ray node id)."""
    import ray

    return {"host": socket.gethostname(), "address": vllm_host_ip(),
            "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


def _seconds(value):
    return int(value) if value == int(value) else value


class RayWorld(World):
    """The ranks of a `vllm serve --distributed-executor-backend ray`, learnt through the Ray cluster.

    form() does what vLLM's initialize_ray_cluster and its executor's worker placement do, in outline and with
    vLLM's words: connect to the cluster, ask for a placement group of tensor x pipeline parallel {"GPU": 1}
    bundles (the first pinned to this node, VLLM_HOST_IP's), wait for it, and run one task in each bundle
    (no CPU asked, and the worker process ends after it), which reports its host. The ranks are ordered as vLLM
    orders its workers: this node's first. lost() names the ranks whose node left the cluster."""

    backend = "ray"

    def __init__(self, tensor_parallel_size=1, pipeline_parallel_size=1, env=None, ray=None):
        super().__init__([], 0)
        self.tensor_parallel_size = tensor_parallel_size or 1
        self.pipeline_parallel_size = pipeline_parallel_size or 1
        self.env = dict(os.environ if env is None else env)
        self.ray = ray
        self.placement_group = None
        raw = (self.env.get("SPECDEC_EMU_RAY_PG_TIMEOUT_S") or "").strip()
        try:
            self.pg_timeout = float(raw) if raw else PG_WAIT_TIMEOUT
        except ValueError:
            raise EngineConfigError("ValueError", "SPECDEC_EMU_RAY_PG_TIMEOUT_S must be a number of seconds, got %r"
                                    % raw)

    @property
    def wanted(self):
        """vLLM's parallel_config.world_size."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def formed(self):
        return bool(self.ranks)

    def as_json(self):
        """GET /lab/world: the MPI world's shape, the backend named, each rank's address (VLLM_HOST_IP) added."""
        return {"world_size": self.size, "backend": self.backend,
                "ranks": [{"rank": r["rank"], "host": r["host"], "address": r["address"]} for r in self.ranks]}

    def form(self, log, stop=None):
        """Join the cluster and place the ranks (blocking). Raises EngineConfigError with vLLM's words, or
        RayStopped when `stop` (a threading.Event) is set while it waits."""
        ray = self.ray
        if ray is None:
            ray, err = import_ray()
            if ray is None:
                raise EngineConfigError("ValueError", "Failed to import Ray: %s.Please install Ray with "
                                        "`pip install ray`." % err)
            self.ray = ray
        from ray._private.state import available_resources_per_node
        from ray.util import placement_group

        if ray.is_initialized():
            log.info("Ray is already initialized. Skipping Ray initialization.", "ray_utils.py:295")
        else:
            # vLLM passes no address: the cluster `ray start` made on this node (RAY_ADDRESS, else
            # /tmp/ray/ray_current_cluster), or, without one, a new cluster of this node alone
            ray.init(address=None)
        log.info("No current placement group found. Creating a new placement group.", "ray_utils.py:345")
        if self.wanted > ray.cluster_resources().get(DEVICE, 0):
            # not refused yet: the other nodes may still be joining; the placement group's wait decides
            log.warning("The number of required %ss exceeds the total number of available %ss in the placement "
                        "group." % (DEVICE, DEVICE), "ray_utils.py:352")
        specs = [{DEVICE: 1.0} for _ in range(self.wanted)]
        current_ip = vllm_host_ip(self.env)
        current_node_id = ray.get_runtime_context().get_node_id()
        current_node_resource = available_resources_per_node().get(current_node_id, {})
        if current_node_resource.get(DEVICE, 0) < 1:
            raise EngineConfigError("ValueError", (
                "Current node has no %s available. current_node_resource=%r. vLLM engine cannot start without "
                "%s. Make sure you have at least 1 %s available in a node current_node_id=%r current_ip=%r."
                % (DEVICE, current_node_resource, DEVICE, DEVICE, current_node_id, current_ip)))
        # the first bundle on this node: vLLM pins it with a sliver of the node's own resource
        specs[0]["node:%s" % current_ip] = 0.001
        pg = placement_group(specs, strategy="PACK")
        self.placement_group = pg
        self._wait_until_ready(ray, pg, log, stop)
        self._verify_bundles(pg, current_node_id, log)
        log.info("use_ray_spmd_worker: True", "ray_distributed_executor.py:171")
        self.ranks = self._place(ray, pg, current_ip, stop)
        return self

    def _wait_until_ready(self, ray, pg, log, stop):
        """vLLM's _wait_until_pg_ready: its log lines after 10, 30, 70, ... s, its ValueError at the timeout."""
        specs = pg.bundle_specs
        ref = pg.ready()
        started = _now()
        step = next_log = 10
        while True:
            left = self.pg_timeout - (_now() - started)
            if left <= 0:
                break
            ready, _ = ray.wait([ref], timeout=min(RAY_POLL_S, left))
            if ready:
                return
            if stop is not None and stop.is_set():
                raise RayStopped()
            elapsed = _now() - started
            if elapsed >= next_log:
                step *= 2
                next_log += step
                log.info("Waiting for creating a placement group of specs for %d seconds. specs=%s. Check "
                         "`ray status` and `ray list nodes` to see if you have enough resources, and make sure the "
                         "IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable "
                         "specified in each node if you are running on a multi-node." % (int(elapsed), specs),
                         "ray_utils.py:240")
        if ray.wait([ref], timeout=0)[0]:
            return
        raise EngineConfigError("ValueError", (
            "Cannot provide a placement group of placement_group_specs=%r within %s seconds. See `ray status` and "
            "`ray list nodes` to make sure the cluster has enough resources." % (specs, _seconds(self.pg_timeout))))

    def _verify_bundles(self, pg, driver_node_id, log):
        """vLLM's _verify_bundles: the driver's node holds a bundle; a warning where tensor parallel ranks span
        nodes (always so on a stack of one-GPU nodes, as upstream warns on two DGX Sparks)."""
        from ray.util import placement_group_table

        table = placement_group_table(pg)
        node_id_to_bundle = defaultdict(list)
        for index, node_id in table["bundles_to_node_id"].items():
            node_id_to_bundle[node_id].append(table["bundles"][index])
        if driver_node_id not in node_id_to_bundle:
            raise EngineConfigError("RuntimeError", (
                "driver node id %s is not included in a placement group %s. Node id -> bundles %s. You don't have "
                "enough GPUs available in a current node. Check `ray status` and `ray list nodes` to see if you "
                "have available GPUs in a node `{driver_node_id}` before starting an vLLM engine."
                % (driver_node_id, pg.id, node_id_to_bundle)))
        for node_id, bundles in node_id_to_bundle.items():
            if len(bundles) < self.tensor_parallel_size:
                log.warning(
                    "tensor_parallel_size=%d is bigger than a reserved number of %ss (%d %ss) in a node %s. Tensor "
                    "parallel workers can be spread out to 2+ nodes which can degrade the performance unless you "
                    "have fast interconnect across nodes, like Infiniband. To resolve this issue, make sure you "
                    "have more than %d GPUs available at each node." % (
                        self.tensor_parallel_size, DEVICE, len(bundles), DEVICE, node_id, self.tensor_parallel_size),
                    "ray_utils.py:206")

    def _place(self, ray, pg, driver_ip, stop):
        """One task in each bundle with a GPU (vLLM's workers, one per rank); the ranks in vLLM's order."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        indices = [i for i, bundle in enumerate(pg.bundle_specs) if bundle.get(DEVICE, 0)][:self.wanted]
        probe = ray.remote(num_cpus=0, num_gpus=1, max_calls=1)(rank_probe)
        refs = [probe.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_capture_child_tasks=True, placement_group_bundle_index=i)).remote()
            for i in indices]
        deadline = _now() + max(self.pg_timeout, 60)
        while True:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=RAY_POLL_S)
            if len(ready) == len(refs):
                break
            if stop is not None and stop.is_set():
                raise RayStopped()
            if _now() > deadline:
                raise EngineConfigError("ray.exceptions.GetTimeoutError", "Get timed out: some object(s) not ready.")
        found = ray.get(refs)
        ips = [f["address"] for f in found]
        per_ip = dict((ip, ips.count(ip)) for ip in ips)
        # vLLM's sort_by_driver_then_worker_ip: the driver's node first, then nodes with fewer workers, then by IP
        order = sorted(range(len(found)), key=lambda i: (0 if ips[i] == driver_ip else 1, per_ip[ips[i]], ips[i]))
        ranks = [dict(found[i], rank=rank, bundle=indices[i]) for rank, i in enumerate(order)]
        node_ids = []
        for r in ranks:
            if r["node_id"] not in node_ids:
                node_ids.append(r["node_id"])
        all_ips = set(ips + [driver_ip])
        if len(node_ids) != len(all_ips):
            raise EngineConfigError("RuntimeError", (
                "Every node should have a unique IP address. Got %d nodes with node ids %s and %d unique IP addresses "
                "%s. Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, make "
                "sure it is unique for each node." % (len(node_ids), node_ids, len(all_ips), all_ips)))
        return ranks

    def lost(self):
        """The ranks whose Ray node is no longer alive in the cluster's node table, in words ([] while all are)."""
        try:
            nodes = self.ray.nodes()
        except Exception as exc:  # the head's own GCS gone
            return ["the Ray cluster does not answer (%s: %s)" % (type(exc).__name__, exc)]
        alive = dict((n.get("NodeID"), bool(n.get("Alive"))) for n in nodes)
        return ["rank %d on %s (Ray node %s)" % (r["rank"], r["host"], r["node_id"])
                for r in self.ranks if not alive.get(r["node_id"])]
