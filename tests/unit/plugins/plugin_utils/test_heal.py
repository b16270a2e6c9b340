# -*- coding: utf-8 -*-
"""plugin_utils._heal: the heal's guards (one heal per class, the restart limit per engine per window, the capacity
floor), each refusing and letting through; a stack healed as one (every member, workers first, its head last); the
state once over and what the hosts show; every bad input refused by name."""

from __future__ import annotations

import json

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _heal as heal
from ansible_collections.specdec.serve.plugins.plugin_utils._heal import HealError, decide, engine, finished, record

NOW = 1_800_000_000
HOUR = 3600
GROUPS = {
    'all': ['spark-01', 'spark-02', 'spark-03', 'spark-04', 'b200-01', 'b200-02', 'gw-01'],
    'ungrouped': [],
    'spark-nodes': ['spark-01', 'spark-02', 'spark-03', 'spark-04'],
    'b200-nodes': ['b200-01', 'b200-02'],
    'stack_a': ['spark-02', 'spark-01'],
    'gateways': ['gw-01'],
}
SINGLE = [{'name': 'gpt-oss-120b'}, {'name': 'llama'}]
STACKED = [{'name': 'gpt-oss-120b', 'stack': 'stack_a'}]


def ask(host='spark-03', instance='gpt-oss-120b', instances=SINGLE, state=None, settings=None, now=NOW, by_hand=False,
        head=None):
    eng = engine(host, instance, instances, GROUPS, head)
    return decide({'host': host, 'engine_instance': instance}, GROUPS, eng, state or {}, settings, now, by_hand)


def healed(decision, outcome='restarted', now=NOW, settings=None):
    return finished(decision['state'], decision, outcome, now, settings)


# --------------------------------------------------------------------------- the engine

def test_an_instance_served_alone_is_its_host():
    assert engine('spark-03', 'llama', SINGLE, GROUPS) == {
        'key': 'spark-03/llama', 'instance': 'llama', 'stack': None, 'head': 'spark-03', 'hosts': ['spark-03']}


def test_a_stack_is_every_member_its_workers_first_and_its_head_last():
    # the alert names the head (its metrics), or any member: the same engine either way
    for host in ('spark-01', 'spark-02'):
        assert engine(host, 'gpt-oss-120b', STACKED, GROUPS) == {
            'key': 'spark-01/gpt-oss-120b', 'instance': 'gpt-oss-120b', 'stack': 'stack_a', 'head': 'spark-01',
            'hosts': ['spark-02', 'spark-01']}
    # stack_link_head names another head
    assert engine('spark-01', 'gpt-oss-120b', STACKED, GROUPS, head='spark-02')['hosts'] == ['spark-01', 'spark-02']


def test_an_engine_the_inventory_does_not_have_is_refused_by_name():
    with pytest.raises(HealError, match=r"heal_instance: 'mistral' is not an instance of spark-03 \(its instances: "
                                        r"gpt-oss-120b, llama\)"):
        engine('spark-03', 'mistral', SINGLE, GROUPS)
    with pytest.raises(HealError, match=r"stack of gpt-oss-120b on spark-03: 'stack_a' must be an inventory group"):
        engine('spark-03', 'gpt-oss-120b', STACKED, GROUPS)
    with pytest.raises(HealError, match=r"stack_link_head of stack stack_a: 'spark-09' must be one of its members"):
        engine('spark-01', 'gpt-oss-120b', STACKED, GROUPS, head='spark-09')
    with pytest.raises(HealError, match=r"heal_host: 'spark-09' is not a host of the inventory"):
        decide({'host': 'spark-09', 'engine_instance': 'x'}, GROUPS, engine('spark-09', 'x', [{'name': 'x'}], GROUPS),
               {}, None, NOW)
    with pytest.raises(HealError, match=r"heal_host: 'gw-01' is in none of the host classes"):
        decide({'host': 'gw-01', 'engine_instance': 'x'}, GROUPS, engine('gw-01', 'x', [{'name': 'x'}], GROUPS),
               {}, None, NOW)


# --------------------------------------------------------------------------- acting

def test_all_guards_pass_the_state_records_the_heal_in_progress():
    d = ask()
    assert (d['act'], d['drain'], d['guard']) == (True, False, None)
    assert (d['engine'], d['hosts'], d['class'], d['restarts']) == ('spark-03/gpt-oss-120b', ['spark-03'],
                                                                     'spark-nodes', 0)
    assert d['state'] == {'classes': {'spark-nodes': {'in_progress': {'engine': 'spark-03/gpt-oss-120b',
                                                                       'hosts': ['spark-03'], 'since': NOW}}},
                          'engines': {}}
    assert d['reason'] == ('all guards pass: no heal in progress in spark-nodes; spark-03 restarted 0 times within '
                           '3600 s (limit 2); 3 of the 4 hosts of spark-nodes keep serving (0.75, floor 0.50).')


