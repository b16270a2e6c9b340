#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: serve_bench
short_description: Benchmark an OpenAI-compatible streaming endpoint, with speculative-decoding statistics
version_added: "0.1.0"
description:
  - Sends streaming chat-completion requests at a fixed concurrency (closed loop) and measures them
    with the standard definitions used by C(vllm bench serve).
  - TTFT is the time to the first chunk carrying generated text (content, reasoning or tool calls).
  - TPOT is (last text chunk - first text chunk) / (output tokens - 1), with the output token count
    taken from the server's usage report, because under speculative decoding one chunk can carry
    several accepted tokens. ITL is the gap between chunks. E2E is the time to the end of the stream.
    Output throughput is the sum of output tokens over the duration of the measured phase.
  - Warm-up requests are sent first and not measured. Each repetition then sends O(num_requests)
    requests, cycling through the prompts in the same order.
  - Speculative-decoding statistics are scraped from the engine around each repetition. For
    TensorRT-LLM, C(/metrics) (iteration stats, drained on read; needs C(enable_iter_perf_stats)) is
    drained before the run and polled during it; the acceptance length is aggregated over the run.
    For vLLM, the C(vllm:spec_decode_*) Prometheus counters are read before and after.
  - Failed requests are counted, with up to five distinct error messages, and never silently dropped;
    the module fails when the share of failed measured requests exceeds O(max_error_rate).
  - Reports a client-side estimate of the acceptance length (tokens per decoding step) from the
    stream itself, next to the engine's figure, because some engines report none (one-model EAGLE-3
    on TensorRT-LLM 1.2.x leaves C(specDecodingStats) null).
  - Checks, before sending anything, that the engine honours the requested sampling. EAGLE-3 on
    TensorRT-LLM decodes greedily (temperature, top_p, top_k and seed are ignored) unless its
    speculative config sets C(allow_advanced_sampling), so O(temperature) > 0 against it fails,
    unless O(allow_greedy_fallback) is set, which measures anyway and flags the result.
  - Uses only the Python standard library, so it runs on GPU hosts with no extra packages.
