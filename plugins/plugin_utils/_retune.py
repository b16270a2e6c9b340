# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tune loop's guard: whether the *speculation stopped paying* alert of one host re-tunes it now.

The alert (labels ``host`` and ``engine_instance``) reaches the rulebook ``extensions/eda/rulebooks/retune.yml``,
which runs ``playbooks/retune.yml``; there the retune role asks :func:`decide` before it touches anything. The guards, in
the order they are asked (the first that refuses names itself and its numbers in the reason):

1. ``in_progress``: one re-tune per host class at a time (the class is the host's group among
   ``classes``, the inventory's host-class groups such as ``spark-nodes`` and ``b200-nodes``).
2. ``cooldown``: a class is re-tuned at most once per cool-down, counted from its last finished re-tune.
3. ``capacity_floor``: the class's hosts that stay serving (its hosts less those drained at a gateway, those
   being re-tuned and the host itself) are at least ``capacity_floor`` of its hosts.
4. ``backend``: at most one host per gateway backend is drained at a time: no host of a backend of this
   host is drained (or being re-tuned) already, this host included.

The state (the playbook's JSON state file) is a mapping per class: ``in_progress`` (``{host, instance,
since}`` or null) and ``last_retune`` (epoch seconds or null). :func:`decide` returns the new state when it
acts (the class's ``in_progress`` set); :func:`finished` is the state once the re-tune is over.

Every bad input raises :class:`RetuneError` with the variable's name, the value and what is allowed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils import _guard_state as guard_state
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    DURATION_WORDS,
    GROUP_RE,
    is_name,
    number,
    refusal,
    seconds,
)

# The defaults of the guards' settings (retune_classes, retune_cooldown, retune_capacity_floor) and of the state file
# (retune_state_file) are the retune role's argument spec's (roles/retune/meta/argument_specs.yml), the one place
# they are written; a setting given as null takes its default from there. The monitoring_tune_loop role makes the
# state file's directory, owned by the tune loop's user.
DEFAULTS: dict[str, Any] = role_spec.defaults('retune', ('classes', 'cooldown', 'capacity_floor'))
STATE_FILE: str = role_spec.default('retune_state_file')
GUARDS = ('in_progress', 'cooldown', 'capacity_floor', 'backend')


def state_path(given=None):
    """The state file: retune_state_file when given (an absolute path), else :data:`STATE_FILE`."""
    return guard_state.state_path(given, STATE_FILE, 'retune', RetuneError)


# the floor compared with a ratio of host counts: a float such as 2/3 is not exact
EPSILON = 1e-9


class RetuneError(ValueError):
    pass


_number = guard_state.is_number


_when = guard_state.when


def _ratio(value):
    return '%.2f' % value


# --------------------------------------------------------------------------- inputs

