# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The draft_sweep role's settings policy (what its argument spec cannot say: ranges, patterns, paths, the checks
that read another setting, one entry per setting, applied by the settings engine, plugin_utils/_settings.py) and
its planner: what the sweep is, decided once from the checked settings (:func:`plan`, which the settings action
calls and returns as ``plan``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import posixpath
from typing import Any

from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import SamplingError, check_sampling
from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_modes, _sweep_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    DRAFT_LEN,
    PlanRefusal,
    as_bool,
    each,
    host_path,
    local_path,
    name,
    no_dotdot_name,
    non_empty,
    rng,
)


POLICY: dict[str, Any] = {
    'draft_sweep_instance': [name],
    'draft_sweep_draft_lens': [non_empty, each(DRAFT_LEN)],
    'draft_sweep_concurrency': [non_empty, each(rng(1, 4096))],
    'draft_sweep_repetitions': [rng(1, 100)],
    'draft_sweep_requests_per_worker': [rng(1, 100000)],
    'draft_sweep_warmup_requests_per_worker': [rng(0, 10000)],
    'draft_sweep_max_tokens': [rng(1, 1048576)],
    'draft_sweep_temperature': [rng(0.0, 2.0)],
    'draft_sweep_request_timeout': [rng(1, 86400)],
    'draft_sweep_min_runs': [rng(1, 100)],
    'draft_sweep_max_rel_mad': [rng(0.0, 1.0)],
    'draft_sweep_mad_k': [rng(0.0, 100.0)],
    'draft_sweep_rel_tol': [rng(0.0, 1.0)],
    'draft_sweep_equivalence_min_prefix': [rng(1, 1048576)],
    'draft_sweep_equivalence_prompts': [rng(1, 8)],
    'draft_sweep_equivalence_max_tokens': [rng(1, 65536)],
    'draft_sweep_workloads': [_sweep_workloads.check],
    'draft_sweep_workload_rule': [_sweep_workloads.check_rule],
    'draft_sweep_input_lengths': [each(rng(1, 1048576))],
    'draft_sweep_report_dir': [local_path],
    'draft_sweep_run_id': [no_dotdot_name],
    'draft_sweep_state_dir': [host_path],
    'draft_sweep_fact_file': [host_path],
}


