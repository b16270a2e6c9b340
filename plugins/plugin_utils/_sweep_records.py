# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the draft_sweep role decides and records, outside its task files:

- :func:`inventory_instance`: the swept instance with its speculative settings spelled out;
- :func:`inputs_key` and :func:`sweep_needed`: the digest of everything that decides what a sweep
  measures and does, and whether a recorded sweep of the same inputs makes a new one unnecessary;
- :func:`candidate_instance`: the instance served for one draft length (a candidate, or the winner);
- :func:`unmeasured_records`, :func:`measured_records` and :func:`failure_text`: the measurement
  records of a candidate (``draft_len``, ``concurrency``, ``workload``, ``runs`` and, for one that
  was not measured, ``error``), as plugin_utils/_bench_select.py reads them;
- :func:`workload_winners`: the winning draft length of each workload, for the local fact;
- :func:`stack_part`: this host's part in a sweep of an instance served across a stack (the head measures,
  every member serves each candidate).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import hashlib
import json

# A schedule belongs to the draft length it was chosen for: a candidate or a new winner never keeps one.
SCHEDULE_KEYS = ('draft_len_schedule', 'num_speculative_tokens_per_batch_size')
ERROR_LENGTH = 300


class SweepRecordError(Exception):
    pass


def truncate(text, length=ERROR_LENGTH, end='...', leeway=5):
    """Jinja's ``truncate(length)``: text up to ``length + leeway`` characters is kept whole; longer
    text is cut at the last space before ``length - len(end)`` and ends with ``end``."""
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(' ', 1)[0] + end


