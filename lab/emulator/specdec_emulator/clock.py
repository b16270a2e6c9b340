"""The speculative-decoding clock: acceptance profile, step-time model and the analytic optimum.

Model (documented in docs/emulator.md):

* Acceptance: `acceptance[i-1]` = p_i, the probability that the first i draft tokens of a step
  are all accepted (vLLM's per-position rate, `per_pos[i-1]/drafts`). Beyond the list the last
  conditional rate p_i/p_(i-1) repeats. One step with draft length k yields a+1 tokens, where a
  follows sequential rejection sampling: position i is accepted with probability p_i/p_(i-1)
  and the first rejection ends the step. E[tokens/step] = 1 + sum_{i<=k} p_i.
* Step time for a batch of b generating requests with draft length k (ms):
      T * (1 + g*(b*(k+1) - 1))          target forward over b*(k+1) tokens
    + k * c * T * (1 + g*(b - 1))        k draft forward passes over b tokens
    + prefill_ms_per_token * prompt tokens of requests in their context step
  T = target_step_ms, c = draft_cost_ratio, g = batch_effect. The g term is what makes
  speculation lose its advantage at high concurrency (verification stops being free once the
  GPU is compute-bound).
"""

import argparse
import json
import os
import sys
import time

ACCEPTANCE_FILE_ENV = "SPECDEC_EMU_ACCEPTANCE_FILE"
# a JSON object {"marker": [p1, p2, ...]}: a request whose prompt contains the marker (the first that
# matches, in the object's order) is accepted at those rates instead (acceptance depends on what is
# generated: repetitive code drafts well, free prose less)
PROMPT_ACCEPTANCE_ENV = "SPECDEC_EMU_ACCEPTANCE_BY_PROMPT"

DEFAULTS = {
    "acceptance": [0.75, 0.55, 0.40, 0.28, 0.19, 0.13, 0.08, 0.05],
    "target_step_ms": 10.0,
    "draft_cost_ratio": 0.1,
    "batch_effect": 0.03,
    "prefill_ms_per_token": 0.005,
    "seed": 0,
}

ENV = {
    "acceptance": "SPECDEC_EMU_ACCEPTANCE",
    "target_step_ms": "SPECDEC_EMU_TARGET_STEP_MS",
    "draft_cost_ratio": "SPECDEC_EMU_DRAFT_COST_RATIO",
    "batch_effect": "SPECDEC_EMU_BATCH_EFFECT",
    "prefill_ms_per_token": "SPECDEC_EMU_PREFILL_MS_PER_TOKEN",
    "seed": "SPECDEC_EMU_SEED",
}


class ProfileError(ValueError):
    pass


def _parse_acceptance(value):
    if isinstance(value, str):
        value = [v for v in value.replace(";", ",").split(",") if v.strip()]
    try:
        rates = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ProfileError("acceptance must be a list of numbers, got %r" % (value,))
    prev = 1.0
    for r in rates:
        if not 0.0 <= r <= prev:
            raise ProfileError("acceptance rates must be non-increasing within [0, 1]: %r" % (rates,))
        prev = r
    return rates


