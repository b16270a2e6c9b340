"""The model lock: recorded by the first fetch of a pinned commit, then the reference of every fetch and re-check."""

import json

import pytest

pytest.importorskip("huggingface_hub", reason="huggingface_hub is in requirements-test.txt")

from ansible_collections.specdec.serve.plugins.module_utils import hf_manifest as hm  # noqa: E402
from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot, SnapshotError  # noqa: E402
from hfhub import hfhub  # noqa: E402

REPO_ID = "specdec-lab/tiny-gpt-oss"
LOCK_PATH = "/srv/inventory/model-locks/specdec-lab/tiny-gpt-oss@x.json"


@pytest.fixture()
def hub():
    server = hfhub.HubServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _isolated_hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


def commit_of(hub, ref="main"):
    return hub.state.repos[REPO_ID].refs[ref]


def snap(hub, dest, **kwargs):
    return Snapshot(REPO_ID, revision=kwargs.pop("revision", commit_of(hub)), dest=str(dest), endpoint=hub.url,
                    ignore_patterns=kwargs.pop("ignore_patterns", ["original/*", "metal/*"]),
                    progress_interval=0.2, lock_path=LOCK_PATH, **kwargs)


def first_lock(hub, tmp_path):
    return snap(hub, tmp_path / "first" / REPO_ID, record_lock=True).run()["lock"]


def change_on_the_hub(hub, path, data):
    """The same commit, listed and served with other bytes (what a hub, mirror or peer could do)."""
    _sha, files = hub.state.repos[REPO_ID].resolve(commit_of(hub))
    files[path] = hfhub.RepoFile(path, data, lfs=files[path].lfs)


def test_first_fetch_records_every_file_with_its_sha256(hub, tmp_path):
    lock = first_lock(hub, tmp_path)
    _sha, files = hub.state.repos[REPO_ID].resolve("main")
    expected = {p: f for p, f in files.items() if not p.startswith(("original/", "metal/"))}
    assert lock["repo_id"] == REPO_ID and lock["revision"] == commit_of(hub)
    assert lock["files"] == {p: {"size": f.size, "sha256": f.sha256} for p, f in expected.items()}
    json.dumps(lock)   # the role writes it as JSON


def test_a_lock_is_recorded_from_a_snapshot_cached_before_locks(hub, tmp_path):
    dest = tmp_path / "m" / REPO_ID
    snap(hub, dest).run()
    again = snap(hub, dest, record_lock=True).run()
    assert again["cached"] and not again["network"] and again["lock"] == first_lock(hub, tmp_path)


def test_an_lfs_file_changed_on_the_hub_is_refused_against_the_lock(hub, tmp_path):
    lock = first_lock(hub, tmp_path)
    change_on_the_hub(hub, "model-00001-of-00002.safetensors", b"other weights" * 1000)
    dest = tmp_path / "second-host" / REPO_ID
    # without the lock the listing that serves the bytes vouches for them: accepted
    assert snap(hub, tmp_path / "unlocked" / REPO_ID).run()["cached"]
    with pytest.raises(SnapshotError) as err:
        snap(hub, dest, lock=lock).run()
    msg = str(err.value)
    assert "model-00001-of-00002.safetensors" in msg and LOCK_PATH in msg and "delete " + LOCK_PATH in msg
    assert not dest.exists()


def test_a_small_file_changed_on_the_hub_is_refused_after_download_and_not_put_in_place(hub, tmp_path):
    lock = first_lock(hub, tmp_path)
    change_on_the_hub(hub, "config.json", b'{"model_type": "other"}\n')
    dest = tmp_path / "second-host" / REPO_ID
    with pytest.raises(SnapshotError) as err:
        snap(hub, dest, lock=lock).run()
    assert "config.json" in str(err.value) and LOCK_PATH in str(err.value)
    assert not dest.exists() and not (tmp_path / "second-host" / (REPO_ID + ".partial") / "config.json").exists()


