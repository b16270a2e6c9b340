"""The draft_sweep role's planner: the sweep decided once on the controller from the checked settings, as the
settings action returns it (``plan``). The instance's engine and port are spec_config's, never a default the role's
tasks spell again: an instance that names only a vLLM profile is swept as the vLLM engine it is."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._roles.draft_sweep import PLANNERS, PlanRefusal, plan
from sweep_decisions import TRT, VLLM_PROFILE_ONLY, settings


def refused(*texts, **values):
    with pytest.raises(PlanRefusal) as err:
        plan(settings(**values))
    for text in texts:
        assert text in str(err.value), str(err.value)


def test_an_instance_that_names_only_a_vllm_profile_is_swept_as_vllm_on_the_default_port():
    out = plan(settings(instance='chat', draft_lens=[2, 4]))
    assert out['engine'] == 'vllm' and out['port'] == 8000
    assert out['exporter_metrics'] is False  # a vLLM engine's metrics are read from the engine, not the exporter
    assert out['speculative']['method'] == 'eagle3' and out['speculative']['draft_model']
    assert out['instance'] == VLLM_PROFILE_ONLY
    assert out['candidates'] == [0, 2, 4] and out['served'] == [0, 2, 4]


def test_a_tensorrt_llm_instance_keeps_its_own_port_and_reads_its_stats_through_the_exporter():
    out = plan(settings(instance='gpt-oss-120b'))
    assert (out['engine'], out['port'], out['exporter_metrics']) == ('trtllm', 8355, True)
    assert out['state_file'] == '/var/lib/specdec/sweep/gpt-oss-120b.json'


def test_without_a_measured_baseline_the_baseline_is_still_served_first_for_the_equivalence_probe():
    out = plan(settings(instance='gpt-oss-120b', baseline=False, draft_lens=[4, 2, 2]))
    assert out['candidates'] == [2, 4] and out['served'] == [0, 2, 4]
    assert plan(settings(instance='gpt-oss-120b', baseline=False, equivalence=False, draft_lens=[3]))['served'] == [3]


def test_the_workloads_are_filled_in_from_the_flat_settings():
    out = plan(settings(instance='gpt-oss-120b', max_tokens=64, temperature=0.0))
    assert [w['name'] for w in out['workloads']] == ['default'] and out['workloads'][0]['max_tokens'] == 64


def test_each_refusal_names_its_setting():
    refused('draft_sweep_instance="nope" must name exactly one of ["chat", "gpt-oss-120b"]', instance='nope')
    refused('draft_sweep_repetitions=2 must be at least draft_sweep_min_runs=3', instance='chat', repetitions=2, min_runs=3)
    refused('instance plain has speculative.method none', instance='plain',
            instances=[dict(TRT, name='plain', speculative={'method': 'none'})])
    refused('draft_sweep_workload_rule', instance='chat', workload_rule='workload:missing')


def test_a_temperature_the_engine_ignores_is_refused_or_with_the_fallback_a_warning():
    # EAGLE-3 on TensorRT-LLM decodes greedily
    refused('draft_sweep_temperature', instance='gpt-oss-120b', temperature=0.8)
    warnings = []
    out = plan(settings(instance='gpt-oss-120b', temperature=0.8, allow_greedy_fallback=True), warnings.append)
    assert out['sampling']['greedy_only'] is True
    assert len(warnings) == 1 and 'gpt-oss-120b' in warnings[0]


def test_only_the_main_entry_point_plans_a_sweep():
    # `adopt` (a rollout's later batches) names no instance to sweep; the other entries read the plan or judge
    # what the host reported
    assert 'adopt' not in PLANNERS and sorted(PLANNERS) == [
        'instance', 'main', 'mode', 'mode_outcome', 'prepare', 'record', 'report', 'select', 'serve', 'serving', 'stack',
        'verdict', 'verify']


def prepared(local=None, datasets=None, **values):
    typed = settings(instance='gpt-oss-120b', **values)
    return PLANNERS['prepare'](typed, None, {'local_facts': local or {},
                                             'reported': {'plan': plan(typed), 'datasets': datasets or {}}})


def test_prepare_spells_out_what_runs_now_and_measures_only_when_an_input_changed():
    first = prepared()
    assert first['declared']['speculative'] == TRT['speculative'] and first['original'] == first['declared']
    assert first['needed'] is True and first['last'] == {} and len(first['inputs']) == 64
    recorded = {'specdec_sweep': {'gpt-oss-120b': {'last_sweep': {'run_id': 'r1', 'inputs_sha256': first['inputs'],
                                                                  'winner': {'draft_len': 4}}}}}
    again = prepared(recorded)
    assert again['inputs'] == first['inputs'] and again['needed'] is False and again['last']['run_id'] == 'r1'
    assert prepared(recorded, force='yes')['needed'] is True
    # another input (the concurrency measured) is another sweep
    other = prepared(recorded, concurrency=[1, 2])
    assert other['inputs'] != first['inputs'] and other['needed'] is True


def test_prepare_keeps_a_winner_the_host_applied_while_the_inventory_names_its_method_and_draft():
    applied = {'specdec_sweep': {'gpt-oss-120b': {'applied': {
        'speculative': dict(TRT['speculative'], max_draft_len=5),
        'swept': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3'}}}}}
    out = prepared(applied)
    assert out['original']['speculative']['max_draft_len'] == 5 and out['declared']['speculative']['max_draft_len'] == 3


def test_prepare_and_stack_refuse_what_they_cannot_read():
    with pytest.raises(PlanRefusal, match="reported.plan must be the sweep's plan"):
        PLANNERS['prepare'](settings(instance='gpt-oss-120b'), None, {'reported': {}})
    with pytest.raises(PlanRefusal, match='draft_sweep stack: instance big is served across stack s1, but h3 is in no stack'):
        PLANNERS['stack']({}, None, {'host': 'h3', 'play_hosts': ['h3'],
                                     'reported': {'instance': {'name': 'big', 'stack': 's1'}, 'layout': None}})
    alone = PLANNERS['stack']({}, None, {'host': 'h3', 'play_hosts': ['h3'],
                                         'reported': {'instance': {'name': 'small'}, 'layout': None}})
    assert alone['role'] is None and alone['head'] == 'h3'