def plan(settings, warn=None, ctx=None):
    """The sweep, decided once on the controller from the typed settings (keys without the role prefix).

    Returns ``instance`` (the swept instance as the inventory declares it, without its secrets), ``engine`` and
    ``port`` (as spec_config renders the instance: a named profile may be what gives it its engine),
    ``speculative`` (its speculative settings spelled out), ``workloads`` (checked and filled in; with
    draft_sweep_input_lengths, each of synthetic prompts once per length), ``input_axis`` (those measured names ->
    their workload and input length), ``sampling``
    (whether the engine honours the workloads' highest temperature), ``candidates`` (the draft lengths
    measured, 0 the baseline), ``served`` (what is served in turn: the baseline for the output-equivalence
    probe alone when it is not measured, then the candidates), ``engine_modes`` (each of draft_sweep_engine_modes,
    offered by the instance's release or not: plugin_utils/_sweep_modes.py), ``state_file`` and
    ``exporter_metrics`` (a TensorRT-LLM engine's iteration stats are read through the monitoring exporter where one
    runs).
    ``warn`` gets the warnings; ``ctx`` (what the settings action gives every planner) is not read. Raises
    PlanRefusal naming each setting."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError, render
    warn = warn if warn is not None else (lambda msg: None)
    name = settings['instance']
    instances = [i for i in settings.get('instances') or [] if isinstance(i, dict)]
    found = [i for i in instances if i.get('name') == name]
    if len(found) != 1:
        raise PlanRefusal(['draft_sweep_instance=%s must name exactly one of %s'
                           % (json.dumps(name), json.dumps([i.get('name') for i in instances]))])
    declared = found[0]
    errors = []
    if settings['repetitions'] < settings['min_runs']:
        errors.append('draft_sweep_repetitions=%s must be at least draft_sweep_min_runs=%s'
                      % (settings['repetitions'], settings['min_runs']))
    defaults = dict((key, settings[key]) for key in ('prompt_set', 'max_tokens', 'temperature', 'ignore_eos'))
    try:
        resolved = _sweep_workloads.resolve(settings['workloads'], defaults, settings['workload_rule'],
                                            settings['input_lengths'])
    except _sweep_workloads.WorkloadsError as exc:
        raise PlanRefusal(errors + exc.errors)
    workloads = resolved['workloads']
    if resolved['kept']:
        warn('draft_sweep_input_lengths: the workloads %s have prompts of their own and are measured as they are, '
             'not at each input length' % ', '.join(resolved['kept']))
    try:
        rendered = render(declared)
    except SpecConfigError as exc:
        raise PlanRefusal(errors + ['draft_sweep: instance %s: %s' % (name, exc)])
    method = rendered['speculative'].get('method') or 'none'
    if method == 'none':
        errors.append('draft_sweep: instance %s has speculative.method none; a sweep needs a speculative method '
                      '(eagle3, draft_target, ngram, mtp, ...) and its draft model.' % name)
    try:
        sampling = check_sampling(rendered, max(w['temperature'] for w in workloads), settings['allow_greedy_fallback'],
                                  temperature_setting='draft_sweep_workloads' if settings['workloads']
                                  else 'draft_sweep_temperature', fallback_setting='draft_sweep_allow_greedy_fallback')
    except SamplingError as exc:
        raise PlanRefusal(errors + ['draft_sweep: instance %s: %s' % (name, exc)])
    if sampling['error'] is not None:
        errors.append('draft_sweep: instance %s: %s' % (name, sampling['error']))
    if errors:
        raise PlanRefusal(errors)
    if sampling['warning'] is not None:
        warn('draft_sweep: instance %s: %s' % (name, sampling['warning']))
    candidates = ([0] if settings['baseline'] else []) + sorted(set(settings['draft_lens']))
    served = ([0] if settings['equivalence'] and 0 not in candidates else []) + candidates
    modes = _engine_modes(settings, rendered)
    for entry in modes:
        if not entry['offered']:
            warn('draft_sweep_engine_modes: %s is not measured: %s' % (entry['mode'], entry['reason']))
    return {'instance': declared, 'engine': rendered['engine'], 'port': rendered['port'],
            'speculative': rendered['speculative'], 'workloads': workloads, 'sampling': sampling,
            'candidates': candidates, 'served': served, 'input_axis': resolved['axis'], 'engine_modes': modes,
            'state_file': posixpath.join(settings['state_dir'], '%s.json' % name),
            'exporter_metrics': rendered['engine'] == 'trtllm'}


def _engine_modes(settings, rendered):
    """draft_sweep_engine_modes as the instance's release offers them (its engine table's SpeculativeConfig)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_tables import load_table
    if not settings['engine_modes']:
        return []
    table = load_table(rendered['engine'], rendered['table_version'])
    fields = ((table.get('classes') or {}).get('SpeculativeConfig') or {}).get('fields') or {}
    return _sweep_modes.offered(settings['engine_modes'], rendered['engine'], rendered['version'], fields,
                                settings['draft_lens'])


def _records_call(what, function, *args, **kwargs):
    """A plugin_utils/_sweep_records.py decision; its refusal names the step."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    try:
        return function(*args, **kwargs)
    except (records.SweepRecordError, KeyError, TypeError, ValueError) as exc:
        raise PlanRefusal(['draft_sweep %s: %s' % (what, exc)])


def stack(settings, warn=None, ctx=None):
    """This host's part in the sweep (plugin_utils/_sweep_records.py, ``stack_part``): an instance served across a
    stack is swept on every member at once, its head measures and a worker follows; every member must be in the
    play (the play's hosts, ``ctx['play_hosts']``: checked and refused). ``ctx['reported']``: ``instance`` (the
    plan's) and ``layout`` (stack_link's, none outside a stack)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    ctx = ctx or {}
    reported = ctx.get('reported') or {}
    return _records_call('stack', records.stack_part, reported.get('instance'), reported.get('layout'),
                         ctx.get('host'), ctx.get('play_hosts') or [])


