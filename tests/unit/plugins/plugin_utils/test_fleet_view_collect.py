"""The fleet_view role's collect step, decided by its planner (plugin_utils/_roles/fleet_view.py): the instances
the host's local facts list, in the order of Jinja's dictsort, and each one's row judged from its health probe
and its last sweep."""

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import fleet_view

LOCAL = {'specdec_serving': {'instances': {'b': {'name': 'b', 'port': 8001}, 'A': {'name': 'A', 'port': 8000}}},
         'specdec_sweep': {'b': {'last_sweep': '2026-12-01T10:00:00Z', 'applied': {'max_draft_len': 3}}}}


def test_the_instances_are_the_local_facts_sorted_as_dictsort_sorts_them():
    listed = fleet_view.PLANNERS['instances']({}, None, {'local_facts': LOCAL})
    assert [i['name'] for i in listed['instances']] == ['A', 'b'] and listed['serving_facts'] is True
    assert fleet_view.PLANNERS['instances']({}, None, {'local_facts': {}}) == {'instances': [], 'serving_facts': False}


def test_each_row_has_its_health_and_last_sweep():
    health = [{'stage': 'ready', 'engine_version': '1.2.0rc6'}, {'stage': 'health', 'failed': True, 'msg': 'refused'}]
    rows = fleet_view.PLANNERS['rows']({}, None, {'local_facts': LOCAL, 'reported': health})
    assert [(r['name'], r['health'], r['health_error']) for r in rows] == [('A', 'ready', None), ('b', 'down', 'refused')]
    assert rows[0]['engine_version_live'] == '1.2.0rc6' and rows[0]['last_sweep'] is None
    assert rows[1]['last_sweep'] == '2026-12-01T10:00:00Z' and rows[1]['sweep_applied'] == {'max_draft_len': 3}


def test_health_results_of_another_shape_are_refused():
    with pytest.raises(PlanRefusal, match='engine_health results'):
        fleet_view.PLANNERS['rows']({}, None, {'local_facts': LOCAL, 'reported': None})