def test_a_stack_is_healed_as_one_engine_and_counts_every_member_against_the_floor():
    d = ask('spark-01', instances=STACKED)
    assert d['act'] and d['hosts'] == ['spark-02', 'spark-01'] and d['stack'] == 'stack_a'
    assert '2 of the 4 hosts of spark-nodes keep serving (0.50, floor 0.50)' in d['reason']
    assert d['state']['classes']['spark-nodes']['in_progress']['hosts'] == ['spark-02', 'spark-01']
    # one heal: the alert repeated for the worker is the same engine, refused while it runs
    again = ask('spark-02', instances=STACKED, state=d['state'], now=NOW + 5)
    assert again['guard'] == 'in_progress' and not again['drain']
    assert again['reason'].startswith('in progress: a heal of spark-01/gpt-oss-120b in class spark-nodes')


# --------------------------------------------------------------------------- one heal per class

def test_one_heal_per_class_at_a_time_another_class_goes_on():
    d = ask()
    other = ask('spark-04', state=d['state'], now=NOW + 30)
    assert (other['act'], other['drain'], other['guard']) == (False, False, 'in_progress')
    assert other['reason'] == ('in progress: a heal of spark-03/gpt-oss-120b in class spark-nodes has been running '
                               'since 2027-01-15T08:00:00Z (30 s); a class is healed one engine at a time.')
    assert 'state' not in other
    b200 = ask('b200-01', state=d['state'], now=NOW + 30)
    assert b200['act'] and set(b200['state']['classes']) == {'spark-nodes', 'b200-nodes'}


# --------------------------------------------------------------------------- the restart limit in its window

def test_the_third_wedge_within_the_window_is_not_restarted_and_stays_drained():
    first = ask()
    state = healed(first, now=NOW + 60)
    second = ask(state=state, now=NOW + 600)
    assert second['act'] and second['restarts'] == 1
    state = healed(second, now=NOW + 660)
    third = ask(state=state, now=NOW + 1200)
    assert (third['act'], third['drain'], third['guard'], third['restarts']) == (False, True, 'restart_limit', 2)
    assert third['reason'] == ('restart limit: spark-03 was restarted 2 times within 3600 s (at 2027-01-15T08:01:00Z, '
                               '2027-01-15T08:11:00Z), the limit is 2: not restarted again; drained at the gateways, it '
                               'stays drained and its alert firing for a person.')
    assert third['state']['engines']['spark-03/gpt-oss-120b']['drained'] is True
    # the drained engine counts as not serving for the rest of its class
    fourth = ask('spark-04', state=healed(third, 'left drained', now=NOW + 1210), now=NOW + 1300)
    assert fourth['act'] and '2 of the 4 hosts of spark-nodes keep serving' in fourth['reason']


def test_restarts_older_than_the_window_do_not_count():
    state = healed(ask(), now=NOW)
    state = healed(ask(state=state, now=NOW + 10), now=NOW + 10)
    assert ask(state=state, now=NOW + 100)['guard'] == 'restart_limit'
    later = ask(state=state, now=NOW + HOUR + 5)
    assert later['act'] and later['restarts'] == 1
    assert ask(state=state, now=NOW + HOUR + 11)['restarts'] == 0
    # a shorter window, a higher limit
    assert ask(state=state, now=NOW + 100, settings={'window': '1m'})['act']
    assert ask(state=state, now=NOW + 100, settings={'restart_limit': 3})['act']


def test_a_drained_engine_stays_drained_until_a_person_heals_it_by_hand():
    state = healed(ask(), now=NOW)
    state = healed(ask(state=state, now=NOW + 10), now=NOW + 10)
    drained = ask(state=state, now=NOW + 20)
    state = healed(drained, 'left drained', now=NOW + 25)
    # past the window its restarts no longer count, yet it stays drained for a person
    later = ask(state=state, now=NOW + 2 * HOUR)
    assert later['guard'] == 'restart_limit' and later['drain']
    assert 'was left drained by an earlier heal and stays drained until a person heals it by hand' in later['reason']
    person = ask(state=state, now=NOW + 2 * HOUR, by_hand=True)
    assert person['act'] and 'by hand' in person['reason']
    back = healed(person, now=NOW + 2 * HOUR + 60)
    assert back['engines']['spark-03/gpt-oss-120b']['drained'] is False
    assert back['engines']['spark-03/gpt-oss-120b']['last_heal']['outcome'] == 'restarted'


def test_a_restart_that_failed_counts_and_leaves_the_engine_drained():
    state = healed(ask(), 'failed', now=NOW + 60)
    entry = state['engines']['spark-03/gpt-oss-120b']
    assert entry['restarts'] == [NOW + 60] and entry['drained'] is True
    assert state['classes']['spark-nodes']['in_progress'] is None


# --------------------------------------------------------------------------- the capacity floor

