# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet playbooks derive from a host's inventory: the instances to serve (with a sweep's
applied winner kept), their rendering, and what model_cache fetches for them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re
from typing import Any

from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import render
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import CONTAINER_MODELS_DIR


def _applied(local_facts, name):
    """(the speculative settings a sweep applied, the method and draft model it swept) or (None, None).

    A sweep records what it measured (``swept``) beside what it applied: its winner may be no
    speculation at all (draft length 0, method none), which is still the answer for the method it
    swept. A fact written before ``swept`` was recorded names the method of what it applied."""
    sweeps = (local_facts or {}).get('specdec_sweep') or {}
    applied = (sweeps.get(name) or {}).get('applied') if isinstance(sweeps, dict) else None
    if not isinstance(applied, dict) or not isinstance(applied.get('speculative'), dict):
        return None, None
    swept = applied.get('swept') if isinstance(applied.get('swept'), dict) else applied['speculative']
    return applied['speculative'], swept


class KeepWinnersError(TypeError):
    """rollout_keep_sweep_winners is not a boolean (the filters name it; any other error is not theirs to name)."""


def fleet_plan(instances, local_facts=None, keep_sweep_winners=None):
    """{serving, rendered, cache, instances} for one host.

    serving: the instances whose state is not absent, each with the speculative settings a draft-length
    sweep applied on this host (ansible_local.specdec_sweep[name].applied.speculative, no speculation
    included) while the inventory still names the method and draft model it swept
    (applied.swept), unless keep_sweep_winners is false (None: the rollout role's default of
    rollout_keep_sweep_winners);
    rendered: spec_config of each (a bad key raises here); cache: per serving instance, the model and
    draft model model_cache fetches (paths stay paths); instances: serving plus those to remove.
    """
    try:
        keep = check_type_bool(role_spec.default('rollout_keep_sweep_winners') if keep_sweep_winners is None
                               else keep_sweep_winners)
    except TypeError as exc:
        raise KeepWinnersError(str(exc))
    serving, removed = [], []
    for inst in instances or []:
        if not isinstance(inst, dict):
            serving.append(inst)  # refused, with its index, by spec_config below
            continue
        if (inst.get('state') or 'started') == 'absent':
            removed.append(inst)
            continue
        applied, swept = _applied(local_facts, inst.get('name')) if keep else (None, None)
        if applied and isinstance(swept, dict):
            declared = render(inst)['speculative']
            if (swept.get('method', 'none') == declared['method']
                    and swept.get('draft_model') == declared['draft_model']):
                inst = dict(copy.deepcopy(inst), speculative=applied)
        serving.append(inst)
    rendered = [render(inst) for inst in serving]
    prefix = CONTAINER_MODELS_DIR + '/'
    cache = [{'model': r['model_path'][len(prefix):] if r['model_path'].startswith(prefix) else r['model_path'],
              'speculative': {'draft_model': r['speculative'].get('draft_model') or ''}} for r in rendered]
    models = []
    for r in rendered:
        for path in (r['model_path'], r['speculative'].get('draft_model_path')):
            if isinstance(path, str) and path.startswith(prefix) and path[len(prefix):] not in models:
                models.append(path[len(prefix):])
    return {'serving': serving, 'rendered': rendered, 'cache': cache, 'models': models,
            'instances': serving + removed}


def disks_below(df_lines, min_gb):
    """The file systems of `df --output=target,avail -B1` output (header first) with less than min_gb
    GB free, as 'target (N.N GB)'."""
    low = []
    for line in list(df_lines or [])[1:]:
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit() and int(fields[1]) < float(min_gb) * 1e9:
            low.append('%s (%.1f GB)' % (fields[0], int(fields[1]) / 1e9))
    return low


def _version_key(text):
    return tuple(int(x) for x in re.findall(r'[0-9]+', text or ''))


def gpu_check(result, count, min_driver=''):
    """'' when `nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader` (a command
    result) lists ``count`` GPUs, each with a driver >= min_driver; else what is wrong."""
    want = 'expected %d GPU(s)%s' % (count, (' with driver >= %s' % min_driver) if min_driver else '')
    if (result or {}).get('rc', 1) != 0:
        return '%s, nvidia-smi failed: %s' % (want, ((result or {}).get('stderr') or (result or {}).get('msg') or '').strip())
    gpus = [line.strip() for line in (result.get('stdout_lines') or []) if line.strip()]
    old = [g for g in gpus if min_driver and _version_key(g.split(',')[-1]) < _version_key(min_driver)]
    if len(gpus) != count or old:
        return '%s, nvidia-smi lists %d: %s' % (want, len(gpus), '; '.join(gpus))
    return ''


