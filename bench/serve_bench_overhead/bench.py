#!/usr/bin/env python3
"""serve_bench overhead: SSE tokens per second one core of the client consumes, and the sweep's
wall time against the sum of its restart, warm-up and measure phases.

    python3 bench/serve_bench_overhead/bench.py sse [--tokens 200000] [--per-chunk 1] [--streams 1]
    python3 bench/serve_bench_overhead/bench.py sweep reports/<run>/<host>-<instance>.json

`sse`: a server in a separate process streams chat-completion chunks as fast as it can (pre-built,
one token per chunk and one event per socket write by default: the worst case, the most events
and reads per token); the client is the
serve_bench runner itself. The figure is output tokens / client CPU seconds (process time of the
client process, all its threads), i.e. tokens per second one fully used core can consume; wall-clock
tokens/s is printed too. Everything stays on 127.0.0.1.
"""

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import Process, Queue

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "collections"))


def serve(q, tokens, per_chunk, batch):
    chunk = json.dumps({"id": "x", "object": "chat.completion.chunk", "model": "m",
                        "choices": [{"index": 0, "delta": {"content": " tok" * per_chunk},
                                     "finish_reason": None}]}, separators=(",", ":")).encode()
    event = b"data: " + chunk + b"\n\n"
    n_events = tokens // per_chunk
    block = event * batch
    framed = b"%x\r\n%s\r\n" % (len(block), block)
    usage = (b"data: " + json.dumps({"choices": [], "usage": {
        "prompt_tokens": 10, "completion_tokens": n_events * per_chunk}}).encode()
        + b"\n\ndata: [DONE]\n\n")

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            BaseHTTPRequestHandler.setup(self)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            full, rest = divmod(n_events, batch)
            for _ in range(full):
                self.wfile.write(framed)
            tail = event * rest + usage
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    q.put(srv.server_address[1])
    srv.serve_forever()


def bench_sse(args):
    from ansible_collections.specdec.serve.plugins.module_utils import bench_runner
    q = Queue()
    p = Process(target=serve, args=(q, args.tokens, args.per_chunk, args.batch), daemon=True)
    p.start()
    port = q.get(timeout=10)
    try:
        cfg = {"url": "http://127.0.0.1:%d" % port, "model": "m", "concurrency": args.streams,
               "num_requests": args.streams, "warmup_requests": 0, "repetitions": 1,
               "max_tokens": args.tokens, "temperature": 0.0, "prompts": ["x"],
               "timeout": 60.0, "spec_metrics": "none"}
        bench_runner.run_benchmark(dict(cfg, num_requests=1, concurrency=1))  # import/JIT warm-up
        cpu0, t0 = time.process_time(), time.perf_counter()
        res = bench_runner.run_benchmark(cfg)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        p.terminate()
    run = res["runs"][0]
    assert run["failed"] == 0, run["errors"]
    tokens = run["output_tokens"]
    out = {"tokens": tokens, "tokens_per_chunk": args.per_chunk, "streams": args.streams,
           "events_per_write": args.batch,
           "client_cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
           "tokens_per_cpu_second": round(tokens / cpu), "tokens_per_wall_second": round(tokens / wall),
           "chunks_per_cpu_second": round(tokens / args.per_chunk / cpu)}
    print(json.dumps(out, indent=2))
    return 0


def bench_sweep(args):
    with open(args.report, encoding="utf-8") as fh:
        rep = json.load(fh)
    t = rep["phase_totals"]
    phases = float(t["restart_s"]) + float(t["warmup_s"]) + float(t["measure_s"])
    wall = float(rep["wall_s"])
    out = {"wall_s": wall, "restart_s": t["restart_s"], "warmup_s": t["warmup_s"],
           "measure_s": t["measure_s"], "phases_s": round(phases, 3),
           "overhead_s": round(wall - phases, 3), "wall_over_phases": round(wall / phases, 4)}
    print(json.dumps(out, indent=2))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sse")
    s.add_argument("--tokens", type=int, default=200000)
    s.add_argument("--per-chunk", type=int, default=1)
    s.add_argument("--streams", type=int, default=1)
    s.add_argument("--batch", type=int, default=1,
                   help="events per socket write (1: one event per write, as an engine streams)")
    w = sub.add_parser("sweep")
    w.add_argument("report")
    args = ap.parse_args()
    return bench_sse(args) if args.cmd == "sse" else bench_sweep(args)


if __name__ == "__main__":
    sys.exit(main())