def test_the_capacity_floor_counts_drained_engines_and_heals_in_progress():
    state = {'classes': {'b200-nodes': {'in_progress': None}},
             'engines': {'spark-01/llama': {'restarts': [], 'drained': True, 'hosts': ['spark-01']}}}
    d = ask('spark-03', state=state, settings={'capacity_floor': 0.6})
    assert (d['act'], d['drain'], d['guard']) == (False, False, 'capacity_floor')
    assert d['reason'] == ('capacity floor: restarting spark-03 would leave 2 of the 4 hosts of spark-nodes serving '
                           '(0.50), below the floor of 0.60 (not serving now: spark-01).')
    assert ask('spark-03', state=state, settings={'capacity_floor': 0.5})['act']
    # a stack's every member leaves the class at once
    assert ask('spark-01', instances=STACKED, settings={'capacity_floor': 0.75})['guard'] == 'capacity_floor'
    assert ask('b200-01', settings={'capacity_floor': 0.5})['act']
    assert ask('b200-01', settings={'capacity_floor': 0.51})['guard'] == 'capacity_floor'
    assert ask('b200-01', settings={'capacity_floor': 0})['act']


# --------------------------------------------------------------------------- what the hosts show

def test_the_record_the_hosts_show():
    state = healed(ask(), now=NOW + 60)
    d = ask(state=state, now=NOW + 600)
    rec = record(healed(d, now=NOW + 660), d, now=NOW + 700)
    assert rec == {'restarts': 2, 'restarted_at': ['2027-01-15T08:01:00Z', '2027-01-15T08:11:00Z'], 'drained': False,
                   'last_heal': {'at': '2027-01-15T08:11:00Z', 'outcome': 'restarted', 'reason': d['reason']},
                   'window_s': 3600.0, 'engine': 'spark-03/gpt-oss-120b'}
    assert record(state, d, now=NOW + 60 + HOUR)['restarts'] == 0


def test_the_state_round_trips_through_its_file_text():
    state = healed(ask(), now=NOW + 60)
    assert heal.state(json.dumps(state)) == state
    assert heal.state('') == {'classes': {}, 'engines': {}}


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize('settings, message', [
    ({'restart_limit': '2'}, "heal_restart_limit: '2' must be a whole number of restarts"),
    ({'restart_limit': True}, "heal_restart_limit: True must be a whole number"),
    ({'window': '1 hour'}, "heal_window: '1 hour' must be seconds"),
    ({'window': 0}, "heal_window: 0 must be seconds"),
    ({'capacity_floor': 1.5}, "heal_capacity_floor: 1.5 must be a fraction from 0 to 1"),
    ({'classes': []}, "heal_classes: \\[\\] must be a non-empty list"),
    ({'classes': ['a b']}, "heal_classes: \\['a b'\\] must be a non-empty list"),
    ({'cooldown': '1h'}, "heal settings: unknown cooldown"),
])
def test_bad_settings_are_refused_by_name(settings, message):
    with pytest.raises(HealError, match=message):
        ask(settings=settings)


@pytest.mark.parametrize('state, message', [
    ('{not json', 'heal_state_file: its content is not JSON'),
    ([1], 'heal state: .* must be a mapping with classes and engines'),
    ({'classes': {'spark-nodes': {'in_progress': {'engine': 'x'}}}}, r"heal state classes\['spark-nodes'\].in_progress"),
    ({'engines': {'x/y': {'restarts': ['yesterday']}}}, r"heal state engines\['x/y'\].restarts: \['yesterday'\]"),
    ({'engines': {'x/y': {'hosts': 'spark-01'}}}, r"heal state engines\['x/y'\].hosts: 'spark-01'"),
])
def test_a_bad_state_is_refused_by_name(state, message):
    with pytest.raises(HealError, match=message):
        ask(state=state)


def test_finish_refuses_what_was_not_in_progress():
    d = ask()
    with pytest.raises(HealError, match="heal outcome: 'fixed' must be one of restarted, failed, left drained"):
        finished(d['state'], d, 'fixed', NOW)
    with pytest.raises(HealError, match="heal class: 'spark-nodes' has no heal of spark-03/gpt-oss-120b in progress"):
        finished({}, d, 'restarted', NOW)
    with pytest.raises(HealError, match='heal decision'):
        finished(d['state'], None, 'restarted', NOW)
    with pytest.raises(HealError, match='heal decision'):
        record(d['state'], {'act': True}, now=NOW)


def test_the_state_file_must_be_an_absolute_path():
    assert heal.state_path(None) == '/var/lib/specdec/retune/heal.json'
    with pytest.raises(HealError, match="heal_state_file: 'heal.json' must be an absolute path"):
        heal.state_path('heal.json')


def test_numbers_given_as_text_are_numbers():
    """-e heal_capacity_floor=0.3 and -e heal_window=600 reach the raw settings as text."""
    d = ask('spark-01', instances=STACKED, settings={'capacity_floor': '0.3', 'window': '600'})
    assert d['act'] and 'floor 0.30' in d['reason'] and 'within 600 s' in d['reason']
    with pytest.raises(HealError, match="heal_capacity_floor: 'half' must be a fraction"):
        ask(settings={'capacity_floor': 'half'})
