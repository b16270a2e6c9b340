"""model_cache in peer mode on three lab hosts: layout, manifests, encodings, permissions, upstream bytes,
the model locks (recorded, then enforced), peer copies over TLS."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(PROJECT / "lab"))
from hfhub import hfhub  # noqa: E402

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
TESTINFRA_HOSTS = RUNNER.get_hosts("all")
SEED = sorted(TESTINFRA_HOSTS)[0]
ROOT = "/var/lib/specdec/models"
TOKEN = hfhub.DEFAULT_PRIVATE_TOKEN
HUB = hfhub.default_repos()
# repo id -> (revision, ignore patterns) as converge.yml asks
MODELS = {
    "specdec-lab/tiny-gpt-oss": ("d53e12e816449f0a2280eb2654a189dd33220755", ["original/*", "metal/*"]),
    "specdec-lab/tiny-gpt-oss-eagle3": ("60fad424d708e68c05212866a9bacd44271c7c8d", ["original/*", "metal/*"]),
    "specdec-lab/private-model": ("v1.0", []),
}
LOCKED = ["specdec-lab/tiny-gpt-oss", "specdec-lab/tiny-gpt-oss-eagle3"]   # pinned to a commit
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
LOCK_DIR = EPHEMERAL / "model-locks"
ENCODINGS = {
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def expected_files(repo_id):
    revision, ignore = MODELS[repo_id]
    _, files = HUB[repo_id].resolve(revision)
    return {p: f for p, f in files.items() if not any(p.startswith(i.rstrip("*")) for i in ignore)}


@pytest.mark.parametrize("repo_id", sorted(MODELS))
def test_one_complete_directory_per_repo(host, repo_id):
    directory = host.file("%s/%s" % (ROOT, repo_id))
    assert directory.is_directory and directory.mode == 0o755 and directory.user == "root"
    assert not host.file("%s/%s.partial" % (ROOT, repo_id)).exists
    for rel, rfile in expected_files(repo_id).items():
        f = host.file("%s/%s/%s" % (ROOT, repo_id, rel))
        assert f.is_file and f.size == rfile.size and f.mode == 0o644, rel
        assert f.sha256sum == rfile.sha256, rel
    assert not host.file("%s/%s/metal" % (ROOT, repo_id)).exists or not MODELS[repo_id][1]


@pytest.mark.parametrize("repo_id", sorted(MODELS))
def test_manifest_pins_the_resolved_commit(host, repo_id):
    manifest = json.loads(host.file("%s/%s/.specdec-manifest.json" % (ROOT, repo_id)).content_string)
    revision = MODELS[repo_id][0]
    assert manifest["repo_id"] == repo_id and manifest["revision"] == revision
    assert manifest["commit"] == HUB[repo_id].resolve(revision)[0]
    files = expected_files(repo_id)
    assert {p: e["size"] for p, e in manifest["files"].items()} == {p: f.size for p, f in files.items()}
    assert {p: e["etag"] for p, e in manifest["files"].items()} == {p: f.etag for p, f in files.items()}


def test_tiktoken_encodings_match_their_published_sha256(host):
    for name, sha in ENCODINGS.items():
        f = host.file("/var/lib/specdec/tiktoken/" + name)
        assert f.is_file and f.mode == 0o644 and f.sha256sum == sha, name


def test_venv_has_the_hub_client(host):
    out = host.run("/opt/specdec/hf-venv/bin/python -c 'import huggingface_hub, hf_xet; print(huggingface_hub.__version__)'")
    assert out.rc == 0, out.stderr


def test_each_host_got_the_wheelhouse_of_its_own_architecture(host):
    """model_cache_wheelhouse maps x86_64 and aarch64 to their own wheelhouse (converge.yml): these x86_64 hosts
    got exactly the x86_64 one, whose compiled wheels (hf-xet, PyYAML) are the ones their venv imports."""
    own, other = (sorted(p.name for p in (PROJECT / "lab" / ".cache" / d).glob("*.whl"))
                  for d in ("wheels", "wheels-aarch64"))
    assert any("aarch64" in w for w in other) and not any("aarch64" in w for w in own)  # the premise
    assert host.system_info.arch == "x86_64"
    assert sorted(host.check_output("ls /opt/specdec/hf-venv-wheels").split()) == own


def test_the_token_is_left_nowhere(host):
    found = host.run("grep -rl --exclude-dir=proc --exclude-dir=sys -e %s /var/lib/specdec /opt/specdec /root /tmp /run /etc /var/log"
                     % TOKEN)
    assert found.rc == 1 and found.stdout == "", found.stdout
    assert not host.file("/run/specdec-model-peer.token").exists
    assert host.run("systemctl is-active specdec-model-peer.service").stdout.strip() != "active"


# The tampered-lock test asks the hub again, on purpose: the converges' traffic is what came before it.
TAMPER_MARK = EPHEMERAL / "tampered-lock-run-started"


def _hub_log():
    path = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "hfhub.jsonl"
    since = float(TAMPER_MARK.read_text()) if TAMPER_MARK.exists() else float("inf")
    return [e for e in (json.loads(line) for line in path.read_text().splitlines()) if e["ts"] < since]


def test_upstream_sent_one_copy_to_the_seed_only():
    log = _hub_log()
    seed = testinfra.get_host("ansible://%s?ansible_inventory=%s" % (SEED, os.environ["MOLECULE_INVENTORY_FILE"]))
    seed_ips = seed.check_output("hostname -I").split()
    clients = {e["client"] for e in log if "/resolve/" in e["path"]}
    assert len(clients) == 1 and clients <= set(seed_ips), (clients, seed_ips)
    seed_ip = clients.pop()
    file_gets = [e for e in log if "/resolve/" in e["path"] and e["method"] == "GET"]
    assert {e["client"] for e in file_gets} == {seed_ip}
    one_copy = sum(f.size for repo_id in MODELS for f in expected_files(repo_id).values())
    assert sum(e["bytes"] for e in file_gets) == one_copy
    encodings = [e for e in log if e["path"].startswith("/encodings/") and e["method"] == "GET"]
    assert {e["client"] for e in encodings} == {seed_ip} and len(encodings) == len(ENCODINGS)


def test_second_run_touched_no_network():
    # The first converge asks each revision twice (plan, download); the idempotence run asks nothing.
    log = _hub_log()
    for repo_id in MODELS:
        asks = [e for e in log if e["path"].startswith("/api/models/%s/revision/" % repo_id)]
        assert len(asks) == 2, (repo_id, asks)


def test_the_pinned_commits_are_the_stand_ins_main():
    for repo_id in LOCKED:
        assert MODELS[repo_id][0] == HUB[repo_id].refs["main"], repo_id


def lock_file(repo_id):
    org, name = repo_id.split("/")
    return LOCK_DIR / org / ("%s@%s.json" % (name, MODELS[repo_id][0]))


@pytest.mark.parametrize("repo_id", LOCKED)
def test_the_first_fetch_recorded_a_lock_with_every_files_sha256(repo_id):
    path = lock_file(repo_id)
    assert path.stat().st_mode & 0o777 == 0o644
    lock = json.loads(path.read_text())
    assert lock["repo_id"] == repo_id and lock["revision"] == MODELS[repo_id][0]
    assert lock["files"] == {p: {"size": f.size, "sha256": f.sha256} for p, f in expected_files(repo_id).items()}


def test_a_tag_is_not_locked():
    assert not list((LOCK_DIR / "specdec-lab").glob("private-model@*"))


def test_a_fetch_against_a_tampered_lock_fails_naming_the_file_and_changes_nothing(host, tmp_path):
    if host.backend.get_hostname() != SEED:
        pytest.skip("run once, on the seed")
    repo_id = LOCKED[0]
    locks = tmp_path / "model-locks"
    target = locks / lock_file(repo_id).relative_to(LOCK_DIR)
    target.parent.mkdir(parents=True)
    for other in LOCKED:
        dest = locks / lock_file(other).relative_to(LOCK_DIR)
        dest.write_text(lock_file(other).read_text())
    lock = json.loads(target.read_text())
    shard = "model-00001-of-00002.safetensors"
    lock["files"][shard]["sha256"] = "0" * 64
    target.write_text(json.dumps(lock))
    manifest = "%s/%s/.specdec-manifest.json" % (ROOT, repo_id)
    before = host.file(manifest).sha256sum
    if not TAMPER_MARK.exists():
        TAMPER_MARK.write_text(repr(time.time()))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"model_cache_lock_dir": str(locks)}))
    proc = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
                           str(Path(__file__).resolve().parents[1] / "converge.yml"), "-l", SEED, "-e", "@%s" % extra],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=dict({"SPECDEC_HFHUB_ADDRESS": "172.29.3.1", "SPECDEC_HFHUB_PORT": "18093"}, **os.environ))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert shard in out and str(target) in out and "disagrees with the lock" in out, out[-3000:]
    assert "delete %s" % target in out
    assert host.file(manifest).sha256sum == before
    assert json.loads(lock_file(repo_id).read_text())["files"][shard]["sha256"] != "0" * 64   # the real lock untouched


def test_the_peers_copied_over_tls_and_the_key_left_the_seed(host):
    seed = testinfra.get_host("ansible://%s?ansible_inventory=%s" % (SEED, os.environ["MOLECULE_INVENTORY_FILE"]))
    log = seed.run("journalctl --no-pager -u specdec-model-peer.service")
    assert "on https://" in log.stdout, log.stdout[-2000:]
    for path in ("/run/specdec-model-peer.key", "/run/specdec-model-peer.crt", "/run/specdec-model-peer-ca.pem"):
        assert not host.file(path).exists, path