def test_a_cached_snapshot_is_rechecked_against_the_lock(hub, tmp_path):
    dest = tmp_path / "m" / REPO_ID
    lock = snap(hub, dest, record_lock=True).run()["lock"]
    assert snap(hub, dest, lock=lock).run()["network"] is False
    tampered = json.loads(json.dumps(lock))
    tampered["files"]["model-00002-of-00002.safetensors"]["sha256"] = "0" * 64
    with pytest.raises(SnapshotError) as err:
        snap(hub, dest, lock=tampered).run()
    assert "model-00002-of-00002.safetensors" in str(err.value) and "0" * 64 in str(err.value)
    # offline (the peer source's probe), the disagreement is reported as not cached
    held = snap(hub, dest, lock=tampered, offline=True).run(check_mode=True)
    assert held["cached"] is False and "model-00002-of-00002.safetensors" in held["msg"]


def test_a_changed_small_file_on_disk_is_fetched_again_and_checked_against_the_lock(hub, tmp_path):
    dest = tmp_path / "m" / REPO_ID
    lock = snap(hub, dest, record_lock=True).run()["lock"]
    config = dest / "config.json"
    config.write_bytes(config.read_bytes().replace(b"gpt_oss", b"gpt_osz"))   # same size
    result = snap(hub, dest, lock=lock).run()
    assert result["repaired"] == ["config.json"]
    assert hm.sha256_file(str(config)) == lock["files"]["config.json"]["sha256"]


def test_with_verify_sha256_every_file_is_hashed_against_the_lock(hub, tmp_path):
    dest = tmp_path / "m" / REPO_ID
    lock = snap(hub, dest, record_lock=True).run()["lock"]
    shard = dest / "model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[0] ^= 1
    shard.write_bytes(bytes(data))
    assert snap(hub, dest, lock=lock).run()["network"] is False            # size only: not seen
    result = snap(hub, dest, lock=lock, verify="sha256").run()
    assert result["repaired"] == ["model-00001-of-00002.safetensors"]


def test_a_file_listed_but_not_locked_and_the_reverse_are_refused(hub, tmp_path):
    lock = first_lock(hub, tmp_path)
    narrower = json.loads(json.dumps(lock))
    del narrower["files"]["generation_config.json"]
    with pytest.raises(SnapshotError, match="generation_config.json .listed but not in the lock"):
        snap(hub, tmp_path / "a" / REPO_ID, lock=narrower).run()
    wider = json.loads(json.dumps(lock))
    wider["files"]["extra.safetensors"] = {"size": 1, "sha256": "1" * 64}
    with pytest.raises(SnapshotError, match="extra.safetensors .in the lock but not listed"):
        snap(hub, tmp_path / "b" / REPO_ID, lock=wider).run()
    # a locked file that the patterns leave out is not asked for
    assert snap(hub, tmp_path / "c" / REPO_ID, lock=lock, ignore_patterns=["original/*", "metal/*", "README.md"]).run()["cached"]


def test_a_lock_of_another_commit_or_repo_is_refused(hub, tmp_path):
    lock = first_lock(hub, tmp_path)
    with pytest.raises(SnapshotError, match="is of specdec-lab/tiny-gpt-oss@%s, not of" % commit_of(hub)):
        snap(hub, tmp_path / "a" / REPO_ID, lock=lock, revision=commit_of(hub, "v1.0")).run()


def test_lock_problems_compares_a_listing_with_the_lock():
    lock = hm.lock_document("o/n", "a" * 40, {"w.safetensors": {"size": 3, "sha256": "b" * 64},
                                              "c.json": {"size": 2, "sha256": "c" * 64}})
    listing = {"w.safetensors": {"size": 3, "sha256": "d" * 64, "oid": "x", "etag": "d" * 64},
               "c.json": {"size": 2, "oid": "y", "etag": "y"}}
    assert hm.lock_problems(lock, listing) == [("w.safetensors", "sha256 %s, the lock says %s" % ("d" * 64, "b" * 64))]
    listing["c.json"]["size"] = 5
    assert ("c.json", "size 5, the lock says 2") in hm.lock_problems(lock, listing)
