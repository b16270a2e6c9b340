# -*- coding: utf-8 -*-
"""The retune_guard action and the retune_finished, retune_outcome and retune_state_path filters: the wrappers over
plugin_utils._retune (refusals as AnsibleActionFail / AnsibleFilterError, the controller's clock by default; the
action reads the alert's values from the raw variables, never templated). tests/unit/roles/test_retune_playbook.py
runs them through Ansible, in playbooks/retune.yml."""

from __future__ import annotations

import time

import pytest

from types import SimpleNamespace

from ansible.errors import AnsibleActionFail, AnsibleFilterError
from ansible.template import Templar

from ansible_collections.specdec.serve.plugins.action.retune_guard import ActionModule
from ansible_collections.specdec.serve.plugins.filter.retune import (
    FilterModule, retune_finished, retune_outcome, retune_state_path)

GROUPS = {'all': ['spark-01', 'spark-02'], 'spark-nodes': ['spark-01', 'spark-02']}
ALERT = {'host': 'spark-01', 'engine_instance': 'gpt-oss-120b'}


def test_filters_are_registered():
    assert FilterModule().filters() == {'retune_finished': retune_finished, 'retune_outcome': retune_outcome,
                                        'retune_state_path': retune_state_path}


def retune_guard(alert, groups, state, settings=None, backends=None, drained=None, now=None):
    """The action run as the play runs it: the alert's values as raw variables, the rest as its arguments."""
    task = SimpleNamespace(args={'state': state, 'settings': settings, 'backends': backends, 'drained': drained},
                           async_val=0, check_mode=False, action='specdec.serve.retune_guard', _role=None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir='/nonexistent'))
    action = ActionModule(task, connection, None, None, Templar(loader=None), None)
    task_vars = {'groups': groups, 'retune_host': alert.get('host'), 'retune_instance': alert.get('engine_instance')}
    if now is None:
        return action.run(task_vars=task_vars)['decision']
    import unittest.mock
    with unittest.mock.patch('time.time', return_value=now):
        return action.run(task_vars=task_vars)['decision']


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
    (lambda: retune_finished({}, 'spark-nodes'), "retune_finished: retune class: 'spark-nodes' has no re-tune in progress"),
], ids=['host', 'state', 'floor', 'template', 'no-instance', 'finished'])
def test_bad_input_is_a_named_error(call, says):
    with pytest.raises((AnsibleActionFail, AnsibleFilterError)) as info:
        call()
    assert says in str(info.value)



def test_the_state_path_filter_names_the_variable():
    assert retune_state_path(None) == '/var/lib/specdec/retune/state.json'
    with pytest.raises(AnsibleFilterError, match="retune_state_path: retune_state_file: 'relative.json'"):
        retune_state_path('relative.json')
