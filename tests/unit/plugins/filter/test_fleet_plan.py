# -*- coding: utf-8 -*-
"""fleet_plan: the instances a host serves (a sweep's applied winner kept), and what it caches."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import fleet_plan
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError

INST = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
        'model': 'openai/gpt-oss-120b', 'port': 8000,
        'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3}}
GONE = {'name': 'old', 'state': 'absent'}


def applied(swept=None, **speculative):
    record = {'speculative': speculative}
    if swept is not None:
        record['swept'] = swept
    return {'specdec_sweep': {'gpt-oss-120b': {'applied': record}}}


SWEPT = {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3'}


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


def test_a_winner_of_no_speculation_is_kept_for_the_method_it_was_swept_for():
    """The sweep measured eagle3 and found it slower than no speculation: a rollout keeps it off."""
    plan = fleet_plan([INST], applied(swept=SWEPT, method='none'))
    assert plan['serving'][0]['speculative'] == {'method': 'none'}
    assert plan['rendered'][0]['speculative']['method'] == 'none'


def test_a_winner_of_the_swept_method_is_kept_with_the_record():
    won = dict(method='eagle3', draft_model='nvidia/gpt-oss-120b-Eagle3', max_draft_len=5)
    assert fleet_plan([INST], applied(swept=SWEPT, **won))['serving'][0]['speculative'] == won


@pytest.mark.parametrize('won, keep', [
    (dict(swept={'method': 'ngram'}, method='none'), True),  # swept for another method
    (dict(swept=dict(SWEPT, draft_model='nvidia/other-draft'), method='none'), True),  # another draft model
    (dict(method='none'), True),  # a fact from before `swept`: its method is what it applied
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


# --------------------------------------------------------------------------- preflight and outcome

from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import (  # noqa: E402
    disks_below,
    gpu_check,
    rollout_status,
)


def test_the_models_to_find_are_those_under_the_models_dir():
    plan = fleet_plan([INST, dict(INST, name='b', port=8001, model='/data/local-model',
                                  speculative={'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3',
                                               'max_draft_len': 3})], {})
    assert plan['models'] == ['openai/gpt-oss-120b', 'nvidia/gpt-oss-120b-Eagle3']


def test_disks_below():
    lines = ['Mounted on Avail', '/var/lib/docker 5000000000', '/var/lib/specdec/models 20000000000', 'garbage']
    assert disks_below(lines, 10) == ['/var/lib/docker (5.0 GB)']
    assert disks_below(lines, 1) == []
    assert disks_below(lines, 30) == ['/var/lib/docker (5.0 GB)', '/var/lib/specdec/models (20.0 GB)']


def smi(*lines, rc=0):
    return {'rc': rc, 'stdout_lines': list(lines), 'stderr': 'NVIDIA-SMI has failed' if rc else ''}


@pytest.mark.parametrize('result, count, driver, problem', [
    (smi('0, NVIDIA B200, 580.65.06', '1, NVIDIA B200, 580.65.06'), 2, '', ''),
    (smi('0, NVIDIA B200, 580.65.06', '1, NVIDIA B200, 580.65.06'), 2, '580.65.06', ''),
    (smi('0, NVIDIA B200, 580.65.06'), 2, '', 'lists 1'),
    (smi('0, NVIDIA B200, 570.124.06', '1, NVIDIA B200, 580.65.06'), 2, '575', 'driver >= 575'),
    (smi(rc=9), 1, '', 'nvidia-smi failed: NVIDIA-SMI has failed'),
])
def test_gpu_check(result, count, driver, problem):
    out = gpu_check(result, count, driver)
    assert (problem in out) if problem else out == ''


def view(*instances):
    base = dict(name='a', image_id='sha256:1', config_checksum='c1', started_at='t1', health='ready')
    return {'instances': [dict(base, **i) for i in instances]}


def test_a_host_whose_engine_moved_is_updated_and_one_that_did_not_is_unchanged():
    before = view({})
    assert rollout_status(view({'config_checksum': 'c2'}), before, 1, 2, [])['status'] == 'updated'
    assert rollout_status(view({'started_at': 't2'}), before, 1, 2, [])['status'] == 'updated'
    out = rollout_status(view({}), before, 1, 2, [{'instance': 'a', 'reasons': ['x']}])
    assert out == {'status': 'unchanged', 'serving': True, 'started': 1, 'finished': 2,
                   'changes': [{'instance': 'a', 'reasons': ['x']}]}


def test_a_failed_batch_is_rolled_back_only_when_the_previous_engine_serves_again():
    before = view({})
    out = rollout_status(view({'started_at': 't3'}), before, 1, 2, [], error='crashed')
    assert out['status'] == 'rolled back' and out['error'] == 'crashed'
    assert rollout_status(view({'health': 'down'}), before, 1, 2, [], error='x')['status'] == 'failed'
    assert rollout_status(view({'config_checksum': 'new'}), before, 1, 2, [], error='x')['status'] == 'failed'


def test_the_cause_of_a_failed_batch_is_the_failed_tasks_message_or_its_failed_items_messages():
    before = view({})
    refused = 'specdec/x:1-amd64 is built for linux/amd64, and this host is linux/arm64 (aarch64)'
    looped = {'failed': True, 'msg': 'One or more items failed', 'results': [
        {'failed': False, 'msg': 'fine', 'item': 'a'},
        {'failed': True, 'msg': refused, 'item': 'b'},
        {'failed': True, 'msg': refused, 'item': 'c'},  # said once
        {'failed': True, 'item': 'd'},  # no message of its own
        {'failed': True, 'msg': 'the engine check refused its config', 'item': 'e'}]}
    out = rollout_status(view({}), before, 1, 2, [], error=looped)
    assert out['status'] == 'rolled back'
    assert out['error'] == refused + '; the engine check refused its config'
    assert rollout_status(view({}), before, 1, 2, [], error={'failed': True, 'msg': 'crashed'})['error'] == 'crashed'
    assert rollout_status(view({}), before, 1, 2, [], error={'msg': 'One or more items failed', 'results': []})[
        'error'] == 'One or more items failed'
    assert rollout_status(view({}), before, 1, 2, [], error={})['error'] == 'failed'
    assert rollout_status(view({}), before, 1, 2, [], error='')['error'] == 'failed'
