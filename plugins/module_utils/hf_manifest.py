# -*- coding: utf-8 -*-
# Copyright: (c) 2026, specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Completion manifests of cached model snapshots (stdlib only).

A snapshot directory is complete when, and only when, it holds ``.specdec-manifest.json``, written
atomically after every file of the snapshot is in place::

    {"format": 1, "repo_id": "openai/gpt-oss-120b", "revision": "main", "commit": "<40 hex>",
     "allow_patterns": null, "ignore_patterns": ["metal/*"], "completed_at": "2026-...Z",
     "files": {"config.json": {"size": 1234, "etag": "<git blob id>", "oid": "<git blob id>"},
               "model.safetensors": {"size": 13000000000, "etag": "<sha256>", "oid": "...",
                                     "sha256": "<sha256>"}}}

``etag`` is the hub's identity of the file: the sha256 of an LFS file (recorded as ``sha256`` too),
the git blob id of a regular file. Re-checking a snapshot against its manifest (``check_files`` with
``verify='size'``) costs one ``stat`` per file and no network; ``verify='sha256'`` hashes every file
and compares with the hub's identity (sha256 for LFS files, git blob sha1 for the others).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import hashlib
import json
import os
import tempfile

MANIFEST_NAME = ".specdec-manifest.json"
PROGRESS_NAME = ".specdec-progress.json"
MANIFEST_FORMAT = 1
HASH_BLOCK = 4 * 1024 * 1024
GB = 1000 ** 3


def manifest_path(base_dir):
    return os.path.join(base_dir, MANIFEST_NAME)


def read_manifest(base_dir):
    """The manifest of ``base_dir`` as a dict, or None when absent or unreadable (= not complete)."""
    try:
        with open(manifest_path(base_dir), "r") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or not data.get("commit"):
        return None
    return data


def atomic_write(path, content, mode=0o644):
    """Write ``content`` (str) to ``path`` through a temporary file, fsync and rename."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_manifest(repo_id, revision, commit, files, allow_patterns=None, ignore_patterns=None, repo_type="model"):
    return {
        "format": MANIFEST_FORMAT,
        "repo_id": repo_id,
        "repo_type": repo_type,
        "revision": revision,
        "commit": commit,
        "allow_patterns": allow_patterns,
        "ignore_patterns": ignore_patterns,
        "completed_at": utc_now(),
        "files": files,
    }


def write_manifest(base_dir, manifest):
    atomic_write(manifest_path(base_dir), json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def manifest_size(manifest):
    return sum(int(entry.get("size", 0)) for entry in manifest.get("files", {}).values())


def _digest_file(digest, path):
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_file(path):
    return _digest_file(hashlib.sha256(), path)


def git_blob_sha1_file(path):
    """The git blob id of a file (what the hub reports for small, non-LFS files)."""
    return _digest_file(hashlib.sha1(b"blob %d\0" % os.path.getsize(path)), path)


def check_file(path, entry, verify="size"):
    """None when ``path`` matches its manifest ``entry``, else a short reason."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return "missing"
    if size != int(entry.get("size", -1)):
        return "size %d, expected %d" % (size, int(entry.get("size", -1)))
    if verify == "sha256":
        if entry.get("sha256"):
            actual = sha256_file(path)
            if actual != entry["sha256"]:
                return "sha256 %s, expected %s" % (actual, entry["sha256"])
        elif entry.get("oid"):
            actual = git_blob_sha1_file(path)
            if actual != entry["oid"]:
                return "git blob id %s, expected %s" % (actual, entry["oid"])
    return None


def check_files(base_dir, manifest, verify="size"):
    """[(path, reason)] of the manifest's files that are missing, of the wrong size or (sha256) content."""
    bad = []
    for rel_path in sorted(manifest.get("files", {})):
        reason = check_file(os.path.join(base_dir, *rel_path.split("/")), manifest["files"][rel_path], verify)
        if reason is not None:
            bad.append((rel_path, reason))
    return bad


def existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def free_bytes(path):
    stat = os.statvfs(existing_ancestor(path))
    return stat.f_bavail * stat.f_frsize


def gb(nbytes):
    return "%.1f GB" % (nbytes / float(GB))


def space_shortfall(path, needed_bytes, reserve_bytes=0):
    """None when ``path`` has room for ``needed_bytes`` (+ reserve), else the message to fail with."""
    free = free_bytes(path)
    if needed_bytes + reserve_bytes > free:
        return "needs %s on %s, %s free" % (gb(needed_bytes + reserve_bytes), existing_ancestor(path), gb(free))
    return None