def _mapping(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SweepRecordError('%s must be a mapping, got %s' % (what, type(value).__name__))
    return value


def inventory_instance(declared, resolved):
    """The declared instance whose ``speculative`` names the method, length and draft model that
    spec_config resolved (``resolved``: its ``speculative``), a named profile's included; what the
    instance sets itself wins, and a resolved value that is null is left out."""
    declared = _mapping(declared, 'the instance')
    resolved = _mapping(resolved, 'the resolved speculative settings')
    spec = {}
    for key in ('method', 'max_draft_len', 'draft_model'):
        if resolved.get(key) is not None:
            spec[key] = resolved.get(key)
    spec.update(_mapping(declared.get('speculative'), 'speculative'))
    return dict(declared, speculative=spec)


def _encode(value):
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    raise TypeError('%s is not JSON serializable' % type(value).__name__)


def _digest(value):
    """``value | to_json(sort_keys=true) | hash('sha256')``."""
    text = json.dumps(value, sort_keys=True, default=_encode)
    return hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()


def inputs_key(instance, candidates, settings, workloads=None, datasets=None):
    """The sha256 of everything that decides what a sweep measures and does (not its run id).

    ``instance`` is :func:`inventory_instance`'s, ``candidates`` the draft lengths measured and
    ``settings`` the role's typed settings. With ``settings['workloads']`` set, the resolved
    ``workloads``, the rule and a digest of the ``datasets`` (workload name -> records) count too."""
    settings = _mapping(settings, 'the settings')
    inputs = {
        'instance': instance, 'candidates': list(candidates),
        'concurrency': settings['concurrency'],
        'repetitions': settings['repetitions'], 'requests_per_worker': settings['requests_per_worker'],
        'warmup_requests_per_worker': settings['warmup_requests_per_worker'],
        'max_tokens': settings['max_tokens'], 'temperature': float(settings['temperature']),
        'allow_greedy_fallback': bool(settings['allow_greedy_fallback']),
        'ignore_eos': bool(settings['ignore_eos']), 'prompt_set': settings['prompt_set'],
        'spec_metrics': settings['spec_metrics'], 'min_runs': settings['min_runs'],
        'max_rel_mad': float(settings['max_rel_mad']), 'mad_k': float(settings['mad_k']),
        'rel_tol': float(settings['rel_tol']), 'apply': bool(settings['apply']),
        'client_limited': settings['client_limited'],
        'equivalence': bool(settings['equivalence']),
        'equivalence_min_prefix': settings['equivalence_min_prefix'],
        'equivalence_prompts': settings['equivalence_prompts'],
        'equivalence_max_tokens': settings['equivalence_max_tokens'],
        'apply_schedule': bool(settings['apply_schedule']),
    }
    if settings.get('engine_modes'):
        inputs['engine_modes'] = list(settings['engine_modes'])
    if settings.get('workloads'):
        inputs.update({'workloads': workloads, 'workload_rule': settings['workload_rule'],
                       'datasets': _digest(datasets if datasets is not None else {})})
    return _digest(inputs)


_MISSING = object()


def sweep_needed(recorded, key, force=False, apply=False):
    """Whether to measure: with ``force``; when the last sweep recorded for the instance (``recorded``,
    its entry of the specdec_sweep local fact) had other inputs than ``key``, or none; or, with
    ``apply``, when that sweep found a winner the fact does not record as applied by it."""
    if force:
        return True
    recorded = _mapping(recorded, 'the recorded sweep')
    last = recorded.get('last_sweep', _MISSING)
    if last is _MISSING or last is None:
        return True
    last = _mapping(last, 'last_sweep')
    if last.get('inputs_sha256', '') != key:
        return True
    if not apply or last.get('winner', _MISSING) is None:
        return False
    applied = _mapping(recorded.get('applied'), 'applied')
    return applied.get('run_id', '') != last.get('run_id')


def candidate_instance(original, declared, draft_len, schedule=None, apply_schedule=False):
    """The instance served for ``draft_len``: ``original`` (what runs now) without speculation for 0,
    otherwise with the declared speculative settings (``declared``: the inventory's instance, see
    :func:`inventory_instance`) at that length and without a schedule. With ``apply_schedule`` and a
    selection ``schedule`` that has one, its engine-neutral ``draft_len_schedule`` is added (spec_config renders
    it for the engine: TensorRT-LLM's ``draft_len_schedule``, vLLM's ``num_speculative_tokens_per_batch_size``
    up to the instance's max_batch_size)."""
    original = _mapping(original, 'the running instance')
    if draft_len == 0:
        return dict(original, speculative={'method': 'none'})
    declared = _mapping(declared, 'the declared instance')
    spec = dict((k, v) for k, v in _mapping(declared.get('speculative'), 'speculative').items()
                if k not in SCHEDULE_KEYS)
    spec['max_draft_len'] = draft_len
    schedule = _mapping(schedule, 'the schedule')
    if apply_schedule and schedule.get('trtllm_draft_len_schedule') is not None:
        spec['draft_len_schedule'] = dict((int(k), int(v)) for k, v in schedule['trtllm_draft_len_schedule'].items())
    return dict(original, speculative=spec)


def failure_text(failure):
    """The message of a failed task result, cut to ERROR_LENGTH characters as the records keep it."""
    failure = _mapping(failure, 'the failed result')
    return truncate(str(failure.get('msg', 'failed')))


def _name(workload):
    return _mapping(workload, 'a workload')['name']


def unmeasured_records(workloads, concurrency, draft_len, error):
    """One record per workload and concurrency level, in that order, with no runs and ``error``
    (cut to ERROR_LENGTH characters): a candidate the gate rejected, or one that failed."""
    error = truncate(str(error))
    return [{'draft_len': draft_len, 'concurrency': conc, 'workload': _name(w), 'runs': [], 'error': error}
            for w in workloads or [] for conc in concurrency or []]


def measured_records(results, draft_len):
    """One record per serve_bench result of a loop over (workload, concurrency) pairs, with its runs."""
    out = []
    for result in results or []:
        result = _mapping(result, 'a serve_bench result')
        run = result.get(result.get('ansible_loop_var') or 'item')
        if not isinstance(run, (list, tuple)) or len(run) != 2:
            raise SweepRecordError('a serve_bench result has no (workload, concurrency) loop item')
        if 'runs' not in result:
            raise SweepRecordError('the serve_bench result of workload %s at concurrency %s has no runs'
                                   % (_name(run[0]), run[1]))
        out.append({'draft_len': draft_len, 'concurrency': run[1], 'workload': _name(run[0]),
                    'runs': result['runs']})
    return out


def workload_winners(workloads):
    """Workload name -> its winner's draft length, or None when it has no winner
    (``workloads``: the selection's per-workload results)."""
    out = {}
    for name, entry in _mapping(workloads, 'the workloads').items():
        winner = _mapping(entry, 'workload %s' % name).get('winner')
        out[name] = winner['draft_len'] if winner else None
    return out


def stack_part(declared, layout, host, play_hosts):
    """This host's part in a sweep of ``declared``: {group, members, head, role}.

    An instance served across a stack (its ``stack`` key) is swept on every member at once: each candidate is
    served by the whole stack (inference_server restarts it as one), and the ``head`` alone, where the stack
    serves, probes and measures it; a worker (``role`` 'worker') follows the head's record.
    Any other instance is its host's alone (``role`` None, ``head`` the host, which measures).
    ``layout``: stack_link's layout of this host (its ``group`` and ``members``, head first), or None;
    ``play_hosts``: the play's hosts, which must hold every member."""
    declared = _mapping(declared, 'the instance')
    group = declared.get('stack')
    if group in (None, ''):
        return {'group': None, 'members': [host], 'head': host, 'role': None}
    name = declared.get('name')
    if not isinstance(layout, dict) or not layout.get('members'):
        raise SweepRecordError("instance %s is served across stack %s, but %s is in no stack (stack_link_group "
                               "is not set for it)" % (name, group, host))
    if layout.get('group') != group:
        raise SweepRecordError("instance %s is served across stack %s, but %s is a member of %s"
                               % (name, group, host, layout.get('group')))
    members = [str(m) for m in layout['members']]
    missing = [m for m in members if m not in list(play_hosts or [])]
    if missing:
        raise SweepRecordError("instance %s is served across stack %s: %s of its members %s not in this play; a "
                               "stack is swept as one (run the sweep on every member, e.g. -l %s)"
                               % (name, group, ', '.join(missing), 'is' if len(missing) == 1 else 'are', group))
    return {'group': group, 'members': members, 'head': members[0], 'role': 'head' if host == members[0] else 'worker'}


# What a sweep's result was measured on, from the serving facts of its instance (inference_server's record):
# a result measured on another engine build, engine release or model no longer says what is fastest.
MEASURED_ON_KEYS = ('engine', 'engine_version', 'image', 'image_id', 'model', 'draft_model')
# The groups the collection's playbooks add hosts to while they run (rollout.yml's specdec_rollout_changes,
# retune.yml's specdec_retune): not the host's classes.
RUN_TIME_GROUP_PREFIX = 'specdec_'


def host_groups(groups):
    """A host's groups as its classes: sorted, without the playbooks' run-time groups."""
    return sorted(str(g) for g in groups or [] if not str(g).startswith(RUN_TIME_GROUP_PREFIX))


def measured_on(serving, instance, groups=None):
    """What the sweep of ``instance`` was measured on: the keys of MEASURED_ON_KEYS from its serving facts
    (``serving``: ansible_local.specdec_serving.instances; None where not recorded) and the host's groups,
    its classes in the inventory (:func:`host_groups`)."""
    record = _mapping(serving, 'the serving facts').get(instance)
    record = record if isinstance(record, dict) else {}
    out = dict((key, record.get(key) if record.get(key) not in ('', None) else None) for key in MEASURED_ON_KEYS)
    out['host_groups'] = host_groups(groups)
    return out


def measured_on_drift(recorded, serving):
    """The keys of MEASURED_ON_KEYS in which what serves now (``serving``: the instance's serving facts)
    differs from what its last sweep was measured on (``recorded``); None when the sweep recorded nothing
    (a sweep older than this record), [] when they agree. A key unknown on either side is not a difference,
    except the image ID, which a change of image always changes."""
    if not isinstance(recorded, dict) or not recorded:
        return None
    serving = serving if isinstance(serving, dict) else {}
    out = []
    for key in MEASURED_ON_KEYS:
        then, now = recorded.get(key), serving.get(key)
        if then in ('', None) or now in ('', None):
            continue
        if str(then) != str(now):
            out.append(key)
    return out


def resweep_instances(instances):
    """The instances a rollout's canary sweeps again after it is updated: those whose last sweep recorded what it
    was measured on and whose serving facts now differ from it in engine, release, image or models
    (:func:`measured_on_drift`). ``instances``: the canary's ``fleet_view_host.instances`` (serving facts with
    ``last_sweep``), read after the update. An instance served across a stack is left out: a stack is swept with
    every member in the play (playbooks/sweep.yml)."""
    out = []
    for inst in instances or []:
        inst = _mapping(inst, 'an instance')
        sweep = inst.get('last_sweep') if isinstance(inst.get('last_sweep'), dict) else {}
        if isinstance(inst.get('stack'), dict):
            continue
        if measured_on_drift(sweep.get('measured_on'), inst):
            out.append(str(inst.get('name')))
    return out


def adopted_sweeps(groups, names, canaries):
    """What a host takes from the rollout's canaries: {instance: the canary's sweep entry} for each instance the
    host serves (``names``) that a canary of the same host groups (its sweep's ``measured_on.host_groups`` equal
    to ``groups``, sorted) swept again in this rollout, with ``adopted_from`` naming that canary. The first
    canary in order wins. ``canaries``: {canary host: {instance: its new sweep entry}}, in batch order."""
    mine = host_groups(groups)
    out = {}
    for host, retuned in _mapping(canaries, 'the canaries').items():
        for name, entry in sorted(_mapping(retuned, 'the sweeps of canary %s' % host).items()):
            entry = _mapping(entry, 'the sweep of %s' % name)
            last = _mapping(entry.get('last_sweep'), 'the last sweep of %s' % name)
            measured = _mapping(last.get('measured_on'), 'what %s was measured on' % name)
            if name in out or name not in list(names or []) or measured.get('host_groups') != mine:
                continue
            out[name] = dict(entry, adopted_from=host)
    return out
