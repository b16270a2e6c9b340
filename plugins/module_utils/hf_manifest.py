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
