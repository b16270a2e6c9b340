"""The engines' own adaptive modes as sweep candidates (draft_sweep_engine_modes, plugin_utils/_sweep_modes.py and
the draft_sweep planner's ``mode``, ``mode_outcome`` and ``serve`` entries): offered only where the release's table
has the mode, refused by the engine with its message, gated, and kept only when it wins by a schedule's rule."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_modes as sm
from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as sr
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.draft_sweep import PlanRefusal, plan
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import render
from sweep_decisions import TRT, draft_select, entry, settings

VLLM = {'name': 'tiny', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.32.0', 'model': 'org/tiny', 'port': 8000,
        'speculative': {'method': 'ngram', 'max_draft_len': 2}}
OLD_VLLM = dict(VLLM, name='old', image='vllm/vllm-openai:v0.11.0')
INSTANCES = [VLLM, OLD_VLLM, TRT]
# the lab's vLLM 0.32.0 CPU build, as engine_check fails the loop task it refuses
ENGINE_MESSAGE = ("instance 'tiny': vLLM 0.32.0 in image specdec-lab/vllm-cpu:0.32.0 (sha256:0123) refuses this "
                  "configuration: Model Runner V1 does not support: adaptive draft verification; the running engine "
                  "keeps serving")


def typed(instance='tiny', **values):
    values.setdefault('instances', INSTANCES)
    values.setdefault('engine_modes', ['adaptive_verification'])
    return settings(instance=instance, **values)


def planned(instance='tiny', warnings=None, **values):
    return plan(typed(instance, **values), (warnings if warnings is not None else []).append)


def test_a_release_that_has_adaptive_verification_offers_it_at_the_largest_swept_length():
    (mode,) = planned(draft_lens=[4, 2, 6])['engine_modes']
    assert (mode['mode'], mode['offered'], mode['draft_len']) == ('adaptive_verification', True, 6)
    assert mode['options'] == {'enable_adaptive_verification': True}


def test_a_release_or_an_engine_without_the_mode_is_reported_with_a_warning_and_not_served():
    warnings = []
    (mode,) = planned('old', warnings)['engine_modes']
    assert mode['offered'] is False and mode['draft_len'] is None
    assert mode['reason'] == ('vllm 0.11.0 has no vLLM\'s adaptive verification (its SpeculativeConfig has no '
                              'enable_adaptive_verification or adaptive_verification)')
    assert warnings == ['draft_sweep_engine_modes: adaptive_verification is not measured: ' + mode['reason']]
    (trt,) = planned('gpt-oss-120b', temperature=0.0)['engine_modes']
    assert trt['offered'] is False and 'served by trtllm' in trt['reason'] and 'draft_len_schedule' in trt['reason']
    assert entry('mode', typed(), mode=trt, original=TRT, declared=TRT) == {
        'instance': None, 'outcome': dict(sm.not_offered(trt))}
    assert sm.not_offered(trt)['outcome'] == 'not offered'


def test_no_mode_asked_for_is_no_mode_planned_and_a_bad_name_is_refused_naming_the_setting():
    assert planned(engine_modes=[])['engine_modes'] == []
    with pytest.raises(SettingsError) as err:
        typed(engine_modes=['adaptive'])
    assert 'draft_sweep_engine_modes' in str(err.value) and 'adaptive_verification' in str(err.value)


def test_the_mode_is_served_as_the_candidate_at_its_length_with_its_option_and_the_controller_accepts_it():
    (mode,) = planned(draft_lens=[2, 4])['engine_modes']
    declared = dict(VLLM, speculative=dict(VLLM['speculative'], options={'prompt_lookup_min': 2}))
    got = entry('mode', typed(), mode=mode, original=VLLM, declared=declared)
    assert got['outcome'] is None
    assert got['instance']['speculative'] == {'method': 'ngram', 'max_draft_len': 4, 'options': {
        'prompt_lookup_min': 2, 'enable_adaptive_verification': True}}
    # vLLM 0.32.0's table has the field: the controller passes it, and the engine in its image has the last word
    rendered = render(got['instance'])
    assert '"enable_adaptive_verification": true' in ' '.join(rendered['command'])


def test_the_engines_check_refusing_the_mode_is_refused_by_the_engine_with_its_message():
    (mode,) = planned()['engine_modes']
    failure = {'failed': True, 'msg': 'One or more items failed',
               'results': [{'failed': True, 'msg': ENGINE_MESSAGE}, {'failed': False, 'msg': 'accepted'}]}
    got = entry('mode_outcome', typed(), step='failed', mode=mode, failure=failure,
                action='specdec.serve.engine_check', times={'t0': 0}, outcomes=[], phases=[])
    out = got['outcome']
    assert (out['status'], out['outcome'], out['kept']) == ('refused', 'refused by the engine', False)
    assert out['message'] == ENGINE_MESSAGE and out['reason'] == 'refused by the engine: ' + ENGINE_MESSAGE
    assert got['outcomes'] == [out] and got['phases'][0]['step'] == 'engine_mode' and got['phases'][0]['failed']
    # any other failure (the engine did not answer its health gate) is a failure, not the engine's refusal
    other = sm.failed_outcome(mode, {'failed': True, 'msg': 'health gate: no answer in 600 s'},
                              'ansible.builtin.uri')
    assert (other['status'], other['outcome']) == ('failed', 'failed to serve')
    assert sm.failed_outcome(mode, {'msg': 'x' * 2000}, 'specdec.serve.engine_check')['message'].endswith('...')


def test_a_mode_whose_output_differs_from_the_baseline_is_rejected_and_not_measured():
    (mode,) = planned()['engine_modes']
    out = [{'index': 0, 'text': 'a b c', 'token_ids': [1, 2, 3]}]
    base = {'outputs': out}
    same = entry('mode_outcome', typed(), step='probed', mode=mode, probe={'outputs': out}, baseline=base,
                 times={'t0': 0, 'ready': 1, 'probed': 2}, outcomes=[], phases=[])
    assert same['outcome'] is None and same['outcomes'] == []
    differs = entry('mode_outcome', typed(), step='probed', mode=mode, baseline=base,
                    probe={'outputs': [{'index': 0, 'text': 'a x', 'token_ids': [1, 9]}]},
                    times={'t0': 0, 'ready': 1, 'probed': 2}, outcomes=[], phases=[])
    assert differs['outcome']['status'] == 'rejected' and differs['outcome']['kept'] is False
    assert differs['outcome']['reason'].startswith('rejected by the output-equivalence gate (diverged)')


def runs(workload, conc, dl, value, n=3):
    return [{'workload': workload, 'concurrency': conc, 'draft_len': dl, 'repetition': i,
             'output_throughput': value} for i in range(n)]


# fixed lengths: 4 best at low load, 2 at high load
TABLE = {1: {0: 100, 2: 190, 4: 250}, 8: {0: 500, 2: 700, 4: 600}}


def selected():
    return draft_select([r for conc, row in TABLE.items() for dl, v in row.items() for r in runs('code', conc, dl, v)])


def bench(values):
    """serve_bench results as measure.yml registers them, one per (workload, concurrency)."""
    return [{'draft_sweep_run': [{'name': 'code'}, conc], 'ansible_loop_var': 'draft_sweep_run',
             'runs': [{'concurrency': conc, 'repetition': i, 'output_throughput': v} for i in range(3)]}
            for conc, v in values.items()]


def test_a_mode_is_kept_only_when_it_wins_at_every_level_and_over_them():
    (mode,) = planned(draft_lens=[2, 4])['engine_modes']
    result = selected()
    won = entry('mode_outcome', typed(), step='measured', mode=mode, result=result, results=bench({1: 260, 8: 720}),
                outcomes=[], phases=[])['outcome']
    assert won['kept'] is True and won['outcome'] == 'won' and won['reason'].startswith('won: ')
    assert [lv['within_noise'] for lv in won['levels']] == [True, True]
    # the best fixed length at each level is 1.0; the mode rated above 1 at both, so above any single length
    assert won['range']['served'] > won['range']['best_single']
    # 19.5 % slower than the best fixed length at high load: lost, and why
    lost = sm.measured_outcome(mode, result, sr.measured_records(bench({1: 260, 8: 700 * 0.805}), 4))
    assert lost['kept'] is False and lost['outcome'] == 'lost'
    assert "at concurrency 8 vLLM's adaptive verification rated 0.805 against 1.000 for the best fixed length 2" \
        in lost['reason']
    # not measured at a level: lost
    part = sm.measured_outcome(mode, result, sr.measured_records(bench({1: 300}), 4))
    assert part['kept'] is False and 'was not measured at concurrency 8' in part['reason']
    assert sm.chosen([lost, won, part]) == won and sm.chosen([lost, part]) is None


def test_a_mode_that_won_is_served_in_place_of_the_fixed_lengths_plan():
    (mode,) = planned(draft_lens=[2, 4])['engine_modes']
    result = selected()
    won = sm.measured_outcome(mode, result, sr.measured_records(bench({1: 260, 8: 720}), 4))
    got = entry('serve', typed(apply_schedule=True), result=result, original=VLLM, declared=VLLM,
                engine_modes=[won])
    assert got['plan']['mode'] == 'engine_mode' and got['plan']['verify'] is False
    assert got['plan']['draft_len'] == 4 and got['plan']['engine_mode'] == 'adaptive_verification'
    assert got['instance']['speculative'] == {'method': 'ngram', 'max_draft_len': 4,
                                              'options': {'enable_adaptive_verification': True}}
    # a mode that lost changes nothing: the fixed lengths' schedule is served and proven as served
    lost = dict(won, kept=False)
    fixed = entry('serve', typed(apply_schedule=True), result=result, original=VLLM, declared=VLLM,
                  engine_modes=[lost])
    assert fixed['plan']['mode'] == 'schedule' and 'options' not in fixed['instance']['speculative']


def test_the_modes_count_among_the_sweeps_inputs_only_when_asked_for():
    s = typed(engine_modes=[])
    key = sr.inputs_key(VLLM, [0, 2], s)
    assert sr.inputs_key(VLLM, [0, 2], typed()) != key
    assert sr.inputs_key(VLLM, [0, 2], dict(s)) == key


def test_what_the_mode_entries_cannot_read_is_refused_naming_the_step():
    with pytest.raises(PlanRefusal, match="draft_sweep mode: mode must be an entry of the plan's engine_modes"):
        entry('mode', typed(), mode={'mode': 'turbo'}, original=VLLM, declared=VLLM)
    (mode,) = planned()['engine_modes']
    with pytest.raises(PlanRefusal, match='draft_sweep mode_outcome: step must be one of failed, probed, measured'):
        entry('mode_outcome', typed(), step='won', mode=mode)
    with pytest.raises(PlanRefusal, match='draft_sweep mode_outcome: the failed result must be a mapping'):
        entry('mode_outcome', typed(), step='failed', mode=mode, failure='boom', times={'t0': 0})
    with pytest.raises(sm.ModeError, match='is not offered here'):
        sm.mode_instance(VLLM, dict(mode, offered=False))
