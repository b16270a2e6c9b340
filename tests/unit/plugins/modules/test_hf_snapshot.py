"""hf_snapshot against the hub stand-in (lab/hfhub) on 127.0.0.1, with the real huggingface_hub client."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub", reason="huggingface_hub is in requirements-test.txt")

from ansible_collections.specdec.serve.plugins.module_utils import hf_manifest as hm  # noqa: E402
from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot, SnapshotError  # noqa: E402
from hfhub import hfhub  # noqa: E402

REPO_ID = "specdec-lab/tiny-gpt-oss"
REPO = Path(__file__).resolve().parents[4]


@pytest.fixture()
def hub(tmp_path):
    server = hfhub.HubServer(log_path=str(tmp_path / "hub.jsonl")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _isolated_hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


def snap(hub, dest, **kwargs):
    kwargs.setdefault("progress_interval", 0.2)
    return Snapshot(kwargs.pop("repo_id", REPO_ID), dest=str(dest) if dest else None,
                    endpoint=kwargs.pop("endpoint", hub.url), **kwargs)


def hub_files(hub, repo_id=REPO_ID, ref="main"):
    sha, files = hub.state.repos[repo_id].resolve(ref)
    return sha, files


def test_download_writes_files_and_manifest(hub, tmp_path):
    dest = tmp_path / "models" / "specdec-lab" / "tiny-gpt-oss"
    result = snap(hub, dest).run()
    sha, files = hub_files(hub)
    assert result["changed"] and result["network"]
    assert result["commit"] == sha
    assert sorted(result["fetched_files"]) == sorted(files)
    for path, rfile in files.items():
        assert (dest / path).read_bytes() == rfile.data
    manifest = json.loads((dest / hm.MANIFEST_NAME).read_text())
    assert manifest["commit"] == sha and manifest["repo_id"] == REPO_ID and manifest["revision"] == "main"
    assert {p: e["size"] for p, e in manifest["files"].items()} == {p: f.size for p, f in files.items()}
    assert manifest["files"]["model-00001-of-00002.safetensors"]["sha256"] == files["model-00001-of-00002.safetensors"].sha256
    assert manifest["files"]["config.json"]["etag"] == files["config.json"].blob_oid
    assert not Path(str(dest) + ".partial").exists()
    assert not (dest / hm.PROGRESS_NAME).exists()
    assert stat.S_IMODE((dest / "config.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((dest / "original").stat().st_mode) == 0o755
    assert result["size"] == sum(f.size for f in files.values())


def test_recheck_of_cached_snapshot_needs_no_network(hub, tmp_path):
    dest = tmp_path / "m"
    snap(hub, dest).run()
    before = hub.state.stats()["requests"]
    # A closed port as endpoint: any network use would fail.
    again = Snapshot(REPO_ID, dest=str(dest), endpoint="http://127.0.0.1:9").run()
    assert again["changed"] is False and again["network"] is False and again["cached"] is True
    assert again["commit"] == hub_files(hub)[0]
    assert hub.state.stats()["requests"] == before


def test_dropped_connection_resumes_with_a_range_request(hub, tmp_path):
    # The client writes in 10 MiB chunks and resumes from the last whole chunk: use a 24 MiB shard
    # and drop the connection after 11 MiB.
    big = "specdec-lab/big-model"
    hub.state.repos[big] = hfhub.model_repo(big, "gpt_oss", weight_size=24 * 2 ** 20)
    shard = "model-00001-of-00002.safetensors"
    hub.state.arm_fault(shard, 11 * 2 ** 20)
    result = snap(hub, tmp_path / "m", repo_id=big).run()
    _, files = hub_files(hub, big)
    size, chunk = files[shard].size, 10 * 2 ** 20
    assert (tmp_path / "m" / shard).read_bytes() == files[shard].data
    log = [json.loads(line) for line in Path(hub.state.log_path).read_text().splitlines()]
    gets = [e for e in log if e["method"] == "GET" and e["path"].endswith(shard)]
    assert [(e["status"], e.get("note", "")) for e in gets] == [(200, "dropped"), (206, "range %d-%d" % (chunk, size))]
    # Resumed, not restarted: less than the file and a half crossed the wire.
    assert sum(e["bytes"] for e in gets) == 11 * 2 ** 20 + size - chunk
    assert result["changed"] and result["cached"]


def test_interrupted_run_never_exposes_dest_and_next_run_fetches_only_the_rest(hub, tmp_path):
    dest = tmp_path / "m"
    shard = "model-00002-of-00002.safetensors"
    hub.state.arm_fault(shard, 0, times=50)          # the client's retries all fail: the run fails
    with pytest.raises(SnapshotError):
        snap(hub, dest, max_workers=1).run()
    assert not dest.exists()                          # nothing half-downloaded at the served path
    partial = Path(str(dest) + ".partial")
    done = {p.relative_to(partial).as_posix() for p in partial.rglob("*") if p.is_file() and ".cache" not in p.parts}
    assert "config.json" in done and shard not in done
    hub.state.faults.clear()
    hub.state.reset()
    result = snap(hub, dest).run()
    assert result["cached"] and (dest / shard).stat().st_size == hub_files(hub)[1][shard].size
    fetched = {p.rsplit("/resolve/", 1)[1].split("/", 1)[1] for p, n in hub.state.stats()["by_path"].items()
               if "/resolve/" in p and n > 0}
    assert shard in fetched and not fetched & done


def test_wrong_revision_fails_clearly(hub, tmp_path):
    with pytest.raises(SnapshotError, match=r"revision 'no-such-tag' not found in specdec-lab/tiny-gpt-oss"):
        snap(hub, tmp_path / "m", revision="no-such-tag").run()
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.partial").exists()


def test_missing_repo_fails_clearly(hub, tmp_path):
    with pytest.raises(SnapshotError, match=r"repo specdec-lab/no-such-model at http://127.0.0.1:\d+ not found \(HTTP 404\)"):
        snap(hub, tmp_path / "m", repo_id="specdec-lab/no-such-model").run()


def test_private_repo_needs_the_token(hub, tmp_path):
    with pytest.raises(SnapshotError, match="give a token if it is private"):
        snap(hub, tmp_path / "p", repo_id=hfhub.PRIVATE_REPO).run()
    result = snap(hub, tmp_path / "p", repo_id=hfhub.PRIVATE_REPO, token=hfhub.DEFAULT_PRIVATE_TOKEN).run()
    assert result["cached"] and (tmp_path / "p" / "config.json").is_file()
    leftovers = [p for p in (tmp_path / "p").rglob("*") if p.is_file()
                 and hfhub.DEFAULT_PRIVATE_TOKEN.encode() in p.read_bytes()]
    assert leftovers == []


def test_corrupted_file_is_found_by_sha256_and_fetched_again(hub, tmp_path):
    dest = tmp_path / "m"
    snap(hub, dest).run()
    shard = "model-00001-of-00002.safetensors"
    data = bytearray((dest / shard).read_bytes())
    data[1000] ^= 0xFF                                # same size, different content
    (dest / shard).write_bytes(bytes(data))
    assert snap(hub, dest).run()["changed"] is False  # a size check cannot see it (by design: no I/O)
    hub.state.reset()
    result = snap(hub, dest, verify="sha256").run()
    assert result["changed"] and result["repaired"] == [shard] and result["fetched_files"] == [shard]
    assert (dest / shard).read_bytes() == hub_files(hub)[1][shard].data
    served = {p: n for p, n in hub.state.stats()["by_path"].items() if "/resolve/" in p and n}
    assert list(served) and all(p.endswith(shard) for p in served)
    assert snap(hub, dest, verify="sha256").run()["changed"] is False


def test_truncated_file_is_found_by_the_size_check(hub, tmp_path):
    dest = tmp_path / "m"
    snap(hub, dest).run()
    with open(dest / "metal" / "model.bin", "r+b") as handle:
        handle.truncate(10)
    result = snap(hub, dest).run()
    assert result["repaired"] == ["metal/model.bin"]
    assert (dest / "metal" / "model.bin").stat().st_size == hub_files(hub)[1]["metal/model.bin"].size


def test_check_mode_reports_without_writing(hub, tmp_path):
    dest = tmp_path / "m"
    result = snap(hub, dest).run(check_mode=True)
    sha, files = hub_files(hub)
    assert result["changed"] and result["commit"] == sha and sorted(result["fetched_files"]) == sorted(files)
    assert result["downloaded_bytes"] == sum(f.size for f in files.values())
    assert "(not cached)" in result["diff"]["before"] and sha in result["diff"]["after"]
    assert not dest.exists() and not Path(str(dest) + ".partial").exists()
    offline = snap(hub, dest, offline=True).run(check_mode=True)
    assert offline["changed"] and offline["cached"] is False and offline["network"] is False


def test_offline_fails_when_not_cached(hub, tmp_path):
    with pytest.raises(SnapshotError, match="offline is set"):
        snap(hub, tmp_path / "m", offline=True).run()


def test_patterns_tag_then_branch_update_fetches_only_changes(hub, tmp_path):
    dest = tmp_path / "m"
    first = snap(hub, dest, revision="v1.0", ignore_patterns=["metal/*"]).run()
    sha_v1, files_v1 = hub_files(hub, ref="v1.0")
    assert first["commit"] == sha_v1 and (dest / "model.safetensors").is_file()
    hub.state.reset()
    second = snap(hub, dest, revision="main", ignore_patterns=["metal/*"]).run()
    sha_main, files_main = hub_files(hub)
    assert second["commit"] == sha_main
    # unchanged files (same etag) were not fetched again; the old single weight file is gone
    assert "README.md" not in second["fetched_files"] and "config.json" in second["fetched_files"]
    assert not (dest / "model.safetensors").exists() and not (dest / "metal").exists()
    assert sorted(p for p in json.loads((dest / hm.MANIFEST_NAME).read_text())["files"]) == \
        sorted(p for p in files_main if not p.startswith("metal/"))
    assert not any(p.endswith("README.md") for p in hub.state.stats()["by_path"] if "/resolve/" in p
                   and hub.state.stats()["by_path"][p] > 0)


def test_branch_is_pinned_until_refresh(hub, tmp_path):
    dest = tmp_path / "m"
    pinned = snap(hub, dest).run()["commit"]
    repo = hub.state.repos[REPO_ID]
    repo.refs["main"] = repo.refs["v1.0"]             # the branch moves upstream
    still = snap(hub, dest).run()
    assert still["changed"] is False and still["commit"] == pinned and still["network"] is False
    moved = snap(hub, dest, refresh=True).run()
    assert moved["changed"] and moved["commit"] == repo.refs["v1.0"] != pinned


def test_full_disk_fails_before_downloading(hub, tmp_path):
    with pytest.raises(SnapshotError, match=r"needs [\d.]+ GB on /\S*, [\d.]+ GB free"):
        snap(hub, tmp_path / "m", reserve_gb=10 ** 9).run()
    assert not any("/resolve/" in p for p in hub.state.stats()["by_path"])


def test_cache_dir_layout_writes_the_ref_last(hub, tmp_path):
    cache = tmp_path / "hub-cache"
    result = Snapshot(REPO_ID, cache_dir=str(cache), endpoint=hub.url).run()
    sha, files = hub_files(hub)
    storage = cache / "models--specdec-lab--tiny-gpt-oss"
    assert result["path"] == str(storage / "snapshots" / sha)
    assert (storage / "refs" / "main").read_text() == sha
    assert (storage / "snapshots" / sha / "config.json").read_bytes() == files["config.json"].data
    assert (storage / "snapshots" / sha / hm.MANIFEST_NAME).is_file()
    again = Snapshot(REPO_ID, cache_dir=str(cache), endpoint="http://127.0.0.1:9").run()
    assert again["changed"] is False and again["network"] is False


def test_absent_removes_the_snapshot(hub, tmp_path):
    dest = tmp_path / "m"
    snap(hub, dest).run()
    assert snap(hub, dest).run(state="absent")["changed"] and not dest.exists()
    assert snap(hub, dest).run(state="absent")["changed"] is False


def _run_module(args, env=None):
    argfile = Path(args.pop("_dir")) / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, str(REPO / "plugins" / "modules" / "hf_snapshot.py"), str(argfile)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "collections"), **(env or {})))
    return proc, json.loads(proc.stdout)


def test_module_entry_point_hides_the_token(hub, tmp_path):
    args = {"_dir": str(tmp_path), "repo_id": hfhub.PRIVATE_REPO, "dest": str(tmp_path / "p"), "endpoint": hub.url,
            "_ansible_diff": True}
    proc, out = _run_module(dict(args), env={"HF_TOKEN": hfhub.DEFAULT_PRIVATE_TOKEN})
    assert out["changed"] is True and out["cached"] is True and "diff" in out, proc.stderr
    assert hfhub.DEFAULT_PRIVATE_TOKEN not in proc.stdout + proc.stderr
    proc, out = _run_module(dict(args, token="hf_wrong_token", _ansible_check_mode=True, dest=str(tmp_path / "q")))
    assert out.get("failed") and "refused the token (HTTP 401)" in out["msg"]
    assert "hf_wrong_token" not in proc.stdout


def test_the_token_can_come_from_a_file_and_is_not_echoed(hub, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(hfhub.DEFAULT_PRIVATE_TOKEN + "\n")
    args = {"_dir": str(tmp_path), "repo_id": hfhub.PRIVATE_REPO, "dest": str(tmp_path / "p"), "endpoint": hub.url,
            "token_file": str(token_file)}
    proc, out = _run_module(dict(args))
    assert out["changed"] is True and out["cached"] is True, proc.stderr
    assert hfhub.DEFAULT_PRIVATE_TOKEN not in proc.stdout + proc.stderr
    token_file.write_text("hf_wrong_token")
    proc, out = _run_module(dict(args, dest=str(tmp_path / "q"), _ansible_check_mode=True))
    assert out.get("failed") and "refused the token (HTTP 401)" in out["msg"]
    assert "hf_wrong_token" not in proc.stdout
    proc, out = _run_module(dict(args, token_file=str(tmp_path / "missing"), dest=str(tmp_path / "r")))
    assert out.get("failed") and "cannot read token_file" in out["msg"]


@pytest.mark.parametrize("path", ["model-00001-of-00002.safetensors", "README.md"])
def test_a_first_download_is_checked_by_content_against_the_listing(hub, tmp_path, path):
    """A mirror (or a peer) that serves other bytes than the hub lists, same size: refused without
    verify=sha256, and the snapshot is never exposed."""
    _, files = hub_files(hub)
    rfile = files[path]
    assert rfile.data[:1] != b" "
    rfile.data = b" " + rfile.data[1:]  # same size, other bytes; the listing keeps the old digests
    dest = tmp_path / "m"
    with pytest.raises(SnapshotError, match="not what the hub lists.*%s" % path.replace(".", r"\.")):
        snap(hub, dest).run()
    assert not dest.exists()
