# -*- coding: utf-8 -*-
"""fleet_plan: the instances a host serves (a sweep's applied winner kept), and what it caches."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils.fleet import fleet_plan
from ansible_collections.specdec.serve.plugins.plugin_utils.spec_config import SpecConfigError

INST = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
        'model': 'openai/gpt-oss-120b', 'port': 8000,
        'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
GONE = {'name': 'old', 'state': 'absent'}


def applied(**speculative):
    return {'specdec_sweep': {'gpt-oss-120b': {'applied': {'speculative': speculative}}}}


def test_serving_cache_and_instances():
    plan = fleet_plan([INST, GONE], {})
    assert plan['serving'] == [INST] and plan['instances'] == [INST, GONE]
    assert plan['cache'] == [{'model': 'openai/gpt-oss-120b', 'speculative': {'draft_model': 'nvidia/gpt-oss-120b-Eagle3'}}]
    assert plan['rendered'][0]['speculative']['max_draft_len'] == 3


def test_an_applied_winner_of_the_same_method_and_draft_is_kept():
    won = dict(method='eagle3', draft_model='nvidia/gpt-oss-120b-Eagle3', max_draft_len=5)
    plan = fleet_plan([INST], applied(**won))
    assert plan['serving'][0]['speculative'] == won and plan['rendered'][0]['speculative']['max_draft_len'] == 5
    assert INST['speculative']['max_draft_len'] == 3  # the inventory's instance is not changed


@pytest.mark.parametrize('won, keep', [
    (dict(method='eagle3', draft_model='nvidia/other-draft', max_draft_len=5), True),  # the inventory moved on
    (dict(method='ngram', max_draft_len=5), True),
    (dict(method='eagle3', draft_model='nvidia/gpt-oss-120b-Eagle3', max_draft_len=5), 'false'),  # -e string
])
def test_the_inventory_wins_otherwise(won, keep):
    assert fleet_plan([INST], applied(**won), keep)['serving'] == [INST]


def test_a_bad_key_raises_naming_it():
    with pytest.raises(SpecConfigError, match='no_such_key'):
        fleet_plan([dict(INST, llm_api_options={'no_such_key': 1})], {})


def test_a_bad_switch_raises():
    with pytest.raises(TypeError):
        fleet_plan([INST], {}, 'sometimes')
