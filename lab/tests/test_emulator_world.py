"""A multi-node trtllm-serve: trtllm-llmapi-launch's rank dispatch, the MPI world's size check and /lab/world.

No MPI here: mpi4py is replaced by a fake world (the emulator images for stacks have the real one;
lab/emulator/stack/Dockerfile)."""

import io
import json
import os
import socket
import stat
import subprocess
import sys
import time
import types
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulator_fixtures"))
import emu_helpers as H  # noqa: E402

from specdec_emulator import server, trtllm_cli, world  # noqa: E402

LAUNCH = os.path.join(H.EMULATOR, "bin", "trtllm-llmapi-launch")
STANDINS = os.path.join(H.EMULATOR, "standins")
MPI_VARS = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "SLURM_NTASKS", "SLURM_PROCID")


# ------------------------------------------------------------------ trtllm-llmapi-launch

@pytest.fixture
def launch(tmp_path):
    """Run the launch script with a python3 on PATH that prints what it was asked to run."""
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\necho "python3 $*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    def run(args, **ranks):
        env = {k: v for k, v in os.environ.items() if k not in MPI_VARS}
        env.update(ranks, PATH="%s:%s" % (tmp_path, os.environ.get("PATH", "")))
        return subprocess.run(["sh", LAUNCH] + args, env=env, capture_output=True, text=True, timeout=10)

    return run


def test_launch_rank0_runs_the_command(launch):
    proc = launch(["echo", "serving", "--tp_size 2"], OMPI_COMM_WORLD_RANK="0")
    assert proc.returncode == 0
    assert proc.stdout == "serving --tp_size 2\n"  # "$@", words kept as given
    assert "mpi_rank: 0" in proc.stderr


def test_launch_other_ranks_run_the_worker_node(launch):
    proc = launch(["echo", "serving"], OMPI_COMM_WORLD_RANK="1")
    assert proc.returncode == 0
    assert proc.stdout == "python3 -m tensorrt_llm.llmapi.mgmn_worker_node\n"
    assert "mpi_rank: 1" in proc.stderr


def test_launch_rank_sources(launch):
    assert launch(["echo", "serving"]).stdout == "serving\n"  # no MPI: rank 0
    assert launch(["echo", "serving"], PMI_RANK="2").stdout.startswith("python3 -m")
    # srun's rank first, as upstream
    assert launch(["echo", "serving"], SLURM_PROCID="0", OMPI_COMM_WORLD_RANK="1").stdout == "serving\n"


def test_launch_without_a_command(launch):
    proc = launch([], OMPI_COMM_WORLD_RANK="0")
    assert proc.returncode == 2 and "usage: trtllm-llmapi-launch" in proc.stderr


def test_launch_is_executable():
    assert os.stat(LAUNCH).st_mode & stat.S_IXUSR


# ------------------------------------------------------------------ the world

def ranks(n):
    return [{"rank": r, "host": "node-%d" % r, "pid": 100 + r} for r in range(n)]


def test_env_world_size():
    assert world.env_world_size({}) == 1
    assert world.env_world_size({"OMPI_COMM_WORLD_SIZE": "2"}) == 2
    assert world.env_world_size({"PMI_SIZE": "4"}) == 4
    assert world.env_world_size({"SLURM_NTASKS": "3"}) == 3
    assert world.env_world_size({"OMPI_COMM_WORLD_SIZE": ""}) == 1


def test_world_describe_and_json():
    w = world.World(ranks(2))
    assert w.describe() == "world size 2: rank 0 on node-0, rank 1 on node-1"
    assert w.as_json() == {"world_size": 2, "ranks": [{"rank": 0, "host": "node-0"}, {"rank": 1, "host": "node-1"}]}


@pytest.fixture
def model(tmp_path):
    return H.make_model(tmp_path, "Llama-3.3-70B-Instruct-FP4")


def configure(model, args, rank=0):
    """trtllm-serve's configure as rank `rank` of a world of two."""
    out = io.StringIO()
    cfg, code = trtllm_cli.configure([model] + args, env=H.base_env(), out=out, world=world.World(ranks(2), rank))
    return cfg, code, out.getvalue()


