# -*- coding: utf-8 -*-
# Copyright: (c) 2026, specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The logic of the hf_snapshot module, apart from AnsibleModule so that it can be tested in-process.

Two layouts:

- ``dest`` (local dir, the default of model_cache): the files of the repo at ``<dest>/<path>``. A
  download goes to ``<dest>.partial`` (existing files hard-linked in first, so an update fetches only
  what changed and a running engine keeps its files), gets its manifest, then is renamed to
  ``<dest>``. ``<dest>`` therefore only ever holds a complete snapshot.
- ``cache_dir`` (the Hugging Face cache layout): ``models--org--name/snapshots/<commit>/``, downloaded
  with the commit id as revision (so the client writes no ref), manifest written into the snapshot
  folder, then ``refs/<revision>`` written atomically: a ref never points at a partial snapshot.

``huggingface_hub`` is imported only when the hub has to be asked; re-checking a complete snapshot
needs the manifest and ``stat`` only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re
import shutil
import sys
import threading
import time

from ansible_collections.specdec.serve.plugins.module_utils import hf_manifest as hm

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_ENDPOINT = "https://huggingface.co"
HF_INTERNAL = ".cache"


class SnapshotError(Exception):
    """A failure with a message for the operator."""


def _patterns(value):
    if value is None:
        return None
    return sorted(value) if isinstance(value, (list, tuple)) else [value]


