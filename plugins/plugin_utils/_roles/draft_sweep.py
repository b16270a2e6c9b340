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
from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    DRAFT_LEN,
    PlanRefusal,
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
    'draft_sweep_report_dir': [local_path],
    'draft_sweep_run_id': [no_dotdot_name],
    'draft_sweep_state_dir': [host_path],
    'draft_sweep_fact_file': [host_path],
}


def plan(settings, warn=None, ctx=None):
    """The sweep, decided once on the controller from the typed settings (keys without the role prefix).

    Returns ``instance`` (the swept instance as the inventory declares it, without its secrets), ``engine`` and
    ``port`` (as spec_config renders the instance: a named profile may be what gives it its engine),
    ``speculative`` (its speculative settings spelled out), ``workloads`` (checked and filled in), ``sampling``
    (whether the engine honours the workloads' highest temperature), ``candidates`` (the draft lengths
    measured, 0 the baseline), ``served`` (what is served in turn: the baseline for the output-equivalence
    probe alone when it is not measured, then the candidates), ``state_file`` and ``exporter_metrics`` (a
    TensorRT-LLM engine's iteration stats are read through the monitoring exporter where one runs).
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
        workloads = _sweep_workloads.resolve(settings['workloads'], defaults, settings['workload_rule'])['workloads']
    except _sweep_workloads.WorkloadsError as exc:
        raise PlanRefusal(errors + exc.errors)
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
    return {'instance': declared, 'engine': rendered['engine'], 'port': rendered['port'],
            'speculative': rendered['speculative'], 'workloads': workloads, 'sampling': sampling,
            'candidates': candidates, 'served': served,
            'state_file': posixpath.join(settings['state_dir'], '%s.json' % name),
            'exporter_metrics': rendered['engine'] == 'trtllm'}


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


# the planners the settings action calls, by the role's entry point
PLANNERS = {'main': plan, 'stack': stack, 'prepare': prepare}