@pytest.mark.parametrize("args,yaml_text", [
    (["--tp_size", "2"], None),
    (["--pp_size", "2"], None),
    ([], "tensor_parallel_size: 2\n"),
    (["--tp_size", "1"], "pipeline_parallel_size: 2\n"),
])
def test_world_size_matches_tp_times_pp(model, tmp_path, args, yaml_text):
    if yaml_text:
        args = args + ["--extra_llm_api_options", H.write_yaml(tmp_path, yaml_text)]
    cfg, code, text = configure(model, args)
    assert cfg is not None, text
    assert cfg.world.size == 2


@pytest.mark.parametrize("args,yaml_text,wanted", [
    ([], None, 1),
    (["--tp_size", "4"], None, 4),
    (["--tp_size", "2", "--pp_size", "2"], None, 4),
    (["--tp_size", "2"], "pipeline_parallel_size: 2\n", 4),
])
def test_world_size_mismatch_refused(model, tmp_path, args, yaml_text, wanted):
    if yaml_text:
        args = args + ["--extra_llm_api_options", H.write_yaml(tmp_path, yaml_text)]
    cfg, code, text = configure(model, args)
    assert cfg is None and code == 1
    assert text.endswith("ValueError: n_workers must be equal to the number of processes in MPI, got %d vs 2\n" % wanted)


def test_trtllm_serve_on_another_rank_refused(model):
    cfg, code, text = configure(model, ["--tp_size", "2"], rank=1)
    assert cfg is None and code == 1
    assert "RuntimeError: only rank 0 can start multi-node session, got 1" in text


# ------------------------------------------------------------------ mpi4py, faked

class FakeRequest:
    """mpi4py's Request: Test() is true once it was asked `polls` times; `on_test(n)` is called at the n-th."""

    def __init__(self, polls, on_test=None):
        self.polls, self.tests, self.on_test = polls, 0, on_test

    def Test(self):
        self.tests += 1
        if self.on_test:
            self.on_test(self.tests)
        self.polls -= 1
        return self.polls < 0


class FakeComm:
    """mpi4py's COMM_WORLD, by its method names. Point-to-point: isend records (obj, dest, tag) in `sent`, and
    Iprobe/recv take from `inbox`, [(obj, tag)] (any source, as the callers ask)."""

    def __init__(self, rank, size, polls=0):
        self.rank, self.size, self.polls = rank, size, polls
        self.barriers = 0
        self.aborted = None
        self.on_barrier_test = None
        self.sent, self.send_polls = [], 0
        self.inbox = []

    def isend(self, obj, dest, tag):
        self.sent.append((obj, dest, tag))
        return FakeRequest(self.send_polls)

    def Iprobe(self, tag):
        return any(t == tag for _, t in self.inbox)

    def recv(self, tag):
        for i, (obj, t) in enumerate(self.inbox):
            if t == tag:
                del self.inbox[i]
                return obj
        raise AssertionError("recv(tag=%d) would block: no such message" % tag)

    def Get_rank(self):
        return self.rank

    def allgather(self, me):
        assert set(me) == {"rank", "host", "pid"} and me["rank"] == self.rank
        return [me if r == self.rank else {"rank": r, "host": "node-%d" % r, "pid": 1} for r in range(self.size)]

    def Ibarrier(self):
        self.barriers += 1
        return FakeRequest(self.polls, self.on_barrier_test)

    def Abort(self, code):  # MPI_Abort does not return: the job ends
        self.aborted = code
        raise SystemExit(code)


@pytest.fixture
def fake_mpi(monkeypatch):
    """mpi4py with a world of two, this process rank 0 unless changed."""
    comm = FakeComm(0, 2)
    mpi = types.SimpleNamespace(COMM_WORLD=comm, Get_processor_name=lambda: "head-host")
    package = types.ModuleType("mpi4py")
    package.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", package)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    monkeypatch.setattr(world, "POLL_S", 0)
    for name in MPI_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    return comm


def test_join_gathers_every_rank(fake_mpi):
    w = world.World.join()
    assert w.rank == 0 and w.size == 2
    assert w.ranks[0]["host"] == "head-host" and w.ranks[0]["pid"] == os.getpid()
    assert w.describe() == "world size 2: rank 0 on head-host, rank 1 on node-1"


