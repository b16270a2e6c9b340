# -*- coding: utf-8 -*-
"""plugin_utils._retune: the tune loop's guards (in progress, cool-down, capacity floor, one drained host per
backend), each refusing and letting through, the state it returns, and every bad input refused by name."""

from __future__ import annotations

import json

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as R
from ansible_collections.specdec.serve.plugins.plugin_utils._retune import RetuneError, decide, finished

NOW = 1_800_000_000
GROUPS = {
    'all': ['spark-01', 'spark-02', 'spark-03', 'spark-04', 'b200-01', 'b200-02', 'gw-01'],
    'ungrouped': [],
    'spark-nodes': ['spark-01', 'spark-02', 'spark-03', 'spark-04'],
    'b200-nodes': ['b200-01', 'b200-02'],
    'gateways': ['gw-01'],
}
ALERT = {'host': 'spark-01', 'engine_instance': 'gpt-oss-120b'}
BACKENDS = {'model_gpt-oss-120b': ['spark-01', 'spark-02', 'b200-01'], 'model_llama': ['spark-03', 'spark-04']}


def ask(alert=None, state=None, settings=None, backends=None, drained=None, groups=None, now=NOW):
    return decide(dict(ALERT, **(alert or {})), GROUPS if groups is None else groups, state or {}, settings, backends,
                  drained, now)


# --------------------------------------------------------------------------- acting

def test_all_guards_pass_the_state_records_the_re_tune_in_progress():
    d = ask(backends=BACKENDS, drained={'model_llama': ['spark-03']})
    assert d['act'] is True and d['guard'] is None
    assert (d['host'], d['instance'], d['class']) == ('spark-01', 'gpt-oss-120b', 'spark-nodes')
    assert d['state'] == {'spark-nodes': {'in_progress': {'host': 'spark-01', 'instance': 'gpt-oss-120b', 'since': NOW},
                                          'last_retune': None}}
    assert d['reason'] == ('all guards pass: no re-tune in progress in spark-nodes, never re-tuned (cool-down 3600 s), '
                           '2 of the 4 hosts of spark-nodes keep serving (0.50, floor 0.50), no other host drained in '
                           'backend model_gpt-oss-120b.')


def test_acting_keeps_the_other_classes_and_keys_of_the_state():
    state = {'b200-nodes': {'in_progress': None, 'last_retune': NOW - 10, 'note': 'kept'},
             'spark-nodes': {'in_progress': None, 'last_retune': NOW - 7200, 'runs': 3}}
    d = ask(state=state)
    assert d['act'] is True
    assert d['state']['b200-nodes'] == state['b200-nodes']
    assert d['state']['spark-nodes'] == {'in_progress': {'host': 'spark-01', 'instance': 'gpt-oss-120b', 'since': NOW},
                                         'last_retune': NOW - 7200, 'runs': 3}
    assert 'last re-tuned 7200 s ago (cool-down 3600 s)' in d['reason']
    assert 'spark-01 is in no gateway backend given' in d['reason']
    assert state['spark-nodes']['in_progress'] is None  # the input is not changed


def test_the_state_may_be_the_state_file_text():
    text = json.dumps({'spark-nodes': {'in_progress': None, 'last_retune': NOW - 60}})
    assert ask(state=text)['guard'] == 'cooldown'
    assert ask(state='')['act'] is True
    assert ask(state=b'\n')['act'] is True


# --------------------------------------------------------------------------- 1. in progress

def test_in_progress_refuses_a_second_re_tune_of_the_class():
    state = {'spark-nodes': {'in_progress': {'host': 'spark-02', 'instance': 'gpt-oss-120b', 'since': NOW - 300},
                             'last_retune': None}}
    d = ask(state=state)
    assert d['act'] is False and d['guard'] == 'in_progress' and 'state' not in d
    assert d['reason'] == ('in progress: a re-tune of spark-02 (gpt-oss-120b) in class spark-nodes has been running since '
                           '2027-01-15T07:55:00Z (300 s); a class is re-tuned one host at a time.')
    # the same host's repeated alert too
    assert ask(state={'spark-nodes': {'in_progress': {'host': 'spark-01', 'since': NOW}}})['guard'] == 'in_progress'


def test_in_progress_in_another_class_does_not_hold_this_class():
    state = {'b200-nodes': {'in_progress': {'host': 'b200-02', 'since': NOW - 300}, 'last_retune': None}}
    assert ask(state=state)['act'] is True


# --------------------------------------------------------------------------- 2. cool-down

