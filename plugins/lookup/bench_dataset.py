# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: bench_dataset
author: specdec.serve maintainers (@specdec-serve)
version_added: "0.1.0"
short_description: Read a file of user requests on the controller for serve_bench
description:
  - Reads a request file on the controller and returns the request records that
    M(specdec.serve.serve_bench) takes as O(specdec.serve.serve_bench#module:dataset), so the file never
    has to be copied to the host that runs the benchmark.
  - JSON Lines of request records, C({"prompt"}) (a completions prompt) or C({"messages"}) (a chat
    conversation), each optionally with C(max_tokens); or ShareGPT conversations (C({"conversations"}), a
    list of turns with C(from) and C(value)), as JSON Lines or as one JSON array. The first human turn of a
    conversation is the prompt; conversations without one are skipped.
  - A malformed file fails with the file and the line (for a JSON array, the line where the element starts).
  - With O(num), a sample of that many records drawn with O(seed), the same for the same seed and file;
    without, every record in file order.
  - Relative paths are looked up as the C(file) lookup does (the role's or play's C(files) directories).
options:
  _terms:
    description: Request files on the controller.
    type: list
    elements: path
    required: true
  format:
    description:
      - V(jsonl) request records, V(sharegpt) conversations, or V(auto) (either, per record).
    type: str
    choices: [auto, jsonl, sharegpt]
    default: auto
  num:
    description: Number of records to sample; omitted, all of them.
    type: int
  seed:
    description: Seed of the sample.
    type: int
    default: 0
  reference_max_tokens:
    description:
      - For ShareGPT conversations, set each record's C(max_tokens) to the length of the reply that follows
        the prompt, estimated at four characters a token (no tokenizer).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Measure 200 requests sampled from the users' ShareGPT conversations
  specdec.serve.serve_bench:
    url: http://127.0.0.1:8000
    request_rate: 4
    concurrency: 64
    num_requests: 200
    dataset: "{{ lookup('specdec.serve.bench_dataset', 'sharegpt.json', num=200, seed=1) }}"

- name: Our own chat requests, in file order
  specdec.serve.serve_bench:
    url: http://127.0.0.1:8000
    dataset: "{{ lookup('specdec.serve.bench_dataset', 'requests.jsonl', format='jsonl') }}"
"""

RETURN = r"""
_raw:
  description: One list of request records per file, each C({"prompt"}) or C({"messages"}), with C(max_tokens) where given.
  type: list
  elements: list
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.specdec.serve.plugins.plugin_utils._bench_dataset import DatasetError, read_dataset


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        out = []
        for term in terms:
            path = self.find_file_in_search_path(variables, "files", term, ignore_missing=True) or term
            try:
                out.append(read_dataset(path, self.get_option("format"), self.get_option("num"),
                                        self.get_option("seed"), self.get_option("reference_max_tokens")))
            except DatasetError as exc:
                raise AnsibleLookupError(str(exc))
        return out
