# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's settings policy (what its argument spec cannot say: ranges, patterns, paths, the checks that
read another setting, one entry per setting, applied by the settings engine, plugin_utils/_settings.py) and its
planner: what a host serves, renders and caches, decided once and published as the fact ``rollout_plan``
(:func:`plan`; the settings action calls it for the role's ``plan`` entry point, whose tasks ``main`` imports), and
its judge of the preflight probe (:func:`preflight`, the ``preflight`` entry); the rollout's batches, once for the play
(:func:`batches`), each host's outcome (:func:`status`), what the canary sweeps again (:func:`resweep`) and what the
other hosts take from its sweeps, or from a re-tuned host's (:func:`adopted`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    each,
    host_port,
    name,
    no_dotdot_name,
    pattern,
    rng,
)


POLICY: dict[str, Any] = {
    'rollout_canary': [rng(1, 100000)],
    'rollout_batch': [pattern(re.compile(r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)\Z'),
                              'a host count or a percentage from 1% to 100%')],
    'rollout_min_free_gb': [rng(0.0, 1000000.0)],
    'rollout_gpu_count': [rng(0, 1024)],
    'rollout_min_driver_version': [pattern(re.compile(r'^[0-9]+(\.[0-9]+){0,3}\Z'), 'a driver version such as 580.65.06')],
    'rollout_run_id': [no_dotdot_name],
    'rollout_adopt_from': [host_port],
    'rollout_adopt_instances': [each(name)],
    'rollout_soak_seconds': [rng(0, 86400)],
    'rollout_soak_seconds_stack': [rng(0, 86400)],
    'rollout_soak_max_error_rate': [rng(0.0, 1.0)],
    'rollout_soak_concurrency': [rng(1, 256)],
    'rollout_soak_request_timeout': [rng(1, 3600)],
}


def plan(settings, warn=None, ctx=None):
    """What this host serves, renders and caches (plugin_utils/_fleet.py, fleet_plan): ``serving`` (the instances
    whose state is not absent, each with the winner a sweep applied here while the inventory names the method and
    draft model it swept, unless ``keep_sweep_winners`` is false), ``rendered`` (spec_config of each, in order),
    ``cache`` and ``models`` (what model_cache fetches), ``instances`` (serving, then those to remove).

    ``ctx``: ``vars`` (``inference_server_instances``, as the host has it, API keys included) and ``local_facts``
    (``ansible_facts.ansible_local``). PlanRefusal names the instance and the key a render refuses."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import KeepWinnersError, fleet_plan
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import SpecConfigError
    ctx = ctx or {}
    instances = (ctx.get('vars') or {}).get('inference_server_instances')
    try:
        out = fleet_plan(instances if instances is not None else [], ctx.get('local_facts') or {},
                         settings['keep_sweep_winners'])
        out.update(_paths(ctx))
        return out
    except SpecConfigError as exc:
        raise PlanRefusal(['inference_server_instances: %s' % exc])
    except KeepWinnersError as exc:
        raise PlanRefusal(['rollout_keep_sweep_winners: %s' % exc])


def _paths(ctx):
    """``models_dir`` and ``image_archive`` (this host's, where the setting maps one per architecture): the
    inference_server settings the host has, else that role's defaults (its argument spec; the models directory's
    follows the model cache's root, model_cache_root)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import (
        SettingsError, check_value, for_architecture)
    found = ctx.get('vars') or {}
    out, errors = {}, []
    for key, var in (('models_dir', 'inference_server_models_dir'), ('image_archive', 'inference_server_image_archive')):
        value = role_spec.value_of(var, found)
        try:
            out[key] = check_value(var, value)
        except SettingsError as exc:
            errors.extend(exc.errors)
    if not errors:
        try:
            out['image_archive'] = for_architecture({'inference_server_image_archive': out['image_archive']},
                                                    (ctx.get('facts') or {}).get('architecture') or '')[
                'inference_server_image_archive']
        except SettingsError as exc:
            errors.extend(exc.errors)
    if errors:
        raise PlanRefusal(errors)
    return out