@pytest.mark.parametrize('cooldown', [3600, '1h', '60m', 3600.0])
def test_cooldown_refuses_within_and_lets_through_after(cooldown):
    within = ask(state={'spark-nodes': {'last_retune': NOW - 3599}}, settings={'cooldown': cooldown})
    assert within['act'] is False and within['guard'] == 'cooldown'
    assert within['reason'] == ('cool-down: class spark-nodes was last re-tuned 3599 s ago (at 2027-01-15T07:00:01Z), '
                                'within its cool-down of 3600 s (1 s left).')
    after = ask(state={'spark-nodes': {'last_retune': NOW - 3600}}, settings={'cooldown': cooldown})
    assert after['act'] is True


def test_a_cooldown_of_zero_never_refuses_and_another_class_does_not_count():
    assert ask(state={'spark-nodes': {'last_retune': NOW}}, settings={'cooldown': 0})['act'] is True
    assert ask(state={'b200-nodes': {'last_retune': NOW}})['act'] is True


def test_a_last_retune_in_the_future_counts_as_now():
    d = ask(state={'spark-nodes': {'last_retune': NOW + 50}})
    assert d['guard'] == 'cooldown' and 'last re-tuned 0 s ago' in d['reason']


# --------------------------------------------------------------------------- 3. capacity floor

def test_capacity_floor_refuses_when_too_few_hosts_would_keep_serving():
    d = ask(drained={'model_llama': ['spark-03', 'spark-04']}, settings={'capacity_floor': 0.5})
    assert d['act'] is False and d['guard'] == 'capacity_floor'
    assert d['reason'] == ('capacity floor: re-tuning spark-01 would leave 1 of the 4 hosts of spark-nodes serving (0.25), '
                           'below the floor of 0.50 (not serving now: spark-03, spark-04).')


def test_capacity_floor_lets_through_at_the_floor_exactly():
    # 3 of 4 keep serving at a floor of 0.75; the other class's drained hosts do not count
    d = ask(settings={'capacity_floor': 0.75}, drained={'model_gpt-oss-120b': ['b200-01']},
            backends={'model_llama': ['spark-01', 'spark-03']})
    assert d['act'] is True and '3 of the 4 hosts of spark-nodes keep serving (0.75, floor 0.75)' in d['reason']
    assert ask(settings={'capacity_floor': 0.76})['guard'] == 'capacity_floor'


def test_capacity_floor_counts_a_floor_that_is_not_exact_in_binary():
    groups = dict(GROUPS, **{'spark-nodes': ['spark-01', 'spark-02', 'spark-03']})
    assert ask(groups=groups, settings={'capacity_floor': 2 / 3})['act'] is True
    assert ask(groups=groups, settings={'capacity_floor': 0.67})['guard'] == 'capacity_floor'


def test_a_class_of_one_host_is_re_tuned_only_with_a_floor_of_zero():
    groups = dict(GROUPS, **{'spark-nodes': ['spark-01']})
    d = ask(groups=groups)
    assert d['guard'] == 'capacity_floor' and 'leave 0 of the 1 hosts' in d['reason']
    assert ask(groups=groups, settings={'capacity_floor': 0})['act'] is True


def test_the_host_itself_already_drained_counts_once():
    # spark-01 drained (for a reason of its own) and re-tuned: 3 of 4 serve, not 2
    d = ask(settings={'capacity_floor': 0.75}, drained={'model_other': ['spark-01']})
    assert d['guard'] == 'backend'  # ... and the backend guard refuses to drain it twice
    assert 'backend model_other already has spark-01 drained; re-tuning spark-01 would drain it again there' in d['reason']


# --------------------------------------------------------------------------- 4. one drained host per backend

def test_backend_refuses_a_second_drained_host_in_a_backend():
    d = ask(backends=BACKENDS, drained={'model_gpt-oss-120b': ['spark-02']})
    assert d['act'] is False and d['guard'] == 'backend'
    assert d['reason'] == ('one drained host per backend: backend model_gpt-oss-120b already has spark-02 drained; '
                           're-tuning spark-01 would drain a second host there.')


def test_backend_counts_a_host_being_re_tuned_in_another_class():
    state = {'b200-nodes': {'in_progress': {'host': 'b200-01', 'since': NOW - 10}}}
    d = ask(state=state, backends=BACKENDS)
    assert d['guard'] == 'backend'
    assert 'backend model_gpt-oss-120b already has b200-01 (being re-tuned) drained' in d['reason']
    # not in a backend of spark-01's: through
    assert ask(state=state, backends={'model_llama': ['spark-01', 'spark-03'], 'model_gpt-oss-120b': ['b200-01']})['act']


def test_backend_lets_through_when_the_drained_host_is_in_another_backend():
    d = ask(backends=BACKENDS, drained={'model_llama': ['spark-04'], 'model_gpt-oss-120b': []})
    assert d['act'] is True and 'no other host drained in backend model_gpt-oss-120b.' in d['reason']


