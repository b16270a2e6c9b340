# -*- coding: utf-8 -*-
"""retune_guard and retune_finished filters: the wrappers over plugin_utils.retune (refusals as
AnsibleFilterError, the controller's clock by default). tests/unit/roles/test_retune_playbook.py runs them
through Ansible, in playbooks/retune.yml."""

from __future__ import annotations

import time

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.retune_guard import (
    FilterModule, retune_finished, retune_guard, retune_outcome, retune_state_path)

GROUPS = {'all': ['spark-01', 'spark-02'], 'spark-nodes': ['spark-01', 'spark-02']}
ALERT = {'host': 'spark-01', 'engine_instance': 'gpt-oss-120b'}


def test_filters_are_registered():
    assert FilterModule().filters() == {'retune_guard': retune_guard, 'retune_finished': retune_finished,
                                        'retune_outcome': retune_outcome, 'retune_state_path': retune_state_path}


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
    (lambda: retune_finished({}, 'spark-nodes'), "retune_finished: retune class: 'spark-nodes' has no re-tune in progress"),
], ids=['host', 'state', 'floor', 'finished'])
def test_bad_input_is_an_ansible_filter_error(call, says):
    with pytest.raises(AnsibleFilterError) as info:
        call()
    assert says in str(info.value)



def test_the_state_path_filter_names_the_variable():
    assert retune_state_path(None) == '/var/lib/specdec/retune/state.json'
    with pytest.raises(AnsibleFilterError, match="retune_state_path: retune_state_file: 'relative.json'"):
        retune_state_path('relative.json')
