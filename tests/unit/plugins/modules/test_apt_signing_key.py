"""apt_signing_key: an apt repository's key trusted by fingerprint, with real gpg keys served over HTTP.

The module runs as Ansible runs it (a Python process reading its arguments from a file). Two keys are
made with gpg for the test: the pinned one and another, which a repository URL must not be able to swap in.
"""

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

import ansible_collections.specdec.serve as collection
from ansible_collections.specdec.serve.plugins.module_utils.openpgp import primary_fingerprints, unpinned

COLLECTION_DIR = list(collection.__path__)[0]
MODULE = os.path.join(COLLECTION_DIR, "plugins", "modules", "apt_signing_key.py")
ROOT = os.path.abspath(os.path.join(COLLECTION_DIR, "..", "..", ".."))

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="the module lists keys with gpg, which this machine lacks")

COLONS = """pub:-:255:22:AAAAAAAAAAAAAAAA:1700000000:::-:::scSC::::::23::0:
fpr:::::::::C95B321B61E88C1809C4F759DDCAE044F796ECB0:
uid:-::::1700000000::HASH::NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>::::::::::0:
sub:-:255:22:BBBBBBBBBBBBBBBB:1700000000::::::e::::::23:
fpr:::::::::1111111111111111111111111111111111111111:
pub:-:255:22:CCCCCCCCCCCCCCCC:1700000000:::-:::scSC::::::23::0:
fpr:::::::::9dc858229fc7dd38854ae2d88d81803c0ebfcd88:
"""


def test_primary_fingerprints_are_the_pub_records_only():
    assert primary_fingerprints(COLONS) == ["C95B321B61E88C1809C4F759DDCAE044F796ECB0",
                                            "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"]
    assert primary_fingerprints("") == []


def test_a_key_is_trusted_only_when_every_primary_key_is_pinned():
    both = ["C95B321B61E88C1809C4F759DDCAE044F796ECB0", "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"]
    assert unpinned(both, [f.lower() for f in both]) == ""
    assert "9DC858229FC7DD38854AE2D88D81803C0EBFCD88" in unpinned(both, both[:1])
    assert unpinned([], both) == "it holds no OpenPGP key"


def _make_key(home, name):
    subprocess.run(["gpg", "--homedir", home, "--batch", "--passphrase", "", "--quick-gen-key",
                    "%s <%s@example.invalid>" % (name, name), "ed25519", "sign", "never"],
                   check=True, capture_output=True)
    armoured = subprocess.run(["gpg", "--homedir", home, "--armor", "--export", "%s@example.invalid" % name],
                              check=True, capture_output=True).stdout
    listed = subprocess.run(["gpg", "--homedir", home, "--batch", "--show-keys", "--with-colons"], input=armoured,
                            check=True, capture_output=True, text=False).stdout.decode()
    return armoured, primary_fingerprints(listed)[0]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    return {name: _make_key(str(home), name) for name in ("pinned", "other")}


@pytest.fixture
def served(tmp_path, keys):
    """An HTTP server whose /gpg serves what the test puts in `files['gpg']`, counting the requests."""
    root = tmp_path / "www"
    root.mkdir()
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            hits.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield root, "http://127.0.0.1:%d/gpg" % server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()


def run(tmp_path, args, check=False, diff=False):
    args = dict(args)
    if check:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in sys.path if p]))
    proc = subprocess.run([sys.executable, MODULE, str(f)], capture_output=True, text=True, timeout=120, env=env)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module output is not JSON: %s %s" % (proc.stdout, proc.stderr))


def test_the_pinned_key_is_stored_once_and_not_fetched_again(tmp_path, keys, served):
    root, url, hits = served
    armoured, fpr = keys["pinned"]
    (root / "gpg").write_bytes(armoured)
    dest = tmp_path / "keyrings" / "docker.asc"
    dest.parent.mkdir()
    args = {"url": url, "dest": str(dest), "fingerprints": [fpr]}

    planned = run(tmp_path, args, check=True, diff=True)
    assert planned["changed"] is True and not dest.exists()
    assert planned["diff"]["after"] == fpr + "\n"

    first = run(tmp_path, args)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True and first["fetched"] is True and first["fingerprints"] == [fpr]
    assert dest.read_bytes() == armoured and oct(dest.stat().st_mode & 0o777) == "0o644"

    asked = len(hits)
    second = run(tmp_path, args)
    assert second["changed"] is False and second["fetched"] is False
    assert len(hits) == asked, "a stored pinned key is not fetched again"


def test_another_key_from_the_url_is_refused_and_the_stored_one_kept(tmp_path, keys, served):
    root, url, _ = served
    pinned, fpr = keys["pinned"]
    other, other_fpr = keys["other"]
    dest = tmp_path / "docker.asc"
    args = {"url": url, "dest": str(dest), "fingerprints": [fpr], "pinned_by": "docker_host_docker_repo_key_fingerprints"}

    (root / "gpg").write_bytes(other)
    refused = run(tmp_path, args)
    assert refused.get("failed") is True
    assert other_fpr in refused["msg"] and fpr in refused["msg"] and url in refused["msg"]
    assert refused["msg"].startswith("docker_host_docker_repo_key_fingerprints: ")
    assert not dest.exists()

    # a stored key that is not pinned (planted, or pinned before a rotation) is replaced only by a pinned one
    dest.write_bytes(other)
    still = run(tmp_path, args)
    assert still.get("failed") is True and dest.read_bytes() == other
    (root / "gpg").write_bytes(pinned)
    fixed = run(tmp_path, args)
    assert fixed["changed"] is True and dest.read_bytes() == pinned


def test_a_page_that_is_no_key_and_a_bad_fingerprint_are_refused(tmp_path, keys, served):
    root, url, _ = served
    (root / "gpg").write_bytes(b"<html>not a key</html>")
    dest = tmp_path / "k.asc"
    nokey = run(tmp_path, {"url": url, "dest": str(dest), "fingerprints": [keys["pinned"][1]]})
    assert nokey.get("failed") is True and "holds no OpenPGP key" in nokey["msg"] and not dest.exists()
    bad = run(tmp_path, {"url": url, "dest": str(dest), "fingerprints": ["9DC8 5822"]})
    assert bad.get("failed") is True and "40 hex digits" in bad["msg"]
