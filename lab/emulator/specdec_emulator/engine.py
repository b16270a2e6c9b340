"""In-flight batching engine loop driven by the speculative-decoding clock.

One iteration at a time, like the real executors: requests that arrive during an iteration join
at the next one; each iteration's duration comes from `Profile.step_ms` and ends at an absolute
deadline (so scheduling jitter does not accumulate); at the deadline every request in the batch
receives its tokens (a+1 for a generating request, where a is drawn by rejection sampling).
"""

import asyncio
import collections
import hashlib
import os
import random
import time

WORDS = ("the of and to in is that for it as with was on be by this are or an at from which "
         "model draft token step accept verify speculative decoding engine batch cache serve fast "
         "latency throughput length kernel memory graph layer tensor request response stream").split()


class EngineDead(Exception):
    pass


class SpecSettings:
    def __init__(self, method=None, max_draft_len=0, max_concurrency=None, draft_len_schedule=None,
                 two_model=False, per_pos_slots=None):
        self.method = method
        self.max_draft_len = int(max_draft_len or 0) if method else 0
        self.max_concurrency = max_concurrency
        self.schedule = {int(k): int(v) for k, v in (draft_len_schedule or {}).items()}
        self.two_model = two_model
        self.per_pos_slots = per_pos_slots or self.max_draft_len

    @property
    def enabled(self):
        return bool(self.method) and self.max_draft_len > 0

    def draft_len(self, batch):
        """Draft length used for an iteration with `batch` active requests."""
        if not self.enabled:
            return 0
        if self.max_concurrency is not None and batch > self.max_concurrency:
            return 0
        if self.schedule:
            keys = sorted(k for k in self.schedule if k <= batch)
            return self.schedule[keys[-1]] if keys else self.max_draft_len
        return self.max_draft_len


def greedy_word(key, position):
    """The word a greedy request with this prompt key generates at this position.

    A function of the prompt and the position only: as with a correct engine, greedy output does
    not depend on the draft length, the batch or the request's arrival order.
    """
    digest = hashlib.sha256(key + b"/" + str(position).encode()).digest()
    return WORDS[int.from_bytes(digest[:4], "big") % len(WORDS)]


def corrupted_word(word):
    """Another word than `word` (the fault injection of SPECDEC_EMU_CORRUPT_SPEC_OUTPUT)."""
    return WORDS[(WORDS.index(word) + 1) % len(WORDS)] if word in WORDS else WORDS[0]


class Request:
    __slots__ = ("rid", "prompt_tokens", "max_tokens", "generated", "phase", "queue", "rng",
                 "cancelled", "pending", "iters_since_push", "finish_reason", "arrival", "greedy_key",
                 "word_rng", "corrupt_from", "acceptance")

    def __init__(self, rid, prompt_tokens, max_tokens, seed, finish_reason, greedy_key=None,
                 corrupt_from=None, acceptance=None):
        self.rid = rid
        self.prompt_tokens = max(1, int(prompt_tokens))
        self.max_tokens = max(1, int(max_tokens))
        self.generated = 0
        self.phase = "context"
        self.queue = asyncio.Queue()
        # acceptance draws; the words come from elsewhere, so speculation never changes the text
        self.rng = random.Random(seed)
        self.word_rng = random.Random(seed ^ 0x5EED)
        self.greedy_key = greedy_key
        self.corrupt_from = corrupt_from
        self.acceptance = acceptance  # the prompt's own rates (SPECDEC_EMU_ACCEPTANCE_BY_PROMPT), or None
        self.cancelled = False
        self.pending = []
        self.iters_since_push = 0
        self.finish_reason = finish_reason
        self.arrival = time.time()

    def next_words(self, n):
        """The next n words: generated[-n:] positions (called after `generated` was advanced)."""
        start = self.generated - n
        out = []
        for pos in range(start, start + n):
            if self.greedy_key is not None:
                word = greedy_word(self.greedy_key, pos)
            else:
                word = self.word_rng.choice(WORDS)
            if self.corrupt_from is not None and pos >= self.corrupt_from:
                word = corrupted_word(word)
            out.append(word)
        return out


class Counters:
    """vLLM-style monotonically increasing counters (exported as Prometheus)."""

    def __init__(self, slots):
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0
        self.per_pos = [0] * slots
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.request_success = collections.Counter()
        self.created = time.time()


