"""HTTP side of the emulator (aiohttp 3.8 API only) and the start-up sequence shared by both engines.

Start-up order follows the engines: arguments validated, socket bound (not listening), model
loaded (load delay: nobody gets an HTTP answer, connections are refused), then the server listens.
"""

import asyncio
import hashlib
import json
import math
import os
import signal
import socket
import threading
import time
import uuid

import aiohttp
from aiohttp import web

from .engine import Engine, EngineDead
from .logs import Logger
from .models import check_harmony_encodings
from .trtllm_args import EngineConfigError
from .versions import at_least
from . import world as worlds
from .world import RayStopped, World

DEFAULT_MAX_TOKENS = 256
_AIOHTTP = tuple(int(x) for x in aiohttp.__version__.split(".")[:2])


class Faults:
    """SPECDEC_EMU_FAULT: comma list of crash_at_start, hang_at_start, oom, crash_after:N,
    hang_after:N, dead_after:N."""

    def __init__(self, spec=""):
        self.crash_at_start = self.hang_at_start = self.oom = False
        self.crash_after = self.hang_after = self.dead_after = None
        for item in [s.strip() for s in (spec or "").split(",") if s.strip()]:
            name, _, arg = item.partition(":")
            if name in ("crash_at_start", "hang_at_start", "oom"):
                setattr(self, name, True)
            elif name in ("crash_after", "hang_after", "dead_after"):
                setattr(self, name, int(arg))
            else:
                raise ValueError("unknown SPECDEC_EMU_FAULT item %r" % item)


class ServeConfig:
    """Everything a CLI front-end resolved; the server needs nothing else."""

    def __init__(self, engine, version, model, served_name, host, port, profile, spec,
                 max_batch_size, draft=None, memory_fraction=0.9, iter_perf_stats=False,
                 stream_interval=1, api_key=None, max_seq_len=None, env=None,
                 perf_metrics=False, iter_stats_max=1000, warnings=(), world=None):
        self.engine = engine
        self.version = version
        self.model = model
        self.served_name = served_name
        self.host = host
        self.port = port
        self.profile = profile
        self.spec = spec
        self.max_batch_size = max_batch_size
        self.draft = draft
        self.memory_fraction = memory_fraction
        self.iter_perf_stats = iter_perf_stats
        self.stream_interval = stream_interval
        self.api_key = api_key
        self.max_seq_len = max_seq_len or model.config.get("max_position_embeddings") or 131072
        self.env = dict(os.environ if env is None else env)
        self.perf_metrics = perf_metrics
        self.iter_stats_max = iter_stats_max
        self.warnings = list(warnings)
        # the MPI world of a multi-node trtllm-serve, the Ray world of a vllm serve on Ray (world.py)
        self.world = world or World.single()
        self.faults = Faults(self.env.get("SPECDEC_EMU_FAULT", ""))
        self.load_delay = float(self.env.get("SPECDEC_EMU_LOAD_DELAY_S", "0") or 0)
        self.max_memory_fraction = float(self.env.get("SPECDEC_EMU_MAX_MEMORY_FRACTION", "0.97"))
        self.device_memory_gib = float(self.env.get("SPECDEC_EMU_DEVICE_MEMORY_GIB", "119.7"))
        self.default_max_tokens = int(self.env.get("SPECDEC_EMU_DEFAULT_MAX_TOKENS", DEFAULT_MAX_TOKENS))
        self.corrupt_spec_output, self.corrupt_spec_draft_lens = corrupt_settings(self.env)


def corrupt_settings(env):
    """(token index, draft lengths or None) of the SPECDEC_EMU_CORRUPT_SPEC_OUTPUT fault injection.

    SPECDEC_EMU_CORRUPT_SPEC_OUTPUT=N: while the engine speculates (a draft length > 0 configured),
    every generated token from index N on is replaced by another word, as an engine with a
    speculative-decoding correctness bug would produce. SPECDEC_EMU_CORRUPT_SPEC_DRAFT_LENS=2,4
    limits it to those configured draft lengths. No upstream engine has such a knob.
    """
    raw = (env.get("SPECDEC_EMU_CORRUPT_SPEC_OUTPUT") or "").strip()
    if not raw:
        return None, None
    try:
        start = int(raw)
        lens = [int(x) for x in (env.get("SPECDEC_EMU_CORRUPT_SPEC_DRAFT_LENS") or "").split(",") if x.strip()]
    except ValueError:
        raise ValueError("SPECDEC_EMU_CORRUPT_SPEC_OUTPUT must be a token index (>= 0) and "
                         "SPECDEC_EMU_CORRUPT_SPEC_DRAFT_LENS a comma list of draft lengths")
    if start < 0:
        raise ValueError("SPECDEC_EMU_CORRUPT_SPEC_OUTPUT must be >= 0, got %d" % start)
    return start, (lens or None)


