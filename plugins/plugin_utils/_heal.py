# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The heal's guards: whether the *engine wedged* alert of one engine restarts it now (docs/heal.md).

``SpecdecEngineWedged`` (labels ``host`` and ``engine_instance``) reaches the tune loop's rulebook, which runs
``playbooks/heal.yml``; there the heal role asks :func:`decide` before it touches anything. The engine is the
instance on the host, or, for an instance served across a stack, the whole stack: every member is drained and
restarted (its workers first, then its head: the inference_server role's order), never one rank alone.

The guards, in the order they are asked (the first that refuses names itself and its numbers in the reason):

1. ``in_progress``: one heal per host class at a time (the class is the host's group among ``classes``).
2. ``restart_limit``: at most ``restart_limit`` restarts of an engine within ``window``. Past it the engine is not
   restarted again: it is drained at the gateways and stays drained, and its alert stays firing, for a person
   (``drain``: true). An engine the heal left drained stays so until a person heals it by hand (``by_hand``).
3. ``capacity_floor``: the class's hosts that stay serving (its hosts less those a heal left drained, those
   being healed and the engine's own) are at least ``capacity_floor`` of its hosts.

The state (the play's JSON state file) holds ``classes`` ({class: {in_progress}}) and ``engines``
({"HEAD/INSTANCE": {restarts: [epoch seconds], drained, hosts, last_heal: {at, outcome, reason}}}).
:func:`decide` returns the new state when it acts (the class's ``in_progress`` set) or drains;
:func:`finished` is the state once the heal is over, and :func:`record` what the engine's hosts show
(their local fact ``specdec_heal``, which the fleet view reads).

Every bad input raises :class:`HealError` with the variable's name, the value and what is allowed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils import _guard_state as guard_state
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    DURATION_WORDS,
    GROUP_RE,
    number,
    refusal,
    seconds,
)

# The defaults are the heal role's argument spec's (roles/heal/meta/argument_specs.yml), the one place they are
# written; a setting given as null takes its default from there.
DEFAULTS: dict[str, Any] = role_spec.defaults('heal', ('classes', 'capacity_floor', 'restart_limit', 'window'))
STATE_FILE: str = role_spec.default('heal_state_file')
GUARDS = ('in_progress', 'restart_limit', 'capacity_floor')
# what a heal ended with: the engine restarted and serves again; restarted and not healthy (it stays drained); not
# restarted, past the restart limit (it stays drained)
OUTCOMES = ('restarted', 'failed', 'left drained')
# the floor compared with a ratio of host counts: a float such as 2/3 is not exact
EPSILON = 1e-9


class HealError(ValueError):
    pass


_number = guard_state.is_number


_when = guard_state.when


def state_path(given=None):
    """The state file: heal_state_file when given (an absolute path), else :data:`STATE_FILE`."""
    return guard_state.state_path(given, STATE_FILE, 'heal', HealError)


# --------------------------------------------------------------------------- inputs

def settings(given=None):
    """The settings, checked: ``classes`` (group names), ``capacity_floor`` (0 to 1), ``restart_limit`` (a whole
    number) and ``window_s`` (seconds, from ``window``: seconds or a duration such as ``1h``). A key
    given as None takes its default (:data:`DEFAULTS`)."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise HealError(refusal('heal settings', given, 'must be a mapping of %s' % ', '.join(sorted(DEFAULTS))))
    unknown = sorted(str(k) for k in given if k not in DEFAULTS)
    if unknown:
        raise HealError('heal settings: unknown %s (known: %s)' % (', '.join(unknown), ', '.join(sorted(DEFAULTS))))
    s = dict(DEFAULTS)
    s.update((k, v) for k, v in given.items() if v is not None)
    classes = s['classes']
    if (not isinstance(classes, (list, tuple)) or not classes
            or not all(isinstance(c, str) and GROUP_RE.match(c) for c in classes) or len(set(classes)) != len(classes)):
        raise HealError(refusal('heal_classes', classes, 'must be a non-empty list of distinct inventory group names'))
    floor = number(s['capacity_floor'])
    if floor is None or not 0 <= floor <= 1:
        raise HealError(refusal('heal_capacity_floor', s['capacity_floor'], 'must be a fraction from 0 to 1 (0.5: half '
                                'the class keeps serving)'))
    # its range (1 or more) is the role's policy's (plugin_utils/_roles/heal.py), checked before the guards run
    limit = s['restart_limit']
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise HealError(refusal('heal_restart_limit', limit, 'must be a whole number of restarts'))
    window = s['window']
    if number(window) is not None and number(window) > 0:
        window_s = number(window)
    else:
        try:
            window_s = float(seconds(window))
        except ValueError:
            raise HealError(refusal('heal_window', window, 'must be seconds (above 0) or %s' % DURATION_WORDS))
    return {'classes': list(classes), 'capacity_floor': float(floor), 'restart_limit': limit, 'window_s': window_s}


def _epochs(where, value):
    if not isinstance(value, (list, tuple)) or not all(_number(t) and t >= 0 for t in value):
        raise HealError(refusal(where, value, 'must be a list of epoch seconds'))
    return sorted(value)


def state(given):
    """The state, checked: {classes: {class: {in_progress}}, engines: {engine: {restarts, drained, hosts,
    last_heal}}}. `given` is the mapping or the state file's text (empty: no state yet)."""
    given = guard_state.parsed(given, 'heal', HealError)
    if not isinstance(given, dict) or not isinstance(given.get('classes', {}), dict) \
            or not isinstance(given.get('engines', {}), dict):
        raise HealError(refusal('heal state', given, 'must be a mapping with classes and engines'))
    classes = {}
    for cls, entry in given.get('classes', {}).items():
        progress = entry.get('in_progress') if isinstance(entry, dict) else 'not a mapping'
        if progress is not None and (not isinstance(progress, dict) or not isinstance(progress.get('engine'), str)
                                     or not isinstance(progress.get('hosts'), list)
                                     or not _number(progress.get('since'))):
            raise HealError(refusal('heal state classes[%r].in_progress' % cls, progress,
                                    'must be null or {engine, hosts, since}'))
        classes[str(cls)] = dict(entry, in_progress=progress)
    engines = {}
    for key, entry in given.get('engines', {}).items():
        where = 'heal state engines[%r]' % key
        if not isinstance(entry, dict):
            raise HealError(refusal(where, entry, 'must be a mapping with restarts, drained, hosts and last_heal'))
        hosts = entry.get('hosts', [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise HealError(refusal(where + '.hosts', hosts, 'must be a list of host names'))
        engines[str(key)] = dict(entry, restarts=_epochs(where + '.restarts', entry.get('restarts', [])),
                                 drained=bool(entry.get('drained', False)), hosts=list(hosts))
    return {'classes': classes, 'engines': engines}


def host_class(host, groups, classes):
    """The host's class: the one group of `classes` (in `groups`, {group: [hosts]}) it is in."""
    return guard_state.host_class(host, groups, classes, 'heal', HealError)


def engine(host, instance, instances, groups, head=None):
    """The engine the alert names: {key, instance, stack, head, hosts}, ``hosts`` every host it runs on, its
    workers first and its head last (one host for an instance served alone). `instances` is the host's
    ``inference_server_instances``; `head` the stack's ``stack_link_head`` (else its first member by name)."""
    if not isinstance(instances, (list, tuple)):
        raise HealError(refusal('inference_server_instances of %s' % host, instances, 'must be a list of instances'))
    names = [i.get('name') for i in instances if isinstance(i, dict)]
    found = [i for i in instances if isinstance(i, dict) and i.get('name') == instance]
    if not found:
        raise HealError(refusal('heal_instance', instance, 'is not an instance of %s (its instances: %s)' % (
            host, ', '.join(str(n) for n in names) or 'none')))
    stack = found[0].get('stack')
    if stack in (None, ''):
        return {'key': '%s/%s' % (host, instance), 'instance': instance, 'stack': None, 'head': host, 'hosts': [host]}
    members = groups.get(stack) if isinstance(groups, dict) else None
    if not isinstance(members, (list, tuple)) or host not in members:
        raise HealError(refusal('stack of %s on %s' % (instance, host), stack, 'must be an inventory group that holds '
                                'the host (the stack\'s members)'))
    members = sorted(str(h) for h in members)
    head = head if head not in (None, '') else members[0]
    if head not in members:
        raise HealError(refusal('stack_link_head of stack %s' % stack, head, 'must be one of its members (%s)'
                                % ', '.join(members)))
    return {'key': '%s/%s' % (head, instance), 'instance': instance, 'stack': stack, 'head': head,
            'hosts': [h for h in members if h != head] + [head]}


def _recent(restarts, now, window_s):
    return [t for t in restarts if now - t < window_s]


# --------------------------------------------------------------------------- the decision

def decide(alert, groups, eng, current_state, given_settings=None, now=None, by_hand=False):
    """Whether the alert's engine is restarted now.

    alert: {host, engine_instance}; groups: the inventory's groups; eng: :func:`engine`; current_state:
    :func:`state`; given_settings: :func:`settings`; now: epoch seconds; by_hand: a person's heal (the restart
    limit does not refuse it, and an engine a heal left drained is put back once it serves).

    Returns {act, drain, host, instance, class, engine, hosts, guard, reason, restarts}: ``act`` restarts the
    engine's hosts (drained first, put back once healthy); ``drain`` (not acting) drains them and leaves them so;
    ``guard`` is the guard that refused (None when acting); ``restarts`` the engine's restarts within the window.
    When the state changes (acting or draining), ``state`` is the new state.
    """
    if not _number(now) or now < 0:
        raise HealError(refusal('now', now, 'must be epoch seconds'))
    s = settings(given_settings)
    st = state(current_state)
    host, instance = alert.get('host'), alert.get('engine_instance')
    cls = host_class(host, groups, s['classes'])
    members = sorted(set(groups.get(cls) or []))
    key = eng['key']
    record = st['engines'].get(key) or {'restarts': [], 'drained': False, 'hosts': eng['hosts']}
    recent = _recent(record['restarts'], now, s['window_s'])
    out: dict[str, Any] = {'act': False, 'drain': False, 'host': host, 'instance': instance, 'class': cls,
                           'engine': key, 'hosts': list(eng['hosts']), 'stack': eng['stack'], 'restarts': len(recent),
                           'by_hand': bool(by_hand)}
    what = 'stack %s (%s)' % (eng['stack'], ', '.join(eng['hosts'])) if eng['stack'] else host

    def refused(guard, reason):
        out.update(guard=guard, reason=reason)
        return out

    # 1. one heal per class at a time
    progress = (st['classes'].get(cls) or {}).get('in_progress')
    if progress:
        return refused('in_progress', 'in progress: a heal of %s in class %s has been running since %s (%d s); a class '
                       'is healed one engine at a time.' % (progress['engine'], cls, _when(progress['since']),
                                                            max(0, now - progress['since'])))

    # 2. the engine's restart limit: past it, drained for a person
    if not by_hand and (record['drained'] or len(recent) >= s['restart_limit']):
        new_state = copy.deepcopy(st)
        new_state['engines'][key] = dict(record, restarts=recent, drained=True, hosts=list(eng['hosts']))
        out.update(drain=True, state=new_state)
        if record['drained'] and len(recent) < s['restart_limit']:
            return refused('restart_limit', 'restart limit: %s was left drained by an earlier heal and stays drained '
                           'until a person heals it by hand (heal_by_hand).' % what)
        return refused('restart_limit', 'restart limit: %s was restarted %d times within %d s (at %s), the limit is %d: '
                       'not restarted again; drained at the gateways, it stays drained and its alert firing for a '
                       'person.' % (what, len(recent), s['window_s'], ', '.join(_when(t) for t in recent),
                                    s['restart_limit']))

    # 3. the class's capacity floor: what a heal left drained, what is being healed, and this engine's hosts
    away = set()
    for other_key, other in st['engines'].items():
        if other['drained'] and other_key != key:
            away.update(other['hosts'])
    for entry in st['classes'].values():
        if entry.get('in_progress'):
            away.update(entry['in_progress']['hosts'])
    mine = set(eng['hosts']) & set(members)
    away = (away & set(members)) - mine
    serving = len(members) - len(away) - len(mine)
    share = float(serving) / len(members)
    if share + EPSILON < s['capacity_floor']:
        return refused('capacity_floor', 'capacity floor: restarting %s would leave %d of the %d hosts of %s serving '
                       '(%.2f), below the floor of %.2f%s.' % (
                           what, serving, len(members), cls, share, s['capacity_floor'],
                           ' (not serving now: %s)' % ', '.join(sorted(away)) if away else ''))

    new_state = copy.deepcopy(st)
    new_state['classes'].setdefault(cls, {})['in_progress'] = {'engine': key, 'hosts': list(eng['hosts']),
                                                               'since': int(now)}
    out.update(act=True, guard=None, state=new_state, reason=(
        'all guards pass: no heal in progress in %s; %s restarted %d time%s within %d s (limit %d%s); %d of the %d '
        'hosts of %s keep serving (%.2f, floor %.2f).' % (
            cls, what, len(recent), '' if len(recent) == 1 else 's', s['window_s'], s['restart_limit'],
            ', by hand' if by_hand else '', serving, len(members), cls, share, s['capacity_floor'])))
    return out


def finished(current_state, decision, outcome, now, given_settings=None):
    """The state once the heal of `decision` (:func:`decide`'s) is over: the class's in_progress cleared (when it
    acted), and the engine's record: a restart counted (``restarted`` or ``failed``), ``drained`` unless it serves
    again, ``last_heal`` {at, outcome, reason}."""
    if outcome not in OUTCOMES:
        raise HealError(refusal('heal outcome', outcome, 'must be one of %s' % ', '.join(OUTCOMES)))
    if not _number(now) or now < 0:
        raise HealError(refusal('now', now, 'must be epoch seconds'))
    if not isinstance(decision, dict) or not isinstance(decision.get('engine'), str):
        raise HealError(refusal('heal decision', decision, 'must be the decision heal_guard returned'))
    s = settings(given_settings)
    st = state(current_state)
    key, cls = decision['engine'], decision.get('class')
    if decision.get('act'):
        progress = (st['classes'].get(cls) or {}).get('in_progress')
        if not progress or progress['engine'] != key:
            raise HealError(refusal('heal class', cls, 'has no heal of %s in progress in the state' % key))
        st['classes'][cls]['in_progress'] = None
    elif outcome != 'left drained':
        raise HealError(refusal('heal outcome', outcome, 'must be "left drained" for a heal that did not restart'))
    record = st['engines'].get(key) or {'restarts': [], 'drained': False, 'hosts': decision['hosts']}
    restarts = _recent(record['restarts'], now, s['window_s'])
    if outcome != 'left drained':
        restarts.append(int(now))
    st['engines'][key] = dict(record, restarts=restarts, drained=outcome != 'restarted', hosts=list(decision['hosts']),
                              last_heal={'at': int(now), 'outcome': outcome, 'reason': decision.get('reason')})
    return st


def record(current_state, decision, given_settings=None, now=None):
    """What the engine's hosts show of it (their local fact ``specdec_heal``, under the instance's name):
    {restarts (within the window), restarted_at (their times), drained, last_heal, window_s}."""
    if not isinstance(decision, dict) or not isinstance(decision.get('engine'), str):
        raise HealError(refusal('heal decision', decision, 'must be the decision heal_guard returned'))
    s = settings(given_settings)
    st = state(current_state)
    entry = st['engines'].get(decision['engine']) or {'restarts': [], 'drained': False}
    recent = _recent(entry['restarts'], now, s['window_s']) if _number(now) else entry['restarts']
    return {'restarts': len(recent), 'restarted_at': [_when(t) for t in recent], 'drained': entry['drained'],
            'last_heal': dict(entry['last_heal'], at=_when(entry['last_heal']['at']))
            if isinstance(entry.get('last_heal'), dict) else None,
            'window_s': s['window_s'], 'engine': decision['engine']}