def prepare(settings, warn=None, ctx=None):
    """What runs now and whether to measure, from the plan (``ctx['reported']['plan']``, the main entry's) and the
    workloads' requests (``datasets``, workload name -> records): ``declared`` (the instance with its speculative
    settings spelled out as the plan rendered them), ``original`` (what the fleet playbooks serve: the inventory's
    definition with a previous sweep's applied winner kept, plugin_utils/_fleet.py), ``inputs`` (the digest of
    everything that decides what the sweep measures and does), ``last`` (the recorded sweep) and ``needed``
    (forced, other inputs than the recorded sweep's, or, applying, a recorded winner not yet applied)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import fleet_plan
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import SpecConfigError
    ctx = ctx or {}
    reported = ctx.get('reported') or {}
    planned = reported.get('plan')
    if not isinstance(planned, dict):
        raise PlanRefusal(["draft_sweep prepare: reported.plan must be the sweep's plan (the main entry's)"])
    local = ctx.get('local_facts') or {}
    declared = _records_call('prepare', records.inventory_instance, planned['instance'], planned['speculative'])
    try:
        original = fleet_plan([declared], local)['serving'][0]
    except SpecConfigError as exc:
        raise PlanRefusal(['draft_sweep_instances: %s' % exc])
    datasets = reported.get('datasets') or {}
    inputs = _records_call('prepare', records.inputs_key, declared, planned['candidates'], settings,
                           planned['workloads'], datasets)
    mine = (local.get('specdec_sweep') or {}).get(settings['instance']) or {}
    needed = _records_call('prepare', records.sweep_needed, mine, inputs, force=bool(settings['force']),
                           apply=bool(settings['apply']))
    return {'declared': declared, 'original': original, 'datasets': datasets, 'inputs': inputs,
            'last': mine.get('last_sweep') or {}, 'needed': needed}


def _reported(ctx):
    return (ctx or {}).get('reported') or {}


def _draft_len(reported, what):
    value = reported.get('draft_len')
    if isinstance(value, bool):
        value = None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise PlanRefusal(['draft_sweep %s: the draft length must be an integer, got %r' % (what, value)])


def _min_prefix(settings):
    value = settings['equivalence_min_prefix']
    return None if value in (None, '') else int(value)


def _decide(what, function, *args, **kwargs):
    """A decision of the gate, the selection, the schedule or an engine mode; its refusal names the step."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import SelectError
    from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import EquivalenceError
    try:
        return function(*args, **kwargs)
    except (SelectError, EquivalenceError, _sweep_modes.ModeError, KeyError, TypeError, ValueError) as exc:
        raise PlanRefusal(['draft_sweep %s: %s' % (what, exc)])