class Engine:
    def __init__(self, profile, spec, max_batch_size=2048, stream_interval=1, iter_stats=False,
                 iter_stats_max=1000, seed=None, log=None):
        self.profile = profile
        self.spec = spec
        self.max_batch_size = max(1, int(max_batch_size or 1))
        self.stream_interval = max(1, int(stream_interval or 1))
        self.iter_stats_enabled = iter_stats
        self.iter_stats = collections.deque(maxlen=max(1, iter_stats_max or 1000))
        self.stats_event = asyncio.Event()
        self.seed = profile.seed if seed is None else seed
        self.log = log or (lambda msg: None)
        self.waiting = collections.deque()
        self.active = []
        self.wake = asyncio.Event()
        self.counters = Counters(max(spec.per_pos_slots, 1))
        self.iteration = 0
        self.request_count = 0
        self.dead = False
        self.hung = False
        # SPECDEC_EMU_WEDGE_FILE: once that file exists the engine wedges for the rest of its life (see wedge())
        self.wedge_file = None
        self.stopped = False
        self.task = None
        self.step_log = collections.deque(maxlen=100000)  # (batch, k, duration_s, start_loop_time)
        # fault injection (SPECDEC_EMU_CORRUPT_SPEC_OUTPUT): token index from which every request's
        # text is wrong, set only when the engine speculates; None: a correct engine
        self.corrupt_from = None

    # -- public -----------------------------------------------------------------
    def start(self):
        self.task = asyncio.ensure_future(self._run())

    async def stop(self):
        self.stopped = True
        self.wake.set()
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    @property
    def busy(self):
        return bool(self.active or self.waiting)

    def submit(self, prompt_tokens, max_tokens, finish_reason="length", greedy_key=None, acceptance=None):
        """Queue a request; `greedy_key` (bytes of the prompt) makes its text greedy: a function of
        the prompt and the position alone; `acceptance` replaces the profile's rates for it."""
        if self.dead:
            raise EngineDead("engine is dead")
        self.request_count += 1
        req = Request(self.request_count, prompt_tokens, max_tokens,
                      seed=self.seed * 1000003 + self.request_count, finish_reason=finish_reason,
                      greedy_key=greedy_key, corrupt_from=self.corrupt_from, acceptance=acceptance)
        self.waiting.append(req)
        self.wake.set()
        return req

    def wedge(self):
        """The executor stopped making progress without dying, as a rank stuck in a collective does: /health
        still answers, requests are still accepted and streams stay open, and no token comes out again; only a
        restart recovers it."""
        if not self.hung:
            self.hung = True
            self.log("engine wedged: no iteration completes from now on (%d requests in flight)"
                     % (len(self.active) + len(self.waiting)))

    def _wedge_requested(self):
        return bool(self.wedge_file) and os.path.exists(self.wedge_file)

    def kill(self):
        """The executor died: fail everything in flight."""
        self.dead = True
        for req in list(self.active) + list(self.waiting):
            req.queue.put_nowait(EngineDead("engine is dead"))
        self.active, self.waiting = [], collections.deque()

    # -- loop -------------------------------------------------------------------
    async def _run(self):
        loop = asyncio.get_event_loop()
        base = None
        while not self.stopped:
            if self.hung or self.dead:
                await asyncio.sleep(3600)
                continue
            self.active = [r for r in self.active if not r.cancelled]
            if not self.active and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                base = None
                continue
            if base is None:
                base = loop.time()
            while self.waiting and len(self.active) < self.max_batch_size:
                req = self.waiting.popleft()
                if not req.cancelled:
                    self.active.append(req)
            batch = list(self.active)
            ctx = [r for r in batch if r.phase == "context"]
            gen = [r for r in batch if r.phase == "gen"]
            k = self.spec.draft_len(len(batch)) if gen else 0
            prefill = sum(r.prompt_tokens for r in ctx)
            dur_ms = self.profile.step_ms(len(gen), k, prefill_tokens=prefill, context_requests=len(ctx))
            deadline = base + dur_ms / 1000.0
            delay = deadline - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.stopped:
                break
            # a wedge strikes mid-iteration, its batch still running (as a rank stuck in a collective holds it)
            if not self.hung and self._wedge_requested():
                self.wedge()
            if self.hung or self.dead:
                continue
            self._finish_iteration(batch, ctx, gen, k, dur_ms)
            self.step_log.append((len(gen), k, dur_ms / 1000.0, deadline))
            now = loop.time()
            # absolute deadlines; re-anchor only after a long stall (e.g. the host was suspended)
            base = deadline if now - deadline < 0.25 else now

    def _finish_iteration(self, batch, ctx, gen, k, dur_ms):
        self.profile.refresh()  # SPECDEC_EMU_ACCEPTANCE_FILE: acceptance changed at run time
        self.iteration += 1
        drafted = accepted = with_draft = 0
        c = self.counters
        for req in ctx:
            req.phase = "gen"
            c.prompt_tokens += req.prompt_tokens
            self._emit(req, 1)
        for req in gen:
            n = 1
            if k > 0:
                a = self.profile.sample_accepted(req.rng, k, req.acceptance)
                drafted += k
                accepted += a
                with_draft += 1
                c.num_drafts += 1
                c.num_draft_tokens += k
                c.num_accepted_tokens += a
                for i in range(min(a, len(c.per_pos))):
                    c.per_pos[i] += 1
                n = a + 1
            self._emit(req, n)
        done = [r for r in batch if r.generated >= r.max_tokens or r.cancelled]
        for req in done:
            if not req.cancelled:
                c.request_success[req.finish_reason] += 1
        if done:
            self.active = [r for r in self.active if r not in done]
        if self.iter_stats_enabled:
            self._record_stats(batch, ctx, gen, k, dur_ms, drafted, accepted, with_draft, len(done))

    def _emit(self, req, n):
        if req.cancelled:
            return
        n = min(n, req.max_tokens - req.generated)
        req.generated += n
        self.counters.generation_tokens += n
        req.pending.extend(req.next_words(n))
        req.iters_since_push += 1
        finished = req.generated >= req.max_tokens
        if finished or req.iters_since_push >= self.stream_interval:
            req.queue.put_nowait((req.pending, req.finish_reason if finished else None))
            req.pending = []
            req.iters_since_push = 0

    def _record_stats(self, batch, ctx, gen, k, dur_ms, drafted, accepted, with_draft, completed):
        draft_ms = 0.0
        if k > 0 and self.spec.two_model:
            p = self.profile
            draft_ms = k * p.draft_cost_ratio * p.target_step_ms * (1 + p.batch_effect * (len(gen) - 1))
        spec_stats = None
        if self.spec.enabled and self.spec_stats_reported:
            spec_stats = {
                "numDraftTokens": drafted,
                "numAcceptedTokens": accepted,
                "numRequestsWithDraftTokens": with_draft,
                "acceptanceLength": (accepted + with_draft) / with_draft if with_draft else 0.0,
                "iterLatencyMS": dur_ms,
                "draftOverhead": draft_ms / dur_ms if dur_ms else 0.0,
            }
        kv_blocks = 65536
        used = sum((r.prompt_tokens + r.generated) // 32 + 1 for r in batch)
        stat = {
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S"),
            "iter": self.iteration - 1,
            "iterLatencyMS": dur_ms,
            "newActiveRequestsQueueLatencyMS": 0.0,
            "numNewActiveRequests": len(ctx),
            "numActiveRequests": len(batch),
            "numQueuedRequests": len(self.waiting),
            "numCompletedRequests": completed,
            "maxNumActiveRequests": self.max_batch_size,
            "maxBatchSizeStatic": self.max_batch_size,
            "maxBatchSizeTunerRecommended": 0,
            "maxBatchSizeRuntime": self.max_batch_size,
            "maxNumTokensStatic": 8192,
            "maxNumTokensTunerRecommended": 0,
            "maxNumTokensRuntime": 8192,
            "gpuMemUsage": 0,
            "cpuMemUsage": 0,
            "pinnedMemUsage": 0,
            "kvCacheStats": {
                "maxNumBlocks": kv_blocks, "freeNumBlocks": kv_blocks - used, "usedNumBlocks": used,
                "tokensPerBlock": 32, "allocTotalBlocks": used, "allocNewBlocks": len(ctx),
                "reusedBlocks": 0, "missedBlocks": len(ctx), "cacheHitRate": 0.0,
            },
            "staticBatchingStats": None,
            "inflightBatchingStats": {
                "numScheduledRequests": len(batch), "numContextRequests": len(ctx),
                "numGenRequests": len(gen), "numPausedRequests": 0,
                "numCtxTokens": sum(r.prompt_tokens for r in ctx), "microBatchId": 0,
                "avgNumDecodedTokensPerIter": ((accepted + len(gen)) / len(gen)) if gen else 0.0,
            },
            "specDecodingStats": spec_stats,
        }
        self.iter_stats.append(stat)
        self.stats_event.set()

    spec_stats_reported = True

    def drain_stats(self):
        out = list(self.iter_stats)
        self.iter_stats.clear()
        self.stats_event.clear()
        return out