def _parse_prompt_acceptance(text):
    """[(marker, rates)] from the JSON object of SPECDEC_EMU_ACCEPTANCE_BY_PROMPT."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ProfileError("%s must be a JSON object, got %r (%s)" % (PROMPT_ACCEPTANCE_ENV, text, exc))
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise ProfileError("%s must be a JSON object of non-empty markers, got %r" % (PROMPT_ACCEPTANCE_ENV, text))
    return [(marker, _parse_acceptance(rates)) for marker, rates in value.items()]


class Profile:
    """Acceptance and timing of one target/draft pair on one emulated device."""

    def __init__(self, **kw):
        values = dict(DEFAULTS)
        values.update({k: v for k, v in kw.items() if v is not None})
        unknown = set(values) - set(DEFAULTS)
        if unknown:
            raise ProfileError("unknown profile keys: %s" % ", ".join(sorted(unknown)))
        self.acceptance = _parse_acceptance(values["acceptance"])
        self.target_step_ms = float(values["target_step_ms"])
        self.draft_cost_ratio = float(values["draft_cost_ratio"])
        self.batch_effect = float(values["batch_effect"])
        self.prefill_ms_per_token = float(values["prefill_ms_per_token"])
        self.seed = int(values["seed"])
        if self.target_step_ms <= 0 or self.draft_cost_ratio < 0 or self.batch_effect < 0:
            raise ProfileError("target_step_ms must be > 0; draft_cost_ratio and batch_effect >= 0")

    @classmethod
    def load(cls, env=None, target_json=None, draft_json=None):
        """defaults < target dir emulator.json < draft dir emulator.json < SPECDEC_EMU_* env vars."""
        env = os.environ if env is None else env
        values = {}
        for source in (target_json or {}, draft_json or {}):
            values.update({k: v for k, v in source.items() if k in DEFAULTS})
        for key, name in ENV.items():
            if env.get(name, "").strip():
                values[key] = env[name]
        profile = cls(**values)
        profile.watch_acceptance(env.get(ACCEPTANCE_FILE_ENV, "").strip() or None)
        if env.get(PROMPT_ACCEPTANCE_ENV, "").strip():
            profile.prompt_acceptance = _parse_prompt_acceptance(env[PROMPT_ACCEPTANCE_ENV])
        return profile

    prompt_acceptance = ()

    def acceptance_for(self, prompt):
        """The rates of the first marker the prompt contains, or None (the profile's own)."""
        for marker, rates in self.prompt_acceptance:
            if marker in prompt:
                return rates
        return None

    # -- run-time acceptance (SPECDEC_EMU_ACCEPTANCE_FILE) -----------------------
    acceptance_file = None
    _acceptance_stamp = None
    _acceptance_checked = 0.0
    _acceptance_configured = None

    def watch_acceptance(self, path):
        """Follow `path`: while it exists, its acceptance list (comma list or JSON list) replaces
        the configured one; re-read when its mtime or size changes, at most every 0.2 s."""
        self.acceptance_file = path
        self._acceptance_configured = list(self.acceptance)
        self.refresh(force=True)

    def refresh(self, force=False):
        """Apply a changed acceptance file (the engine calls this once per iteration)."""
        if not self.acceptance_file:
            return
        now = time.monotonic()
        if not force and now - self._acceptance_checked < 0.2:
            return
        self._acceptance_checked = now
        try:
            st = os.stat(self.acceptance_file)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._acceptance_stamp:
            return
        self._acceptance_stamp = stamp
        if stamp is None:
            self.acceptance = list(self._acceptance_configured)
            return
        try:
            with open(self.acceptance_file) as fh:
                text = fh.read().strip()
            self.acceptance = _parse_acceptance(json.loads(text) if text.startswith("[") else text)
        except (OSError, ValueError, ProfileError) as exc:
            print("emulator: %s ignored: %s" % (self.acceptance_file, exc), file=sys.stderr)

    def as_dict(self):
        return {k: getattr(self, k) for k in DEFAULTS}

    # -- acceptance -------------------------------------------------------------
    def p(self, i, acceptance=None):
        """Probability that the first i draft tokens are accepted (p(0) = 1); `acceptance` replaces
        the profile's rates (a prompt's own, see acceptance_for)."""
        if i <= 0:
            return 1.0
        acc = self.acceptance if acceptance is None else acceptance
        if not acc:
            return 0.0
        if i <= len(acc):
            return acc[i - 1]
        last = acc[-1]
        prev = acc[-2] if len(acc) > 1 else 1.0
        ratio = last / prev if prev > 0 else 0.0
        return last * ratio ** (i - len(acc))

    def conditional(self, i, acceptance=None):
        prev = self.p(i - 1, acceptance)
        return self.p(i, acceptance) / prev if prev > 0 else 0.0

    def expected_tokens(self, k, acceptance=None):
        """E[tokens per step] = 1 + sum_{i<=k} p_i (the mean acceptance length)."""
        return 1.0 + sum(self.p(i, acceptance) for i in range(1, k + 1))

    def sample_accepted(self, rng, k, acceptance=None):
        """Rejection sampling: number of accepted draft tokens in one step."""
        a = 0
        for i in range(1, k + 1):
            if rng.random() < self.conditional(i, acceptance):
                a += 1
            else:
                break
        return a

    # -- time -------------------------------------------------------------------
    def step_ms(self, batch, k, prefill_tokens=0, context_requests=0):
        """Duration of one engine iteration in milliseconds.

        batch: requests in the generation phase; k: draft length used this step;
        context_requests/prefill_tokens: requests doing their context step (1 token each).
        """
        T, g, c = self.target_step_ms, self.batch_effect, self.draft_cost_ratio
        tokens = batch * (k + 1) + context_requests
        if tokens <= 0:
            return 0.0
        ms = T * (1.0 + g * (tokens - 1))
        if k > 0 and batch > 0:
            ms += k * c * T * (1.0 + g * (batch - 1))
        return ms + self.prefill_ms_per_token * prefill_tokens

    def per_user_tokens_per_s(self, concurrency, k):
        return 1000.0 * self.expected_tokens(k) / self.step_ms(concurrency, k)

    def throughput(self, concurrency, k):
        """Steady-state output tokens/s with `concurrency` requests always generating."""
        return concurrency * self.per_user_tokens_per_s(concurrency, k)

    def speedup(self, concurrency, k):
        return self.throughput(concurrency, k) / self.throughput(concurrency, 0)

    def optimum(self, concurrency, max_draft_len=8):
        """Smallest k in 0..max_draft_len with the highest steady-state throughput."""
        best_k, best = 0, self.throughput(concurrency, 0)
        for k in range(1, max_draft_len + 1):
            t = self.throughput(concurrency, k)
            if t > best * (1 + 1e-12):
                best_k, best = k, t
        return best_k


def analytic_table(profile, concurrencies=(1, 8, 64), max_draft_len=8, max_batch_size=None):
    """What a perfect sweep would find: per concurrency, tokens/s per draft length and the optimum."""
    out = {"profile": profile.as_dict(), "max_draft_len": max_draft_len, "concurrency": {}}
    for n in concurrencies:
        b = min(n, max_batch_size) if max_batch_size else n
        rows = {}
        for k in range(0, max_draft_len + 1):
            rows[str(k)] = {
                "mean_acceptance_length": round(profile.expected_tokens(k), 6),
                "step_ms": round(profile.step_ms(b, k), 6),
                "output_tok_s": round(profile.throughput(b, k), 4),
                "per_user_tok_s": round(profile.per_user_tokens_per_s(b, k), 4),
                "speedup": round(profile.speedup(b, k), 6),
            }
        k_best = profile.optimum(b, max_draft_len)
        out["concurrency"][str(n)] = {"batch": b, "optimum_draft_len": k_best,
                                      "optimum_speedup": rows[str(k_best)]["speedup"], "draft_len": rows}
    return out


def _profile_from_dirs(model_dir, draft_dir):
    def read(d):
        if d and os.path.isfile(os.path.join(d, "emulator.json")):
            with open(os.path.join(d, "emulator.json"), encoding="utf-8") as fh:
                return json.load(fh)
        return {}
    return Profile.load(target_json=read(model_dir), draft_json=read(draft_dir))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m specdec_emulator.clock",
                                 description="State the emulator's analytic optimum draft length.")
    ap.add_argument("--optimum", action="store_true", help="print the optimum per concurrency (default)")
    ap.add_argument("--concurrency", default="1,8,64", help="comma-separated concurrencies")
    ap.add_argument("--max-draft-len", type=int, default=8)
    ap.add_argument("--max-batch-size", type=int, default=None)
    ap.add_argument("--model-dir", help="target model directory (reads its emulator.json)")
    ap.add_argument("--draft-dir", help="draft model directory (reads its emulator.json)")
    ap.add_argument("--json", action="store_true", help="full table as JSON")
    args = ap.parse_args(argv)
    try:
        profile = _profile_from_dirs(args.model_dir, args.draft_dir)
        conc = [int(c) for c in args.concurrency.split(",") if c.strip()]
    except (ProfileError, ValueError) as exc:
        ap.error(str(exc))
    table = analytic_table(profile, conc, args.max_draft_len, args.max_batch_size)
    if args.json:
        json.dump(table, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    for n, row in table["concurrency"].items():
        k = row["optimum_draft_len"]
        print("concurrency %s: optimum draft length %d, speedup %.3f, %.1f tok/s" % (
            n, k, row["optimum_speedup"], row["draft_len"][str(k)]["output_tok_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