def write_progress(base_dir, done, total, started, now):
    elapsed = max(now - started, 1e-6)
    progress = {
        "bytes_done": done, "bytes_total": total,
        "percent": round(100.0 * done / total, 1) if total else 100.0,
        "rate_mb_s": round(done / elapsed / 1e6, 2),
        "elapsed_s": round(elapsed, 1),
        "updated_at": utc_now(),
    }
    try:
        atomic_write(os.path.join(base_dir, PROGRESS_NAME), json.dumps(progress) + "\n")
    except OSError:
        pass
    return progress


# ---------------------------------------------------------------- the model lock
#
# A lock is what the first fetch of a pinned commit recorded, kept by the user on the controller
# (model_cache_lock_dir) and handed back on every later run::
#
#     {"format": 1, "repo_id": "org/name", "revision": "<40 hex commit>",
#      "files": {"config.json": {"size": 1234, "sha256": "<sha256 of the bytes>"},
#                "model.safetensors": {"size": 13000000000, "sha256": "<the hub's LFS oid>"}}}
#
# Every later fetch, peer copy and re-check is compared with it, not with the listing of whoever
# serves the bytes: a hub, mirror or peer that lists (and serves) other bytes for the same commit
# is refused, naming the file.

LOCK_FORMAT = 1
RELOCK_HINT = "if the change is deliberate, delete %s and run again to record a new lock"


def lock_document(repo_id, commit, files):
    """The lock of ``repo_id`` at ``commit``: ``files`` is {path: {size, sha256}}."""
    return {"format": LOCK_FORMAT, "repo_id": repo_id, "revision": commit,
            "files": dict((p, {"size": int(e["size"]), "sha256": e["sha256"]}) for p, e in sorted(files.items()))}


def sha256_and_blob_file(path):
    """(sha256, git blob id) of a file, in one read."""
    sha = hashlib.sha256()
    blob = hashlib.sha1(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            sha.update(block)
            blob.update(block)
    return sha.hexdigest(), blob.hexdigest()


def lock_problems(lock, listing, selected=None):
    """[(path, reason)] where a file listing ({path: manifest entry}, from a hub listing or a manifest)
    disagrees with a lock's files: a file listed but not locked, locked (and selected by the patterns,
    ``selected(path)``) but not listed, of another size, or an LFS sha256 other than the lock's. The
    listing's non-LFS files have only a git blob id: their bytes are compared with the lock's sha256
    after they are read (``content_problems``)."""
    locked = lock.get("files") or {}
    problems = []
    for rel in sorted(set(listing) | set(locked)):
        entry, want = listing.get(rel), locked.get(rel)
        if want is None:
            problems.append((rel, "listed but not in the lock"))
        elif entry is None:
            if selected is None or selected(rel):
                problems.append((rel, "in the lock but not listed"))
        elif int(entry.get("size", -1)) != int(want.get("size", -2)):
            problems.append((rel, "size %s, the lock says %s" % (entry.get("size"), want.get("size"))))
        elif entry.get("sha256") and entry["sha256"] != want.get("sha256"):
            problems.append((rel, "sha256 %s, the lock says %s" % (entry["sha256"], want.get("sha256"))))
    return problems


def content_problems(base_dir, lock, paths):
    """[(path, reason)] of the files ``paths`` under ``base_dir`` whose bytes do not hash to the lock's sha256."""
    problems = []
    for rel in sorted(paths):
        want = (lock.get("files") or {}).get(rel)
        if want is None:
            continue
        try:
            actual = sha256_file(os.path.join(base_dir, *rel.split("/")))
        except OSError:
            problems.append((rel, "missing"))
            continue
        if actual != want.get("sha256"):
            problems.append((rel, "sha256 %s, the lock says %s" % (actual, want.get("sha256"))))
    return problems


def lock_from_snapshot(base_dir, repo_id, commit, files):
    """The lock of a complete snapshot: the listing's sha256 (the hub's LFS oid) of LFS files, whose bytes
    were checked against it when downloaded; the sha256 of the bytes of the others, read now and checked
    against their git blob id. Raises ValueError naming a file whose bytes are not what was listed."""
    locked = {}
    for rel, entry in sorted(files.items()):
        if entry.get("sha256"):
            locked[rel] = {"size": entry["size"], "sha256": entry["sha256"]}
            continue
        sha, blob = sha256_and_blob_file(os.path.join(base_dir, *rel.split("/")))
        if entry.get("oid") and blob != entry["oid"]:
            raise ValueError("%s: git blob id %s, the listing says %s" % (rel, blob, entry["oid"]))
        locked[rel] = {"size": entry["size"], "sha256": sha}
    return lock_document(repo_id, commit, locked)
