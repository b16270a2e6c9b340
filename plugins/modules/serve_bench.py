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
  - Open loop (O(request_rate)) sends requests at a Poisson or constant rate, seeded, with at most
    O(concurrency) in flight, and reports how far the client kept to the schedule.
  - The prompts are a built-in set, O(prompts), a user's request records (O(dataset), read from a JSONL or
    ShareGPT file on the controller by the C(specdec.serve.bench_dataset) lookup), or synthetic prompts of
    a set input-length distribution (O(input_len)); O(output_len) sets each request's output length
    (C(max_tokens) with C(ignore_eos)).
  - Goodput (O(goodput_ttft_ms), O(goodput_tpot_ms)) is the share and the rate of requests meeting the
    latency targets.
  - Watches its own client (CPU use, waits for a CPU, chunks read in bursts, open-loop send lag) and flags
    a repetition the client may have limited (RV(client_bottleneck), RV(flags)); with
    O(fail_on_client_bottleneck) it fails instead.
  - Uses only the Python standard library, so it runs on GPU hosts with no extra packages.
author: specdec.serve maintainers (@specdec-serve)
options:
  path:
    description:
      - Path of the chat-completions endpoint under O(url).
      - A path ending in C(/completions) but not C(/chat/completions) is the completions API, sent
        C(prompt) rather than C(messages) (O(dataset) records must then be prompts).
    type: str
    default: /v1/chat/completions
  concurrency:
    description:
      - Closed loop, number of requests in flight at any time.
      - Open loop (O(request_rate) set), the most requests in flight; a request due when that many are in
        flight waits for one to end (C(cap_waited) in each run's C(load) counts them). The warm-up runs closed-loop
        at this concurrency.
    type: int
    default: 1
  request_rate:
    description:
      - Requests per second of an open loop; when omitted the closed loop of O(concurrency) workers runs.
      - Arrival times follow O(arrival) from O(seed), the same in every repetition; latencies are measured
        from when a request is sent.
    type: float
  arrival:
    description: Arrival process of the open loop, exponential gaps (V(poisson)) or equal gaps (V(constant)).
    type: str
    choices: [poisson, constant]
    default: poisson
  seed:
    description:
      - Seed of the open loop's arrival times and of the synthetic lengths and prompts; the same seed gives
        the same workload. It is not sent to the engine (put a sampling C(seed) in O(extra_body)).
    type: int
    default: 0
  input_len:
    description:
      - Synthetic prompts of this length distribution, in tokens, one distinct prompt per request; O(prompts),
        O(prompt_set) and O(dataset) are then not used.
      - Lengths are approximate, with no tokenizer (the engine's C(/tokenize) is not asked); a prompt of
        N tokens is N words of a list of common English words that are one token each in the GPT and Llama 3
        vocabularies. The chat template adds its own tokens; C(prompt_tokens) of each run is the engine's count.
    type: dict
    suboptions: &length
      distribution:
        description: V(fixed) (C(mean)), V(uniform) (integers from C(min) to C(max)) or V(normal) (C(mean)
          and C(sd), rounded, clamped to C(min) (default 1) and C(max)).
        type: str
        choices: [fixed, uniform, normal]
        default: fixed
      mean:
        description: Length of V(fixed), mean of V(normal).
        type: int
      min:
        description: Smallest length.
        type: int
      max:
        description: Largest length.
        type: int
      sd:
        description: Standard deviation of V(normal).
        type: float
  output_len:
    description:
      - Output lengths of this distribution (keys as O(input_len)), drawn per request from O(seed); each
        request gets its length as C(max_tokens) and C(ignore_eos=true), so it generates exactly that many
        tokens on engines that honour C(ignore_eos) (vLLM, TensorRT-LLM). O(max_tokens) is then not used.
    type: dict
    suboptions: *length
  dataset:
    description:
      - The user's request records, each C({prompt}) (a completions prompt; sent as the user message to the
        chat endpoint) or C({messages}) (a chat conversation), optionally with C(max_tokens); request i uses
        record i mod n.
      - Read a file on the controller with the C(specdec.serve.bench_dataset) lookup (JSONL or ShareGPT,
        sampled with a seed), which returns this list.
    type: list
    elements: dict
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
  top_p:
    description:
      - Nucleus-sampling C(top_p) of each request (0 < top_p <= 1; a C(top_p) in O(extra_body) takes its
        place); not sent when omitted.
      - It only matters when O(temperature) > 0, which a greedy-only engine already refuses, so it needs no
        check of its own; RV(sampling.top_p) records it.
    type: float
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
    description: Own prompts; when given, O(prompt_set) is ignored. Not with O(dataset) or O(input_len).
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
    description:
      - Where to scrape them; defaults to O(url) plus C(/metrics).
      - Where the monitoring role's exporter reads a TensorRT-LLM engine (its C(/metrics) queue is drained on
        read, so there can be only one reader), read the exporter instead, which serves the same JSON list
        drained per reader, e.g. C(http://127.0.0.1:9470/engine/INSTANCE/metrics?reader=serve_bench) with
        O(spec_metrics=trtllm); benchmark and monitoring then never take each other's iterations.
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
  prefix_cache:
    description:
      - Allow repeated prompts to be served from the engine's prefix cache.
      - By default (V(false)) every request of every run (the warm-up, each repetition) starts with a tag of
        its own, C([DIGEST-cCONCURRENCY-RUN/INDEX]), before its prompt or first message, so that no request
        is served from the prefix cache of an earlier one with the same prompt. A workload of few prompts sent
        many times otherwise measures cache hits, not prefill, and candidates that reach a warm cache at
        different points do not compare. The tags are the same for the same run of every candidate, so
        candidates send the same number of prompt tokens. A chat template's own tokens before the first
        message still share their block.
      - V(true) sends the prompts as they are, for a workload whose traffic repeats prompts by design (a fixed
        system prompt, multi-turn sessions).
    type: bool
    default: false
  max_error_rate:
    description: Largest share (0..1) of failed measured requests before the module fails.
    type: float
    default: 0.0
  goodput_ttft_ms:
    description: TTFT target of goodput, milliseconds; with O(goodput_tpot_ms) either or both.
    type: float
  goodput_tpot_ms:
    description:
      - TPOT target of goodput, milliseconds. A request meets the goodput targets when it succeeded and its
        TTFT and TPOT are within those given (a one-token output has no TPOT and meets that target).
    type: float
  fail_on_client_bottleneck:
    description:
      - Fail when the client itself may have limited a repetition (RV(client_bottleneck)), with the
        measurements and the evidence; otherwise the module warns and the result carries RV(flags).
    type: bool
    default: false
extends_documentation_fragment:
  - specdec.serve.probes.endpoint
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
  - name: draft_sweep role
    description: Picks the fastest draft length from measurements made with this module.
    link: https://github.com/specdec/serve/blob/main/docs/draft_sweep.md
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
    top_p:
      description: The C(top_p) sent, only when one is.
      type: float
      returned: when O(top_p) or a C(top_p) in O(extra_body) is given
      sample: 0.9
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
      per_position_acceptance_rate. C(available) is false when the engine reported nothing; metrics_url
      names where they were read (the engine, or the exporter of O(metrics_url)).
    - request_records holds one compact record per request when O(include_requests) is set.
    - client is the evidence of whether the client limited the repetition (see RV(client_bottleneck)),
      wall_s, cpu_s, cpu_per_wall (CPU-seconds of the process per second), threads, threads_cpu_s
      (CPU time of the client's threads), run_queue_wait_s and run_queue_wait_per_slice_ms (time the
      client's threads waited for a CPU, in all and per timeslice, from Linux schedstat; null elsewhere), chunk_gaps, chunk_bursts and
      chunk_burst_share (gaps between text chunks below 0.1 ms, chunks read together), server_bursts
      (chunks came in bursts while the client had a CPU whenever it woke and used little of it, so the
      server wrote them together, which does not flag the repetition), send_lag_p90_ms (open loop),
      thresholds, bottleneck and reasons.
    - load (open loop) holds mode, arrival, request_rate, achieved_request_rate (between the first and
      the last send), max_in_flight, seed, cap_waited, cap_wait_ms (waits for a free slot under
      O(concurrency)) and send_lag_ms (the client's own delay from the scheduled time to the send).
    - goodput (with O(goodput_ttft_ms) or O(goodput_tpot_ms)) holds ttft_ms, tpot_ms (the targets),
      requests, met, share (met / requests, failed requests included) and request_rate (met per second of
      the repetition).
  returned: success
  type: list
  elements: dict
summary:
  description:
    - Across repetitions, output_throughput (values, median, mad, min, max), acceptance_length (the
      engine's, values and median) and acceptance_length_estimate (the client-side estimate, values
      and median); pooled request statistics ttft_ms, tpot_ms, itl_ms, e2e_ms, tokens_per_chunk.
    - goodput, with a goodput target, pools the repetitions (targets, met, requests, share) and gives
      request_rate (values per repetition and median).
  returned: success
  type: dict
prefix_cache:
  description: Whether repeated prompts could be served from the prefix cache (O(prefix_cache)); false when every
    request started with a tag of its own.
  returned: success
  type: bool
  sample: false
client_bottleneck:
  description:
    - Whether the client may have limited any repetition - its threads waited on average more than 2 ms
      for a CPU per timeslice, or more than half of the gaps between text chunks were below 0.1 ms
      (chunks read in bursts), or the process used more than 0.9 CPU-seconds per second, or (open loop)
      the 90th percentile of the send lag exceeded 10 ms. C(client) of each run holds the evidence.
  returned: success
  type: bool
  sample: false
flags:
  description: One line per flagged repetition, with the evidence that tripped a threshold.
  returned: success
  type: list
  elements: str
  sample: ["client_bottleneck: repetition 0: run_queue_wait: the client's threads waited 7.3 ms for a CPU per timeslice (threshold 2 ms)"]
workload:
  description:
    - What was sent when a workload option is used (O(input_len), O(output_len), O(dataset), O(top_p) or a
      completions path) - source (V(synthetic), V(dataset) or V(prompts)), api, seed, input_len and
      output_len (the distribution and a summary of the drawn lengths), records, max_tokens_total.
  returned: when a workload option is used
  type: dict
load:
  description: The open loop's settings, mode, arrival, request_rate, max_in_flight and seed.
  returned: when O(request_rate) is set
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
    ENDPOINT_ARGS, PROMPT_SETS, run_benchmark)
from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import (
    SamplingError, check_sampling, serving_from_fact)
from ansible_collections.specdec.serve.plugins.module_utils.bench_workload import (
    WorkloadError, check_length_spec, normalize_record)

LENGTH_SPEC = dict(
    distribution=dict(type="str", choices=["fixed", "uniform", "normal"], default="fixed"),
    mean=dict(type="int"),
    min=dict(type="int"),
    max=dict(type="int"),
    sd=dict(type="float"),
)


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
            ENDPOINT_ARGS,
            path=dict(type="str", default="/v1/chat/completions"),
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
            prefix_cache=dict(type="bool", default=False),
            max_error_rate=dict(type="float", default=0.0),
            request_rate=dict(type="float"),
            arrival=dict(type="str", choices=["poisson", "constant"], default="poisson"),
            seed=dict(type="int", default=0),
            input_len=dict(type="dict", options=LENGTH_SPEC),
            output_len=dict(type="dict", options=LENGTH_SPEC),
            dataset=dict(type="list", elements="dict"),
            top_p=dict(type="float"),
            goodput_ttft_ms=dict(type="float"),
            goodput_tpot_ms=dict(type="float"),
            fail_on_client_bottleneck=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["prompts", "dataset", "input_len"]],
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
    if p["request_rate"] is not None and not p["request_rate"] > 0:
        module.fail_json(msg="request_rate must be > 0, got %s" % p["request_rate"])
    if p["top_p"] is not None and not 0 < p["top_p"] <= 1:
        module.fail_json(msg="top_p must be within 0 (excluded) and 1, got %s" % p["top_p"])
    for key in ("goodput_ttft_ms", "goodput_tpot_ms"):
        if p[key] is not None and not p[key] > 0:
            module.fail_json(msg="%s must be > 0, got %s" % (key, p[key]))
    records = None
    try:
        lengths = dict((key, check_length_spec(p[key], key) if p[key] else None)
                       for key in ("input_len", "output_len"))
        if p["dataset"] is not None:
            if not p["dataset"]:
                module.fail_json(msg="dataset must not be an empty list")
            records = [normalize_record(r, "dataset[%d]" % i) for i, r in enumerate(p["dataset"])]
    except WorkloadError as exc:
        module.fail_json(msg="serve_bench: %s" % exc)

    serving, source = serving_of(module, p)
    temperature = (p["extra_body"] or {}).get("temperature", p["temperature"])
    try:
        sampling = check_sampling(serving, temperature, p["allow_greedy_fallback"])
    except SamplingError as exc:
        module.fail_json(msg="serve_bench: %s" % exc, errors={"count": 0, "samples": []})
    sampling["source"] = source
    top_p = (p["extra_body"] or {}).get("top_p", p["top_p"])
    if top_p is not None:
        # top_p only shapes sampling at temperature > 0, which the check above already refuses on a
        # greedy-only engine (or flags with allow_greedy_fallback): it needs no rule of its own
        sampling["top_p"] = top_p
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
    cfg["records"] = records
    cfg.update(lengths)
    if sampling["serving"]:
        cfg["stream_interval"] = sampling["serving"]["stream_interval"]
    try:
        result = run_benchmark(cfg)
    except WorkloadError as exc:
        module.fail_json(msg="serve_bench: %s" % exc, errors={"count": 0, "samples": []},
                         sampling=sampling)
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
    if result["client_bottleneck"] and p["fail_on_client_bottleneck"]:
        module.fail_json(msg="the client may have limited the measurement (fail_on_client_bottleneck): %s"
                         % " | ".join(result["flags"]), **result)
    for flag in result["flags"]:
        module.warn(flag)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