def settings(given=None):
    """The settings, checked: ``classes`` (a list of group names), ``cooldown_s`` (seconds, from ``cooldown``:
    seconds or a duration such as ``1h``) and ``capacity_floor`` (0 to 1). A key given as None takes its
    default (:data:`DEFAULTS`)."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise RetuneError(refusal('retune settings', given, 'must be a mapping of %s' % ', '.join(sorted(DEFAULTS))))
    unknown = sorted(str(k) for k in given if k not in DEFAULTS)
    if unknown:
        raise RetuneError('retune settings: unknown %s (known: %s)' % (', '.join(unknown), ', '.join(sorted(DEFAULTS))))
    s = dict(DEFAULTS)
    s.update((k, v) for k, v in given.items() if v is not None)
    classes = s['classes']
    if (not isinstance(classes, (list, tuple)) or not classes
            or not all(isinstance(c, str) and GROUP_RE.match(c) for c in classes) or len(set(classes)) != len(classes)):
        raise RetuneError(refusal('retune_classes', classes, 'must be a non-empty list of distinct inventory group names'))
    cooldown = s['cooldown']
    if number(cooldown) is not None and number(cooldown) >= 0:
        cooldown_s = number(cooldown)
    else:
        try:
            cooldown_s = float(seconds(cooldown))
        except ValueError:
            raise RetuneError(refusal('retune_cooldown', cooldown, 'must be seconds (0 or more) or %s' % DURATION_WORDS))
    floor = number(s['capacity_floor'])
    if floor is None or not 0 <= floor <= 1:
        raise RetuneError(refusal('retune_capacity_floor', s['capacity_floor'], 'must be a fraction from 0 to 1 (0.5: half the class keeps serving)'))
    return {'classes': list(classes), 'cooldown_s': cooldown_s, 'capacity_floor': float(floor)}


def _entry(cls, entry):
    where = 'retune state[%r]' % cls
    if entry is None:
        entry = {}
    if not isinstance(entry, dict):
        raise RetuneError(refusal(where, entry, 'must be a mapping with in_progress and last_retune'))
    out = dict(entry)
    progress = entry.get('in_progress')
    if progress is not None:
        if (not isinstance(progress, dict) or not isinstance(progress.get('host'), str) or not progress['host']
                or not _number(progress.get('since')) or progress['since'] < 0):
            raise RetuneError(refusal(where + '.in_progress', progress,
                                      'must be null or {host, since}: the host being re-tuned and since when (epoch seconds)'))
    out['in_progress'] = progress
    last = entry.get('last_retune')
    if last is not None and (not _number(last) or last < 0):
        raise RetuneError(refusal(where + '.last_retune', last, 'must be null or epoch seconds'))
    out['last_retune'] = last
    return out


def state(given):
    """The state, checked: {class: {in_progress, last_retune, ...}}. `given` is the mapping or the state file's
    text (empty: no state yet). Other keys of an entry are kept as they are."""
    if given is None:
        given = {}
    given = guard_state.parsed(given, 'retune', RetuneError)
    if not isinstance(given, dict):
        raise RetuneError(refusal('retune state', given, 'must be a mapping of host class to {in_progress, last_retune}'))
    return dict((str(cls), _entry(cls, entry)) for cls, entry in given.items())


def _hosts(where, value):
    if not isinstance(value, (list, tuple)) or not all(isinstance(h, str) and h for h in value):
        raise RetuneError(refusal(where, value, 'must be a list of host names'))
    return list(value)


def backends(given):
    """{backend: [hosts]} from a mapping of backend to hosts, or from the gateway plan's backends (a list of
    {name, servers: [{host, ...}]}, as gateway_plan returns them)."""
    if given is None:
        return {}
    out: dict[str, list] = {}
    if isinstance(given, dict):
        for name, hosts in given.items():
            out[str(name)] = _hosts('retune_backends[%r]' % name, hosts)
        return out
    if isinstance(given, (list, tuple)):
        for i, backend in enumerate(given):
            if (not isinstance(backend, dict) or not isinstance(backend.get('name'), str)
                    or not isinstance(backend.get('servers'), (list, tuple))):
                raise RetuneError(refusal('retune_backends[%d]' % i, backend, 'must be a backend of the gateway plan: {name, servers}'))
            hosts = [s.get('host') if isinstance(s, dict) else s for s in backend['servers']]
            out.setdefault(backend['name'], [])
            out[backend['name']].extend(h for h in _hosts('retune_backends[%d].servers' % i, hosts) if h not in out[backend['name']])
        return out
    raise RetuneError(refusal('retune_backends', given, 'must be a mapping of backend to its hosts, or the gateway plan\'s backends'))


def drained(given):
    """{backend: [hosts drained there now]}."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise RetuneError(refusal('retune_drained', given, 'must be a mapping of backend to the hosts drained there now'))
    return dict((str(name), _hosts('retune_drained[%r]' % name, hosts)) for name, hosts in given.items())


def host_class(host, groups, classes):
    """The host's class: the one group of `classes` (in `groups`, {group: [hosts]}) it is in."""
    return guard_state.host_class(host, groups, classes, 'retune', RetuneError)


