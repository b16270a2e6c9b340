# -*- coding: utf-8 -*-
"""One instance schema: spec_config's keys plus the keys inference_server owns are exactly the
suboptions of inference_server_instances in the argument spec, and the keys documented in
docs/spec_config.md (its instance table) are spec_config's."""

from __future__ import annotations

import os
import re

import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import DEFAULT_IGNORE_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_instance import INSTANCE_KEYS, SPECULATIVE_KEYS

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')


def spec_suboptions():
    with open(os.path.join(ROOT, 'roles', 'inference_server', 'meta', 'argument_specs.yml')) as handle:
        specs = yaml.safe_load(handle)['argument_specs']
    # every entry point that takes the instances (main and changes; previous works from the kept facts alone)
    entries = [entry for entry in specs.values() if 'inference_server_instances' in entry['options']]
    assert len(entries) >= 2
    return [set(entry['options']['inference_server_instances']['options']) for entry in entries]


def doc_section(heading='## Input: the instance'):
    with open(os.path.join(ROOT, 'docs', 'spec_config.md')) as handle:
        return handle.read().split(heading, 1)[1].split('\n## ', 1)[0]


def doc_tables(section):
    """The first-column keys of each table of a section, in order."""
    tables, current = [], None
    for line in section.splitlines():
        if line.startswith('|'):
            if current is None:
                current = set()
                tables.append(current)
            match = re.match(r'^\| `([a-z_]+)`', line)
            if match:
                current.add(match.group(1))
        else:
            current = None
    return tables


def test_the_argument_spec_has_every_instance_key_and_no_other():
    want = set(INSTANCE_KEYS) | set(DEFAULT_IGNORE_KEYS)
    for options in spec_suboptions():
        assert sorted(options ^ want) == []


def test_the_docs_list_every_instance_key_speculative_key_and_owned_key():
    section = doc_section()
    instance, speculative = doc_tables(section)[:2]
    assert instance == set(INSTANCE_KEYS)
    assert speculative == set(SPECULATIVE_KEYS)
    owned = section.split('Keys owned by other parts are skipped:', 1)[1].split('and any listed', 1)[0]
    assert set(re.findall(r'`([a-z_]+)`', owned)) == set(DEFAULT_IGNORE_KEYS)