def test_backends_as_the_gateway_plan_gives_them():
    plan = [{'name': 'model_gpt-oss-120b', 'model': 'openai/gpt-oss-120b',
             'servers': [{'name': 'spark-01:gpt-oss-120b', 'host': 'spark-01', 'instance': 'gpt-oss-120b'},
                         {'name': 'spark-02:gpt-oss-120b', 'host': 'spark-02', 'instance': 'gpt-oss-120b'}]},
            {'name': 'model_llama', 'model': 'meta/llama', 'servers': [{'host': 'spark-01'}, {'host': 'spark-03'}]}]
    assert retune.backends(plan) == {'model_gpt-oss-120b': ['spark-01', 'spark-02'], 'model_llama': ['spark-01', 'spark-03']}
    d = ask(backends=plan, drained={'model_llama': ['spark-03']})
    assert d['guard'] == 'backend' and 'backend model_llama already has spark-03 drained' in d['reason']
    ok = ask(backends=plan)
    assert ok['act'] and 'no other host drained in backends model_gpt-oss-120b, model_llama.' in ok['reason']


def test_the_guards_are_asked_in_order():
    # every guard would refuse: the first one named is the one reported
    state = {'spark-nodes': {'in_progress': {'host': 'spark-02', 'since': NOW}, 'last_retune': NOW}}
    worst = dict(state=state, backends=BACKENDS, drained={'model_gpt-oss-120b': ['spark-02', 'spark-03', 'spark-04']})
    assert ask(**worst)['guard'] == 'in_progress'
    worst['state'] = {'spark-nodes': {'last_retune': NOW}}
    assert ask(**worst)['guard'] == 'cooldown'
    worst['state'] = {}
    assert ask(**worst)['guard'] == 'capacity_floor'
    worst['drained'] = {'model_gpt-oss-120b': ['spark-02']}
    assert ask(**worst)['guard'] == 'backend'
    assert retune.GUARDS == ('in_progress', 'cooldown', 'capacity_floor', 'backend')


# --------------------------------------------------------------------------- finished

def test_finished_clears_the_class_and_starts_its_cool_down():
    started = ask()['state']
    done = finished(started, 'spark-nodes', NOW + 900, host='spark-01')
    assert done == {'spark-nodes': {'in_progress': None, 'last_retune': NOW + 900}}
    assert started['spark-nodes']['in_progress']  # the input is not changed
    assert ask(state=done, now=NOW + 1000)['guard'] == 'cooldown'
    assert ask(state=done, now=NOW + 900 + 3600)['act'] is True