author: specdec.serve maintainers (@specdec-serve)
options:
  url:
    description: Base URL of the server (scheme, host, port, optional path prefix).
    type: str
    default: http://127.0.0.1:8000
  path:
    description: Path of the chat-completions endpoint under O(url).
    type: str
    default: /v1/chat/completions
  model:
    description: Model name sent in each request. When omitted, the first model of C(GET /v1/models).
    type: str
  api_key:
    description: Bearer token sent as C(Authorization), if the server requires one.
    type: str
  concurrency:
    description: Number of requests in flight at any time.
    type: int
    default: 1
  num_requests:
    description: Requests per measured repetition.
    type: int
    default: 10
  warmup_requests:
    description: Requests sent before measuring, at the same concurrency, not measured.
    type: int
    default: 2
  repetitions:
    description: Measured repetitions; each is reported separately under RV(runs).
    type: int
    default: 1
  max_tokens:
    description: C(max_tokens) of each request.
    type: int
    default: 256
  temperature:
    description:
      - Sampling temperature of each request (a C(temperature) in O(extra_body) takes its place).
      - Above 0 it is refused when the engine decodes greedily whatever the request asks (see
        O(serving)), unless O(allow_greedy_fallback) is true.
    type: float
    default: 0.0
  serving:
    description:
      - What serves the endpoint, for the sampling check and the acceptance estimate. Any of the output
        of the C(specdec.serve.spec_config) filter for the instance, a record of the local fact
        C(ansible_local.specdec_serving.instances) (C(engine), C(engine_version), C(speculative_method)),
        or a mapping with the keys below; other keys are ignored.
      - C(engine) (V(trtllm) or V(vllm)), C(engine_version), C(speculative_method) (C(none), C(eagle3),
        C(draft_target), ...), C(decoding_type) (TensorRT-LLM's; V(Eagle) and V(Eagle3) mean EAGLE-3),
        C(allow_advanced_sampling) (bool, TensorRT-LLM 1.2.0rc6 and later) and C(stream_interval)
        (TensorRT-LLM; above 1 a chunk spans several steps and no acceptance estimate is made).
      - When omitted and O(url) is on this host (loopback), the instance of the local fact
        O(serving_fact) that listens on the URL's port is used; with no such instance nothing is
        checked and RV(sampling.checked) is false.
    type: dict
  serving_fact:
    description:
      - The local fact file of C(specdec.serve.inference_server) read when O(serving) is omitted (an
        executable is run, as Ansible runs local facts; another file is read as JSON).
    type: path
    default: /etc/ansible/facts.d/specdec_serving.fact
  allow_greedy_fallback:
    description:
      - Measure even when O(temperature) > 0 is sent to an engine that decodes greedily. The result
        carries RV(sampling.honoured=false) and its warning, and the module warns.
    type: bool
    default: false
  ignore_eos:
    description: Send C(ignore_eos=true) so every request generates O(max_tokens) tokens (vLLM, TensorRT-LLM).
    type: bool
    default: false
  extra_body:
    description: Extra keys merged into every request body.
    type: dict
    default: {}
  prompt_set:
    description:
      - Built-in fixed prompt set. V(vacation) is the single prompt of the hand-run benchmark; V(mixed)
        adds seven more (reasoning, code, summary, translation).
    type: str
    choices: [vacation, mixed]
    default: mixed
  prompts:
    description: Own prompts; when given, O(prompt_set) is ignored.
    type: list
    elements: str
  timeout:
    description: Socket timeout in seconds for each request.
    type: float
    default: 300
  spec_metrics:
    description: Which engine's speculative-decoding statistics to scrape; V(auto) recognises the format.
    type: str
    choices: [auto, trtllm, vllm, none]
    default: auto
  metrics_url:
    description: Where to scrape them; defaults to O(url) plus C(/metrics).
    type: str
  metrics_poll_interval:
    description: Seconds between polls of the TensorRT-LLM C(/metrics) queue during a run.
    type: float
    default: 1.0
  percentiles:
    description: Percentiles reported for TTFT, TPOT, ITL and E2E.
    type: list
    elements: float
    default: [50, 90, 99]
  include_requests:
    description: Also return one compact record per request.
    type: bool
    default: false
  max_error_rate:
    description: Largest share (0..1) of failed measured requests before the module fails.
    type: float
    default: 0.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent and RV(runs) is empty.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The module changes nothing on the host and always reports C(changed=false).
  - Reading TensorRT-LLM C(/metrics) drains the engine's statistics queue, so do not run two
    benchmarks, or a second scraper, against the same engine at once.
seealso:
  - name: draft_select filter
    description: Picks the fastest draft length from measurements made with this module.
    link: https://github.com/specdec/serve/blob/main/docs/serve_bench.md
"""

EXAMPLES = r"""
- name: Measure the endpoint at concurrency 4, three repetitions
  specdec.serve.serve_bench:
    url: http://127.0.0.1:8000
    concurrency: 4
    num_requests: 32
    warmup_requests: 4
    repetitions: 3
    max_tokens: 256
    temperature: 0.0
    prompt_set: mixed
  register: bench

- name: The seeds' single vacation prompt, vLLM counters
  specdec.serve.serve_bench:
    url: http://127.0.0.1:8000
    model: openai/gpt-oss-120b
    prompt_set: vacation
    num_requests: 10
    spec_metrics: vllm

- name: Measure sampling at temperature 0.7; fails against EAGLE-3 on TensorRT-LLM, which decodes greedily
  specdec.serve.serve_bench:
    url: http://127.0.0.1:8000
    temperature: 0.7
    # what serves the endpoint; without it the local fact of the instance on port 8000 is read
    serving: "{{ ansible_local.specdec_serving.instances['gpt-oss-120b'] }}"

- name: Show throughput and acceptance length
  ansible.builtin.debug:
    msg: >-
      {{ bench.summary.output_throughput.median }} tok/s, acceptance length
      {{ bench.summary.acceptance_length.median }} (engine),
      {{ bench.summary.acceptance_length_estimate.median }} (client-side estimate)
"""

RETURN = r"""
model:
  description: Model name used.
  returned: success
  type: str
  sample: openai/gpt-oss-120b
url:
  description: Base URL measured.
  returned: success
  type: str
concurrency:
  description: Concurrency used.
  returned: success
  type: int
spec_engine:
  description: Engine whose speculative statistics were read (V(trtllm), V(vllm) or V(none)).
  returned: success
  type: str
sampling:
  description: The sampling check, made before any request is sent.
  returned: always
  type: dict
  contains:
    checked:
      description: Whether the engine was known (from O(serving) or the local fact).
      type: bool
      sample: true
    source:
      description: Where the engine was learnt, V(serving), V(local fact) or V(none).
      type: str
      sample: serving
    serving:
      description:
        - engine, engine_version, speculative_method, decoding_type, allow_advanced_sampling and
          stream_interval, or null.
      type: dict
      sample: {"engine": "trtllm", "engine_version": "1.2.0rc6", "speculative_method": "eagle3",
               "decoding_type": "Eagle", "allow_advanced_sampling": false, "stream_interval": 1}
    greedy_only:
      description: The engine decodes greedily whatever the request asks.
      type: bool
      sample: true
    temperature:
      description: The temperature sent.
      type: float
      sample: 0.0
    honoured:
      description: False when the engine ignored the sampling asked for (only with O(allow_greedy_fallback)).
      type: bool
      sample: true
    reason:
      description: Why the engine is greedy-only, or null.
      type: str
      sample: "eagle3 on TensorRT-LLM 1.2.0rc6 decodes greedily: a request's temperature, top_p, top_k and seed are ignored"
    error:
      description: Why the module refused, or null.
      type: str
    warning:
      description: The flag of a measurement whose temperature was not honoured, or null.
      type: str
warmup:
  description: Warm-up requests, completed, failed, duration_s and errors.
  returned: success
  type: dict
runs:
  description:
    - One entry per repetition with repetition, concurrency, requests, completed, failed, duration_s,
      output_tokens, prompt_tokens, usage_missing (requests without usage counts), output_throughput,
      total_token_throughput, request_throughput (per second), ttft_ms, tpot_ms, itl_ms, e2e_ms,
      tokens_per_chunk, output_speed_per_request (each a dict of count, mean, std, min, max and
      p50/p90/p99), acceptance_length_estimate, decoding_steps_counted, errors (count, samples) and
      spec_decode.
    - acceptance_length_estimate is the client-side estimate of the acceptance length, tokens per
      decoding step read from the stream, sum(output tokens - 1) / sum(text chunks - 1) over the
      successful requests with usage counts (the first chunk is the context step's one token);
      null with TensorRT-LLM C(stream_interval) above 1 (from O(serving)) or when no request qualifies.
    - spec_decode for TensorRT-LLM holds iterations, num_draft_tokens, num_accepted_tokens,
      num_requests_with_draft_tokens, acceptance_length, acceptance_rate, draft_overhead_mean; for vLLM
      num_drafts, num_draft_tokens, num_accepted_tokens, acceptance_length, acceptance_rate and
      per_position_acceptance_rate. C(available) is false when the engine reported nothing.
    - request_records holds one compact record per request when O(include_requests) is set.
  returned: success
  type: list
  elements: dict
summary:
  description:
    - Across repetitions, output_throughput (values, median, mad, min, max), acceptance_length (the
      engine's, values and median) and acceptance_length_estimate (the client-side estimate, values
      and median); pooled request statistics ttft_ms, tpot_ms, itl_ms, e2e_ms, tokens_per_chunk.
  returned: success
  type: dict
errors:
  description: Failed measured requests over all repetitions, count and samples (message, count).
  returned: always
  type: dict
  sample: {"count": 1, "samples": [{"message": "HTTP 503: LLM is unavailable", "count": 1}]}
timing:
  description: Wall time in seconds of warm-up (warmup_s), measurement (measure_s) and the whole call (total_s).
  returned: success
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import urlsplit

from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import (
    PROMPT_SETS, run_benchmark)
from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import (
    SamplingError, check_sampling, serving_from_fact)


def read_local_fact(module, path):
    """The JSON of a local fact file (run when executable, as Ansible does); None when unreadable."""
    if not path or not os.path.isfile(path):
        return None
    try:
        if os.access(path, os.X_OK):
            rc, out, dummy = module.run_command([path])
            if rc != 0:
                return None
        else:
            with open(path) as fh:
                out = fh.read()
        return json.loads(out)
    except (IOError, OSError, ValueError):
        return None


def serving_of(module, p):
    """(serving description, source) for the sampling check."""
    if p["serving"]:
        return p["serving"], "serving"
    try:
        parts = urlsplit(p["url"])
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None, "none"
    record = serving_from_fact(read_local_fact(module, p["serving_fact"]), host, port)
    return (record, "local fact") if record else (None, "none")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:8000"),
            path=dict(type="str", default="/v1/chat/completions"),
            model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            concurrency=dict(type="int", default=1),
            num_requests=dict(type="int", default=10),
            warmup_requests=dict(type="int", default=2),
            repetitions=dict(type="int", default=1),
            max_tokens=dict(type="int", default=256, no_log=False),
            temperature=dict(type="float", default=0.0),
            serving=dict(type="dict"),
            serving_fact=dict(type="path", default="/etc/ansible/facts.d/specdec_serving.fact"),
            allow_greedy_fallback=dict(type="bool", default=False),
            ignore_eos=dict(type="bool", default=False),
            extra_body=dict(type="dict", default={}),
            prompt_set=dict(type="str", choices=sorted(PROMPT_SETS), default="mixed"),
            prompts=dict(type="list", elements="str"),
            timeout=dict(type="float", default=300.0),
            spec_metrics=dict(type="str", choices=["auto", "trtllm", "vllm", "none"], default="auto"),
            metrics_url=dict(type="str"),
            metrics_poll_interval=dict(type="float", default=1.0),
            percentiles=dict(type="list", elements="float", default=[50, 90, 99]),
            include_requests=dict(type="bool", default=False),
            max_error_rate=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for key, low in (("concurrency", 1), ("num_requests", 1), ("repetitions", 1),
                     ("max_tokens", 1), ("warmup_requests", 0)):
        if p[key] < low:
            module.fail_json(msg="%s must be >= %d, got %d" % (key, low, p[key]))
    if not 0.0 <= p["max_error_rate"] <= 1.0:
        module.fail_json(msg="max_error_rate must be within 0..1, got %s" % p["max_error_rate"])
    if p["timeout"] <= 0 or p["metrics_poll_interval"] <= 0:
        module.fail_json(msg="timeout and metrics_poll_interval must be > 0")
    for q in p["percentiles"]:
        if not 0 <= q <= 100:
            module.fail_json(msg="percentiles must be within 0..100, got %s" % q)
    prompts = p["prompts"] if p["prompts"] else PROMPT_SETS[p["prompt_set"]]
    if p["prompts"] is not None and not p["prompts"]:
        module.fail_json(msg="prompts must not be an empty list")

    serving, source = serving_of(module, p)
    temperature = (p["extra_body"] or {}).get("temperature", p["temperature"])
    try:
        sampling = check_sampling(serving, temperature, p["allow_greedy_fallback"])
    except SamplingError as exc:
        module.fail_json(msg="serve_bench: %s" % exc, errors={"count": 0, "samples": []})
    sampling["source"] = source
    if sampling["error"]:
        module.fail_json(msg="serve_bench: %s" % sampling["error"], sampling=sampling,
                         errors={"count": 0, "samples": []})
    if sampling["warning"]:
        module.warn(sampling["warning"])

    if module.check_mode:
        module.exit_json(changed=False, runs=[], errors={"count": 0, "samples": []}, sampling=sampling,
                         msg="check mode: no request sent")

    cfg = dict(p)
    cfg["prompts"] = prompts
    if sampling["serving"]:
        cfg["stream_interval"] = sampling["serving"]["stream_interval"]
    try:
        result = run_benchmark(cfg)
    except (IOError, OSError, ValueError) as exc:
        module.fail_json(msg="serve_bench could not start: %s" % exc,
                         errors={"count": 0, "samples": []}, sampling=sampling)
    result["sampling"] = sampling

    requests = sum(r["requests"] for r in result["runs"])
    failed = result["errors"]["count"]
    if requests and failed / float(requests) > p["max_error_rate"]:
        module.fail_json(msg="%d of %d measured requests failed (max_error_rate %s); first: %s"
                         % (failed, requests, p["max_error_rate"],
                            result["errors"]["samples"][0]["message"]), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