def instance(settings, warn=None, ctx=None):
    """The instance served for a draft length (plugin_utils/_sweep_records.py, ``candidate_instance``):
    ``instance``, what runs now (``original``) without speculation for 0, otherwise with the declared speculative
    settings at that length, without an earlier winner's schedule. ``ctx['reported']``: ``original``,
    ``declared`` (the prepare entry's) and ``draft_len``."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    reported = _reported(ctx)
    return {'instance': _records_call('instance', records.candidate_instance, reported.get('original'),
                                      reported.get('declared'), _draft_len(reported, 'instance'))}


def verdict(settings, warn=None, ctx=None):
    """The output-equivalence gate on a probed candidate (plugin_utils/_output_equivalence.py,
    ``candidate_verdict``): ``verdict``, ``verdicts`` (the sweep's, with it) and ``baseline`` (the probe of the
    baseline, draft length 0, which every later candidate is compared with). Identical output, or the leading
    tokens draft_sweep_equivalence_min_prefix asks for; no baseline output, or a failed probe request, rejects (the
    gate fails closed). ``ctx['reported']``: ``draft_len``, ``probe`` (its output_probe result, {} with the gate
    off), ``baseline`` and ``verdicts`` (the sweep's so far)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import candidate_verdict
    reported = _reported(ctx)
    draft_len = _draft_len(reported, 'verdict')
    probe = reported.get('probe') or None
    baseline = reported.get('baseline') or None
    found = _decide('verdict', candidate_verdict, baseline, probe, draft_len, min_prefix=_min_prefix(settings),
                    enabled=as_bool(settings['equivalence']))
    return {'verdict': found, 'verdicts': list(reported.get('verdicts') or []) + [found],
            'baseline': (probe or {}) if draft_len == 0 else (baseline or {})}


def _seconds(times, start, end):
    try:
        return float(times[end]) - float(times[start])
    except (KeyError, TypeError, ValueError):
        raise PlanRefusal(['draft_sweep record: times.%s and times.%s must be timestamps, got %r'
                           % (start, end, times)])


def _bench_time(results, key):
    return sum(float((r.get('timing') or {}).get(key) or 0) for r in results if isinstance(r, dict))


def _step(ctx, steps, what):
    """(reported, its step, the phases so far, its times with ``now``), the step one of ``steps``."""
    import time
    reported = _reported(ctx)
    step = reported.get('step')
    if step not in steps:
        raise PlanRefusal(['draft_sweep %s: step must be one of %s, got %r' % (what, ', '.join(steps), step)])
    return reported, step, list(reported.get('phases') or []), dict(reported.get('times') or {}, now=time.time())


# what each step of the sweep adds to its record
RECORD_STEPS = ('rejected', 'baseline_probe', 'measured', 'failed', 'apply', 'verify', 'fallback')


def record(settings, warn=None, ctx=None):
    """The sweep's record after one of its steps, the one place its phases are written: ``measurements`` (the
    measurements, one per workload and concurrency level of each candidate), ``verdicts`` (the gate's), ``phases``
    (where the time went: restart, probe, warm-up and measurement seconds of each step) and, for ``verify``,
    ``served_items`` (the applied plan's measurements as served). ``ctx['reported']``: ``step`` (one of
    RECORD_STEPS), ``draft_len``, ``measurements``, ``verdicts`` and ``phases`` (the record so far), ``times``
    (``t0`` the step's start, ``ready`` when the candidate answered, ``probed`` when its output was compared;
    the step ends now), and by step: ``workloads`` (the plan's) and ``reason`` (rejected), ``results``
    (serve_bench's, measured and verify; none on a stack's worker, which keeps its head's),
    ``failure`` (the failed task's result), ``measure`` (whether the candidate was to be measured), ``workloads``
    and ``baseline`` (failed)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import candidate_verdict
    reported, step, phases, times = _step(ctx, RECORD_STEPS, 'record')
    draft_len = _draft_len(reported, 'record')
    # (never ``items``: Jinja's ``plan.items`` is the mapping's method)
    items = list(reported.get('measurements') or [])
    verdicts = list(reported.get('verdicts') or [])
    results = [r for r in reported.get('results') or [] if isinstance(r, dict)]
    phase = {'step': step, 'draft_len': draft_len, 'restart_s': 0, 'warmup_s': 0, 'measure_s': 0}
    out = {}
    if step in ('rejected', 'baseline_probe', 'measured'):
        phase.update(step='candidate' if step != 'baseline_probe' else step,
                     restart_s=_seconds(times, 't0', 'ready'), probe_s=_seconds(times, 'ready', 'probed'))
    if step == 'rejected':
        phase['rejected'] = True
        items += _records_call('record', records.unmeasured_records, reported.get('workloads'),
                               settings['concurrency'], draft_len,
                               'rejected by the output-equivalence gate: %s' % reported.get('reason'))
    elif step in ('measured', 'verify'):
        phase.update(warmup_s=_bench_time(results, 'warmup_s'), measure_s=_bench_time(results, 'measure_s'))
        measured = _records_call('record', records.measured_records, results, draft_len)
        if step == 'measured':
            items += measured
        else:
            out['served_items'] = measured
    elif step == 'failed':
        error = _records_call('record', records.failure_text, reported.get('failure'))
        measure = as_bool(reported.get('measure'), False)
        if measure:
            items += _records_call('record', records.unmeasured_records, reported.get('workloads'),
                                   settings['concurrency'], draft_len, error)
        # a candidate that failed before its output was compared is unverified (not eligible); a baseline that
        # failed leaves no output to compare with, so every candidate after it is unverified too
        if not [v for v in verdicts if isinstance(v, dict) and v.get('draft_len') == draft_len]:
            verdicts.append(_decide('record', candidate_verdict, reported.get('baseline') or None, None, draft_len,
                                    min_prefix=_min_prefix(settings), enabled=as_bool(settings['equivalence']),
                                    error=error))
        phase.update(step='candidate' if measure else 'baseline_probe', failed=True,
                     restart_s=_seconds(times, 't0', 'now'), probe_s=0)
    elif step in ('apply', 'fallback'):
        phase['restart_s'] = _seconds(times, 't0', 'now')
    out.update(measurements=items, verdicts=verdicts, phases=phases + [phase])
    return out


def select(settings, warn=None, ctx=None):
    """The winner (plugin_utils/_bench_select.py, ``select_workloads``): ``result``, one draft length per
    concurrency level for each workload and one for all of them by draft_sweep_workload_rule, never a length the
    gate rejected, and ``winners`` (each workload's own). ``ctx['reported']``: ``measurements`` and ``verdicts``."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select_workloads
    reported = _reported(ctx)
    excluded = [v.get('draft_len') for v in reported.get('verdicts') or [] if isinstance(v, dict)
                and not v.get('eligible')]
    # an empty rule is the role's default, which select_workloads reads from the spec (no copy here)
    result = _decide('select', select_workloads, list(reported.get('measurements') or []),
                     rule=settings['workload_rule'] or None, min_runs=settings['min_runs'],
                     max_rel_mad=settings['max_rel_mad'], k=settings['mad_k'], rel_tol=settings['rel_tol'],
                     excluded=excluded, client_limited=settings['client_limited'])
    return {'result': result, 'excluded': excluded,
            'winners': _records_call('select', records.workload_winners, result.get('workloads'))}


def serve(settings, warn=None, ctx=None):
    """What a sweep that applies its winner serves (plugin_utils/_sweep_schedule.py, ``schedule_plan``):
    ``plan`` (the winner of the lowest level, or with draft_sweep_apply_schedule over several levels the schedule
    their winners make, or the one length it reduces to; an engine mode that won, plugin_utils/_sweep_modes.py,
    in place of them all: it was measured as served already) and ``instance`` (as a candidate is defined, with the
    plan's schedule for the engine where there is one, or the mode's options). ``ctx['reported']``: ``result`` (the
    select entry's), ``original``, ``declared`` and ``engine_modes`` (the modes' outcomes)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_plan
    reported = _reported(ctx)
    won = _decide('serve', _sweep_modes.chosen, reported.get('engine_modes'))
    if won:
        entry = dict(won, offered=True, options=dict(won.get('options') or {}))
        candidate = _records_call('serve', records.candidate_instance, reported.get('original'),
                                  reported.get('declared'), won['draft_len'])
        return {'plan': {'mode': 'engine_mode', 'engine_mode': won['mode'], 'draft_len': won['draft_len'],
                         'schedule': None, 'verify': False, 'reason': '%s %s' % (won['title'], won['reason'])},
                'instance': _decide('serve', _sweep_modes.mode_instance, candidate, entry)}
    served = _decide('serve', schedule_plan, reported.get('result'), as_bool(settings['apply_schedule'], False))
    return {'plan': served, 'instance': _records_call(
        'serve', records.candidate_instance, reported.get('original'), reported.get('declared'),
        served['draft_len'], schedule=served['schedule'], apply_schedule=served['schedule'] is not None)}


def verify(settings, warn=None, ctx=None):
    """Whether the applied plan stays, as measured (plugin_utils/_sweep_schedule.py, ``schedule_verdict``):
    ``verdict`` (a schedule stays only if it is within noise of the best fixed length at every level and beats
    every single length over them) and, where it does not, ``instance`` (the best single length's, as a candidate
    is defined). ``ctx['reported']``: ``result``, ``served_items``, ``plan`` (the serve entry's), ``original`` and
    ``declared``."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_verdict
    reported = _reported(ctx)
    found = _decide('verify', schedule_verdict, reported.get('result'), reported.get('served_items'),
                    reported.get('plan'))
    out = {'verdict': found}
    if not found['keep']:
        out['instance'] = _records_call('verify', records.candidate_instance, reported.get('original'),
                                        reported.get('declared'), found['served_draft_len'])
    return out


def _mode_entry(reported, what):
    entry = reported.get('mode')
    if not isinstance(entry, dict) or entry.get('mode') not in _sweep_modes.MODES:
        raise PlanRefusal(['draft_sweep %s: mode must be an entry of the plan\'s engine_modes, got %r' % (what, entry)])
    return entry


def mode(settings, warn=None, ctx=None):
    """The instance served for an engine mode (plugin_utils/_sweep_modes.py, ``mode_instance``): ``instance``, as a
    candidate at the mode's draft length is defined, with the mode's speculative options. ``ctx['reported']``:
    ``mode`` (an entry of the plan's engine_modes), ``original`` and ``declared``."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    reported = _reported(ctx)
    entry = _mode_entry(reported, 'mode')
    if not entry.get('offered'):
        return {'instance': None, 'outcome': _decide('mode', _sweep_modes.not_offered, entry)}
    candidate = _records_call('mode', records.candidate_instance, reported.get('original'), reported.get('declared'),
                              entry['draft_len'])
    return {'instance': _decide('mode', _sweep_modes.mode_instance, candidate, entry), 'outcome': None}


# what each step of an engine mode decides
MODE_STEPS = ('failed', 'probed', 'measured')


def mode_outcome(settings, warn=None, ctx=None):
    """What became of an engine mode after one of its steps: ``outcome`` (None while it goes on: it passed the
    output-equivalence gate and is to be measured), ``outcomes`` (the sweep's, with it once decided) and ``phases``
    (the sweep's, with this step's time). ``ctx['reported']``: ``step`` (one of MODE_STEPS), ``mode``, ``outcomes``,
    ``phases``, ``times`` (``t0``, and ``ready`` and ``probed`` once served and probed), and by step: ``failure``
    and ``action`` (the failed task's result and module: the engine's check refusing it is ``refused``), ``probe``
    and ``baseline`` (probed: output_probe's results, {} with the gate off), ``result`` (the selection) and
    ``results`` (measured: serve_bench's)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import candidate_verdict
    reported, step, phases, times = _step(ctx, MODE_STEPS, 'mode_outcome')
    entry = _mode_entry(reported, 'mode_outcome')
    outcomes = list(reported.get('outcomes') or [])
    phase = {'step': 'engine_mode', 'mode': entry['mode'], 'draft_len': entry.get('draft_len'),
             'restart_s': 0, 'probe_s': 0, 'warmup_s': 0, 'measure_s': 0}
    outcome = None
    if step == 'failed':
        outcome = _decide('mode_outcome', _sweep_modes.failed_outcome, entry, reported.get('failure'),
                          reported.get('action'))
        phase.update(failed=True, restart_s=_seconds(times, 't0', 'now'))
    elif step == 'probed':
        found = _decide('mode_outcome', candidate_verdict, reported.get('baseline') or None,
                        reported.get('probe') or None, entry['draft_len'], min_prefix=_min_prefix(settings),
                        enabled=as_bool(settings['equivalence']))
        outcome = _decide('mode_outcome', _sweep_modes.gate_outcome, entry, found)
        phase.update(restart_s=_seconds(times, 't0', 'ready'), probe_s=_seconds(times, 'ready', 'probed'))
    else:
        from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
        results = [r for r in reported.get('results') or [] if isinstance(r, dict)]
        measured = _records_call('mode_outcome', records.measured_records, results, entry['draft_len'])
        outcome = _decide('mode_outcome', _sweep_modes.measured_outcome, entry, reported.get('result') or {},
                          measured)
        phase.update(warmup_s=_bench_time(results, 'warmup_s'), measure_s=_bench_time(results, 'measure_s'))
    return {'outcome': outcome, 'outcomes': outcomes + ([outcome] if outcome else []), 'phases': phases + [phase]}


def serving(settings, warn=None, ctx=None):
    """What serves while a length is measured (module_utils/bench_sampling.py, ``serving_summary``): ``serving``,
    its engine, version and speculative settings, rendered once per measurement; serve_bench checks the
    temperature against it and reads its stream_interval. ``ctx['reported']``: ``instance``."""
    from ansible_collections.specdec.serve.plugins.module_utils.bench_sampling import serving_summary
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError, render
    served = _reported(ctx).get('instance')
    try:
        return {'serving': serving_summary(render(served))}
    except SpecConfigError as exc:
        raise PlanRefusal(['draft_sweep serving: %s' % exc])


def report(settings, warn=None, ctx=None):
    """The report's judgements: ``measured_on`` (what the sweep was measured on, as the serving facts record it
    after the sweep, and the host's groups: plugin_utils/_sweep_records.py, ``measured_on``), ``equivalence`` (the
    gate's section: plugin_utils/_output_equivalence.py, ``summarize``) and ``phase_totals``. ``ctx['reported']``:
    ``serving`` (the serving facts' instances), ``groups`` (the host's), ``verdicts``, ``baseline``, ``candidates``
    (the plan's) and ``phases``; and ``context`` (plugin_utils/_sweep_context.py: per workload, concurrency and
    input length, the best speculative speed-up and acceptance, and the length beyond which speculation stopped
    paying) from ``result`` (the selection) and ``input_axis`` (the plan's)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as records
    from ansible_collections.specdec.serve.plugins.plugin_utils._output_equivalence import summarize
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_context import by_input_length
    reported = _reported(ctx)
    phases = [p for p in reported.get('phases') or [] if isinstance(p, dict)]
    totals = dict((key, round(sum(float(p.get(key) or 0) for p in phases), 3))
                  for key in ('restart_s', 'probe_s', 'warmup_s', 'measure_s'))
    return {'measured_on': _records_call('report', records.measured_on, reported.get('serving') or {},
                                         settings['instance'], reported.get('groups')),
            'equivalence': _decide('report', summarize, list(reported.get('verdicts') or []),
                                   enabled=as_bool(settings['equivalence']), min_prefix=_min_prefix(settings),
                                   baseline=reported.get('baseline') or None,
                                   baseline_measured=0 in (reported.get('candidates') or []),
                                   prompts=settings['equivalence_prompts'],
                                   max_tokens=settings['equivalence_max_tokens']),
            'phase_totals': totals,
            'context': _decide('report', by_input_length, reported.get('result') or {},
                               reported.get('input_axis') or {})}


# the planners the settings action calls, by the role's entry point
PLANNERS = {'main': plan, 'stack': stack, 'prepare': prepare, 'instance': instance, 'verdict': verdict,
            'record': record, 'select': select, 'mode': mode, 'mode_outcome': mode_outcome, 'serve': serve,
            'verify': verify, 'serving': serving, 'report': report}