# --------------------------------------------------------------------------- the decision

def decide(alert, groups, current_state, given_settings=None, given_backends=None, given_drained=None, now=None):
    """Whether the alert's host is re-tuned now.

    alert: {host, engine_instance} (the alert's labels); groups: the inventory's groups; current_state: the
    state (:func:`state`); given_settings: :func:`settings`; given_backends: :func:`backends`; given_drained:
    :func:`drained`; now: epoch seconds.

    Returns {act, host, instance, class, guard, reason}: guard is the guard that refused (None when acting)
    and reason one sentence that names it and its numbers; when acting, also ``state``: the new state, with
    the class's in_progress set to {host, instance, since: now}.
    """
    if not isinstance(alert, dict):
        raise RetuneError(refusal('retune alert', alert, 'must be the alert\'s labels: {host, engine_instance}'))
    host = alert.get('host')
    instance = alert.get('engine_instance')
    if not isinstance(host, str) or not host:
        raise RetuneError(refusal('retune_host', host, 'must be the host the alert names (its label host)'))
    if not is_name(instance):
        raise RetuneError(refusal('retune_instance', instance, 'must be the engine instance the alert names (its label '
                                  'engine_instance), a plain name'))
    if not _number(now) or now < 0:
        raise RetuneError(refusal('now', now, 'must be epoch seconds'))
    s = settings(given_settings)
    st = state(current_state)
    bk = backends(given_backends)
    dr = drained(given_drained)
    cls = host_class(host, groups, s['classes'])
    members = sorted(set(groups.get(cls) or []))
    entry = st.get(cls) or {'in_progress': None, 'last_retune': None}
    out: dict[str, Any] = {'act': False, 'host': host, 'instance': instance, 'class': cls}

    def refused(guard, reason):
        out.update(guard=guard, reason=reason)
        return out

    # 1. one re-tune per class at a time
    progress = entry['in_progress']
    if progress:
        return refused('in_progress', 'in progress: a re-tune of %s%s in class %s has been running since %s (%d s); '
                       'a class is re-tuned one host at a time.' % (
                           progress['host'], ' (%s)' % progress['instance'] if progress.get('instance') else '', cls,
                           _when(progress['since']), max(0, now - progress['since'])))

    # 2. the class's cool-down
    last = entry['last_retune']
    if last is not None:
        ago = max(0.0, now - last)
        if ago < s['cooldown_s']:
            return refused('cooldown', 'cool-down: class %s was last re-tuned %d s ago (at %s), within its cool-down of %d s '
                           '(%d s left).' % (cls, ago, _when(last), s['cooldown_s'], s['cooldown_s'] - ago))

    # what is not serving now: drained at a gateway, or being re-tuned (in any class)
    busy = dict((c, e['in_progress']['host']) for c, e in st.items() if e['in_progress'])
    drained_hosts = set(h for hosts in dr.values() for h in hosts)
    away = sorted((drained_hosts | set(busy.values())) & set(members) - {host})

    # 3. the class's capacity floor
    serving = len(members) - len(away) - 1
    share = float(serving) / len(members)
    if share + EPSILON < s['capacity_floor']:
        return refused('capacity_floor', 'capacity floor: re-tuning %s would leave %d of the %d hosts of %s serving (%s), '
                       'below the floor of %s%s.' % (
                           host, serving, len(members), cls, _ratio(share), _ratio(s['capacity_floor']),
                           ' (not serving now: %s)' % ', '.join(away) if away else ''))

    # 4. one drained host per backend
    mine = sorted(set(b for b, hosts in bk.items() if host in hosts) | set(b for b, hosts in dr.items() if host in hosts))
    for backend in mine:
        held = set(dr.get(backend, []))
        others = sorted(held | set(h for h in busy.values() if h in bk.get(backend, [])))
        if others:
            return refused('backend', 'one drained host per backend: backend %s already has %s drained; re-tuning %s '
                           'would drain %s there.' % (
                               backend, ', '.join(h if h in held else '%s (being re-tuned)' % h for h in others), host,
                               'it again' if others == [host] else 'a second host'))

    new_state = copy.deepcopy(st)
    new_entry = new_state.setdefault(cls, {'in_progress': None, 'last_retune': None})
    new_entry['in_progress'] = {'host': host, 'instance': instance, 'since': int(now)}
    since = 'last re-tuned %d s ago' % max(0.0, now - last) if last is not None else 'never re-tuned'
    if mine:
        routes = 'no other host drained in backend%s %s' % ('s' if len(mine) > 1 else '', ', '.join(mine))
    else:
        routes = '%s is in no gateway backend given' % host
    out.update(act=True, guard=None, state=new_state, reason=(
        'all guards pass: no re-tune in progress in %s, %s (cool-down %d s), %d of the %d hosts of %s keep serving '
        '(%s, floor %s), %s.' % (cls, since, s['cooldown_s'], serving, len(members), cls, _ratio(share),
                                 _ratio(s['capacity_floor']), routes)))
    return out


