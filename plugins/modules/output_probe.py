#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: output_probe
short_description: Record what an OpenAI-compatible endpoint generates greedily for fixed prompts
version_added: "0.1.0"
description:
  - Sends each prompt of a fixed set once, one request at a time, as a non-streaming chat completion at
    temperature 0, and returns the generated text and, where the engine gives them, its tokens.
  - Tokens come from C(logprobs=true) on chat completions, which TensorRT-LLM (C(trtllm-serve)) and vLLM answer
    with one C(choices[0].logprobs.content[]) entry per generated token (its C(token) text). When the engine returns
    none, or refuses C(logprobs) with a 4xx status, the request is sent again without it and only the text is kept;
    RV(unit) is then C(character).
  - The C(specdec.serve.draft_sweep) role probes the no-speculation baseline and every candidate with it and
    compares the outputs (its planner's output-equivalence gate), because speculative decoding must
    not change greedy output.
  - A failed request is recorded in its prompt's C(error) and counted in RV(failed_prompts); the module fails only when
    it cannot start (bad URL, no model listed).
  - Uses only the Python standard library, so it runs on GPU hosts with no extra packages.
author: specdec.serve maintainers (@specdec-serve)
options:
  path:
    description: Path of the chat-completions endpoint under O(url).
    type: str
    default: /v1/chat/completions
  prompt_set:
    description: Built-in fixed prompt set, the one of C(specdec.serve.serve_bench).
    type: str
    choices: [vacation, mixed]
    default: mixed
  num_prompts:
    description: How many prompts of O(prompt_set) to send, from its first; 0 sends them all.
    type: int
    default: 0
  prompts:
    description: Own prompts; when given, O(prompt_set) and O(num_prompts) are ignored.
    type: list
    elements: str
  max_tokens:
    description: C(max_tokens) of each request.
    type: int
    default: 32
  logprobs:
    description: Ask for C(logprobs) to get the generated tokens; false compares characters only.
    type: bool
    default: true
  timeout:
    description: Socket timeout in seconds for each request.
    type: float
    default: 300
extends_documentation_fragment:
  - specdec.serve.probes.endpoint
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent and RV(outputs) is empty.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The module changes nothing on the host and always reports C(changed=false).
  - Requests go one at a time (batch size 1), the engine's most deterministic shape; greedy output can still
    depend on the batch on GPUs (see the C(specdec.serve.draft_sweep) role's C(draft_sweep_equivalence_min_prefix)).
seealso:
  - module: specdec.serve.serve_bench
"""

EXAMPLES = r"""
- name: Probe the endpoint with the first three prompts, 32 tokens each
  specdec.serve.output_probe:
    url: http://127.0.0.1:8000
    num_prompts: 3
    max_tokens: 32
  register: probe

- name: Show the first output
  ansible.builtin.debug:
    msg: "{{ probe.outputs[0].text }} ({{ probe.unit }}s compared)"
"""

RETURN = r"""
model:
  description: Model name used.
  returned: success
  type: str
  sample: openai/gpt-oss-120b
url:
  description: Base URL probed.
  returned: success
  type: str
max_tokens:
  description: C(max_tokens) of each request.
  returned: success
  type: int
temperature:
  description: The temperature sent, always 0.
  returned: success
  type: float
  sample: 0.0
unit:
  description: C(token) when every output carries its tokens, otherwise C(character).
  returned: success
  type: str
  sample: token
failed_prompts:
  description:
    - Prompts whose request failed.
    - Not named C(failed), which Ansible reads as the task's own outcome; a probe with a failed request
      is a result to judge, not a failed task.
  returned: success
  type: int
  sample: 0
outputs:
  description: One entry per prompt, in order.
  returned: success
  type: list
  elements: dict
  contains:
    index:
      description: The prompt's position in the set.
      type: int
    text:
      description: The generated text (reasoning text, if any, then the content), or null on error.
      type: str
    tokens:
      description: The generated tokens' texts, or null when the engine gave none.
      type: list
      elements: str
    logprobs:
      description: Whether tokens were returned.
      type: bool
    completion_tokens:
      description: The server's usage count.
      type: int
    finish_reason:
      description: The server's finish reason.
      type: str
    error:
      description: Why the request failed, or null.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.specdec.serve.plugins.module_utils.bench_probe import run_probe
from ansible_collections.specdec.serve.plugins.module_utils.bench_runner import ENDPOINT_ARGS, PROMPT_SETS


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ENDPOINT_ARGS,
            path=dict(type="str", default="/v1/chat/completions"),
            prompt_set=dict(type="str", choices=sorted(PROMPT_SETS), default="mixed"),
            num_prompts=dict(type="int", default=0),
            prompts=dict(type="list", elements="str"),
            max_tokens=dict(type="int", default=32, no_log=False),
            logprobs=dict(type="bool", default=True),
            timeout=dict(type="float", default=300.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["max_tokens"] < 1:
        module.fail_json(msg="max_tokens must be >= 1, got %d" % p["max_tokens"])
    if p["num_prompts"] < 0:
        module.fail_json(msg="num_prompts must be >= 0, got %d" % p["num_prompts"])
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be > 0")
    if p["prompts"] is not None and not p["prompts"]:
        module.fail_json(msg="prompts must not be an empty list")
    if p["prompts"]:
        prompts = p["prompts"]
    else:
        prompts = PROMPT_SETS[p["prompt_set"]]
        if p["num_prompts"]:
            prompts = prompts[:p["num_prompts"]]

    if module.check_mode:
        module.exit_json(changed=False, outputs=[], failed_prompts=0, msg="check mode: no request sent")

    cfg = dict(p)
    cfg["prompts"] = prompts
    try:
        result = run_probe(cfg)
    except (IOError, OSError, ValueError) as exc:
        module.fail_json(msg="output_probe could not start: %s" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
