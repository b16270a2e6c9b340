"""Emulator conformance: ask a real `vllm serve` and the emulator the same things and list the differences.

Stdlib only. The functions take base URLs (HTTP side), command outcomes (CLI side) and log text, and
return plain data, so the same comparison runs in the real_engine molecule scenario (the engine on a
lab host) and standalone against a locally started engine:

    python3 lab/emulator/conformance.py --real-url http://127.0.0.1:18600 --real-container conf-real \
        --image specdec-lab/vllm-cpu:0.32.0 --models-dir lab/.cache/models --model tiny-llama

`observe(url, model)` gathers facts ({name: value}) about one server; `differences(real, emu)` lists
the names whose values differ; `ALLOWED` holds the differences docs/emulator.md explains ("Conformance
with the real engine"); anything else is a failure.
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VERSION = "0.32.0"

# Differences the emulator keeps on purpose: fact name -> why (mirrored in docs/emulator.md). Empty: at
# 0.32.0 every compared fact agrees; what is deliberately not compared is normalised away by the fact
# functions below (documented in the same section).
ALLOWED = {}

# ----------------------------------------------------------------------------- command line

# Options vLLM 0.32.0 accepts: a sample of the common ones, one the emulator used to lack and
# `--enforce-eager` (the CPU image has no compiler for torch.compile).
VALID_OPTIONS = ["--enforce-eager", "--max-num-seqs", "4", "--max-model-len", "1024", "--seed", "0",
                 "--attention-backend", "CPU_ATTN", "--max-num-batched-tokens", "2048"]

# name -> extra argv after the valid options. Each case fails in the real engine before the model loads:
# argparse errors at once, --speculative-config errors in SpeculativeConfig's validation.
CLI_CASES = {
    # unknown and removed-in-this-version options (--swap-space and --disable-log-requests are gone by 0.32)
    "unknown_options": ["--swap-space", "4", "--disable-log-requests", "--foo-bar", "1"],
    "spec_unknown_key": ["--speculative-config",
                         json.dumps({"method": "ngram", "num_speculative_tokens": 2, "bogus_key": 1})],
    # step5_mtp arrives in 0.33; the literal error lists every method the version knows
    "spec_missing_method": ["--speculative-config", json.dumps({"method": "step5_mtp", "num_speculative_tokens": 2})],
    "spec_bad_value": ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 2,
                                                           "prompt_lookup_min": 4, "prompt_lookup_max": 2})],
}


LOG_LINE = re.compile(r"^(\(\w+ pid=\d+\) )?(DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d ")


def cli_facts(name, rc, text):
    """What a refused start says: its exit code and the error it ends with (the last traceback lines,
    or argparse's `prog: error:` line), with the noise around them (warnings, paths) removed."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    facts = {"cli.%s.exit" % name: rc}
    err = [ln for ln in lines if re.match(r"^[\w .-]+: error: ", ln)]
    if err:
        facts["cli.%s.error" % name] = err[-1]
        return facts
    for i in range(len(lines) - 1, -1, -1):
        if re.match(r"^[\w.]+(Error|Exception)\b", lines[i]):
            tail = lines[i:]
            break
    else:
        facts["cli.%s.error" % name] = lines[-1] if lines else ""
        return facts
    head = tail[0]
    facts["cli.%s.exception" % name] = head.split(":")[0] if ":" in head else head
    facts["cli.%s.headline" % name] = head
    # a log line of another process of the engine (the API server's start-up lines) may land after the traceback
    # when it is written out of order: noise, not the error
    body = [ln for ln in tail[1:] if "errors.pydantic.dev" not in ln and not LOG_LINE.match(ln)]
    norm = []
    for ln in body:
        ln = re.sub(r"input_value=ArgsKwargs\(.*\), input_type=ArgsKwargs", "input_value=ArgsKwargs(...)", ln)
        norm.append(ln.strip())
    facts["cli.%s.detail" % name] = norm
    return facts


def real_cli_script(image, model, cases=None, docker="docker", mounts=(), env=()):
    """A shell script that starts each case as `docker run --rm IMAGE serve MODEL VALID+case` in parallel
    and prints `@@@ NAME rc=N` followed by the output's tail for each."""
    cases = CLI_CASES if cases is None else cases
    base = [docker, "run", "--rm", "--entrypoint", "vllm"]
    for m in mounts:
        base += ["-v", m]
    for e in env:
        base += ["-e", e]
    base += [image, "serve", model] + VALID_OPTIONS
    lines = ["d=$(mktemp -d)"]
    for name, extra in cases.items():
        cmd = " ".join(shlex.quote(w) for w in base + extra)
        lines.append("( %s > $d/%s 2>&1; echo $? > $d/%s.rc ) &" % (cmd, name, name))
    lines.append("wait")
    for name in cases:
        lines.append('echo "@@@ %s rc=$(cat $d/%s.rc)"; tail -c 6000 $d/%s' % (name, name, name))
    lines.append('rm -rf "$d"')
    return "\n".join(lines) + "\n"


def parse_cli_outputs(text):
    """{name: (rc, text)} from real_cli_script's output."""
    out = {}
    for block in re.split(r"^@@@ ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        name, rc = re.match(r"(\S+) rc=(\d+)", head).groups()
        out[name] = (int(rc), body)
    return out


def emulator_env(version=VERSION, **extra):
    env = dict(os.environ)
    env.update({"SPECDEC_EMU_VERSION": version, "PYTHONPATH": HERE, "VLLM_LOG_STATS_INTERVAL": "1",
                "SPECDEC_EMU_TARGET_STEP_MS": "2"})
    env.pop("SPECDEC_EMU_FAULT", None)
    env.update(extra)
    return env


def emulator_cli(model_dir, cases=None, version=VERSION, timeout=30):
    """{name: (rc, text)}: the emulator's `vllm serve MODEL VALID+case` for each case."""
    cases = CLI_CASES if cases is None else cases
    out = {}
    for name, extra in cases.items():
        argv = [sys.executable, os.path.join(HERE, "bin", "vllm"), "serve", model_dir, "--port", "0",
                "--host", "127.0.0.1"] + VALID_OPTIONS + extra
        proc = subprocess.Popen(argv, env=emulator_env(version), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        try:
            text, _ = proc.communicate(timeout=timeout)
            out[name] = (proc.returncode, text)
        except subprocess.TimeoutExpired:  # it started: the case was accepted
            proc.send_signal(signal.SIGTERM)
            text, _ = proc.communicate(timeout=10)
            out[name] = (0, text)
    return out


def compare_cli(real, emu):
    """real, emu: {name: (rc, text)} -> (facts_real, facts_emu)."""
    fr, fe = {}, {}
    for name in sorted(set(real) | set(emu)):
        if name in real:
            fr.update(cli_facts(name, *real[name]))
        if name in emu:
            fe.update(cli_facts(name, *emu[name]))
    return fr, fe


# ----------------------------------------------------------------------------- HTTP

def http(url, method="GET", body=None, headers=None, timeout=60):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict((k.lower(), v) for k, v in resp.headers.items()), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict((k.lower(), v) for k, v in exc.headers.items()), exc.read().decode()


def keys(obj):
    return sorted(obj) if isinstance(obj, dict) else type(obj).__name__


def _sse(text):
    events = [ln[len("data: "):] for ln in text.split("\n") if ln.startswith("data: ")]
    done = bool(events) and events[-1] == "[DONE]"
    return [json.loads(e) for e in events if e != "[DONE]"], done


def _stream_facts(prefix, status, headers, text, chat):
    f = {prefix + ".status": status, prefix + ".content_type": headers.get("content-type")}
    chunks, done = _sse(text)
    f[prefix + ".done_terminator"] = done
    usage = [c for c in chunks if c.get("choices") == []]
    normal = [c for c in chunks if c.get("choices")]
    finish = [c for c in normal if c["choices"][0].get("finish_reason")]
    f[prefix + ".usage_chunks"] = len(usage)
    f[prefix + ".finish_chunks"] = len(finish)
    f[prefix + ".finish_reason"] = finish[-1]["choices"][0]["finish_reason"] if finish else None
    first = normal[0] if normal else {}
    kinds = {"first": first, "finish": finish[-1] if finish else {}}
    middle = [c for c in normal[1:] if not c["choices"][0].get("finish_reason")]
    if middle:
        kinds["middle"] = middle[0]
    if usage:
        kinds["usage"] = usage[-1]
        f[prefix + ".usage.keys"] = keys(usage[-1].get("usage"))
        u = usage[-1].get("usage") or {}
        f[prefix + ".usage.total_is_sum"] = u.get("total_tokens") == (u.get("prompt_tokens") or 0) + (
            u.get("completion_tokens") or 0)
    for kind, chunk in kinds.items():
        f["%s.%s.keys" % (prefix, kind)] = keys(chunk)
        choices = chunk.get("choices") or [{}]
        f["%s.%s.choice_keys" % (prefix, kind)] = keys(choices[0])
        if chat and "delta" in choices[0]:
            f["%s.%s.delta_keys" % (prefix, kind)] = keys(choices[0]["delta"])
        f["%s.%s.object" % (prefix, kind)] = chunk.get("object")
    if chat and first:
        f[prefix + ".first.delta"] = first["choices"][0].get("delta")
    return f


def _error_facts(prefix, status, text):
    f = {prefix + ".status": status}
    try:
        body = json.loads(text)
    except ValueError:
        f[prefix + ".body"] = text
        return f
    f[prefix + ".keys"] = keys(body)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        f[prefix + ".error_keys"] = keys(err)
        for k in ("message", "type", "param", "code"):
            f["%s.%s" % (prefix, k)] = err.get(k)
    else:
        f[prefix + ".body"] = body
    return f


def observe_http(url, model):
    f = {}
    status, headers, text = http(url + "/health")
    f.update({"health.status": status, "health.body": text})
    status, headers, text = http(url + "/version")
    f.update({"version.status": status, "version.body": json.loads(text)})
    status, headers, text = http(url + "/v1/models")
    body = json.loads(text)
    card = body["data"][0]
    f.update({"models.keys": keys(body), "models.object": body.get("object"), "models.card_keys": keys(card),
              "models.permission_keys": keys((card.get("permission") or [{}])[0]), "models.id": card.get("id"),
              "models.owned_by": card.get("owned_by"), "models.max_model_len": card.get("max_model_len")})

    # 24 tokens: a stream has a chunk between its first and its last even when every step accepts a
    # long draft (how many tokens share a chunk is not compared)
    comp = {"model": model, "prompt": "def main(", "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 24, "temperature": 0,
            "ignore_eos": True}
    status, headers, text = http(url + "/v1/completions", "POST", comp)
    body = json.loads(text)
    f.update({"completion.status": status, "completion.keys": keys(body), "completion.object": body.get("object"),
              "completion.choice_keys": keys(body["choices"][0]), "completion.usage_keys": keys(body.get("usage")),
              "completion.finish_reason": body["choices"][0].get("finish_reason"),
              "completion.completion_tokens": body["usage"]["completion_tokens"],
              "completion.id_prefix": body["id"].split("-")[0]})
    status, headers, text = http(url + "/v1/chat/completions", "POST", chat)
    body = json.loads(text)
    f.update({"chat.status": status, "chat.keys": keys(body), "chat.object": body.get("object"),
              "chat.choice_keys": keys(body["choices"][0]), "chat.message_keys": keys(body["choices"][0]["message"]),
              "chat.usage_keys": keys(body.get("usage")), "chat.finish_reason": body["choices"][0].get("finish_reason"),
              "chat.id_prefix": body["id"].split("-")[0]})
    for prefix, path, req, is_chat in (
            ("stream.completion", "/v1/completions", comp, False),
            ("stream.chat", "/v1/chat/completions", chat, True)):
        status, headers, text = http(url + path, "POST", dict(req, stream=True))
        f.update(_stream_facts(prefix, status, headers, text, is_chat))
        status, headers, text = http(url + path, "POST",
                                     dict(req, stream=True, stream_options={"include_usage": True}))
        f.update(_stream_facts(prefix + "_usage", status, headers, text, is_chat))

    bad = {
        "unknown_model": ("/v1/completions", dict(comp, model="no-such-model")),
        "unknown_model_chat": ("/v1/chat/completions", dict(chat, model="no-such-model")),
        "bad_json": ("/v1/completions", b'{"model": bad json'),
        "bad_json_chat": ("/v1/chat/completions", b"{oops"),
        "not_an_object": ("/v1/completions", b"[1, 2]"),
        "max_tokens_too_large": ("/v1/completions", dict(comp, max_tokens=100000)),
        "max_tokens_too_large_chat": ("/v1/chat/completions", dict(chat, max_tokens=100000)),
        "max_tokens_zero": ("/v1/completions", dict(comp, max_tokens=0)),
        "max_completion_tokens_zero_chat": ("/v1/chat/completions", dict(chat, max_completion_tokens=0)),
        "no_prompt": ("/v1/completions", {"model": model, "max_tokens": 2}),
        "no_messages": ("/v1/chat/completions", {"model": model, "messages": []}),
    }
    for name, (path, req) in bad.items():
        status, headers, text = http(url + path, "POST", req)
        f.update(_error_facts("error." + name, status, text))
    status, headers, text = http(url + "/no/such/path")
    f.update(_error_facts("error.unknown_path", status, text))
    status, headers, text = http(url + "/v1/completions")
    f.update(_error_facts("error.wrong_method", status, text))
    return f


# ----------------------------------------------------------------------------- metrics and logs

METRIC_FAMILIES = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                   "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos",
                   "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:prompt_tokens",
                   "vllm:generation_tokens", "vllm:request_success")
ENUMERATED_LABELS = ("position", "finished_reason")
_SAMPLE = re.compile(r'^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)')


def metric_facts(text):
    """Per family of interest: its HELP/TYPE lines, sample names, label names and enumerated label values."""
    f = {}
    meta = {}
    samples = {}
    for line in text.splitlines():
        m = re.match(r"^# (HELP|TYPE) (\S+) (.*)$", line)
        if m:
            meta.setdefault(m.group(2), {})[m.group(1)] = m.group(3)
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            samples.setdefault(m.group(1), []).append(labels)
    seen_spec = any(n.startswith("vllm:spec_decode") for n in samples)
    f["metrics.spec_decode_present"] = seen_spec
    for fam in METRIC_FAMILIES:
        names = sorted(n for n in samples if n == fam or n in (fam + "_total", fam + "_created"))
        f["metrics.%s.samples" % fam] = names
        for name in names:
            label_sets = samples[name]
            f["metrics.%s.labels" % name] = sorted(set(k for ls in label_sets for k in ls))
            for lab in ENUMERATED_LABELS:
                values = sorted(set(ls[lab] for ls in label_sets if lab in ls))
                if values:
                    f["metrics.%s.%s" % (name, lab)] = values
            f["metrics.%s.meta" % name] = meta.get(name)
        for name in (fam, fam + "_total", fam + "_created"):
            if name in meta and name not in names:
                f["metrics.%s.meta" % name] = meta[name]
    return f


SPEC_LOG = re.compile(r"^\((\w+) pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[([\w.]+):\d+\] (SpecDecoding metrics: .*)$")


def log_facts(text):
    """The last `SpecDecoding metrics:` line, numbers replaced by N (its shape, not its figures)."""
    lines = [ln for ln in text.splitlines() if "SpecDecoding metrics:" in ln]
    if not lines:
        return {"log.spec_decoding_line": None}
    line = lines[-1].strip()
    m = SPEC_LOG.match(line)
    if not m:
        return {"log.spec_decoding_line": re.sub(r"\d+(\.\d+)?", "N", line)}
    return {"log.spec_decoding_prefix": "(%s pid=N) INFO MM-DD HH:MM:SS [%s:N]" % (m.group(1), m.group(2)),
            "log.spec_decoding_line": re.sub(r"\d+(\.\d+)?", "N", m.group(3))}


def differences(real, emu, allowed=None):
    """[(name, real value, emulator value, allowed reason or None)] for every fact that differs."""
    allowed = ALLOWED if allowed is None else allowed
    out = []
    for name in sorted(set(real) | set(emu)):
        missing = object()
        a, b = real.get(name, missing), emu.get(name, missing)
        if a != b:
            out.append((name, None if a is missing else a, None if b is missing else b, allowed.get(name)))
    return out


def unexplained(diffs):
    return [d for d in diffs if d[3] is None]


def report(diffs):
    lines = []
    for name, a, b, why in diffs:
        lines.append("%s %s\n    real:     %r\n    emulator: %r%s" % (
            "ALLOWED" if why else "DIFFERS", name, a, b, ("\n    why: " + why) if why else ""))
    return "\n".join(lines) or "no differences"


# ----------------------------------------------------------------------------- the emulator as a server

class Emulator:
    """`vllm serve` of the emulator in a subprocess on a free local port; .url, .log() (stderr so far)."""

    def __init__(self, model_dir, argv, version=VERSION, env=None):
        self.model_dir, self.argv, self.version = model_dir, list(argv), version
        self.env = emulator_env(version, **(env or {}))
        self.proc = None
        self._log = tempfile.TemporaryFile(mode="w+")
        self.url = None

    def __enter__(self):
        cmd = [sys.executable, os.path.join(HERE, "bin", "vllm"), "serve", self.model_dir, "--host", "127.0.0.1",
               "--port", "0"] + self.argv
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            m = re.search(r"Uvicorn running on http://[\d.]+:(\d+)", self.log())
            if m:
                self.url = "http://127.0.0.1:%s" % m.group(1)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("emulator did not start:\n" + self.log()[-3000:])

    def log(self):
        self._log.flush()
        self._log.seek(0)
        return self._log.read()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


def serve_args(argv):
    """The options of a real `vllm serve MODEL ...` argv that the emulator gets too (not host, port, model)."""
    out, skip = [], False
    words = list(argv)
    if words and words[0] == "serve":
        words = words[1:]
    if words and not words[0].startswith("-"):
        words = words[1:]
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("--host", "--port"):
            skip = True
            continue
        if w.startswith(("--host=", "--port=")):
            continue
        out.append(w)
    return out


def drive(url, model, requests=4, max_tokens=48):
    """Greedy traffic that n-gram speculation finds matches in (repetitive prompts)."""
    prompt = "one two three four one two three four one two three four one two"
    for _ in range(requests):
        http(url + "/v1/completions", "POST", {"model": model, "prompt": prompt, "max_tokens": max_tokens,
                                               "temperature": 0, "ignore_eos": True}, timeout=120)


def wait_for_log(read_log, timeout=30):
    """Poll read_log() until it holds a SpecDecoding line; returns the text."""
    deadline = time.time() + timeout
    text = read_log()
    while "SpecDecoding metrics:" not in text and time.time() < deadline:
        time.sleep(1)
        text = read_log()
    return text


def compare_servers(real_url, emu_url, model, real_log, emu_log):
    """HTTP, metrics and log facts of both servers (traffic first, so every counter and the log line exist)."""
    drive(real_url, model)
    drive(emu_url, model)
    real = observe_http(real_url, model)
    emu = observe_http(emu_url, model)
    real.update(metric_facts(http(real_url + "/metrics")[2]))
    emu.update(metric_facts(http(emu_url + "/metrics")[2]))
    real.update(log_facts(wait_for_log(real_log, 40)))
    emu.update(log_facts(wait_for_log(emu_log, 10)))
    return real, emu


# ----------------------------------------------------------------------------- standalone

def _docker_args(container):
    out = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)[0]
    return info["Args"]


def _docker_logs(container):
    proc = subprocess.run(["docker", "logs", container], capture_output=True, text=True)
    return proc.stdout + proc.stderr


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--real-url", required=True)
    p.add_argument("--real-container", required=True, help="docker container of the real engine (args, logs)")
    p.add_argument("--image", default="specdec-lab/vllm-cpu:%s" % VERSION)
    p.add_argument("--models-dir", default=os.path.join(ROOT, "lab", ".cache", "models"))
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--skip-cli", action="store_true")
    args = p.parse_args(argv)
    real_argv = _docker_args(args.real_container)
    served = real_argv[real_argv.index("--served-model-name") + 1] if "--served-model-name" in real_argv else None
    model_dir = os.path.join(os.path.abspath(args.models_dir), args.model)
    real, emu = {}, {}
    with Emulator(model_dir, serve_args(real_argv)) as emulator:
        r, e = compare_servers(args.real_url, emulator.url, served or real_argv[1],
                               lambda: _docker_logs(args.real_container), emulator.log)
        real.update(r)
        emu.update(e)
    if not args.skip_cli:
        script = real_cli_script(args.image, "/models/" + args.model,
                                 mounts=["%s:/models:ro" % os.path.abspath(args.models_dir)],
                                 env=["HF_HUB_OFFLINE=1", "VLLM_CPU_KVCACHE_SPACE=1"])
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
        r, e = compare_cli(parse_cli_outputs(out), emulator_cli(model_dir))
        real.update(r)
        emu.update(e)
    diffs = differences(real, emu)
    print(report(diffs))
    return 1 if unexplained(diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
