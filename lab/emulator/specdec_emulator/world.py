"""The MPI world of a multi-node `trtllm-serve` (lab only).

NVIDIA's multi-node recipe starts every rank with `mpirun ... trtllm-llmapi-launch trtllm-serve ...`:
rank 0 runs trtllm-serve, the others `python3 -m tensorrt_llm.llmapi.mgmn_worker_node`. The emulator's
ranks compute nothing; they make the world real. Every rank joins it (mpi4py) and takes part in one
handshake, an allgather of {rank, host, pid}; rank 0 checks the engine's parallel size against it and
serves, the workers wait until rank 0 ends the world at its shutdown (a barrier), so mpirun exits 0.

Without MPI in the environment nothing here imports mpi4py: the single-node images do not have it.
"""

import os
import socket
import time

from .trtllm_args import EngineConfigError

# The world size as mpirun (OpenMPI), a PMI launcher (MPICH's hydra, srun --mpi=pmi2) and srun set it.
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
POLL_S = 0.2


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

    def wait_end(self):
        """A worker: block until rank 0 ends the world."""
        _wait(self.comm.Ibarrier(), None)


def _wait(request, timeout):
    """Test a request until it completes (not Wait: a blocking MPI call spins a CPU core for as long as it
    waits). A non-blocking barrier matches only another non-blocking barrier: both sides use Ibarrier."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True
