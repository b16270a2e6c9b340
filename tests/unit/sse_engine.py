"""A stdlib streaming server with a fixed token schedule (several tokens per chunk), so the SSE client's
TTFT, TPOT and throughput can be checked exactly against a virtual clock the server advances, or as bounds
on the real clock. Shared by the serve_bench tests (module_utils and the module)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class VirtualClock:
    """A clock the fake engine sets to each chunk's scheduled time, in lock-step with the client.

    The client calls the clock right after each read; the engine writes a chunk only once the
    client has read (and timestamped) the previous one, so every read returns exactly the chunk
    last written and is stamped with that chunk's scheduled time.
    """

    def __init__(self):
        self.now = 0.0
        self.calls = 0
        self.cond = threading.Condition()

    def __call__(self):
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
            return self.now

    def write_then_wait(self, write):
        with self.cond:
            seen = self.calls
        write()
        with self.cond:
            assert self.cond.wait_for(lambda: self.calls > seen, timeout=30), "the client never read the chunk"


class FakeEngine:
    """A chat-completions streaming server with a known clock.

    Every request: first text chunk ``ttft`` seconds after the request arrives,
    then one chunk every ``interval`` seconds, each carrying ``per_chunk`` tokens,
    until ``tokens`` tokens are sent; then a usage chunk and ``[DONE]``.
    With a ``clock`` (a VirtualClock) it does not sleep: it sets the clock to each chunk's
    scheduled time and sends it when the client has read the previous one (one stream at a time).
    """

    def __init__(self, ttft=0.04, interval=0.02, per_chunk=3, tokens=30, prompt_tokens=17,
                 usage=True, mode="ok", metrics_body=None, metrics_type="application/json", clock=None):
        self.clock = clock
        self.ttft = ttft
        self.interval = interval
        self.per_chunk = per_chunk
        self.tokens = tokens
        self.prompt_tokens = prompt_tokens
        self.usage = usage
        self.mode = mode
        self.metrics_body = metrics_body
        self.metrics_type = metrics_type
        self.requests = []
        self.connections = set()
        self.lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    body = json.dumps({"object": "list", "data": [{"id": "fake-model"}]}).encode()
                    ctype = "application/json"
                elif self.path == "/metrics" and engine.metrics_body is not None:
                    mb = engine.metrics_body
                    body = (mb() if callable(mb) else mb).encode()
                    ctype = engine.metrics_type
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_POST(self):
                t0 = time.perf_counter()
                n = int(self.headers["Content-Length"])
                req = json.loads(self.rfile.read(n))
                with engine.lock:
                    engine.requests.append(req)
                    engine.connections.add(self.client_address)
                if engine.mode == "http500":
                    body = b'{"error": "boom"}'
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def event(obj):
                    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                    if engine.clock is None:
                        self._chunk(b"data: " + raw + b"\n\n")
                    else:
                        engine.clock.write_then_wait(lambda: self._chunk(b"data: " + raw + b"\n\n"))

                def chunk(delta, finish=None):
                    return {"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

                if engine.clock is not None:
                    t0 = engine.clock.now
                event(chunk({"role": "assistant"}))
                sent = 0
                j = 0
                while sent < engine.tokens:
                    due = t0 + engine.ttft + j * engine.interval
                    if engine.clock is not None:
                        engine.clock.now = due
                    else:
                        delay = due - time.perf_counter()
                        if delay > 0:
                            time.sleep(delay)
                    k = min(engine.per_chunk, engine.tokens - sent)
                    sent += k
                    finish = "length" if sent >= engine.tokens else None
                    if engine.mode == "error_event" and j == 2:
                        event({"error": {"message": "engine fell over", "code": 500}})
                        self._chunk(b"")
                        return
                    event(chunk({"content": "tok " * k}, finish))
                    j += 1
                    if engine.mode == "truncate" and j == 3:
                        self._chunk(b"")
                        return
                if engine.usage:
                    event({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": engine.prompt_tokens,
                                     "completion_tokens": engine.tokens,
                                     "total_tokens": engine.prompt_tokens + engine.tokens}})
                event(b"[DONE]")
                self._chunk(b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def true_tpot(self):
        chunks = -(-self.tokens // self.per_chunk)
        return (chunks - 1) * self.interval / (self.tokens - 1)

    @property
    def true_e2e(self):
        chunks = -(-self.tokens // self.per_chunk)
        return self.ttft + (chunks - 1) * self.interval

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
