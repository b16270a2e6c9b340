# -*- coding: utf-8 -*-
"""plugin_utils._soak: what the canary soaks (only the canary, only changed instances with a soak, a stack's from its
head, the bound as a count) and the verdict of a soak (a round over the bound, no token, no round, cut short)."""

from __future__ import annotations

from ansible_collections.specdec.serve.plugins.plugin_utils import _soak as soak

SETTINGS = {'soak_seconds': 0, 'soak_seconds_stack': 1800, 'soak_max_error_rate': 0.25, 'soak_concurrency': 2,
            'soak_request_timeout': 60}
SERVED = [{'name': 'alone', 'port': 8000, 'stack': None},
          {'name': 'stacked', 'port': 8001, 'stack': {'group': 'stack_a', 'role': 'head', 'rank': 0}},
          {'name': 'worker', 'port': 8002, 'stack': {'group': 'stack_b', 'role': 'worker', 'rank': 1}}]


def test_before_the_deploy_only_a_canary_with_a_soaked_change_keeps_its_previous_files():
    assert soak.plan(SETTINGS, True, ['stacked'], stacked=['stacked'])['keep'] is True
    # a single host's soak is 0 by default: nothing kept
    assert soak.plan(SETTINGS, True, ['alone'], stacked=[])['keep'] is False
    assert soak.plan(dict(SETTINGS, soak_seconds=60), True, ['alone'], stacked=[])['keep'] is True
    # not the canary, or nothing changed
    assert soak.plan(SETTINGS, False, ['stacked'], stacked=['stacked']) == {'keep': False, 'targets': []}
    assert soak.plan(SETTINGS, True, [], stacked=['stacked'])['keep'] is False
    assert soak.plan(dict(SETTINGS, soak_seconds_stack=0), True, ['stacked'], stacked=['stacked'])['keep'] is False


def test_after_the_deploy_the_targets_are_the_changed_instances_this_node_gates():
    out = soak.plan(dict(SETTINGS, soak_seconds=30), True, ['alone', 'stacked', 'worker'], SERVED)
    assert out['keep'] is True
    assert out['targets'] == [
        {'name': 'alone', 'url': 'http://127.0.0.1:8000', 'seconds': 30, 'stack': None, 'concurrency': 2,
         'requests': 8, 'max_failed': 2, 'timeout': 60},
        {'name': 'stacked', 'url': 'http://127.0.0.1:8001', 'seconds': 1800, 'stack': 'stack_a', 'concurrency': 2,
         'requests': 8, 'max_failed': 2, 'timeout': 60}]
    # a stack's worker keeps its files (it rolls back with its head) and soaks nothing itself
    worker = soak.plan(SETTINGS, True, ['worker'], SERVED)
    assert worker == {'keep': True, 'targets': []}
    assert soak.plan(dict(SETTINGS, soak_max_error_rate=0.0), True, ['stacked'], SERVED)['targets'][0]['max_failed'] == 0


def round_(requests=8, failed=0, tokens=512, message='timed out'):
    return {'runs': [{'requests': requests, 'failed': failed, 'output_tokens': tokens,
                      'errors': {'count': failed, 'samples': [{'message': message}] if failed else []}}]}


TARGET = {'name': 'stacked', 'seconds': 20, 'max_failed': 2}


def test_a_soak_that_ran_its_seconds_within_the_bound_passes():
    v = soak.verdict(TARGET, round_(failed=2), 7, 21.3)
    assert v['passed'] and (v['rounds'], v['requests'], v['failed'], v['output_tokens']) == (7, 8, 2, 512)
    assert v['reason'] == ('soak of stacked (21.3 s under load, round 7) passed: the last round 2 of 8 requests '
                           'failed, 512 tokens')


def test_a_round_over_the_bound_or_without_a_token_fails_the_soak():
    v = soak.verdict(TARGET, round_(failed=8, tokens=0), 3, 9.0)
    assert not v['passed']
    assert v['reason'] == ('soak of stacked (9.0 s under load, round 3): 8 of 8 requests failed (at most 2 allowed) '
                           'and 0 tokens came out: timed out')
    assert not soak.verdict(TARGET, round_(failed=3), 2, 30)['passed']
    # no error, and no token either (an engine that answers empty): failed
    assert not soak.verdict(TARGET, round_(tokens=0), 2, 30)['passed']


def test_a_round_that_did_not_run_or_a_soak_cut_short_fails():
    v = soak.verdict(TARGET, {'failed': True, 'msg': 'connection refused'}, 1, 0.4)
    assert not v['passed'] and 'the round did not run (connection refused)' in v['reason']
    assert 'did not run (no result)' in soak.verdict(TARGET, None, None, 0)['reason']
    cut = soak.verdict(TARGET, round_(), 4, 12.0)
    assert not cut['passed'] and cut['reason'].endswith('ended before its 20 s')
