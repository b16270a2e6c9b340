"""The lab's hub stand-in speaks the hub's HTTP protocol: headers, ranges, errors, accounting."""

import hashlib
import http.client
import json
from urllib.parse import urlsplit

import pytest

from hfhub import hfhub

REPO_ID = "specdec-lab/tiny-gpt-oss"


@pytest.fixture()
def hub(tmp_path):
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "cl100k_base.tiktoken").write_bytes(b"IQ== 0\n")
    server = hfhub.HubServer(tiktoken_dir=str(tmp_path / "enc"), log_path=str(tmp_path / "log.jsonl")).start()
    yield server
    server.stop()


def request(hub, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection(urlsplit(hub.url).hostname, urlsplit(hub.url).port, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def test_repo_info_and_tree(hub):
    resp, data = request(hub, "GET", "/api/models/%s/revision/v1.0" % REPO_ID)
    info = json.loads(data)
    sha, files = hub.state.repos[REPO_ID].resolve("v1.0")
    assert resp.status == 200 and info["sha"] == sha and info["config"]["model_type"] == "gpt_oss"
    assert sorted(s["rfilename"] for s in info["siblings"]) == sorted(files)
    _, data = request(hub, "GET", "/api/models/%s/tree/main?recursive=true" % REPO_ID)
    tree = json.loads(data)
    entry = next(e for e in tree if e["path"] == "model-00001-of-00002.safetensors")
    assert entry["lfs"]["oid"] == hashlib.sha256(hub.state.repos[REPO_ID].resolve("main")[1][entry["path"]].data).hexdigest()
    assert {"type": "directory", "path": "original"}.items() <= next(e for e in tree if e["path"] == "original").items()
    _, data = request(hub, "GET", "/api/models/%s/tree/main" % REPO_ID)
    assert not any("/" in e["path"] for e in json.loads(data))


def test_resolve_headers_and_ranges(hub):
    sha, files = hub.state.repos[REPO_ID].resolve("main")
    path = "/%s/resolve/main/config.json" % REPO_ID
    resp, data = request(hub, "HEAD", path)
    assert resp.status == 200 and data == b""
    assert resp.getheader("X-Repo-Commit") == sha
    assert resp.getheader("ETag") == '"%s"' % files["config.json"].blob_oid
    assert int(resp.getheader("Content-Length")) == files["config.json"].size
    assert resp.getheader("X-Xet-Hash") is None and resp.getheader("Link") is None   # plain HTTP, no Xet
    resp, data = request(hub, "GET", path, {"Range": "bytes=10-"})
    assert resp.status == 206 and data == files["config.json"].data[10:]
    assert resp.getheader("Content-Range") == "bytes 10-%d/%d" % (files["config.json"].size - 1, files["config.json"].size)
    resp, _ = request(hub, "GET", path, {"Range": "bytes=99999-"})
    assert resp.status == 416
    resp, _ = request(hub, "HEAD", "/%s/resolve/main/model-00001-of-00002.safetensors" % REPO_ID)
    assert resp.getheader("X-Linked-Etag") == '"%s"' % files["model-00001-of-00002.safetensors"].sha256


@pytest.mark.parametrize("path,status,code", [
    ("/api/models/specdec-lab/nope/revision/main", 404, "RepoNotFound"),
    ("/api/models/%s/revision/nope" % REPO_ID, 404, "RevisionNotFound"),
    ("/%s/resolve/main/nope.json" % REPO_ID, 404, "EntryNotFound"),
    ("/api/models/%s/revision/main" % hfhub.PRIVATE_REPO, 401, "RepoNotFound"),
])
def test_errors_carry_the_hub_error_codes(hub, path, status, code):
    resp, _ = request(hub, "GET", path)
    assert resp.status == status and resp.getheader("X-Error-Code") == code


def test_private_repo_opens_with_the_token(hub):
    resp, _ = request(hub, "GET", "/api/models/%s/revision/main" % hfhub.PRIVATE_REPO,
                      {"Authorization": "Bearer " + hfhub.DEFAULT_PRIVATE_TOKEN})
    assert resp.status == 200


def test_accounting_fault_and_encodings(hub):
    resp, data = request(hub, "GET", "/encodings/cl100k_base.tiktoken")
    assert resp.status == 200 and data == b"IQ== 0\n"
    assert request(hub, "GET", "/encodings/o200k_base.tiktoken")[0].status == 404   # not in the dir
    stats = json.loads(request(hub, "GET", "/_stats")[1])
    assert stats["by_path"]["/encodings/cl100k_base.tiktoken"] == len(data)
    assert stats["by_client"] == {"127.0.0.1": stats["bytes_served"]} and stats["requests"] == 2
    request(hub, "POST", "/_fault", body=json.dumps({"path": "README.md", "after_bytes": 7}))
    with pytest.raises(http.client.IncompleteRead):
        request(hub, "GET", "/%s/resolve/main/README.md" % REPO_ID)
    resp, data = request(hub, "GET", "/%s/resolve/main/README.md" % REPO_ID)   # the fault fires once
    assert resp.status == 200 and data.startswith(b"# specdec-lab/tiny-gpt-oss")
    log = [json.loads(line) for line in open(hub.state.log_path)]
    assert [e["bytes"] for e in log if e["path"].endswith("README.md")] == [7, len(data)]
    request(hub, "POST", "/_stats/reset")
    stats = json.loads(request(hub, "GET", "/_stats")[1])
    # only the reset's own answer remains
    assert stats["requests"] == 1 and stats["bytes_served"] == len(json.dumps({"reset": True}))


def test_generated_content_is_deterministic():
    first = hfhub.default_repos()[REPO_ID].describe()
    assert first == hfhub.default_repos()[REPO_ID].describe()
    assert first["refs"]["main"] != first["refs"]["v1.0"]
