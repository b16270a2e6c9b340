# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve complete model snapshots of this host to its peers, speaking the Hugging Face hub protocol.

model_cache's ``peer`` source: one host downloads from the hub, then runs this server for the time
the other hosts need to copy; they use the same hf_snapshot module (the real huggingface_hub client,
with resumption) with this server as endpoint. Only snapshots with a completion manifest
(``<root>/<org>/<name>/.specdec-manifest.json``) are served, and only the files the manifest lists,
with the hub's own identities (ETag, LFS sha256), so the peers' manifests equal the seed's.

Endpoints: ``GET /api/models/{org}/{name}[/revision/{rev}]``, ``GET /api/models/{org}/{name}/tree/{rev}``,
``HEAD|GET /{org}/{name}/resolve/{rev}/{path}`` (Range supported), ``GET /encodings/{name}.tiktoken``.
With ``--token-file``, every request for a snapshot must carry ``Authorization: Bearer <token>``
(the encodings, public files, are served without it). With ``--tls-cert`` and ``--tls-key`` it serves
HTTPS only (TLS 1.2 or later); the handshake runs in the connection's own thread.

Stdlib only (any python3 >= 3.8).
"""

import argparse
import hashlib
import hmac
import json
import os
import re
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

MANIFEST = ".specdec-manifest.json"
API_RE = re.compile(r"^/api/models/([^/]+)/([^/]+)(?:/(revision|tree)/([^/]+)(/.*)?)?/?$")
RESOLVE_RE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")
RANGE_RE = re.compile(r"^bytes=(\d+)-(\d*)$")
CHUNK = 1 << 20


class PeerHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "specdec-model-peer/1.0"
    root = "."
    tiktoken_dir = None
    token = None

    def log_message(self, format, *args):  # noqa: A002
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))

    def _reply(self, status, body=b"", headers=None):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, status, code, message, headers=None):
        headers = dict(headers or {})
        if code:
            headers["X-Error-Code"] = code
        headers["X-Error-Message"] = message
        self._reply(status, json.dumps({"error": message}).encode(), headers)

    def _authorised(self):
        # a constant-time comparison: the time to refuse says nothing of how much of the token was right
        given = self.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if self.token and not hmac.compare_digest(given, ("Bearer " + self.token).encode("utf-8")):
            self._error(401, "RepoNotFound", "Invalid username or password.")
            return False
        return True

    def _manifest(self, org, name, revision):
        org, name = unquote(org), unquote(name)
        if org.startswith(".") or name.startswith(".") or "/" in org + name:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        base = os.path.join(self.root, org, name)
        try:
            with open(os.path.join(base, MANIFEST)) as handle:
                manifest = json.load(handle)
        except (OSError, ValueError):
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if revision not in (manifest.get("revision"), manifest.get("commit")):
            self._error(404, "RevisionNotFound", "Invalid rev id: %s" % revision)
            return None
        manifest["_base"] = base
        return manifest

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = urlsplit(self.path).path
        if path.startswith("/encodings/"):   # public files: no token, so get_url needs no secret header
            return self._encoding(path[len("/encodings/"):])
        if not self._authorised():
            return
        match = API_RE.match(path)
        if match and self.command == "GET":
            org, name, kind, rev, _sub = match.groups()
            manifest = self._manifest(org, name, unquote(rev or "main"))
            if manifest is None:
                return
            if kind == "tree":
                return self._reply(200, json.dumps(_tree(manifest)).encode())
            info = {"id": "%s/%s" % (unquote(org), unquote(name)), "sha": manifest["commit"], "private": False,
                    "siblings": [{"rfilename": p} for p in sorted(manifest["files"])]}
            return self._reply(200, json.dumps(info).encode())
        match = RESOLVE_RE.match(path)
        if match:
            org, name, rev, rel = match.groups()
            manifest = self._manifest(org, name, unquote(rev))
            if manifest is None:
                return
            rel = unquote(rel)
            entry = manifest["files"].get(rel)
            if entry is None:
                return self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": manifest["commit"]})
            headers = {"ETag": '"%s"' % entry["etag"], "X-Repo-Commit": manifest["commit"]}
            if entry.get("sha256"):
                headers["X-Linked-Etag"] = '"%s"' % entry["etag"]
                headers["X-Linked-Size"] = str(entry["size"])
            return self._file(os.path.join(manifest["_base"], *rel.split("/")), headers)
        return self._error(404, None, "Not found")

    def _encoding(self, name):
        if not self.tiktoken_dir or not re.match(r"^[a-z0-9_]+\.tiktoken$", name):
            return self._error(404, None, "Not found")
        path = os.path.join(self.tiktoken_dir, name)
        if not os.path.isfile(path):
            return self._error(404, None, "Not found")
        with open(path, "rb") as handle:
            etag = hashlib.sha256(handle.read()).hexdigest()
        return self._file(path, {"ETag": '"%s"' % etag})

    def _file(self, path, headers):
        try:
            handle = open(path, "rb")
        except OSError:
            return self._error(404, "EntryNotFound", "Entry not found")
        with handle:
            size = os.fstat(handle.fileno()).st_size
            start, end, status = 0, size, 200
            match = RANGE_RE.match(self.headers.get("Range", "").strip())
            if match:
                start = int(match.group(1))
                end = min(int(match.group(2)) + 1, size) if match.group(2) else size
                if start >= size and size:
                    return self._reply(416, b"", {"Content-Range": "bytes */%d" % size})
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, size)
            self.send_response(status)
            headers.update({"Content-Length": str(end - start), "Accept-Ranges": "bytes",
                            "Content-Type": "application/octet-stream"})
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command == "HEAD":
                return
            handle.seek(start)
            left = end - start
            while left > 0:
                block = handle.read(min(CHUNK, left))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)


def _tree(manifest):
    entries = []
    for rel, entry in sorted(manifest["files"].items()):
        item = {"type": "file", "oid": entry.get("oid") or entry["etag"], "size": entry["size"], "path": rel}
        if entry.get("sha256"):
            item["lfs"] = {"oid": entry["sha256"], "size": entry["size"], "pointerSize": 134}
        entries.append(item)
    return entries


class TLSServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that speaks TLS on every connection, the handshake in the connection's thread
    (a slow or silent client holds up no other)."""

    tls_context = None
    handshake_timeout = 30

    def finish_request(self, request, client_address):
        request.settimeout(self.handshake_timeout)
        try:
            request = self.tls_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            sys.stderr.write("%s TLS handshake failed: %s\n" % (client_address[0], exc))
            return
        request.settimeout(None)
        try:
            super().finish_request(request, client_address)
        finally:
            try:
                request.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass


def tls_context(cert, key):
    """A server context of TLS 1.2 or later with the certificate and key (PEM files)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def make_server(bind, port, handler, cert=None, key=None):
    """The peer server: HTTPS with a certificate and key, else plain HTTP."""
    if bool(cert) != bool(key):
        raise SystemExit("specdec-model-peer: --tls-cert and --tls-key go together")
    if cert:
        server_class = type("Server", (TLSServer,), {"tls_context": tls_context(cert, key)})
        httpd = server_class((bind, port), handler)
    else:
        httpd = ThreadingHTTPServer((bind, port), handler)
    httpd.daemon_threads = True
    return httpd


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--root", required=True, help="model_cache_root: <root>/<org>/<name>")
    parser.add_argument("--tiktoken-dir")
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument("--token-file", help="file holding the bearer token peers must send")
    parser.add_argument("--tls-cert", help="PEM certificate: serve HTTPS (with --tls-key)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = parser.parse_args(argv)
    token = None
    if args.token_file:
        with open(args.token_file) as handle:
            token = handle.read().strip() or None
    handler = type("Handler", (PeerHandler,), {"root": os.path.abspath(args.root),
                                               "tiktoken_dir": args.tiktoken_dir, "token": token})
    httpd = make_server(args.bind, args.port, handler, args.tls_cert, args.tls_key)
    sys.stderr.write("specdec-model-peer: serving %s on %s://%s:%d\n"
                     % (args.root, "https" if args.tls_cert else "http", args.bind, args.port))
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