def test_rank0_refusal_releases_the_workers(fake_mpi, model, capsys):
    assert trtllm_cli.main([model, "--tp_size", "4"]) == 1
    assert "got 4 vs 2" in capsys.readouterr().err
    assert fake_mpi.barriers == 1 and fake_mpi.aborted is None


def test_refusal_on_another_rank_aborts(fake_mpi, model):
    fake_mpi.rank = 1
    with pytest.raises(SystemExit):
        trtllm_cli.main([model, "--tp_size", "2"])
    assert fake_mpi.aborted == 1 and fake_mpi.barriers == 0


def test_worker_node_waits_for_rank0(fake_mpi, capsys):
    fake_mpi.rank, fake_mpi.polls = 1, 3
    sys.path.insert(0, STANDINS)
    try:
        from tensorrt_llm.llmapi import mgmn_worker_node
    finally:
        sys.path.remove(STANDINS)
    assert mgmn_worker_node.main() == 0
    err = capsys.readouterr().err
    assert "worker rank1 on head-host joined the MPI world size 2: rank 0 on node-0, rank 1 on head-host" in err
    assert "worker rank1 quited" in err
    assert fake_mpi.barriers == 1


# ------------------------------------------------------------------ SPECDEC_EMU_WEDGE_FILE on a worker rank

def test_worker_tells_rank0_once_when_its_wedge_file_appears(tmp_path, monkeypatch):
    monkeypatch.setattr(world, "POLL_S", 0)
    wedge = tmp_path / "wedge"
    comm = FakeComm(1, 2, polls=6)
    sent_at = []  # (barrier test, messages sent by then)

    def on_test(n):
        sent_at.append((n, len(comm.sent)))
        if n == 3:
            wedge.write_text("")

    comm.on_barrier_test = on_test
    logs = []
    world.World(ranks(2), 1, comm).wait_end(wedge_file=str(wedge), log=logs.append)
    # nothing before the file exists, one message after, and the worker still waited for the end
    assert sent_at == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 1), (6, 1), (7, 1)]
    assert comm.sent == [({"rank": 1, "host": "node-1", "file": str(wedge)}, 0, world.WEDGE_TAG)]
    assert comm.barriers == 1
    assert len(logs) == 1 and logs[0].startswith("rank 1 on node-1 wedged (SPECDEC_EMU_WEDGE_FILE %s exists)" % wedge)


def test_worker_without_a_wedge_file_sends_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(world, "POLL_S", 0)
    comm = FakeComm(1, 2, polls=3)
    world.World(ranks(2), 1, comm).wait_end(wedge_file=str(tmp_path / "absent"))
    world.World(ranks(2), 1, comm).wait_end()
    assert comm.sent == [] and comm.barriers == 2


def test_wedge_message_never_taken_does_not_keep_the_worker(tmp_path, monkeypatch):
    """Rank 0 ended the world without receiving it: the worker quits after a bounded wait, so mpirun ends."""
    monkeypatch.setattr(world, "POLL_S", 0)
    monkeypatch.setattr(world, "WEDGE_SEND_GRACE_S", 0.05)
    (tmp_path / "wedge").write_text("")
    comm = FakeComm(1, 2, polls=2)
    comm.send_polls = 10 ** 9
    logs = []
    world.World(ranks(2), 1, comm).wait_end(wedge_file=str(tmp_path / "wedge"), log=logs.append)
    assert len(comm.sent) == 1
    assert logs[-1] == "rank 1: the wedge message to rank 0 did not leave in time; quitting without it"


def test_worker_node_reads_its_wedge_file_from_its_environment(fake_mpi, tmp_path, monkeypatch, capsys):
    (tmp_path / "wedge").write_text("")
    monkeypatch.setenv("SPECDEC_EMU_WEDGE_FILE", str(tmp_path / "wedge"))
    fake_mpi.rank, fake_mpi.polls = 1, 2
    sys.path.insert(0, STANDINS)
    try:
        from tensorrt_llm.llmapi import mgmn_worker_node
    finally:
        sys.path.remove(STANDINS)
    assert mgmn_worker_node.main() == 0
    assert [(m["rank"], dest, tag) for m, dest, tag in fake_mpi.sent] == [(1, 0, world.WEDGE_TAG)]
    err = capsys.readouterr().err
    assert "rank 1 on head-host wedged (SPECDEC_EMU_WEDGE_FILE %s exists)" % (tmp_path / "wedge") in err
    assert "worker rank1 quited" in err


