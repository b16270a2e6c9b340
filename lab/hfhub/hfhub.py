#!/usr/bin/env python3
"""Hugging Face hub stand-in for the lab (stdlib only).

It serves what the real ``huggingface_hub`` client asks for in ``snapshot_download`` and
``hf_hub_download`` (0.2x, 1.x and 2.x), for a set of small generated model repos:

- ``GET /api/models/{org}/{name}[/revision/{rev}]``: repo info (``sha``, ``siblings``, ``private``)
- ``GET /api/models/{org}/{name}/tree/{rev}[/{path}]``: file listing (``oid``, ``size``, ``lfs``)
- ``HEAD|GET /{org}/{name}/resolve/{rev}/{path}``: the file, with ``ETag``, ``X-Repo-Commit``,
  ``Content-Length``, ``Accept-Ranges`` and ``Range`` support (206) so interrupted downloads resume
- errors as the hub sends them: 404 + ``X-Error-Code: RepoNotFound | RevisionNotFound | EntryNotFound``,
  401 for a private repo without the right token
- ``GET /encodings/{o200k_base,cl100k_base}.tiktoken`` from ``--tiktoken-dir`` (same path as the
  public blob store, so ``TIKTOKEN`` URLs differ only by host)

No Xet headers are ever sent, so ``hf_xet`` stays out of the way and the client uses plain HTTP.

Traffic accounting: every request is appended to a JSON-lines log (``--log``) with the body bytes
actually written; ``GET /_stats`` returns totals (overall, per client address, per path) and
``POST /_stats/reset`` zeroes them. Fault injection: ``POST /_fault`` with
``{"path": "<substring>", "after_bytes": N, "times": 1}`` (or ``--fault path:N``) makes the next
matching GET send its headers and N body bytes, then drop the connection.

Run it: ``python3 lab/hfhub/hfhub.py serve --host 127.0.0.1 --port 18080``; clients use
``HF_ENDPOINT=http://127.0.0.1:18080``. ``python3 lab/hfhub/hfhub.py repos`` lists the repos.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

LFS_THRESHOLD = 10 * 1024          # files at least this big (and weights) are served as LFS files
DEFAULT_WEIGHT_SIZE = 256 * 1024   # bytes of each generated weight shard
DEFAULT_PRIVATE_TOKEN = "hf_lab_private_token_0123456789"
ENCODINGS = ("o200k_base.tiktoken", "cl100k_base.tiktoken")


# ---------------------------------------------------------------- generated repos

def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the hub reports as ``oid`` (and ETag) of a regular file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def generated_bytes(seed: str, size: int) -> bytes:
    """Deterministic pseudo-random content of ``size`` bytes."""
    return hashlib.shake_256(seed.encode()).digest(size)


class RepoFile:
    def __init__(self, path: str, data: bytes, lfs: bool | None = None):
        self.path = path
        self.data = data
        self.size = len(data)
        self.lfs = lfs if lfs is not None else (self.size >= LFS_THRESHOLD or path.endswith(".safetensors"))
        self.blob_oid = git_blob_sha1(data)
        self.sha256 = hashlib.sha256(data).hexdigest()

    @property
    def etag(self) -> str:
        # The hub's ETag is the sha256 of an LFS file and the git blob id of a regular one.
        return self.sha256 if self.lfs else self.blob_oid

    def tree_entry(self) -> dict:
        entry = {"type": "file", "oid": self.blob_oid, "size": self.size, "path": self.path}
        if self.lfs:
            # The git blob of an LFS file is its pointer; report the pointer's id like the hub does.
            pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                       % (self.sha256, self.size)).encode()
            entry["oid"] = git_blob_sha1(pointer)
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(pointer)}
        return entry


class Repo:
    def __init__(self, repo_id: str, commits: list[dict[str, bytes]], refs: dict[str, int],
                 private_token: str | None = None):
        self.repo_id = repo_id
        self.private_token = private_token
        self.commits: list[tuple[str, dict[str, RepoFile]]] = []
        parent = ""
        for index, files in enumerate(commits):
            rfiles = {path: RepoFile(path, data) for path, data in sorted(files.items())}
            digest = hashlib.sha1(("%s\n%d\n%s\n" % (repo_id, index, parent)).encode())
            for path, rfile in rfiles.items():
                digest.update(("%s %s\n" % (path, rfile.etag)).encode())
            sha = digest.hexdigest()
            self.commits.append((sha, rfiles))
            parent = sha
        self.refs = {name: self.commits[index][0] for name, index in refs.items()}

    def resolve(self, revision: str) -> tuple[str, dict[str, RepoFile]] | None:
        sha = self.refs.get(revision, revision)
        for commit_sha, files in self.commits:
            if commit_sha == sha:
                return commit_sha, files
        return None

    def describe(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "private": self.private_token is not None,
            "refs": dict(self.refs),
            "commits": [{"sha": sha, "files": {p: {"size": f.size, "etag": f.etag, "sha256": f.sha256}
                                               for p, f in files.items()}}
                        for sha, files in self.commits],
        }


def _model_commits(repo_id: str, model_type: str, weight_size: int, extra_config: dict | None = None):
    """Two commits: v1.0 (one weight file) and main (two shards, an index, a nested dir)."""
    config = {"model_type": model_type, "architectures": [_ARCH.get(model_type, "LlamaForCausalLM")],
              "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 201088 if model_type == "gpt_oss" else 32000}
    config.update(extra_config or {})

    def dump(obj):
        return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()

    readme = ("# %s (lab stand-in)\n\nGenerated content served by the lab hub stand-in.\n" % repo_id).encode()
    first = {
        "README.md": readme,
        "config.json": dump(dict(config, specdec_lab_revision=1)),
        "generation_config.json": dump({"max_new_tokens": 256}),
        "tokenizer_config.json": dump({"model_max_length": 131072}),
        "model.safetensors": generated_bytes(repo_id + "@1/model", weight_size),
    }
    shard_names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    second = {
        "README.md": readme,
        "config.json": dump(dict(config, specdec_lab_revision=2)),
        "generation_config.json": dump({"max_new_tokens": 256}),
        "tokenizer_config.json": dump({"model_max_length": 131072}),
        shard_names[0]: generated_bytes(repo_id + "@2/shard1", weight_size),
        shard_names[1]: generated_bytes(repo_id + "@2/shard2", weight_size // 2 + 17),
        "model.safetensors.index.json": dump({"weight_map": {"layers.0": shard_names[0], "layers.1": shard_names[1]}}),
        "original/params.json": dump({"dim": 64, "n_layers": 2}),
        "metal/model.bin": generated_bytes(repo_id + "@2/metal", weight_size // 4),
    }
    return [first, second], {"v1.0": 0, "main": 1}


_ARCH = {"gpt_oss": "GptOssForCausalLM", "llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM",
         "eagle3": "LlamaForCausalLMEagle3", "arctic_lstm_speculator": "ArcticLSTMSpeculatorPreTrainedModel"}

# repo id -> model_type; the real names let lab inventories use the names of the seeds.
DEFAULT_MODELS = {
    "specdec-lab/tiny-gpt-oss": "gpt_oss",
    "specdec-lab/tiny-gpt-oss-eagle3": "eagle3",
    "openai/gpt-oss-120b": "gpt_oss",
    "openai/gpt-oss-20b": "gpt_oss",
    "nvidia/gpt-oss-120b-Eagle3": "eagle3",
    "nvidia/gpt-oss-120b-Eagle3-v2": "eagle3",
    "nvidia/gpt-oss-120b-Eagle3-long-context": "eagle3",
    "nvidia/Llama-3.3-70B-Instruct-FP4": "llama",
    "nvidia/Llama-3.1-8B-Instruct-FP4": "llama",
    "Qwen/Qwen3-32B": "qwen3",
    "RedHatAI/Qwen3-32B-speculator.eagle3": "eagle3",
    "Snowflake/Arctic-LSTM-Speculator-gpt-oss-120b": "arctic_lstm_speculator",
}
PRIVATE_REPO = "specdec-lab/private-model"


def model_repo(repo_id: str, model_type: str = "llama", weight_size: int = DEFAULT_WEIGHT_SIZE,
               private_token: str | None = None) -> Repo:
    """A generated model repo with the two commits of ``_model_commits`` (refs ``v1.0`` and ``main``)."""
    commits, refs = _model_commits(repo_id, model_type, weight_size)
    return Repo(repo_id, commits, refs, private_token=private_token)


def directory_repo(repo_id: str, path: str) -> Repo:
    """A repo of one commit (ref ``main``) holding the files under ``path``, e.g. a real model that
    ``save_pretrained`` wrote (the lab's real-engine models, lab/vllm-cpu/make_model.py)."""
    files = {}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            with open(full, "rb") as handle:
                files[os.path.relpath(full, path).replace(os.sep, "/")] = handle.read()
    if not files:
        raise SystemExit("hfhub: %s holds no file for %s" % (path, repo_id))
    return Repo(repo_id, [files], {"main": 0})


def parse_model_dir(spec: str) -> tuple[str, str]:
    """``ORG/NAME=DIRECTORY`` -> (repo id, directory)."""
    repo_id, sep, path = spec.partition("=")
    if not sep or not re.fullmatch(r"[\w.-]+/[\w.-]+", repo_id) or not os.path.isdir(path):
        raise argparse.ArgumentTypeError("%r: want ORG/NAME=DIRECTORY (an existing directory)" % spec)
    return repo_id, path


def default_repos(weight_size: int = DEFAULT_WEIGHT_SIZE, private_token: str = DEFAULT_PRIVATE_TOKEN) -> dict[str, Repo]:
    repos = {repo_id: model_repo(repo_id, model_type, weight_size) for repo_id, model_type in DEFAULT_MODELS.items()}
    repos[PRIVATE_REPO] = model_repo(PRIVATE_REPO, "llama", weight_size // 4, private_token)
    return repos


# ---------------------------------------------------------------- server

class HubState:
    """Repos, counters, the request log and the armed faults, shared by all handler threads."""

    def __init__(self, repos: dict[str, Repo], tiktoken_dir: str | None = None, log_path: str | None = None):
        self.repos = repos
        self.tiktoken_dir = tiktoken_dir
        self.log_path = log_path
        self.lock = threading.Lock()
        self.faults: list[dict] = []
        self.reset()

    def reset(self):
        with self.lock:
            self.bytes_served = 0
            self.requests = 0
            self.by_client: dict[str, int] = {}
            self.by_path: dict[str, int] = {}

    def record(self, client: str, method: str, path: str, status: int, nbytes: int, note: str = ""):
        entry = {"ts": round(time.time(), 3), "client": client, "method": method, "path": path,
                 "status": status, "bytes": nbytes}
        if note:
            entry["note"] = note
        with self.lock:
            self.requests += 1
            self.bytes_served += nbytes
            self.by_client[client] = self.by_client.get(client, 0) + nbytes
            self.by_path[path] = self.by_path.get(path, 0) + nbytes
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps(entry, sort_keys=True) + "\n")

    def stats(self) -> dict:
        with self.lock:
            return {"bytes_served": self.bytes_served, "requests": self.requests,
                    "by_client": dict(self.by_client), "by_path": dict(self.by_path),
                    "faults_armed": [dict(f) for f in self.faults]}

    def arm_fault(self, path: str, after_bytes: int, times: int = 1):
        with self.lock:
            self.faults.append({"path": path, "after_bytes": int(after_bytes), "times": int(times)})

    def take_fault(self, path: str) -> int | None:
        with self.lock:
            for fault in self.faults:
                if fault["path"] in path and fault["times"] > 0:
                    fault["times"] -= 1
                    if fault["times"] <= 0:
                        self.faults.remove(fault)
                    return fault["after_bytes"]
        return None


_API_RE = re.compile(r"^/api/models/(?P<org>[^/]+)/(?P<name>[^/]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<sub>/.*)?)?/?$")
_RESOLVE_RE = re.compile(r"^/(?P<org>[^/]+)/(?P<name>[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "specdec-hfhub/1.0"
    state: HubState  # set on the subclass made by make_server

    def log_message(self, format, *args):  # noqa: A002 - quiet; the JSON-lines log is the record
        pass

    # -- helpers
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, note: str = ""):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        sent = len(body) if self.command != "HEAD" else 0
        # Recorded before the body goes out, so a client that has read it always finds it counted.
        self.state.record(self.client_address[0], self.command, self.path, status, sent, note)
        if sent:
            self.wfile.write(body)

    def _json(self, status: int, obj, headers: dict | None = None):
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, status: int, code: str | None, message: str, headers: dict | None = None):
        headers = dict(headers or {})
        if code:
            headers["X-Error-Code"] = code
        headers["X-Error-Message"] = message
        self._json(status, {"error": message}, headers)

    def _repo(self, org: str, name: str) -> Repo | None:
        repo_id = "%s/%s" % (unquote(org), unquote(name))
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if repo.private_token is not None:
            auth = self.headers.get("Authorization", "")
            if auth != "Bearer " + repo.private_token:
                if auth:
                    self._error(401, None, "Invalid credentials in Authorization header")
                else:
                    self._error(401, "RepoNotFound", "Invalid username or password.")
                return None
        return repo

    # -- verbs
    def do_HEAD(self):
        self._dispatch()

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if url.path == "/_stats/reset":
            self.state.reset()
            return self._json(200, {"reset": True})
        if url.path == "/_fault":
            try:
                spec = json.loads(raw or b"{}")
                self.state.arm_fault(spec.get("path", ""), int(spec.get("after_bytes", 0)), int(spec.get("times", 1)))
            except (ValueError, TypeError) as exc:
                return self._error(400, None, "bad fault spec: %s" % exc)
            return self._json(200, {"armed": True})
        return self._error(404, None, "Not found")

    def _dispatch(self):
        url = urlsplit(self.path)
        path = url.path
        if path == "/_stats" and self.command == "GET":
            return self._json(200, self.state.stats())
        if path.startswith("/encodings/"):
            return self._encoding(path[len("/encodings/"):])
        match = _API_RE.match(path)
        if match and self.command == "GET":
            return self._api(match, parse_qs(url.query))
        match = _RESOLVE_RE.match(path)
        if match:
            return self._resolve(match)
        return self._error(404, None, "Not found")

    def _api(self, match, query):
        repo = self._repo(match["org"], match["name"])
        if repo is None:
            return
        revision = unquote(match["rev"] or "main")
        resolved = repo.resolve(revision)
        if resolved is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
        sha, files = resolved
        if match["kind"] == "tree":
            sub = unquote((match["sub"] or "").strip("/"))
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            return self._json(200, _tree(files, sub, recursive))
        info = {
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id, "modelId": repo.repo_id, "sha": sha,
            "private": repo.private_token is not None, "gated": False, "disabled": False,
            "downloads": 0, "likes": 0, "tags": [], "library_name": "transformers",
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": p} for p in files],
        }
        config = files.get("config.json")
        if config is not None:
            info["config"] = json.loads(config.data)
        return self._json(200, info)

    def _resolve(self, match):
        repo = self._repo(match["org"], match["name"])
        if repo is None:
            return
        revision = unquote(match["rev"])
        resolved = repo.resolve(revision)
        if resolved is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
        sha, files = resolved
        rfile = files.get(unquote(match["path"]))
        if rfile is None:
            return self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": sha})
        headers = {"ETag": '"%s"' % rfile.etag, "X-Repo-Commit": sha}
        if rfile.lfs:
            headers["X-Linked-Etag"] = '"%s"' % rfile.etag
            headers["X-Linked-Size"] = str(rfile.size)
        self._body(rfile.data, headers)

    def _encoding(self, name: str):
        if name not in ENCODINGS or not self.state.tiktoken_dir:
            return self._error(404, None, "Not found")
        try:
            with open(os.path.join(self.state.tiktoken_dir, name), "rb") as handle:
                data = handle.read()
        except OSError:
            return self._error(404, None, "Not found")
        self._body(data, {"ETag": '"%s"' % hashlib.md5(data).hexdigest()})

    def _body(self, data: bytes, headers: dict):
        """Send a file body, honouring Range and an armed connection-drop fault."""
        headers = dict(headers, **{"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})
        start, end, status = 0, len(data), 200
        range_header = self.headers.get("Range")
        if range_header:
            rmatch = _RANGE_RE.match(range_header.strip())
            if rmatch and (rmatch.group(1) or rmatch.group(2)):
                if rmatch.group(1):
                    start = int(rmatch.group(1))
                    end = min(int(rmatch.group(2)) + 1, len(data)) if rmatch.group(2) else len(data)
                else:  # suffix range
                    start = max(len(data) - int(rmatch.group(2)), 0)
                if start >= len(data) and len(data) > 0:
                    headers["Content-Range"] = "bytes */%d" % len(data)
                    return self._send(416, b"", headers)
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, len(data))
        body = data[start:end]
        drop_after = self.state.take_fault(self.path) if self.command == "GET" else None
        if drop_after is None:
            return self._send(status, body, headers, note="range %d-%d" % (start, end) if status == 206 else "")
        # Fault: announce the whole body, send part of it, then cut the connection.
        self.send_response(status)
        headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        part = body[:max(0, min(drop_after, len(body) - 1))]
        self.wfile.write(part)
        self.wfile.flush()
        self.state.record(self.client_address[0], self.command, self.path, status, len(part), "dropped")
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _tree(files: dict[str, RepoFile], sub: str, recursive: bool) -> list[dict]:
    prefix = sub + "/" if sub else ""
    entries, dirs = [], set()
    for path, rfile in files.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        parts = rest.split("/")
        for depth in range(1, len(parts)):
            if recursive or depth == 1:
                dirs.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            entries.append(rfile.tree_entry())
    entries.extend({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
                   for d in sorted(dirs))
    return entries


class HubServer:
    """The stand-in as an object: ``with HubServer() as hub: hub.url ...`` (used by the unit tests)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, repos: dict[str, Repo] | None = None,
                 tiktoken_dir: str | None = None, log_path: str | None = None):
        self.state = HubState(repos if repos is not None else default_repos(), tiktoken_dir, log_path)
        handler = type("BoundHubHandler", (HubHandler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return "http://%s:%d" % (host, port)

    def start(self) -> "HubServer":
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="hfhub", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- command line

def _daemonize(pidfile: str, logfile: str):
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    sys.stdout.flush()
    sys.stderr.flush()
    with open(os.devnull, "rb") as devnull:
        os.dup2(devnull.fileno(), 0)
    out = os.open(logfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    with open(pidfile, "w", encoding="utf-8") as handle:
        handle.write("%d\n" % os.getpid())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the stand-in")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (loopback or the lab network gateway)")
    serve.add_argument("--port", type=int, default=18080)
    serve.add_argument("--tiktoken-dir", help="directory holding o200k_base.tiktoken and cl100k_base.tiktoken")
    serve.add_argument("--log", help="JSON-lines request log (bytes served per request)")
    serve.add_argument("--weight-size", type=int, default=DEFAULT_WEIGHT_SIZE)
    serve.add_argument("--private-token", default=DEFAULT_PRIVATE_TOKEN,
                       help="token that opens %s" % PRIVATE_REPO)
    serve.add_argument("--fault", action="append", default=[], metavar="PATH_SUBSTRING:BYTES",
                       help="drop the connection once after BYTES body bytes of a GET whose path contains it")
    serve.add_argument("--model-dir", action="append", default=[], type=parse_model_dir, metavar="ORG/NAME=DIR",
                       help="also serve DIR's files as the repo ORG/NAME (one commit, ref main)")
    serve.add_argument("--daemon", action="store_true", help="detach; needs --pidfile")
    serve.add_argument("--pidfile")
    serve.add_argument("--stdout-log", default=os.devnull, help="where a daemon's stdout/stderr go")
    listing = sub.add_parser("repos", help="print the generated repos (refs, commits, files) as JSON")
    listing.add_argument("--weight-size", type=int, default=DEFAULT_WEIGHT_SIZE)
    args = parser.parse_args(argv)

    if args.command == "repos":
        print(json.dumps([r.describe() for r in default_repos(args.weight_size).values()], indent=2))
        return 0

    repos = default_repos(args.weight_size, args.private_token)
    repos.update({repo_id: directory_repo(repo_id, path) for repo_id, path in args.model_dir})
    server = HubServer(args.host, args.port, repos, args.tiktoken_dir, args.log)
    for fault in args.fault:
        path, _, nbytes = fault.rpartition(":")
        server.state.arm_fault(path, int(nbytes))
    if args.daemon:
        if not args.pidfile:
            parser.error("--daemon needs --pidfile")
        _daemonize(args.pidfile, args.stdout_log)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print("hfhub: serving on %s" % server.url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        if args.daemon and args.pidfile:
            try:
                os.unlink(args.pidfile)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
