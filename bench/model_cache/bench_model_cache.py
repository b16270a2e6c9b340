#!/usr/bin/env python3
"""model_cache figures, measured in one run (history: bench/model_cache/HISTORY.md).

1. Re-check of a cached multi-GB model: hf_snapshot's no-op path (manifest + one stat per file, no
   network: the endpoint is a closed port) against hashing every file (what verify=sha256 does).
   The model is made of sparse files of the given sizes, so it takes no disk space; hashing still
   reads every byte through the page cache.
2. Upstream bytes for a fleet of N hosts: `hub` mode (every host downloads from the hub stand-in)
   against `peer` mode (one host downloads, the others copy from it through the role's peer server),
   counted by the stand-in. The hosts are directories on this machine and the transfers go over
   loopback; the code is the module's and the peer server's own.

Usage: python3 bench/model_cache/bench_model_cache.py [--shards 15] [--shard-gb 0.5] [--hosts 4] [--out FILE]
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "collections"), str(REPO / "lab")]

from ansible_collections.specdec.serve.plugins.module_utils import hf_manifest as hm  # noqa: E402
from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot  # noqa: E402
from hfhub import hfhub  # noqa: E402


def recheck_bench(work, shards, shard_bytes, repeats):
    repo_id = "bench/sparse-model"
    dest = work / "models" / repo_id
    dest.mkdir(parents=True)
    files = {}
    for i in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        with open(dest / name, "wb") as handle:
            handle.truncate(shard_bytes)
        files[name] = {"size": shard_bytes}
    t0 = time.perf_counter()
    for name in files:   # the identities a download would have recorded
        files[name]["sha256"] = files[name]["etag"] = hm.sha256_file(str(dest / name))
    first_hash = time.perf_counter() - t0
    hm.write_manifest(str(dest), hm.build_manifest(repo_id, "main", "0" * 40, files, None, None))

    def noop():
        result = Snapshot(repo_id, dest=str(dest), endpoint="http://127.0.0.1:9").run()
        assert result["changed"] is False and result["network"] is False
    noop()
    noop_times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        noop()
        noop_times.append(time.perf_counter() - t0)
    # The same no-op as the module process Ansible starts on a host (interpreter start-up included, SSH not).
    argfile = work / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"repo_id": repo_id, "dest": str(dest),
                                                           "endpoint": "http://127.0.0.1:9"}}))
    proc_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(REPO / "plugins/modules/hf_snapshot.py"), str(argfile)],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "collections")))
        proc_times.append(time.perf_counter() - t0)
        assert json.loads(proc.stdout)["changed"] is False, proc.stdout + proc.stderr
    t0 = time.perf_counter()
    bad = hm.check_files(str(dest), hm.read_manifest(str(dest)), "sha256")
    hash_time = time.perf_counter() - t0
    assert bad == []
    noop_med = sorted(noop_times)[len(noop_times) // 2]
    return {"model_bytes": shards * shard_bytes, "files": shards, "noop_median_s": noop_med,
            "noop_max_s": max(noop_times), "noop_runs": repeats,
            "noop_module_process_s": sorted(proc_times)[1], "hash_s": hash_time,
            "first_hash_s": first_hash, "speedup": hash_time / noop_med,
            # both as module processes: interpreter start-up + check, against start-up + hashing
            "speedup_process": (sorted(proc_times)[1] + hash_time) / sorted(proc_times)[1]}


def start_peer(root, token):
    spec = importlib.util.spec_from_file_location("peer", REPO / "roles/model_cache/files/specdec_model_peer.py")
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    handler = type("H", (peer.PeerHandler,), {"root": str(root), "tiktoken_dir": None, "token": token,
                                              "log_message": lambda *a: None})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, "http://127.0.0.1:%d" % httpd.server_address[1]


def fleet_bench(work, hosts, weight_bytes):
    repos = {r: hfhub.model_repo(r, t, weight_bytes) for r, t in
             (("openai/gpt-oss-120b", "gpt_oss"), ("nvidia/gpt-oss-120b-Eagle3-long-context", "eagle3"))}
    out = {}
    for mode in ("hub", "peer"):
        hub = hfhub.HubServer(repos=repos).start()
        roots = [work / mode / ("host-%02d" % (i + 1)) for i in range(hosts)]
        t0 = time.perf_counter()
        if mode == "hub":
            for root in roots:
                for repo_id in repos:
                    Snapshot(repo_id, dest=str(root / repo_id), endpoint=hub.url,
                             ignore_patterns=["original/*", "metal/*"]).run()
        else:
            for repo_id in repos:
                Snapshot(repo_id, dest=str(roots[0] / repo_id), endpoint=hub.url,
                         ignore_patterns=["original/*", "metal/*"]).run()
            httpd, url = start_peer(roots[0], "bench-token")
            for root in roots[1:]:
                for repo_id in repos:
                    Snapshot(repo_id, dest=str(root / repo_id), endpoint=url, token="bench-token",
                             ignore_patterns=["original/*", "metal/*"]).run()
            httpd.shutdown()
        elapsed = time.perf_counter() - t0
        stats = hub.state.stats()
        hub.stop()
        one_copy = sum(hm.manifest_size(hm.read_manifest(str(roots[0] / r))) for r in repos)
        for root in roots:
            for r in repos:
                assert hm.read_manifest(str(root / r))["files"] == hm.read_manifest(str(roots[0] / r))["files"]
        out[mode] = {"upstream_bytes": stats["bytes_served"], "upstream_requests": stats["requests"],
                     "one_copy_bytes": one_copy, "copies": stats["bytes_served"] / one_copy, "elapsed_s": elapsed}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=15)
    # gpt-oss-120b: about 65 GB in 15 shards
    parser.add_argument("--shard-gb", type=float, default=4.35)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--weight-mb", type=float, default=16, help="size of each generated weight shard in the fleet test")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="bench-hf-home-"))
    work = Path(tempfile.mkdtemp(prefix="bench-model-cache-"))
    try:
        recheck = recheck_bench(work, args.shards, int(args.shard_gb * 1e9), args.repeats)
        fleet = fleet_bench(work, args.hosts, int(args.weight_mb * 2 ** 20))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = {"recheck": recheck, "fleet": fleet, "hosts": args.hosts,
               "python": sys.version.split()[0], "cpus": os.cpu_count()}
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    ok = recheck["speedup_process"] >= 50 and recheck["noop_module_process_s"] < 1 and round(fleet["peer"]["copies"]) == 1 \
        and round(fleet["hub"]["copies"]) == args.hosts
    print("targets met" if ok else "TARGETS NOT MET", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
