"""model_cache's peer server: a host's complete snapshots served to its peers over the hub protocol."""

import importlib.util
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub", reason="huggingface_hub is in requirements-test.txt")

from ansible_collections.specdec.serve.plugins.module_utils import hf_manifest as hm  # noqa: E402
from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot, SnapshotError  # noqa: E402
from hfhub import hfhub  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
spec = importlib.util.spec_from_file_location("specdec_model_peer", REPO / "roles/model_cache/files/specdec_model_peer.py")
peer_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer_mod)
REPO_ID = "specdec-lab/tiny-gpt-oss-eagle3"


@pytest.fixture(autouse=True)
def _isolated_hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


@pytest.fixture()
def seeded(tmp_path):
    hub = hfhub.HubServer().start()
    root = tmp_path / "seed"
    Snapshot(REPO_ID, revision="v1.0", dest=str(root / REPO_ID), endpoint=hub.url).run()
    (root / "half" / "done").mkdir(parents=True)        # a snapshot without manifest: never served
    (root / "half" / "done" / "config.json").write_text("{}")
    handler = type("H", (peer_mod.PeerHandler,), {"root": str(root), "tiktoken_dir": None, "token": "peer-secret",
                                                  "log_message": lambda *a: None})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield hub, root, "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    hub.stop()


def test_peer_copy_equals_the_seed_and_costs_no_upstream_bytes(seeded, tmp_path):
    hub, root, peer_url = seeded
    upstream = hub.state.stats()["bytes_served"]
    result = Snapshot(REPO_ID, revision="v1.0", dest=str(tmp_path / "peer" / REPO_ID), endpoint=peer_url,
                      token="peer-secret", verify="sha256").run()
    assert result["cached"] and hub.state.stats()["bytes_served"] == upstream
    seed_manifest = hm.read_manifest(str(root / REPO_ID))
    peer_manifest = hm.read_manifest(str(tmp_path / "peer" / REPO_ID))
    assert peer_manifest["files"] == seed_manifest["files"] and peer_manifest["commit"] == seed_manifest["commit"]
    for rel in seed_manifest["files"]:
        assert (tmp_path / "peer" / REPO_ID / rel).read_bytes() == (root / REPO_ID / rel).read_bytes()


def test_peer_refuses_without_token_and_serves_only_complete_snapshots(seeded, tmp_path):
    _, _, peer_url = seeded
    with pytest.raises(SnapshotError, match="not found"):
        Snapshot(REPO_ID, revision="v1.0", dest=str(tmp_path / "a"), endpoint=peer_url).run()
    with pytest.raises(SnapshotError, match="not found"):
        Snapshot("half/done", dest=str(tmp_path / "b"), endpoint=peer_url, token="peer-secret").run()
    with pytest.raises(SnapshotError, match="revision 'main' not found"):
        Snapshot(REPO_ID, revision="main", dest=str(tmp_path / "c"), endpoint=peer_url, token="peer-secret").run()


def test_encodings_are_served_without_the_token(tmp_path):
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "o200k_base.tiktoken").write_bytes(b"abc 0\n")
    handler = type("H", (peer_mod.PeerHandler,), {"root": str(tmp_path), "tiktoken_dir": str(tmp_path / "enc"),
                                                  "token": "peer-secret", "log_message": lambda *a: None})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    import urllib.error
    import urllib.request
    base = "http://127.0.0.1:%d" % httpd.server_address[1]
    try:
        assert urllib.request.urlopen(base + "/encodings/o200k_base.tiktoken", timeout=5).read() == b"abc 0\n"
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(base + "/api/models/a/b/revision/main", timeout=5)
        assert denied.value.code == 401
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/encodings/../../etc/passwd", timeout=5)
    finally:
        httpd.shutdown()


def test_peer_refuses_a_wrong_token_of_the_same_length_and_any_other_scheme(seeded, tmp_path):
    _, _, peer_url = seeded
    for token in ("peer-secreT", "peer-secret-and-more", ""):
        with pytest.raises(SnapshotError, match="not found"):
            Snapshot(REPO_ID, revision="v1.0", dest=str(tmp_path / ("w%d" % len(token))), endpoint=peer_url,
                     token=token or None).run()
    request = urllib.request.Request(peer_url + "/api/models/%s" % REPO_ID, headers={"Authorization": "Basic peer-secret"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 401