@pytest.mark.parametrize('state, cls, host, says', [
    ({}, 'spark-nodes', None, "retune class: 'spark-nodes' has no re-tune in progress in the state (none is in progress)"),
    ({'b200-nodes': {'in_progress': {'host': 'b200-01', 'since': 1}}}, 'spark-nodes', None, '(b200-nodes)'),
    ({'spark-nodes': {'in_progress': {'host': 'spark-02', 'since': 1}}}, 'spark-nodes', 'spark-01',
     "retune_host: 'spark-01' is not the host being re-tuned in class spark-nodes (spark-02 is)"),
], ids=['nothing', 'other-class', 'other-host'])
def test_finished_refuses_what_is_not_in_progress(state, cls, host, says):
    with pytest.raises(RetuneError) as info:
        finished(state, cls, NOW, host)
    assert says in str(info.value)


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize('kwargs, says', [
    ({'alert': {'host': None}}, "retune_host: None must be the host the alert names"),
    ({'alert': {'host': 'nowhere'}}, "retune_host: 'nowhere' is not a host of the inventory"),
    ({'alert': {'host': 'gw-01'}}, "retune_host: 'gw-01' is in none of the host classes of retune_classes "
                                   "(spark-nodes, b200-nodes)"),
    ({'alert': {'engine_instance': 'a b'}}, "retune_instance: 'a b' must be the engine instance the alert names"),
    ({'alert': {'engine_instance': None}}, "retune_instance: None must be"),
    ({'groups': dict(GROUPS, **{'b200-nodes': ['spark-01']})},
     "retune_host: 'spark-01' is in more than one host class of retune_classes (spark-nodes, b200-nodes)"),
    ({'groups': ['spark-01']}, "groups: ['spark-01'] must be the inventory's groups"),
    ({'settings': {'cooldown': -1}}, "retune_cooldown: -1 must be seconds (0 or more) or a Prometheus duration"),
    ({'settings': {'cooldown': '1 hour'}}, "retune_cooldown: '1 hour' must be seconds"),
    ({'settings': {'cooldown': True}}, "retune_cooldown: True must be seconds"),
    ({'settings': {'capacity_floor': 1.5}}, "retune_capacity_floor: 1.5 must be a fraction from 0 to 1"),
    ({'settings': {'capacity_floor': '1.5'}}, "retune_capacity_floor: '1.5' must be a fraction"),
    ({'settings': {'classes': []}}, "retune_classes: [] must be a non-empty list of distinct inventory group names"),
    ({'settings': {'classes': 'spark-nodes'}}, "retune_classes: 'spark-nodes' must be a non-empty list"),
    ({'settings': {'classes': ['a', 'a']}}, "retune_classes: ['a', 'a'] must be a non-empty list of distinct"),
    ({'settings': {'floor': 0.5}}, "retune settings: unknown floor (known: capacity_floor, classes, cooldown)"),
    ({'settings': ['x']}, "retune settings: ['x'] must be a mapping"),
    ({'state': '{"spark-nodes": '}, "retune_state_file: its content is not JSON"),
    ({'state': [1]}, "retune state: [1] must be a mapping of host class to {in_progress, last_retune}"),
    ({'state': {'spark-nodes': 5}}, "retune state['spark-nodes']: 5 must be a mapping"),
    ({'state': {'spark-nodes': {'last_retune': 'yesterday'}}},
     "retune state['spark-nodes'].last_retune: 'yesterday' must be null or epoch seconds"),
    ({'state': {'spark-nodes': {'in_progress': {'host': 'spark-02'}}}},
     "retune state['spark-nodes'].in_progress: {'host': 'spark-02'} must be null or {host, since}"),
    ({'backends': {'b': 'spark-01'}}, "retune_backends['b']: 'spark-01' must be a list of host names"),
    ({'backends': [{'servers': []}]}, "retune_backends[0]: {'servers': []} must be a backend of the gateway plan"),
    ({'backends': 'x'}, "retune_backends: 'x' must be a mapping of backend to its hosts"),
    ({'drained': ['spark-02']}, "retune_drained: ['spark-02'] must be a mapping of backend to the hosts drained"),
    ({'drained': {'b': [None]}}, "retune_drained['b']: [None] must be a list of host names"),
    ({'now': 'now'}, "now: 'now' must be epoch seconds"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_input_is_refused_naming_the_variable_and_value(kwargs, says):
    with pytest.raises(RetuneError) as info:
        ask(**kwargs)
    assert says in str(info.value)


def test_the_alert_must_be_a_mapping():
    with pytest.raises(RetuneError) as info:
        decide('spark-01', GROUPS, {}, now=NOW)
    assert "retune alert: 'spark-01' must be the alert's labels" in str(info.value)


def test_a_setting_given_as_null_takes_its_default():
    s = retune.settings({'classes': None, 'cooldown': None, 'capacity_floor': None})
    assert s == {'classes': ['spark-nodes', 'b200-nodes'], 'cooldown_s': 3600.0, 'capacity_floor': 0.5}
    assert retune.settings({'classes': ['a100-nodes'], 'cooldown': '2h', 'capacity_floor': 1})['cooldown_s'] == 7200.0


def entry(run, spec):
    return {"last_sweep": {"run_id": run}, "applied": {"run_id": run, "speculative": spec}}


def test_the_outcome_of_a_re_tune():
    two = {"method": "eagle3", "draft_model": "d", "max_draft_len": 2}
    four = dict(two, max_draft_len=4)
    same = R.outcome(entry("r0", two), entry("r1", dict(two)))
    assert same["changed"] is False and same["outcome"] == "re-verified"
    assert same["reason"] == "sweep r1 chose what was served (draft length 2): re-verified"
    moved = R.outcome(entry("r0", two), entry("r1", four))
    assert moved["changed"] is True and moved["outcome"] == "changed"
    assert moved["reason"] == "sweep r1 chose draft length 4 where draft length 2 was served"
    sched = R.outcome(entry("r0", four), entry("r1", dict(four, draft_len_schedule={1: 4, 8: 1})))
    assert sched["changed"] is True and 'schedule {"1": 4, "8": 1}' in sched["reason"]
    off = R.outcome({}, entry("r1", {"method": "none"}))
    assert off["changed"] is True and "chose no speculation where nothing recorded was served" in off["reason"]
    # the sweep did not apply (a failed apply restored the instance): nothing for the class to take
    kept = R.outcome(entry("r0", two), {"last_sweep": {"run_id": "r1"}})
    assert kept["changed"] is False and kept["outcome"] == "not applied"
    with pytest.raises(R.RetuneError, match="must be the entry the sweep recorded"):
        R.outcome(entry("r0", two), {})


def test_numbers_given_as_text_are_numbers():
    """-e retune_capacity_floor=0.25 and -e retune_cooldown=600 reach the raw settings as text."""
    s = retune.settings({'capacity_floor': '0.25', 'cooldown': '600'})
    assert (s['capacity_floor'], s['cooldown_s']) == (0.25, 600.0)
    with pytest.raises(RetuneError, match="retune_capacity_floor: 'most' must be a fraction"):
        retune.settings({'capacity_floor': 'most'})