class Snapshot:
    """One repo snapshot, described by the module's parameters."""

    def __init__(self, repo_id, revision="main", dest=None, cache_dir=None, allow_patterns=None,
                 ignore_patterns=None, token=None, endpoint=None, verify="size", refresh=False,
                 offline=False, max_workers=8, reserve_gb=0.0, progress_interval=2.0, lock=None,
                 lock_path=None, record_lock=False, ca_file=None):
        if (dest is None) == (cache_dir is None):
            raise SnapshotError("exactly one of dest and cache_dir is required")
        if not re.match(r"^[\w.-]+/[\w.-]+$", repo_id or ""):
            raise SnapshotError("repo_id %r is not of the form org/name" % (repo_id,))
        self.repo_id = repo_id
        self.revision = revision or "main"
        self.dest = os.path.abspath(dest) if dest else None
        self.cache_dir = os.path.abspath(cache_dir) if cache_dir else None
        self.allow_patterns = _patterns(allow_patterns)
        self.ignore_patterns = _patterns(ignore_patterns)
        self.token = token or None
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.verify = verify
        self.refresh = refresh
        self.offline = offline
        self.max_workers = max_workers
        self.reserve_bytes = int(float(reserve_gb or 0) * hm.GB)
        self.progress_interval = progress_interval
        self.lock = lock or None
        self.lock_path = lock_path or "the lock"
        self.record_lock = record_lock
        self.ca_file = ca_file or None
        self._hub = None
        if self.lock is not None:
            if not isinstance(self.lock.get("files"), dict) or not self.lock["files"]:
                raise SnapshotError("the lock %s of %s has no files: %s" % (
                    self.lock_path, repo_id, hm.RELOCK_HINT % self.lock_path))
            if self.lock.get("repo_id") != repo_id or self.lock.get("revision") != self.revision:
                raise SnapshotError("the lock %s is of %s@%s, not of %s@%s: %s" % (
                    self.lock_path, self.lock.get("repo_id"), self.lock.get("revision"), repo_id, self.revision,
                    hm.RELOCK_HINT % self.lock_path))

    # ------------------------------------------------------------ layout
    @property
    def storage_folder(self):
        if self.cache_dir is None:
            raise AssertionError("storage_folder is read in the cache_dir layout only")
        return os.path.join(self.cache_dir, "models--" + self.repo_id.replace("/", "--"))

    def snapshot_dir(self, commit):
        if self.dest:
            return self.dest
        return os.path.join(self.storage_folder, "snapshots", commit)

    def work_dir(self, commit):
        """Where files land while downloading."""
        if self.dest:
            return self.dest + ".partial"
        return self.snapshot_dir(commit)

    def current_manifest(self):
        """The manifest of the snapshot the requested revision points at locally, or None."""
        if self.dest:
            return hm.read_manifest(self.dest)
        commit = self.revision if COMMIT_RE.match(self.revision) else None
        if commit is None:
            try:
                with open(os.path.join(self.storage_folder, "refs", self.revision)) as handle:
                    commit = handle.read().strip()
            except OSError:
                return None
        return hm.read_manifest(self.snapshot_dir(commit))

    def matches(self, manifest):
        """Whether a local manifest describes the requested repo, revision and file selection."""
        return (manifest is not None
                and manifest.get("repo_id") == self.repo_id
                and self.revision in (manifest.get("revision"), manifest.get("commit"))
                and _patterns(manifest.get("allow_patterns")) == self.allow_patterns
                and _patterns(manifest.get("ignore_patterns")) == self.ignore_patterns)

    def selected(self, path):
        """Whether the allow and ignore patterns select ``path`` (as huggingface_hub's filter_repo_objects)."""
        def pats(value):
            return [p + "*" if p.endswith("/") else p for p in value]
        if self.allow_patterns is not None and not any(fnmatch.fnmatch(path, p) for p in pats(self.allow_patterns)):
            return False
        return not (self.ignore_patterns and any(fnmatch.fnmatch(path, p) for p in pats(self.ignore_patterns)))

    # ------------------------------------------------------------ the lock
    def lock_message(self, problems, what):
        return ("%s@%s: %s disagrees with the lock %s: %s. The lock is what the first fetch of this commit "
                "recorded, and nothing was put in place; %s" % (
                    self.repo_id, self.revision, what, self.lock_path,
                    ", ".join("%s (%s)" % item for item in problems[:5]), hm.RELOCK_HINT % self.lock_path))

    def _cached_against_lock(self, base, manifest):
        """[(path, reason)] where a cached snapshot disagrees with the lock: its manifest's list (sizes, LFS
        sha256), the bytes of its small non-LFS files, and with verify=sha256 the bytes of every file."""
        files = manifest.get("files", {})
        problems = hm.lock_problems(self.lock, files, self.selected)
        known = set(problem[0] for problem in problems)
        hashed = [p for p, e in files.items() if p not in known and (self.verify == "sha256" or not e.get("sha256"))]
        return problems + hm.content_problems(base, self.lock, hashed)

    def _check_lock_content(self, base, remote):
        """After a download: the bytes of the non-LFS files (the listing gives only their git blob id) against
        the lock's sha256. A file that differs is removed, so that the next run fetches it again."""
        if self.lock is None:
            return
        problems = hm.content_problems(base, self.lock, [p for p, e in remote.items() if not e.get("sha256")])
        if problems:
            for rel, _reason in problems:
                _unlink(os.path.join(base, *rel.split("/")))
            raise SnapshotError(self.lock_message(problems, "what %s served" % self.endpoint))

    # ------------------------------------------------------------ hub access
    def hub(self):
        """The huggingface_hub module, imported with quiet, telemetry-free settings."""
        if self._hub is None:
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
            if self.ca_file:
                # the endpoint's server is verified against this CA only (httpx reads SSL_CERT_FILE, requests
                # REQUESTS_CA_BUNDLE); set before the client makes its session
                if not os.path.isfile(self.ca_file):
                    raise SnapshotError("ca_file %s is not a file" % self.ca_file)
                os.environ["SSL_CERT_FILE"] = self.ca_file
                os.environ["REQUESTS_CA_BUNDLE"] = self.ca_file
            try:
                import huggingface_hub  # pylint: disable=import-outside-toplevel
                import huggingface_hub.utils  # noqa: F401 pylint: disable=import-outside-toplevel
            except ImportError as exc:
                raise SnapshotError(
                    "huggingface_hub is not importable by %s (%s): run the module under the interpreter of "
                    "the venv that model_cache creates (ansible_python_interpreter)" % (sys.executable, exc))
            if self.ca_file:   # a session made before the CA was set would not use it
                http = getattr(huggingface_hub.utils, "_http", None)
                reset = getattr(http, "close_session", None) or getattr(http, "reset_sessions", None)
                if reset is not None:
                    reset()
            self._hub = huggingface_hub
        return self._hub

    def _explain(self, exc):
        """Turn a huggingface_hub exception into a message naming the repo, the revision and the fix."""
        hub = self.hub()
        name = type(exc).__name__
        where = "%s at %s" % (self.repo_id, self.endpoint)
        if name == "RevisionNotFoundError":
            return ("revision %r not found in %s: use an existing branch, tag or full 40-hex commit id"
                    % (self.revision, where))
        if name == "GatedRepoError":
            return ("%s is gated: accept its terms on the hub with the account whose token is given "
                    "(model_cache_hf_token)" % where)
        if name == "RepositoryNotFoundError":
            hint = "check the repo id" if self.token else "check the repo id, or give a token if it is private"
            status = getattr(getattr(exc, "response", None), "status_code", None)
            return "repo %s not found (HTTP %s): %s" % (where, status, hint)
        if name in ("DisabledRepoError",):
            return "%s is disabled on the hub" % where
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return ("%s refused the token (HTTP %s): check that the token (model_cache_hf_token) is valid "
                    "and may read this repo" % (where, status))
        if isinstance(exc, getattr(hub.utils, "HfHubHTTPError", ())):
            return "hub error for %s: %s" % (where, str(exc).splitlines()[0])
        if isinstance(exc, (OSError, ValueError)) or "Connect" in name or "Timeout" in name:
            return "cannot download %s: %s: %s" % (where, name, str(exc).splitlines()[0] if str(exc) else "")
        return "%s: %s" % (name, exc)

    def _call(self, func, *args, **kwargs):
        try:
            return func(*args, **kwargs)
        except SnapshotError:
            raise
        except Exception as exc:  # pylint: disable=broad-except
            raise SnapshotError(self._explain(exc))

    def resolve(self):
        """Commit id of the requested revision (one metadata call)."""
        api = self.hub().HfApi(endpoint=self.endpoint, token=self.token)
        info = self._call(api.repo_info, self.repo_id, revision=self.revision, repo_type="model")
        if not info.sha:
            raise SnapshotError("the hub at %s returned no commit for %s@%s" % (self.endpoint, self.repo_id, self.revision))
        return info.sha

    def remote_files(self, commit):
        """{path: manifest entry} of the files selected by the patterns at ``commit``."""
        hub = self.hub()
        api = hub.HfApi(endpoint=self.endpoint, token=self.token)
        tree = self._call(lambda: [f for f in api.list_repo_tree(self.repo_id, revision=commit, recursive=True)
                                   if hasattr(f, "blob_id")])
        from huggingface_hub.utils import filter_repo_objects  # pylint: disable=import-outside-toplevel
        selected = set(filter_repo_objects(items=[f.path for f in tree], allow_patterns=self.allow_patterns,
                                           ignore_patterns=self.ignore_patterns))
        files = {}
        for item in tree:
            if item.path not in selected:
                continue
            lfs = getattr(item, "lfs", None)
            lfs_sha = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
            entry = {"size": int(item.size), "oid": item.blob_id, "etag": lfs_sha or item.blob_id}
            if lfs_sha:
                entry["sha256"] = lfs_sha
            files[item.path] = entry
        return files

    # ------------------------------------------------------------ main entry
    def run(self, check_mode=False, state="present"):
        if state == "absent":
            return self.remove(check_mode)
        manifest = self.current_manifest()
        result = {"repo_id": self.repo_id, "revision": self.revision, "network": False, "changed": False,
                  "downloaded_bytes": 0, "fetched_files": [], "repaired": []}
        bad = None
        if self.matches(manifest):
            base = self.snapshot_dir(manifest["commit"])
            if self.lock is None:
                bad = hm.check_files(base, manifest, self.verify)
            else:   # the lock is the reference: sizes here, content (small files, or all with sha256) there
                bad = hm.check_files(base, manifest, "size")
                bad += [b for b in self._cached_against_lock(base, manifest) if b[0] not in set(found[0] for found in bad)]
            if not bad and not self.refresh:
                return self._done(result, manifest, cached=True)
        if self.offline:
            if bad:
                detail = ", ".join("%s (%s)" % item for item in bad[:5])
            else:
                detail = "no complete snapshot with a matching manifest"
            if check_mode:
                result.update(changed=True, cached=False, msg="would download: " + detail)
                return result
            raise SnapshotError("%s@%s is not complete in %s and offline is set: %s"
                                % (self.repo_id, self.revision, self.dest or self.cache_dir, detail))

        result["network"] = True
        commit = self.resolve()
        if manifest is not None and self.matches(manifest) and manifest["commit"] == commit and not bad:
            return self._done(result, manifest, cached=True)   # refresh: the revision did not move
        remote = self.remote_files(commit)
        if not remote:
            raise SnapshotError("no file of %s@%s (commit %s) matches allow_patterns=%s ignore_patterns=%s"
                                % (self.repo_id, self.revision, commit, self.allow_patterns, self.ignore_patterns))
        if self.lock is not None:
            problems = hm.lock_problems(self.lock, remote, self.selected)
            if problems:
                raise SnapshotError(self.lock_message(problems, "the listing of %s" % self.endpoint))
        old_files = (manifest or {}).get("files", {}) if manifest and manifest.get("repo_id") == self.repo_id else {}
        bad_paths = set(entry[0] for entry in (bad or []))
        to_fetch = sorted(p for p, e in remote.items()
                          if p in bad_paths or old_files.get(p, {}).get("etag") != e["etag"])
        result.update(commit=commit, fetched_files=to_fetch, repaired=sorted(bad_paths & set(remote)),
                      cached=False, changed=True,
                      diff=self._diff(manifest, commit, remote))
        needed = sum(remote[p]["size"] for p in to_fetch)
        result["downloaded_bytes"] = needed
        if check_mode:
            result["path"] = self.snapshot_dir(commit)
            result["msg"] = "would download %d file(s), %s" % (len(to_fetch), hm.gb(needed))
            return result
        shortfall = hm.space_shortfall(self.work_dir(commit), needed, self.reserve_bytes)
        if shortfall:
            raise SnapshotError("%s@%s: %s" % (self.repo_id, self.revision, shortfall))
        new_manifest = hm.build_manifest(self.repo_id, self.revision, commit, remote,
                                         self.allow_patterns, self.ignore_patterns)
        if self.dest:
            self._download_local(commit, remote, new_manifest, manifest, bad_paths)
        else:
            self._download_cache(commit, remote, new_manifest, bad_paths)
        return self._done(result, new_manifest, cached=True)

    def _done(self, result, manifest, cached):
        result.update(commit=manifest["commit"], cached=cached, path=self.snapshot_dir(manifest["commit"]),
                      manifest=hm.manifest_path(self.snapshot_dir(manifest["commit"])),
                      files=len(manifest["files"]), size=hm.manifest_size(manifest),
                      completed_at=manifest.get("completed_at"))
        if self.record_lock:
            try:
                result["lock_path"] = self.lock_path
                result["lock"] = hm.lock_from_snapshot(self.snapshot_dir(manifest["commit"]), self.repo_id,
                                                       manifest["commit"], manifest["files"])
            except (OSError, ValueError) as exc:
                raise SnapshotError("%s@%s: cannot record a lock, the snapshot is not what was listed: %s"
                                    % (self.repo_id, self.revision, exc))
        return result

    @staticmethod
    def _describe(manifest):
        if not manifest:
            return "(not cached)\n"
        lines = ["commit: %s" % manifest.get("commit"), "files:"]
        lines += ["  %s %d" % (p, e.get("size", 0)) for p, e in sorted(manifest.get("files", {}).items())]
        return "\n".join(lines) + "\n"

    def _diff(self, manifest, commit, remote):
        target = self.dest or self.storage_folder
        return {"before_header": target, "after_header": target,
                "before": self._describe(manifest), "after": self._describe({"commit": commit, "files": remote})}

    # ------------------------------------------------------------ downloading
    def _snapshot_download(self, work, measure, commit, layout_kwargs, total):
        hub = self.hub()
        stop = threading.Event()
        started = time.time()

        def report():
            while not stop.wait(self.progress_interval):
                hm.write_progress(work, min(_bytes_under(measure), total), total, started, time.time())

        reporter = threading.Thread(target=report, name="progress", daemon=True)
        reporter.start()
        try:
            self._call(hub.snapshot_download, self.repo_id, revision=commit, endpoint=self.endpoint,
                       token=self.token, allow_patterns=self.allow_patterns, ignore_patterns=self.ignore_patterns,
                       max_workers=self.max_workers, **layout_kwargs)
        finally:
            stop.set()
            reporter.join()
        hm.write_progress(work, total, total, started, time.time())

    def _check_complete(self, base, remote, bad_paths, fresh=None):
        """After a download: every file present with its size; the files fetched by this run (``fresh``,
        every file when None) and, with verify=sha256, all of them checked by content against the
        upstream listing (sha256 of LFS files, git blob id of the others)."""
        content = set(remote) if self.verify == "sha256" or fresh is None else set(fresh) | set(bad_paths)
        bad = hm.check_files(base, {"files": dict((k, v) for k, v in remote.items() if k not in content)}, "size")
        bad += hm.check_files(base, {"files": dict((k, v) for k, v in remote.items() if k in content)}, "sha256")
        if bad:
            raise SnapshotError("%s@%s incomplete or not what the hub lists after download: %s" % (
                self.repo_id, self.revision, ", ".join("%s (%s)" % b for b in sorted(bad)[:5])))

    def _download_local(self, commit, remote, new_manifest, old_manifest, bad_paths):
        dest, work = self.dest, self.work_dir(commit)
        if dest is None:
            raise AssertionError("_download_local is called in the dest layout only")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if not os.path.isdir(work):
            if os.path.isdir(dest):
                _hardlink_tree(dest, work)
            else:
                os.makedirs(work)
        for stale in (hm.MANIFEST_NAME, hm.PROGRESS_NAME):
            _unlink(os.path.join(work, stale))
        # Files that failed the check: drop them (and the client's record of them) so they are fetched again.
        # Unlinking in the work dir leaves the live snapshot's links alone.
        for rel in bad_paths:
            _unlink(os.path.join(work, *rel.split("/")))
            _unlink(os.path.join(work, HF_INTERNAL, "huggingface", "download", *rel.split("/")) + ".metadata")
        total = sum(e["size"] for e in remote.values())
        self._snapshot_download(work, work, commit, {"local_dir": work}, total)
        # Files of an older revision or of a wider selection do not belong to this snapshot.
        for rel in _files_under(work):
            if rel not in remote and rel.split("/")[0] != HF_INTERNAL:
                _unlink(os.path.join(work, *rel.split("/")))
        _remove_empty_dirs(work)
        had = (old_manifest or {}).get("files", {}) if os.path.isdir(dest) else {}
        self._check_complete(work, remote, bad_paths, fresh=[k for k in remote if had.get(k) != remote[k]])
        self._check_lock_content(work, remote)
        _normalise_modes(work)
        _unlink(os.path.join(work, hm.PROGRESS_NAME))
        hm.write_manifest(work, new_manifest)
        if os.path.lexists(dest):
            old = "%s.old-%d" % (dest, os.getpid())
            os.rename(dest, old)
            os.rename(work, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(work, dest)

    def _download_cache(self, commit, remote, new_manifest, bad_paths):
        snap = self.snapshot_dir(commit)
        _unlink(hm.manifest_path(snap))
        for rel in bad_paths:
            link = os.path.join(snap, *rel.split("/"))
            target = os.path.realpath(link)
            _unlink(link)
            if target != link and os.path.dirname(target).endswith("blobs"):
                _unlink(target)
        os.makedirs(snap, exist_ok=True)
        total = sum(e["size"] for e in remote.values())
        self._snapshot_download(snap, os.path.join(self.storage_folder, "blobs"), commit,
                                {"cache_dir": self.cache_dir}, total)
        self._check_complete(snap, remote, bad_paths)
        self._check_lock_content(snap, remote)
        _unlink(os.path.join(snap, hm.PROGRESS_NAME))
        hm.write_manifest(snap, new_manifest)
        if self.revision != commit:
            refs = os.path.join(self.storage_folder, "refs")
            os.makedirs(os.path.join(refs, os.path.dirname(self.revision)), exist_ok=True)
            hm.atomic_write(os.path.join(refs, self.revision), commit)

    def remove(self, check_mode):
        target = self.dest or self.storage_folder
        present = [p for p in (target, target + ".partial") if os.path.lexists(p)] if self.dest else \
            ([target] if os.path.lexists(target) else [])
        result = {"repo_id": self.repo_id, "revision": self.revision, "changed": bool(present), "network": False,
                  "path": target, "removed": present}
        if present and not check_mode:
            for path in present:
                shutil.rmtree(path)
        return result


# ---------------------------------------------------------------- file helpers

def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _files_under(base):
    for root, _dirs, files in os.walk(base):
        for name in files:
            yield os.path.relpath(os.path.join(root, name), base).replace(os.sep, "/")


def _bytes_under(base):
    """Bytes of the files under ``base``, counting in-flight ``*.incomplete`` files but not the client's metadata."""
    total = 0
    for root, _dirs, files in os.walk(base):
        internal = (os.sep + HF_INTERNAL) in root
        for name in files:
            if internal and not name.endswith(".incomplete"):
                continue
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _hardlink_tree(src, dst):
    """Copy a directory tree with hard links (same filesystem: no data copied)."""
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        target_root = os.path.join(dst, rel) if rel != "." else dst
        os.makedirs(target_root, exist_ok=True)
        for name in files:
            if rel == "." and name in (hm.MANIFEST_NAME, hm.PROGRESS_NAME):
                continue
            source = os.path.join(root, name)
            try:
                os.link(source, os.path.join(target_root, name))
            except OSError:
                shutil.copy2(source, os.path.join(target_root, name))
        dirs.sort()


def _remove_empty_dirs(base):
    for root, _dirs, _files in os.walk(base, topdown=False):
        if root != base and not os.listdir(root):
            os.rmdir(root)


def _normalise_modes(base):
    """World-readable files and traversable dirs: engines in containers read them under their own uid."""
    for root, dirs, files in os.walk(base):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)
    os.chmod(base, 0o755)
