# -*- coding: utf-8 -*-
"""The retune_guard action, each of its steps (decide, outcome, finish) a wrapper over plugin_utils._retune (refusals
as AnsibleActionFail, the controller's clock by default; the decision reads the alert's values from the raw
variables, never templated, and the state file on the controller). tests/unit/roles/test_retune_playbook.py runs them
through Ansible, in playbooks/retune.yml."""

from __future__ import annotations

import time

import pytest

from types import SimpleNamespace

from ansible.errors import AnsibleActionFail
from ansible.template import Templar

from ansible_collections.specdec.serve.plugins.action.retune_guard import ActionModule

GROUPS = {'all': ['spark-01', 'spark-02'], 'spark-nodes': ['spark-01', 'spark-02']}
ALERT = {'host': 'spark-01', 'engine_instance': 'gpt-oss-120b'}


def step(args, task_vars=None):
    """The action's result for `args`, as the play runs it."""
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action='specdec.serve.retune_guard', _role=None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir='/nonexistent'))
    return ActionModule(task, connection, None, None, Templar(loader=None), None).run(task_vars=task_vars or {})


def retune_guard(alert, groups, state, settings=None, backends=None, drained=None, now=None, state_file=None):
    """The decision as the play asks for it: the alert's values as raw variables, the rest as its arguments."""
    args = {'state': state, 'settings': settings, 'backends': backends, 'drained': drained, 'state_file': state_file}
    task_vars = {'groups': groups, 'retune_host': alert.get('host'), 'retune_instance': alert.get('engine_instance')}
    if now is None:
        return step(args, task_vars)['decision']
    import unittest.mock
    with unittest.mock.patch('time.time', return_value=now):
        return step(args, task_vars)['decision']


def retune_finished(state, cls, host=None):
    return step({'step': 'finish', 'state': state, 'class': cls, 'host': host})['state']


def test_the_guard_acts_and_refuses():
    allowed = retune_guard(ALERT, GROUPS, '', now=1000)
    assert allowed['act'] is True and allowed['state']['spark-nodes']['in_progress']['since'] == 1000
    refused = retune_guard(ALERT, GROUPS, {'spark-nodes': {'last_retune': 900}}, {'cooldown': 200}, now=1000)
    assert refused['act'] is False and refused['guard'] == 'cooldown' and '(100 s left)' in refused['reason']


def test_now_is_the_controllers_clock_by_default():
    before = int(time.time())
    decision = retune_guard(ALERT, GROUPS, {})
    assert before <= decision['state']['spark-nodes']['in_progress']['since'] <= time.time()
    done = retune_finished(decision['state'], 'spark-nodes')
    assert before <= done['spark-nodes']['last_retune'] <= time.time()


@pytest.mark.parametrize('call, says', [
    (lambda: retune_guard(dict(ALERT, host='spark-09'), GROUPS, {}), "retune_guard: retune_host: 'spark-09' is not a host"),
    (lambda: retune_guard(ALERT, GROUPS, '{', {}), 'retune_guard: retune_state_file: its content is not JSON'),
    (lambda: retune_guard(ALERT, GROUPS, {}, {'capacity_floor': 2}), 'retune_guard: retune_capacity_floor: 2 must be'),
    (lambda: retune_guard(dict(ALERT, host='{{ 7 * 6 }}'), GROUPS, {}),
     "retune_guard: retune_host: '\\x7b\\x7b 7 * 6 \\x7d\\x7d' must be a name"),
    (lambda: retune_guard(dict(ALERT, engine_instance=None), GROUPS, {}), "retune_guard: retune_instance: None must be a name"),
    (lambda: retune_finished({}, 'spark-nodes'), "retune_guard: retune class: 'spark-nodes' has no re-tune in progress"),
    (lambda: retune_guard(ALERT, GROUPS, None, state_file='relative.json'),
     "retune_guard: retune_state_file: 'relative.json' must be an absolute path"),
    (lambda: step({'step': 'outcome', 'before': {}, 'after': {}}), 'retune_guard: the sweep after the re-tune: {} must be'),
    (lambda: step({'step': '{{ 1 }}'}), "retune_guard: step: '\\x7b\\x7b 1 \\x7d\\x7d' must be one of decide, outcome, finish"),
], ids=['host', 'state', 'floor', 'template', 'no-instance', 'finished', 'state-file', 'outcome', 'step'])
def test_bad_input_is_a_named_error(call, says):
    with pytest.raises(AnsibleActionFail) as info:
        call()
    assert says in str(info.value)


def test_the_decision_reads_the_state_file_on_the_controller_and_names_it(tmp_path):
    path = tmp_path / 'state.json'
    out = step({'state_file': str(path)}, {'groups': GROUPS, 'retune_host': 'spark-01', 'retune_instance': 'x'})
    assert out['state_path'] == str(path) and out['decision']['act'] is True  # no file yet: no state
    path.write_text('{"spark-nodes": {"in_progress": {"host": "spark-02", "instance": "x", "since": 1}}}')
    busy = step({'state_file': str(path)}, {'groups': GROUPS, 'retune_host': 'spark-01', 'retune_instance': 'x'})
    assert busy['decision']['act'] is False and busy['decision']['guard'] == 'in_progress'
    default = step({}, {'groups': GROUPS, 'retune_host': 'spark-01', 'retune_instance': 'x'})
    assert default['state_path'] == '/var/lib/specdec/retune/state.json'


def test_the_outcome_says_whether_the_sweep_changed_what_is_served():
    spec = {'method': 'eagle3', 'max_draft_len': 3}
    before = {'applied': {'speculative': spec}}
    same = step({'step': 'outcome', 'before': before, 'after': dict(before, last_sweep={'run_id': 'r1'})})['outcome']
    assert same['changed'] is False and same['outcome'] == 're-verified'
    longer = {'applied': {'speculative': dict(spec, max_draft_len=5)}, 'last_sweep': {'run_id': 'r2'}}
    new = step({'step': 'outcome', 'before': before, 'after': longer})['outcome']
    assert new['changed'] is True and new['reason'] == 'sweep r2 chose draft length 5 where draft length 3 was served'