def _greedy(body):
    """Temperature 0 asked for: the text is a function of the prompt (greedy decoding)."""
    t = body.get("temperature")
    return isinstance(t, (int, float)) and not isinstance(t, bool) and t == 0


def count_tokens(text):
    """A tokenizer stand-in: about four characters per token."""
    return max(1, int(math.ceil(len(text or "") / 4.0)))


def _error(engine, status, message, typ="BadRequestError", param=None):
    if engine == "vllm":
        body = {"error": {"message": message, "type": typ, "param": param, "code": status}}
    else:
        body = {"object": "error", "message": message, "type": typ, "param": None, "code": status}
    return web.json_response(body, status=status)


class EmulatorApp:
    def __init__(self, cfg, log, exit_hook):
        self.cfg = cfg
        self.log = log
        self.exit_hook = exit_hook
        self.engine = Engine(cfg.profile, cfg.spec, max_batch_size=cfg.max_batch_size,
                             stream_interval=cfg.stream_interval, iter_stats=cfg.iter_perf_stats,
                             iter_stats_max=cfg.iter_stats_max, log=log.info)
        self.engine.spec_stats_reported = getattr(cfg.spec, "stats_reported", True)
        self.engine.wedge_file = (cfg.env.get("SPECDEC_EMU_WEDGE_FILE") or "").strip() or None
        start, lens = cfg.corrupt_spec_output, cfg.corrupt_spec_draft_lens
        if start is not None and cfg.spec.enabled and (lens is None or cfg.spec.max_draft_len in lens):
            self.engine.corrupt_from = start
            log.warning("fault injection SPECDEC_EMU_CORRUPT_SPEC_OUTPUT=%d: generated text is corrupted "
                        "from token %d on (draft length %d)" % (start, start, cfg.spec.max_draft_len))
        self.completed = 0
        self.created = int(time.time())
        self.perf = []
        self._spec_log_task = None
        self._world_watch_task = None
        self._wedge_watch_task = None
        self._last_spec_log = None

    # -- app ---------------------------------------------------------------------
    def make_app(self):
        middlewares = [self.access_log]
        if self.cfg.engine == "vllm":
            middlewares.append(self.fastapi_errors)
        if self.cfg.engine == "vllm" and self.cfg.api_key:
            middlewares.append(self.auth)
        app = web.Application(middlewares=middlewares)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/version", self.version)
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)
        if self.cfg.engine == "trtllm":
            r.add_get("/health_generate", self.health_generate)
            r.add_get("/metrics", self.trt_metrics)
            r.add_get("/perf_metrics", self.perf_metrics)
            r.add_get("/lab/world", self.lab_world)  # the lab's own: which ranks serve, on which hosts
            if self.cfg.perf_metrics:
                r.add_get("/prometheus/metrics", self.trt_prometheus)
        else:
            r.add_get("/metrics", self.vllm_metrics)
            r.add_get("/ping", self.health)
            r.add_post("/ping", self.health)
            if self.cfg.world.backend == "ray":
                r.add_get("/lab/world", self.lab_world)  # the lab's own: the ranks Ray placed, on which hosts
        return app

    @web.middleware
    async def access_log(self, request, handler):
        resp = await handler(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        where = "%s:%s" % (peer[0], peer[1]) if peer else "-"
        reason = getattr(resp, "reason", "") or ""
        if not (self.cfg.engine == "trtllm" and request.path == "/metrics"):
            self.log.uvicorn('%s - "%s %s HTTP/%d.%d" %d %s' % (
                where, request.method, request.path_qs, request.version.major, request.version.minor,
                resp.status, reason))
        return resp

    @web.middleware
    async def fastapi_errors(self, request, handler):
        """vLLM's server is FastAPI: an unknown path or method is {"detail": ...} in JSON."""
        try:
            return await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            return web.json_response({"detail": exc.reason}, status=exc.status)

    # vLLM from 0.32.0: response fields and request errors as the real 0.32.0 gives them (checked by
    # lab/emulator/conformance.py); earlier versions keep the shapes they were modelled with.
    @property
    def modern(self):
        return self.cfg.engine == "vllm" and at_least(self.cfg.version, "0.32.0")

    @property
    def fingerprint(self):
        """system_fingerprint: vllm-VERSION-<8 hex of the configuration's hash>."""
        digest = hashlib.sha256(repr((self.cfg.model.arg, self.cfg.served_name, self.cfg.spec.method,
                                      self.cfg.spec.max_draft_len)).encode()).hexdigest()
        return "vllm-%s-%s" % (self.cfg.version, digest[:8])

    def _request_errors(self, body, chat):
        """vLLM 0.32.0's checks of a request body, before any generation; None or an error response."""
        if chat:
            messages = body.get("messages")
            if isinstance(messages, list) and not messages:
                return _error("vllm", 400, "Cannot apply chat template to an empty conversation. "
                                           "Provide at least one message.")
        elif body.get("prompt") in (None, "", []):
            return _error("vllm", 400, "Either prompt or prompt_embeds must be provided and non-empty. "
                                       "(parameter=prompt)", param="prompt")
        value = (body.get("max_completion_tokens") if body.get("max_completion_tokens") is not None
                 else body.get("max_tokens")) if chat else body.get("max_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                return _error("vllm", 400, "max_tokens must be at least 1, got %d. (parameter=max_tokens, "
                                           "value=%d)" % (value, value), param="max_tokens")
            if value > self.cfg.max_seq_len:
                return _error("vllm", 400, "max_tokens=%d cannot be greater than max_model_len=%d. Please request "
                                           "fewer output tokens. (parameter=max_tokens, value=%d)"
                              % (value, self.cfg.max_seq_len, value), param="max_tokens")
            # a prompt plus max_tokens over the context is not refused: generation stops at the context's end
            if chat:
                msgs = body.get("messages") or []
                text = " ".join(_content_text(m.get("content")) for m in msgs if isinstance(m, dict))
                prompt_tokens = count_tokens(text) + 4 * len(msgs)
            else:
                prompt = body.get("prompt")
                prompt_tokens = count_tokens(prompt if isinstance(prompt, str) else json.dumps(prompt))
            room = self.cfg.max_seq_len - prompt_tokens
            if 1 <= room < value:
                body["max_completion_tokens" if chat and body.get("max_completion_tokens") is not None
                     else "max_tokens"] = room
        return None

    def _shaped(self, resp, chat):
        """The fields vLLM 0.32.0 adds to a non-streamed completion or chat completion (nulls mostly)."""
        if not self.modern or not isinstance(resp, web.Response) or resp.status != 200 or resp.prepared:
            return resp
        data = json.loads(resp.text)
        choice = data["choices"][0]
        if chat:
            message = choice["message"]
            if not message.get("tool_calls"):
                message.pop("tool_calls", None)
            for k in ("refusal", "annotations", "audio", "function_call", "reasoning"):
                message.setdefault(k, None)
            choice.update(token_ids=None, routed_experts=None)
            extra = ("service_tier", "prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params",
                     "ec_transfer_params", "metrics")
        else:
            choice.update(token_ids=None, prompt_logprobs=None, prompt_token_ids=None, routed_experts=None)
            extra = ("service_tier", "kv_transfer_params", "ec_transfer_params", "metrics")
        for k in extra:
            data.setdefault(k, None)
        data["system_fingerprint"] = self.fingerprint
        data["usage"].update(prompt_tokens_details=None, completion_tokens_details=None)
        resp.text = json.dumps(data)
        return resp

    @web.middleware
    async def auth(self, request, handler):
        if request.path.startswith("/v1"):
            if request.headers.get("Authorization", "") != "Bearer " + self.cfg.api_key:
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    # -- simple endpoints -------------------------------------------------------
    async def health(self, request):
        if self.cfg.engine == "vllm" and self.engine.dead:
            return web.Response(status=503)
        return web.Response(status=200)

    async def version(self, request):
        return web.json_response({"version": self.cfg.version})

    async def lab_world(self, request):
        return web.json_response(self.cfg.world.as_json())

    async def models(self, request):
        card = {"id": self.cfg.served_name, "object": "model", "created": self.created,
                "owned_by": "tensorrt_llm" if self.cfg.engine == "trtllm" else "vllm"}
        if self.cfg.engine == "vllm":
            card.update({"root": self.cfg.model.arg, "parent": None, "max_model_len": self.cfg.max_seq_len,
                         "permission": [{"id": "modelperm-" + uuid.uuid4().hex, "object": "model_permission",
                                         "created": self.created, "allow_create_engine": False,
                                         "allow_sampling": True, "allow_logprobs": True,
                                         "allow_search_indices": False, "allow_view": True,
                                         "allow_fine_tuning": False, "organization": "*", "group": None,
                                         "is_blocking": False}]})
        return web.json_response({"object": "list", "data": [card]})

    async def health_generate(self, request):
        try:
            req = self.engine.submit(count_tokens("hi") + 4, 1)
            item = await asyncio.wait_for(req.queue.get(), timeout=30)
            if isinstance(item, Exception):
                raise item
        except (EngineDead, asyncio.TimeoutError) as exc:
            return web.Response(status=500, text="Generation health check failed: %s" % (exc or "timeout"))
        return web.Response(status=200, text="Generation health check OK")

    # -- metrics ------------------------------------------------------------------
    async def trt_metrics(self, request):
        if not self.cfg.iter_perf_stats:
            return web.json_response([])
        if not self.engine.iter_stats and self.engine.busy:
            try:
                await asyncio.wait_for(self.engine.stats_event.wait(), timeout=2.0)
            except asyncio.TimeoutError:
                pass
        return web.json_response(self.engine.drain_stats())

    async def perf_metrics(self, request):
        out = list(self.perf) if self.cfg.perf_metrics else []
        self.perf = []
        return web.json_response(out)

    async def trt_prometheus(self, request):
        c = self.engine.counters
        lines = ["# HELP trtllm_request_success_total Count of successfully processed requests.",
                 "# TYPE trtllm_request_success_total counter"]
        for reason, n in sorted(c.request_success.items()):
            lines.append('trtllm_request_success_total{finished_reason="%s",model_name="%s",engine_type="trtllm"} %.1f'
                         % (reason, self.cfg.served_name, n))
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def vllm_metrics(self, request):
        c, e = self.engine.counters, self.engine
        labels = 'engine="0",model_name="%s"' % self.cfg.served_name.replace('"', '\\"')
        out = []

        def metric(name, kind, help_text, samples):
            # prometheus_client's text format: a counter's family is named NAME_total, and its
            # NAME_created samples follow as a gauge family of their own
            family = name + "_total" if kind == "counter" else name
            out.append("# HELP %s %s" % (family, help_text))
            out.append("# TYPE %s %s" % (family, kind))
            for suffix, lab, value in samples:
                if suffix != "_created":
                    out.append("%s%s{%s} %s" % (name, suffix, lab, repr(float(value))))
            created = [(lab, value) for suffix, lab, value in samples if suffix == "_created"]
            if created:
                out.append("# HELP %s_created %s" % (name, help_text))
                out.append("# TYPE %s_created gauge" % name)
                for lab, value in created:
                    out.append("%s_created{%s} %s" % (name, lab, repr(float(value))))

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [("", labels, len(e.active))])
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [("", labels, len(e.waiting))])
        metric("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.",
               [("_total", labels, c.prompt_tokens), ("_created", labels, c.created)])
        metric("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
               [("_total", labels, c.generation_tokens), ("_created", labels, c.created)])
        samples = []
        for reason in ("stop", "length", "abort") + (("error", "repetition") if self.modern else ()):
            lab = labels + ',finished_reason="%s"' % reason
            samples += [("_total", lab, c.request_success.get(reason, 0)), ("_created", lab, c.created)]
        metric("vllm:request_success", "counter", "Count of successfully processed requests.", samples)
        if self.cfg.spec.enabled:
            for name, value, text in (
                    ("num_drafts", c.num_drafts, "Number of spec decoding drafts."),
                    ("num_draft_tokens", c.num_draft_tokens, "Number of draft tokens."),
                    ("num_accepted_tokens", c.num_accepted_tokens, "Number of accepted tokens.")):
                metric("vllm:spec_decode_" + name, "counter", text,
                       [("_total", labels, value), ("_created", labels, c.created)])
            samples = []
            for i, value in enumerate(c.per_pos):
                lab = labels + ',position="%d"' % i
                samples += [("_total", lab, value), ("_created", lab, c.created)]
            metric("vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
                   "Accepted tokens per draft position.", samples)
        return web.Response(body=("\n".join(out) + "\n").encode(),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    # -- generation -----------------------------------------------------------------
    async def _read(self, request):
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            if self.modern and isinstance(exc, json.JSONDecodeError):
                loc = "body.%d" % exc.pos
                return None, _error("vllm", 400, "1 validation error:\n  {'type': 'json_invalid', 'loc': '%s', "
                                    "'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {'error': %r}}"
                                    % (loc, exc.msg), "Bad Request", loc)
            return None, _error(self.cfg.engine, 400, "Invalid JSON body")
        if not isinstance(body, dict):
            if self.modern:
                shown = "'<list of %d items>'" % len(body) if isinstance(body, list) else repr(body)
                return None, _error("vllm", 400, "1 validation error:\n  {'type': 'model_attributes_type', 'loc': "
                                    "'body', 'msg': 'Input should be a valid dictionary or object to extract fields "
                                    "from', 'input': %s}" % shown, "Bad Request", "body")
            return None, _error(self.cfg.engine, 400, "Request body must be a JSON object")
        if self.cfg.engine == "vllm" and body.get("model") not in (None, self.cfg.served_name):
            if self.modern:
                return None, _error("vllm", 404, "The model `%s` does not exist. Valid aliases: %s." % (
                    body.get("model"), self.cfg.served_name), "NotFoundError", "model")
            return None, _error("vllm", 404, "The model `%s` does not exist." % body.get("model"),
                                "NotFoundError")
        if self.modern:
            err = self._request_errors(body, request.path.endswith("/chat/completions"))
            if err is not None:
                return None, err
        return body, None

    def _max_tokens(self, body, chat):
        for key in (("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)):
            value = body.get(key)
            if value is not None:
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ValueError("%s must be a positive integer" % key)
                return value, "length"
        if self.cfg.engine == "vllm" and not chat:
            return 16, "length"
        return self.cfg.default_max_tokens, "stop"

    async def completions(self, request):
        return self._shaped(await self._generate(request, chat=False), chat=False)

    async def chat(self, request):
        return self._shaped(await self._generate(request, chat=True), chat=True)

    async def _generate(self, request, chat):
        body, err = await self._read(request)
        if err is not None:
            return err
        try:
            max_tokens, finish = self._max_tokens(body, chat)
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise ValueError("messages must be a non-empty list")
                text = " ".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))
                prompt_tokens = count_tokens(text) + 4 * len(messages)
                key = json.dumps([[m.get("role"), _content_text(m.get("content"))]
                                  for m in messages if isinstance(m, dict)])
            else:
                prompt = body.get("prompt")
                if prompt is None:
                    raise ValueError("prompt is required")
                key = prompt if isinstance(prompt, str) else json.dumps(prompt)
                prompt_tokens = count_tokens(key)
        except ValueError as exc:
            return _error(self.cfg.engine, 400, str(exc))
        if prompt_tokens + max_tokens > self.cfg.max_seq_len:
            return _error(self.cfg.engine, 400, "This model's maximum context length is %d tokens. However, "
                          "you requested %d tokens (%d in the messages, %d in the completion)." % (
                              self.cfg.max_seq_len, prompt_tokens + max_tokens, prompt_tokens, max_tokens))
        try:
            req = self.engine.submit(prompt_tokens, max_tokens, finish_reason=finish,
                                     greedy_key=key.encode("utf-8") if _greedy(body) else None,
                                     acceptance=self.engine.profile.acceptance_for(text if chat else key))
        except EngineDead:
            return _error(self.cfg.engine, 500, "LLM is unavailable. Please check the server logs for more details.",
                          "InternalServerError")
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        model = body.get("model") or self.cfg.served_name
        created = int(time.time())
        t0 = time.monotonic()
        if body.get("stream"):
            resp = await self._stream(request, req, rid, model, created, chat, prompt_tokens, body)
        else:
            resp = await self._collect(req, rid, model, created, chat, prompt_tokens, body)
        self._request_done(req, t0)
        return resp

    def _usage(self, req, prompt_tokens):
        return {"prompt_tokens": prompt_tokens, "completion_tokens": req.generated,
                "total_tokens": prompt_tokens + req.generated}

    async def _collect(self, req, rid, model, created, chat, prompt_tokens, body):
        words, finish = [], None
        try:
            while finish is None:
                item = await req.queue.get()
                if isinstance(item, Exception):
                    raise item
                chunk, finish = item
                words.extend(chunk)
        except EngineDead:
            return _error(self.cfg.engine, 500, "LLM is unavailable. Please check the server logs for more details.",
                          "InternalServerError")
        except asyncio.CancelledError:
            req.cancelled = True
            raise
        text = "".join(" " + w for w in words)
        tokens = [" " + w for w in words]
        if chat:
            # chat logprobs as both engines give them: one entry per generated token, its text
            # (the emulator has no distribution: logprob 0, no alternatives)
            logprobs = None
            if body.get("logprobs") is True:
                logprobs = {"content": [{"token": t, "logprob": 0.0, "bytes": list(t.encode("utf-8")),
                                         "top_logprobs": []} for t in tokens]}
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                      "logprobs": logprobs, "finish_reason": finish, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            obj = "text_completion"
        return web.json_response({"id": rid, "object": obj, "created": created, "model": model,
                                  "choices": [choice], "usage": self._usage(req, prompt_tokens)})

    async def _stream(self, request, req, rid, model, created, chat, prompt_tokens, body):
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                       "Cache-Control": "no-cache"})
        opts = body.get("stream_options") or {}
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        obj = "chat.completion.chunk" if chat else "text_completion"

        modern = self.modern

        def chunk(choice_fields, finish, first=False):
            if chat:
                choice = {"index": 0, "delta": choice_fields, "logprobs": None, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": choice_fields, "logprobs": None, "finish_reason": finish,
                          "stop_reason": None}
            data = {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
            if modern:  # 0.32.0's null token-id fields; the fingerprint on the last chunk
                if not chat:
                    choice.update(prompt_token_ids=None, token_ids=None)
                elif first:
                    data.update(prompt_token_ids=None, prompt_text=None)
                else:
                    if finish is not None:
                        choice["stop_reason"] = None
                    choice["token_ids"] = None
                if finish is not None and not include_usage:
                    data["system_fingerprint"] = self.fingerprint
            elif include_usage:
                data["usage"] = None
            return ("data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()

        try:
            await resp.prepare(request)
            if chat:
                await resp.write(chunk({"role": "assistant", "content": ""}, None, first=True))
            finish = None
            while finish is None:
                item = await req.queue.get()
                if isinstance(item, Exception):
                    raise item
                words, finish = item
                text = "".join(" " + w for w in words)
                await resp.write(chunk({"content": text} if chat else text, finish))
            if include_usage:
                data = {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
                        "usage": self._usage(req, prompt_tokens)}
                if modern:
                    data["system_fingerprint"] = self.fingerprint
                await resp.write(("data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except EngineDead:
            err = {"error": {"message": "LLM is unavailable", "type": "InternalServerError", "code": 500}}
            try:
                await resp.write(("data: " + json.dumps(err) + "\n\n").encode())
                await resp.write_eof()
            except (ConnectionError, RuntimeError):
                pass
        except asyncio.CancelledError:
            req.cancelled = True
            raise
        except (ConnectionError, RuntimeError):
            req.cancelled = True
        return resp

    def _request_done(self, req, t0):
        self.completed += 1
        if self.cfg.perf_metrics and len(self.perf) < 1000:
            entry = {"request_id": req.rid, "perf_metrics": {"timing_metrics": {
                "arrival_time": req.arrival, "e2e_latency_s": time.monotonic() - t0}}}
            self.perf.append(entry)
        f = self.cfg.faults
        if f.crash_after is not None and self.completed >= f.crash_after:
            self.log.raw("[TensorRT-LLM][ERROR] CUDA runtime error in cudaStreamSynchronize: "
                         "an illegal memory access was encountered" if self.cfg.engine == "trtllm" else
                         "RuntimeError: CUDA error: an illegal memory access was encountered")
            asyncio.get_event_loop().call_later(0.05, self.exit_hook, 1)
        if f.dead_after is not None and self.completed >= f.dead_after and not self.engine.dead:
            self.log.error("Executor worker died: RuntimeError: CUDA error: an illegal memory access was encountered")
            self.engine.kill()
        if f.hang_after is not None and self.completed >= f.hang_after:
            self.engine.hung = True


def _content_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


# ----------------------------------------------------------------------- start-up

class StartupFailure(Exception):
    def __init__(self, exc_type, message, code=1):
        super().__init__(message)
        self.exc_type, self.message, self.code = exc_type, message, code


def _oom(cfg):
    total = cfg.device_memory_gib
    free_gib = max(0.05, total * (1 - cfg.max_memory_fraction) * 0.5)
    ask = total * cfg.memory_fraction - total * cfg.max_memory_fraction + 1.0
    if cfg.engine == "vllm":
        return StartupFailure("ValueError", (
            "Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization "
            "(%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
            % (total * cfg.max_memory_fraction, total, cfg.memory_fraction, total * cfg.memory_fraction)))
    return StartupFailure("torch.OutOfMemoryError", (
        "CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB of which "
        "%.2f GiB is free. Including non-PyTorch memory, this process has %.2f GiB memory in use. Of the "
        "allocated memory %.2f GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but "
        "unallocated." % (max(ask, 0.5), total, free_gib, total - free_gib, total - free_gib - 1)))


async def serve(cfg, stop_event=None, exit_hook=None, ready=None, install_signals=False):
    """Run the emulated server until stop_event is set (or SIGTERM). Returns the exit code."""
    log = Logger(cfg.engine)
    loop = asyncio.get_event_loop()
    stop_event = stop_event or asyncio.Event()
    state = {"code": 0}

    def do_exit(code):
        state["code"] = code
        stop_event.set()
        if exit_hook:
            exit_hook(code)

    if install_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop_event.set)
            except (NotImplementedError, RuntimeError):
                pass

    if cfg.engine == "trtllm":
        log.raw("[TensorRT-LLM] TensorRT-LLM version: %s" % cfg.version)
    else:
        log.info("vLLM API server version %s" % cfg.version, "api_server.py:1885")
        log.info("args: model=%r" % cfg.model.arg, "utils.py:328")
    for w in cfg.warnings:
        log.warning(w)
    if cfg.world.size > 1:
        log.info(cfg.world.describe())
    sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((cfg.host, cfg.port))
    except OSError as exc:
        sock.close()
        log.traceback("OSError", "[Errno %d] %s" % (exc.errno or 98, exc.strerror or exc))
        return 1
    port = sock.getsockname()[1]
    try:
        if not cfg.world.formed:  # vLLM's executor joins its Ray cluster before the workers load the model
            if not await _form_world(cfg, log, stop_event):
                sock.close()
                return state["code"]
        if cfg.faults.oom or cfg.memory_fraction > cfg.max_memory_fraction:
            raise _oom(cfg)
        if cfg.engine == "trtllm":
            log.info("Loading model %s (backend pytorch)" % cfg.model.path)
            if cfg.draft is not None:
                log.info("Loading speculative model %s" % cfg.draft.path)
        else:
            log.info("Starting to load model %s..." % cfg.model.arg, "gpu_model_runner.py:2338")
        if cfg.faults.hang_at_start:
            await stop_event.wait()
            sock.close()
            return state["code"]
        if cfg.load_delay > 0:
            try:
                await asyncio.wait_for(stop_event.wait(), cfg.load_delay)
                sock.close()
                return state["code"]
            except asyncio.TimeoutError:
                pass
        if cfg.faults.crash_at_start:
            raise StartupFailure("RuntimeError", "CUDA error: an illegal memory access was encountered")
        harmony = cfg.model.model_type == "gpt_oss" and not (
            cfg.engine == "trtllm" and cfg.env.get("DISABLE_HARMONY_ADAPTER") == "1")
        if harmony:
            try:
                check_harmony_encodings(cfg.env)
            except EngineConfigError as exc:
                raise StartupFailure(exc.exc_type, exc.message)
    except StartupFailure as exc:
        sock.close()
        log.traceback(exc.exc_type, exc.message)
        return exc.code

    app_state = EmulatorApp(cfg, log, do_exit)
    app = app_state.make_app()
    if _AIOHTTP >= (3, 9):
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.SockSite(runner, sock)
    else:  # aiohttp 3.8 (Debian bookworm)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.SockSite(runner, sock, shutdown_timeout=0.5)
    app_state.engine.start()
    await site.start()
    if cfg.engine == "vllm":
        log.info("Starting vLLM API server 0 on http://%s:%d" % (cfg.host, port), "launcher.py:44")
        app_state._spec_log_task = asyncio.ensure_future(_vllm_stat_logger(app_state, log, cfg))
    if hasattr(cfg.world, "lost"):
        app_state._world_watch_task = asyncio.ensure_future(_watch_world(app_state, log, cfg))
    if cfg.world.comm is not None:  # rank 0 of an MPI world: a worker rank may hang (SPECDEC_EMU_WEDGE_FILE)
        app_state._wedge_watch_task = asyncio.ensure_future(_watch_wedged_ranks(app_state, log, cfg))
    log.uvicorn("Started server process [%d]" % os.getpid())
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")
    log.uvicorn("Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (cfg.host, port))
    if ready:
        ready(port)
    await stop_event.wait()
    log.uvicorn("Shutting down")
    for task in (app_state._spec_log_task, app_state._world_watch_task, app_state._wedge_watch_task):
        if task:
            task.cancel()
    await app_state.engine.stop()
    await runner.cleanup()
    log.uvicorn("Finished server process [%d]" % os.getpid())
    return state["code"]


async def _form_world(cfg, log, stop_event):
    """Form a world that forms at start-up (world.RayWorld), in a thread: True once formed, False when the
    server was stopped meanwhile; StartupFailure with the engine's words when it cannot form."""
    loop = asyncio.get_event_loop()
    stop = threading.Event()
    job = loop.run_in_executor(None, cfg.world.form, log, stop)
    waiter = asyncio.ensure_future(stop_event.wait())
    try:
        await asyncio.wait([job, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not job.done():
        stop.set()
    try:
        await job
    except RayStopped:
        return False
    except EngineConfigError as exc:
        raise StartupFailure(exc.exc_type, exc.message)
    except Exception as exc:  # Ray's own (e.g. ConnectionError from ray.init)
        kind = type(exc)
        name = kind.__name__ if kind.__module__ == "builtins" else "%s.%s" % (kind.__module__, kind.__name__)
        raise StartupFailure(name, str(exc))
    if stop_event.is_set():
        return False
    log.info(cfg.world.describe())
    return True


async def _watch_world(app_state, log, cfg):
    """A node of the world gone (world.lost(), every SPECDEC_EMU_RAY_WATCH_S seconds, default 5) kills the
    engine: /health answers 503 and requests fail, as vLLM's do once a Ray worker's node died."""
    try:
        interval = max(0.01, float(cfg.env.get("SPECDEC_EMU_RAY_WATCH_S", "5") or 5))
    except ValueError:
        log.warning("SPECDEC_EMU_RAY_WATCH_S is not a number of seconds: %r; watching every 5 s"
                    % cfg.env.get("SPECDEC_EMU_RAY_WATCH_S"))
        interval = 5.0
    loop = asyncio.get_event_loop()
    while not app_state.engine.dead:
        await asyncio.sleep(interval)
        gone = await loop.run_in_executor(None, cfg.world.lost)
        if gone and not app_state.engine.dead:
            log.error("A node of the world left the Ray cluster: %s. The engine is dead (vLLM's next step on "
                      "that node's worker fails: ray.exceptions.ActorDiedError, its node has died)." % ", ".join(gone))
            app_state.engine.kill()
            return


async def _watch_wedged_ranks(app_state, log, cfg):
    """A worker rank of the MPI world that hangs (SPECDEC_EMU_WEDGE_FILE on its host, world.World.wait_end)
    wedges the engine, as one rank stuck in a collective stops every iteration of the world: rank 0 asks the
    world every POLL_S seconds (a non-blocking probe, on this loop, whose thread also ends the world: one
    thread makes every MPI call, whatever thread level MPI gave)."""
    engine = app_state.engine
    while not (engine.hung or engine.dead):
        await asyncio.sleep(worlds.POLL_S)
        hung = cfg.world.wedged()
        if hung and not (engine.hung or engine.dead):
            log.warning("%s wedged: the world's collectives stop; no iteration completes from now on"
                        % ", ".join(hung))
            engine.wedge()  # the path of rank 0's own SPECDEC_EMU_WEDGE_FILE
            return


async def _vllm_stat_logger(app_state, log, cfg):
    interval = float(cfg.env.get("VLLM_LOG_STATS_INTERVAL", "10") or 10)
    c = app_state.engine.counters
    last = (0, 0, 0, [0] * len(c.per_pos), time.monotonic())
    while True:
        await asyncio.sleep(interval)
        drafts, dtoks, acc, per_pos, t = last
        now = time.monotonic()
        dd, dt, da = c.num_drafts - drafts, c.num_draft_tokens - dtoks, c.num_accepted_tokens - acc
        if cfg.spec.enabled and dd > 0:
            rates = ", ".join("%.3f" % ((c.per_pos[i] - per_pos[i]) / dd) for i in range(len(c.per_pos)))
            log.info("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
                     "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
                     "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" % (
                         1 + da / dd, da / (now - t), dt / (now - t), da, dt, rates, 100.0 * da / dt),
                     "metrics.py:96")
        last = (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, list(c.per_pos), now)


class ThreadedServer:
    """Run an emulator in a background thread of this process (unit tests, benchmarks)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.port = None
        self.exit_code = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._loop = None
        self._stop = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._stop = asyncio.Event()

        def ready(port):
            self.port = port
            self._ready.set()

        try:
            self.exit_code = loop.run_until_complete(serve(self.cfg, self._stop, ready=ready))
        finally:
            self._ready.set()
            self._done.set()
            loop.close()

    def start(self, timeout=30):
        if self._thread.is_alive() or self._done.is_set():
            return self
        self._thread.start()
        self._ready.wait(timeout)
        return self

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, timeout=10):
        if self._loop and not self._done.is_set():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._done.wait(timeout)
        return self.exit_code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