def _probe(lines):
    """The fleet role's probe output, by kind: docker (rc, root or error), df lines, images, models, gpu."""
    out: dict[str, Any] = {'docker': None, 'df': [], 'images': {}, 'models': {}, 'gpu_rc': None, 'gpu': []}
    for line in lines or []:
        kind, dummy, rest = line.partition(' ')
        if kind == 'docker':
            rc, dummy, text = rest.partition(' ')
            out['docker'] = (int(rc) if rc.lstrip('-').isdigit() else 1, text.strip())
        elif kind == 'df':
            out['df'].append(rest)
        elif kind == 'image':
            name, dummy, image_id = rest.rpartition(' ')
            out['images'][name] = '' if image_id == '-' else image_id
        elif kind == 'model':
            name, dummy, held = rest.rpartition(' ')
            out['models'][name] = held == 'yes'
        elif kind == 'gpu-rc':
            out['gpu_rc'] = int(rest) if rest.strip().lstrip('-').isdigit() else 1
        elif kind == 'gpu':
            out['gpu'].append(rest)
    return out


def preflight(lines, host, min_free_gb=0, gpu_count=0, min_driver='', models_dir='', image_archive='',
              registry=None, archive_tags=None):
    """What stops a rollout on this host, from the rollout role's one probe (every problem at once).

    ``lines``: the probe's output (``docker RC ROOT``, ``df TARGET AVAIL``, ``image NAME ID|-``,
    ``model REPO yes|no``, ``gpu-rc RC`` and ``gpu LINE``). ``registry``: the ``docker manifest inspect``
    results of the missing images when there is no archive (a loop's results). ``archive_tags``: a callable
    giving the tags of ``image_archive`` (read on the controller only when an image is missing).
    Returns {'missing_images': [...], 'problems': [...]}."""
    probe = _probe(lines)
    rc, root = probe['docker'] if probe['docker'] is not None else (1, 'no answer from the probe')
    if rc != 0:
        return {'missing_images': [], 'problems': [
            'docker does not answer on %s (%s); run playbooks/prepare.yml first.' % (host, root)]}
    problems = []
    if gpu_count > 0:
        result = {'rc': probe['gpu_rc'] if probe['gpu_rc'] is not None else 1, 'stdout_lines': probe['gpu'],
                  'stderr': '\n'.join(probe['gpu'])}
        problem = gpu_check(result, gpu_count, min_driver)
        if problem:
            problems.append('%s: %s' % (host, problem))
    low = disks_below(['target avail'] + probe['df'], min_free_gb)
    if low:
        problems.append('%s: less than rollout_min_free_gb=%s GB free on %s.' % (host, min_free_gb, ', '.join(low)))
    missing = [name for name, image_id in probe['images'].items() if not image_id]
    if missing:
        if image_archive:
            exists = os.path.isfile(image_archive)
            tags = list(archive_tags(image_archive)) if exists and archive_tags else []
            unreachable = [name for name in missing if name not in tags]
            where = 'in the archive %s %s' % (image_archive, '(tags in it: %s)' % ', '.join(tags) if exists
                                              else '(missing on the controller)')
        else:
            asked = dict((r.get('item'), r.get('rc')) for r in (registry or []) if isinstance(r, dict) and not r.get('skipped'))
            unreachable = [name for name in missing if asked.get(name, 1) != 0]
            where = 'in their registry (docker manifest inspect failed)'
        if unreachable:
            problems.append('%s: image(s) %s neither on the host nor %s.' % (host, ', '.join(unreachable), where))
    absent = [name for name, held in probe['models'].items() if not held]
    if absent:
        problems.append('%s: model(s) %s not in %s; run playbooks/prepare.yml (model_cache) first.'
                        % (host, ', '.join(absent), models_dir))
    return {'missing_images': missing, 'problems': problems}


def _identity(view, keys):
    return [dict((k, inst.get(k)) for k in keys if k in inst) for inst in (view or {}).get('instances', [])]


