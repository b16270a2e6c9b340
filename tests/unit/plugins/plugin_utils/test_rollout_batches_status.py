"""The rollout role's planner, its ``batches`` entry (the order, the batch sizes and the preview, once for the play,
each host's changes and stack read from the inventory) and its ``status`` entry (a host's outcome, with the gateways'
record of its restart)."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import rollout

SETTINGS = {'canary': 1, 'batch': '25%', 'run_id': 'r7'}
CHANGE = [{'instance': 'gpt-oss-120b', 'reasons': ['engine.env differs']}]


def batches(hostvars, hosts, groups=None, **settings):
    ctx = {'hostvars': hostvars, 'groups': groups or {}, 'reported': {'hosts': hosts}}
    return rollout.PLANNERS['batches'](dict(SETTINGS, **settings), None, ctx)


def test_the_preview_names_the_hosts_to_change_in_order_with_their_reasons():
    hostvars = {'b200-01': {'inference_server_changes': []},
                'b200-02': {'inference_server_changes': [
                    {'instance': 'gpt-oss-120b', 'reasons': ['engine.env differs']},
                    {'instance': 'llama', 'reasons': ['engine.yaml differs', 'unit inactive']}]},
                'b200-03': {'inference_server_changes': [
                    {'instance': 'gpt-oss-120b', 'reasons': ['image nvcr.io/x:1 to load']}]}}
    out = batches(hostvars, ['b200-01', 'b200-02', 'b200-03'])
    assert out['preview'] == [
        'Rollout r7: 2 of 3 host(s) to change (canary 1, then batches of 25% of them); the others have nothing to change.',
        'b200-02: gpt-oss-120b (engine.env differs); llama (engine.yaml differs, unit inactive)',
        'b200-03: gpt-oss-120b (image nvcr.io/x:1 to load)']
    assert out['hosts'] == ['b200-02', 'b200-03'] and out['serial'] == [1, 1]
    nothing = batches({'a': {}, 'b': {'inference_server_changes': []}}, ['a', 'b'], run_id='r8', canary=2, batch='50')
    assert nothing['preview'] == [
        'Rollout r8: 0 of 2 host(s) to change (canary 2, then batches of 50 of them); the others have nothing to change.']
    assert nothing['hosts'] == [] and nothing['serial'] == [1]


def test_a_stack_served_here_is_one_member_of_a_batch_and_a_stack_group_alone_is_not():
    stack = {'stack_link_group': 'pair', 'rollout_instances': [{'name': 'big', 'stack': True}],
             'inference_server_changes': CHANGE}
    hostvars = {'s1': stack, 's2': dict(stack, inference_server_changes=[]),
                # in a stack group, but serving nothing across it: a host of its own
                'x1': {'stack_link_group': 'other', 'rollout_instances': [{'name': 'small'}],
                       'inference_server_changes': CHANGE},
                'x2': {'stack_link_group': 'other', 'rollout_instances': [{'name': 'small'}],
                       'inference_server_changes': CHANGE}}
    groups = {'pair': ['s2', 's1'], 'other': ['x1', 'x2']}
    out = batches(hostvars, ['s1', 's2', 'x1', 'x2'], groups, batch='1')
    assert out['units'] == [['s1', 's2'], ['x1'], ['x2']]
    assert out['hosts'] == ['s1', 's2', 'x1', 'x2'] and out['serial'] == [2, 1, 1]


def test_the_hosts_must_be_given_as_a_list():
    with pytest.raises(PlanRefusal, match='reported.hosts'):
        batches({}, 'b200-01')


def view(**changed):
    instance = dict(name='a', image_id='sha256:1', config_checksum='c1', started_at='t1', health='ready')
    instance.update(changed)
    return {'instances': [instance]}


def status(**reported):
    return rollout.PLANNERS['status'](SETTINGS, None, {'reported': reported})


def test_an_updated_host_keeps_the_gateways_record_and_the_resweep():
    gateway = {'drained_at': 10.0, 'ready_at': 12.5, 'drain_timed_out': [], 'drain_waited_s': 1.5}
    out = status(after=view(started_at='t2'), before=view(), started=5.0, changes=CHANGE, error=None,
                 gateway=gateway, resweep=['a'])
    assert out['status'] == 'updated' and out['serving'] is True and out['started'] == 5.0
    assert out['finished'] >= 5.0 and out['changes'] == CHANGE
    assert out['gateway'] == gateway and out['resweep'] == ['a'] and 'error' not in out


def test_a_host_that_no_gateway_drained_has_no_gateway_record_and_no_resweep_unless_given():
    out = status(after=view(), before=view(), started=1, changes=[], error=None,
                 gateway={'drained_at': None, 'ready_at': None, 'drain_timed_out': [], 'drain_waited_s': 0})
    assert out['status'] == 'unchanged' and 'gateway' not in out and 'resweep' not in out


def test_a_failed_batch_is_rolled_back_with_its_cause_only_when_the_previous_engine_serves_again():
    out = status(after=view(started_at='t3'), before=view(), started=1, changes=CHANGE,
                 error={'failed': True, 'msg': 'crashed'}, gateway={'drained_at': 3})
    assert out['status'] == 'rolled back' and out['error'] == 'crashed'
    assert out['gateway'] == {'drained_at': 3, 'ready_at': None, 'drain_timed_out': [], 'drain_waited_s': 0}
    assert status(after=view(health='down'), before=view(), started=1, changes=[], error='x')['status'] == 'failed'