def finished(current_state, cls, now, host=None):
    """The state once the re-tune of class `cls` is over: its in_progress cleared, its last_retune `now` (the
    cool-down counts from here). `host`, when given, must be the host the state says is being re-tuned."""
    st = state(current_state)
    if not isinstance(cls, str) or cls not in st or not st[cls]['in_progress']:
        raise RetuneError(refusal('retune class', cls, 'has no re-tune in progress in the state (%s)' % (
            ', '.join(sorted(c for c in st if st[c]['in_progress'])) or 'none is in progress')))
    if host is not None and st[cls]['in_progress']['host'] != host:
        raise RetuneError(refusal('retune_host', host, 'is not the host being re-tuned in class %s (%s is)' % (
            cls, st[cls]['in_progress']['host'])))
    if not _number(now) or now < 0:
        raise RetuneError(refusal('now', now, 'must be epoch seconds'))
    new_state = copy.deepcopy(st)
    new_state[cls].update(in_progress=None, last_retune=int(now))
    return new_state


def _served(entry):
    """The speculative settings a sweep entry says are served (its ``applied``), or None."""
    applied = entry.get('applied') if isinstance(entry, dict) else None
    spec = applied.get('speculative') if isinstance(applied, dict) else None
    return spec if isinstance(spec, dict) else None


def _length(spec):
    if spec is None:
        return 'nothing recorded'
    if spec.get('method', 'none') == 'none':
        return 'no speculation'
    sched = spec.get('draft_len_schedule')
    return 'draft length %s%s' % (spec.get('max_draft_len'), ', schedule %s' % json.dumps(sched, sort_keys=True)
                                  if sched else '')


def outcome(before, after):
    """What the re-tune's sweep found: ``{changed, outcome, before, after, reason}``. ``before`` and ``after``
    are the instance's entries of the host's sweep fact around the sweep (draft_sweep applied its winner).
    ``changed``: the sweep's winner is not what was served, so the class takes it (the rollout's canary path);
    the sweep's own rule already holds noise out (a length wins only by more than rel_tol of a score that the
    spread lowers). Otherwise ``re-verified``: the host serves what it served, measured again."""
    if not isinstance(after, dict) or not isinstance(after.get('last_sweep'), dict):
        raise RetuneError(refusal('the sweep after the re-tune', after, 'must be the entry the sweep recorded'))
    then, now = _served(before), _served(after)
    run = after['last_sweep'].get('run_id')
    if then is not None and now is not None and json.dumps(then, sort_keys=True) == json.dumps(now, sort_keys=True):
        return {'changed': False, 'outcome': 're-verified', 'before': then, 'after': now,
                'reason': 'sweep %s chose what was served (%s): re-verified' % (run, _length(now))}
    return {'changed': now is not None, 'outcome': 'changed' if now is not None else 'not applied',
            'before': then, 'after': now,
            'reason': 'sweep %s chose %s where %s was served' % (run, _length(now), _length(then))}