def failure_cause(result):
    """What a failed task says went wrong: its ``msg``; for a task with a loop, whose ``msg`` is only Ansible's own
    "One or more items failed", the messages of its failed items, each once, in order. A text is taken as it is."""
    if not isinstance(result, dict):
        return str(result) if result not in (None, '') else 'failed'
    said = []
    for item in result.get('results') or []:
        if isinstance(item, dict) and item.get('failed') and item.get('msg') not in (None, ''):
            if str(item['msg']) not in said:
                said.append(str(item['msg']))
    return '; '.join(said) or str(result.get('msg') or 'failed')


def rollout_status(now, before, started, finished, changes, error=None):
    """A host's outcome in a rollout, from the fleet view of the host before it and now.

    Without ``error``: ``updated`` when an instance's image, config or container start moved, else
    ``unchanged``. With ``error`` (the batch failed on this host: its text, or the failed task's result, whose
    cause :func:`failure_cause` reads): ``rolled back`` when every instance runs its previous image and config
    again and serves, else ``failed``.
    """
    serving = all(inst.get('health') == 'ready' for inst in (now or {}).get('instances', []))
    status = {'serving': serving, 'started': started, 'finished': finished, 'changes': changes}
    keys: tuple[str, ...]
    if error is None:
        keys = ('name', 'image_id', 'config_checksum', 'started_at')
        status['status'] = 'updated' if _identity(now, keys) != _identity(before, keys) else 'unchanged'
    else:
        keys = ('name', 'image_id', 'config_checksum')
        back = _identity(now, keys) == _identity(before, keys)
        status.update(status='rolled back' if back and serving else 'failed', error=failure_cause(error))
    return status


def rollout_preview(hosts, changes, run_id, canary, batch):
    """What a rollout is about to do, as lines: how many of ``hosts`` it changes, then one line per host it
    changes (in the order of ``hosts``), naming each instance and why. ``changes`` holds, per host, its
    ``inference_server_changes`` (``[{'instance': name, 'reasons': [...]}]``; empty: nothing to change)."""
    if not isinstance(hosts, (list, tuple)) or not isinstance(changes, (list, tuple)) or len(hosts) != len(changes):
        raise ValueError('rollout_preview: expects the hosts and, per host, its changes (two lists of one length)')
    changing = [(host, host_changes) for host, host_changes in zip(hosts, changes) if host_changes]
    lines = ['Rollout %s: %d of %d host(s) to change (canary %s, then batches of %s of them); the others have '
             'nothing to change.' % (run_id, len(changing), len(hosts), canary, batch)]
    for host, host_changes in changing:
        parts = ['%s (%s)' % (c['instance'], ', '.join(c['reasons'])) for c in host_changes]
        lines.append('%s: %s' % (host, '; '.join(parts)))
    return lines


def rollout_batches(hosts, changes, stacks, canary, batch):
    """The rollout's order and batch sizes, a stack counting as one member: every member of a stack that has an
    instance to change goes in the same batch (a stack restarts as one, inference_server), and a batch size
    counts members, not hosts. ``hosts``: the play's hosts in inventory order; ``changes``: per host, its
    inference_server_changes; ``stacks``: per host, the members of the stack whose instances it serves ([] when
    none); ``canary``: members in the first batch; ``batch``: members per later batch, a count or ``N%`` of the
    members that change (at least one). Returns {hosts: the hosts to roll out in order, serial: the host count of
    each batch (the play's ``serial``), units: the members, each a list of hosts}."""
    if not (isinstance(hosts, (list, tuple)) and isinstance(changes, (list, tuple)) and isinstance(stacks, (list, tuple))
            and len(hosts) == len(changes) == len(stacks)):
        raise ValueError('rollout_batches: expects the hosts and, per host, its changes and its stack (three lists '
                         'of one length)')
    stack_of = dict(zip(hosts, stacks))
    units, placed = [], set()
    for host, host_changes in zip(hosts, changes):
        if not host_changes or host in placed:
            continue
        members = [m for m in hosts if m in (stack_of.get(host) or [])] or [host]
        units.append(members)
        placed.update(members)
    size = str(batch).strip()
    if size.endswith('%'):
        per_batch = max(1, (len(units) * int(size[:-1])) // 100)
    else:
        per_batch = max(1, int(size))
    first = max(1, int(canary))
    groups = [units[:first]] + [units[i:i + per_batch] for i in range(first, len(units), per_batch)]
    return {'hosts': [h for unit in units for h in unit],
            'serial': [sum(len(u) for u in group) for group in groups if group] or [1],
            'units': units}