def preflight(settings, warn=None, ctx=None):
    """What stops a rollout on this host (plugin_utils/_fleet.py, ``preflight``), judged from the role's probe
    (``ctx['reported']``: ``probe``, its output lines, and ``registry``, the ``docker manifest inspect`` results of
    the images the host misses, once asked): ``missing_images``, ``problems`` (every one at once), with
    ``models_dir`` and ``image_archive`` as :func:`plan` has them. The image archive's tags are read here, on the
    controller."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import preflight as judge
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError, read_archive
    ctx = ctx or {}
    reported = ctx.get('reported') or {}
    lines = reported.get('probe')
    if not isinstance(lines, list):
        raise PlanRefusal(["the preflight probe's output (reported.probe) must be its lines, got %s"
                           % type(lines).__name__])
    paths = _paths(ctx)
    try:
        out = judge(lines, ctx.get('host'), min_free_gb=settings['min_free_gb'], gpu_count=settings['gpu_count'],
                    min_driver=settings['min_driver_version'], models_dir=paths['models_dir'],
                    image_archive=paths['image_archive'], registry=reported.get('registry') or [],
                    archive_tags=lambda path: sorted(read_archive(path)))
    except ImageArchiveError as exc:
        raise PlanRefusal(['inference_server_image_archive: %s' % exc])
    out.update(paths)
    return out


def batches(settings, warn=None, ctx=None):
    """The rollout's order and batches (plugin_utils/_fleet.py, ``rollout_batches``: ``hosts``, ``serial``,
    ``units``) and what it is about to do (``preview``, ``rollout_preview``'s lines), made once for the play (the
    ``batches`` entry's tasks run once). ``ctx['reported']['hosts']``: the hosts that act, in inventory order (the
    play's); each one's ``inference_server_changes`` and, where one of its ``rollout_instances`` is served across
    a stack (``stack``), the members of its ``stack_link_group`` (the inventory's group) come from ``hostvars``."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet as fleet
    ctx = ctx or {}
    hosts = (ctx.get('reported') or {}).get('hosts')
    if not isinstance(hosts, list):
        raise PlanRefusal(["the rollout's hosts (reported.hosts) must be a list, got %s" % type(hosts).__name__])
    hostvars, groups = ctx.get('hostvars') or {}, ctx.get('groups') or {}
    changes, stacks = [], []
    for host in hosts:
        found = hostvars[host] if host in hostvars else {}
        changes.append(found['inference_server_changes'] if 'inference_server_changes' in found else [])
        group = found['stack_link_group'] if 'stack_link_group' in found else ''
        instances = found['rollout_instances'] if 'rollout_instances' in found else []
        served = group and any(isinstance(i, dict) and i.get('stack') for i in instances or [])
        stacks.append(sorted(groups.get(group) or []) if served else [])
    out = fleet.rollout_batches(hosts, changes, stacks, settings['canary'], settings['batch'])
    out['preview'] = fleet.rollout_preview(hosts, changes, settings['run_id'], settings['canary'], settings['batch'])
    return out


def status(settings, warn=None, ctx=None):
    """This host's outcome (plugin_utils/_fleet.py, ``rollout_status``: ``updated``, ``unchanged``, ``rolled back``,
    ``failed``), from what ``ctx['reported']`` gives: ``after`` and ``before`` (fleet_view_host now and before the
    rollout), ``started`` (when its batch started), ``changes`` (its inference_server_changes), ``error`` (the failed
    task's result, where the batch failed here), ``gateway`` (gateway_drained_at, gateway_ready_at,
    gateway_drain_timed_out and gateway_drain_waited_s; kept as ``gateway`` where the host was drained) and
    ``resweep`` (the instances swept again on the canary; kept where given) and ``soak`` (the canary's soak
    verdicts; kept where given). Finished: now."""
    import time

    from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet as fleet
    reported = (ctx or {}).get('reported') or {}
    out = fleet.rollout_status(reported.get('after'), reported.get('before'), reported.get('started'), time.time(),
                               reported.get('changes'), reported.get('error'))
    gateway = reported.get('gateway') or {}
    if gateway.get('drained_at') is not None:
        out['gateway'] = {'drained_at': gateway['drained_at'], 'ready_at': gateway.get('ready_at'),
                          'drain_timed_out': gateway.get('drain_timed_out') or [],
                          'drain_waited_s': gateway.get('drain_waited_s') or 0}
    if reported.get('resweep') is not None:
        out['resweep'] = reported['resweep']
    if reported.get('soak') is not None:
        out['soak'] = reported['soak']
    return out


def _records():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as sweep_records
    return sweep_records


def resweep(settings, warn=None, ctx=None):
    """The instances the canary sweeps again after its update (plugin_utils/_sweep_records.py, ``resweep_instances``:
    those whose engine, release, image or models now differ from what their last sweep was measured on, a stack's
    left out), with ``rollout_resweep`` on and on a canary only, else none. ``ctx['reported']``: ``instances`` (the
    host's fleet_view_host.instances, read after the update) and ``canary`` (whether the host is one)."""
    records = _records()
    reported = (ctx or {}).get('reported') or {}
    if not settings['resweep'] or not reported.get('canary'):
        return []
    try:
        return records.resweep_instances(reported.get('instances'))
    except (records.SweepRecordError, TypeError, ValueError) as exc:
        raise PlanRefusal(['the instances to sweep again: %s' % exc])


def adopted(settings, warn=None, ctx=None):
    """What this host takes from other hosts' sweeps (plugin_utils/_sweep_records.py, ``adopted_sweeps``): {instance:
    the sweep entry, with ``adopted_from``} for the instances it serves that a host of the same groups swept again.
    ``ctx['reported']``: ``groups`` (group_names), ``names`` (the instances it serves), ``from`` (those hosts, in batch
    order) and ``instances``: the instances taken from each host's recorded sweeps (its local fact specdec_sweep: a
    re-tuned host's, rollout_adopt_instances), or, null, each one's ``rollout_retuned`` (what the canary swept again
    in this rollout)."""
    records = _records()
    ctx = ctx or {}
    reported, hostvars = ctx.get('reported') or {}, ctx.get('hostvars') or {}
    wanted = reported.get('instances')
    sources = {}
    for host in reported.get('from') or []:
        found = hostvars[host] if host in hostvars else {}
        if wanted is None:
            sources[host] = (found['rollout_retuned'] if 'rollout_retuned' in found else None) or {}
            continue
        facts = (found['ansible_facts'] if 'ansible_facts' in found else None) or {}
        recorded = (facts.get('ansible_local') or {}).get('specdec_sweep') or {}
        sources[host] = dict((name, entry) for name, entry in recorded.items() if name in wanted)
    try:
        return records.adopted_sweeps(reported.get('groups'), reported.get('names'), sources)
    except (records.SweepRecordError, TypeError, ValueError) as exc:
        raise PlanRefusal(['the sweeps to take: %s' % exc])


def soak(settings, warn=None, ctx=None):
    """The canary's soak (plugin_utils/_soak.py, ``plan``): ``keep`` (inference_server keeps the previous files until
    the soak passes) and ``targets`` (each changed instance this node gates, with its URL, seconds and round).
    ``ctx['reported']``: ``canary`` (this host is in the first batch), ``changed`` (the names of its changed
    instances) and, before the deploy, ``stacked`` (those served across a stack) or, after it, ``instances`` (the
    served ones: fleet_view_host.instances)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _soak
    reported = (ctx or {}).get('reported') or {}
    return _soak.plan(settings, bool(reported.get('canary')), reported.get('changed') or [],
                      reported.get('instances'), reported.get('stacked'))


def soak_verdict(settings, warn=None, ctx=None):
    """A target's soak judged (plugin_utils/_soak.py, ``verdict``). ``ctx['reported']``: ``target`` (one of
    :func:`soak`'s), ``last`` (its last serve_bench round), ``attempts`` (the rounds run) and ``elapsed`` (seconds)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _soak
    reported = (ctx or {}).get('reported') or {}
    target = reported.get('target')
    if not isinstance(target, dict) or 'name' not in target:
        raise PlanRefusal(['the soak target (reported.target) must be one of the soak entry\'s targets'])
    try:
        elapsed = float(reported.get('elapsed') or 0)
    except (TypeError, ValueError):
        raise PlanRefusal(['the soak\'s elapsed seconds (reported.elapsed) must be a number'])
    return _soak.verdict(target, reported.get('last'), reported.get('attempts'), elapsed)


# the planners the settings action calls, by the role's entry point
PLANNERS = {'plan': plan, 'preflight': preflight, 'batches': batches, 'status': status, 'resweep': resweep,
            'adopted': adopted, 'soak': soak, 'soak_verdict': soak_verdict}
# the variables of other roles a plan is made from (the settings action templates them for the planner)
PLAN_VARS = {'plan': ('inference_server_instances', 'inference_server_models_dir', 'model_cache_root',
                      'inference_server_image_archive'),
             'preflight': ('inference_server_models_dir', 'model_cache_root', 'inference_server_image_archive')}
# the plan carries the instances' API keys to inference_server: the settings action never shows it (the role
# publishes it as the fact rollout_plan, no_log, for every role and playbook of the play to read)
PLAN_HOLDS_SECRETS = ('plan',)