def test_rank0_takes_each_wedge_message_once():
    comm = FakeComm(0, 3)
    w = world.World(ranks(3), 0, comm)
    assert w.wedged() == []
    comm.inbox += [({"rank": 2, "host": "node-2", "file": "/models/w"}, world.WEDGE_TAG), ("other", 1)]
    assert w.wedged() == ["rank 2 on node-2"]
    assert w.wedged() == [] and comm.inbox == [("other", 1)]  # another tag's message is not taken
    assert world.World(ranks(1)).wedged() == []  # no MPI: nothing to ask


def post_completion(url, timeout):
    body = json.dumps({"model": "m", "prompt": "x", "max_tokens": 4}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def test_rank0_engine_wedges_when_a_worker_rank_hangs(model, monkeypatch, capsys):
    """A worker's wedge message (as wait_end sends it) wedges rank 0's engine: /health stays 200, no token."""
    monkeypatch.setattr(world, "POLL_S", 0.01)
    comm = FakeComm(0, 2)
    cfg, code = trtllm_cli.configure([model, "--host", "127.0.0.1", "--port", "0", "--tp_size", "2"],
                                     env=H.base_env(), out=io.StringIO(), world=world.World(ranks(2), 0, comm))
    assert cfg is not None
    srv = server.ThreadedServer(cfg).start()
    try:
        assert post_completion(srv.base_url, 10)["usage"]["completion_tokens"] == 4
        time.sleep(0.1)
        assert "wedged" not in capsys.readouterr().err  # no message, no wedge
        comm.inbox.append(({"rank": 1, "host": "node-1", "file": "/models/wedge"}, world.WEDGE_TAG))
        deadline = time.monotonic() + 5
        while comm.inbox and time.monotonic() < deadline:
            time.sleep(0.01)
        assert comm.inbox == [], "rank 0 did not take the wedge message"
        with pytest.raises(OSError):  # socket.timeout: accepted, and no token comes out
            post_completion(srv.base_url, 1.0)
        with urllib.request.urlopen(srv.base_url + "/health", timeout=5) as resp:
            assert resp.status == 200
    finally:
        assert srv.stop() == 0
    err = capsys.readouterr().err
    assert "rank 1 on node-1 wedged: the world's collectives stop; no iteration completes from now on" in err
    assert "engine wedged: no iteration completes from now on" in err


def test_no_mpi_without_mpi_env(model, monkeypatch):
    """Outside MPI nothing imports mpi4py (the single-node images lack it): a poisoned import would raise."""
    for name in MPI_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:  # the whole start-up, up to the bind that fails
        code = trtllm_cli.main([model, "--host", "127.0.0.1", "--port", str(busy.getsockname()[1])])
    finally:
        busy.close()
    assert code == 1


# ------------------------------------------------------------------ /lab/world

def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, json.loads(resp.read().decode())


def test_lab_world_single_process(model):
    srv = H.start("trtllm", [model, "--host", "127.0.0.1", "--port", "0"], H.base_env())
    try:
        status, body = get_json(srv.base_url + "/lab/world")
    finally:
        assert srv.stop() == 0
    assert status == 200
    assert body == {"world_size": 1, "ranks": [{"rank": 0, "host": socket.gethostname()}]}


def test_lab_world_of_a_stack(model):
    cfg, code, text = configure(model, ["--host", "127.0.0.1", "--port", "0", "--tp_size", "2"])
    assert cfg is not None, text
    srv = server.ThreadedServer(cfg).start()
    try:
        status, body = get_json(srv.base_url + "/lab/world")
    finally:
        assert srv.stop() == 0
    assert body == {"world_size": 2, "ranks": [{"rank": 0, "host": "node-0"}, {"rank": 1, "host": "node-1"}]}
