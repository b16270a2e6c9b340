# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of specdec.serve.heal_guard: the heal's decisions on the controller (plugin_utils/_heal.py), one step
each: whether the wedged engine the alert names is restarted now (the guards, reading the state file), the state once
the heal is over, and what the engine's hosts show of it.

The alert's values (``heal_host``, ``heal_instance``) come from an event, through extra vars, and extra vars are
templates: this action reads them as they were given, never templated, and refuses any that is not a plain name
before anything else uses it (plugin_utils/_event.py). The documentation is in plugins/modules/heal_guard.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.specdec.serve.plugins.plugin_utils import _guard_state as guard_state
from ansible_collections.specdec.serve.plugins.plugin_utils import _heal as heal
from ansible_collections.specdec.serve.plugins.plugin_utils._event import EventError, labels_from, shown

# the alert's labels, as the rulebooks give them to the play
ALERT_VARS = (('heal_host', 'host'), ('heal_instance', 'engine_instance'))
STEPS = ('decide', 'finish', 'record')
TRUE = ('true', 'yes', 'on', '1')
FALSE = ('false', 'no', 'off', '0', '')


def by_hand(task_vars):
    """heal_by_hand, read as given (a person's -e, never the rulebook's): a boolean or its usual spellings."""
    value = task_vars.get('heal_by_hand', False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and str(value).strip().lower() in TRUE + FALSE:
        return str(value).strip().lower() in TRUE
    raise AnsibleActionFail('heal_guard: heal_by_hand: %s must be true or false; nothing was restarted' % shown(value))


def read_state(path):
    """The state file's text on the controller ('' when there is none yet)."""
    return guard_state.read_state(path, 'heal', heal.HealError)


def the_engine(alert, task_vars):
    """The engine the alert names, from the inventory (its host's instances and, for a stack, its members)."""
    groups = task_vars.get('groups') or {}
    hostvars = task_vars.get('hostvars') or {}
    host = alert['host']
    if host not in hostvars:
        raise heal.HealError("heal_host: '%s' is not a host of the inventory" % host)
    # inventory data, templated as the inventory gives it; the alert's values are only keys here
    instances = hostvars[host].get('inference_server_instances', [])
    found = [i for i in instances or [] if isinstance(i, dict) and i.get('name') == alert['engine_instance']]
    stack = found[0].get('stack') if found else None
    head = None
    if stack and isinstance(groups.get(stack), (list, tuple)) and groups[stack]:
        head = hostvars[sorted(groups[stack])[0]].get('stack_link_head')
    return heal.engine(host, alert['engine_instance'], instances, groups, head)


class ActionModule(ActionBase):
    """The heal's decisions, on the controller: the guards', the state once over, the hosts' record."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(['step', 'state', 'state_file', 'settings', 'decision', 'outcome'])

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        step = args.get('step') or 'decide'
        if step not in STEPS:
            raise AnsibleActionFail('heal_guard: step: %s must be one of %s' % (shown(step), ', '.join(STEPS)))
        try:
            if step == 'decide':
                alert = labels_from(task_vars, ALERT_VARS, 'nothing was restarted')
                person = by_hand(task_vars)
                path = heal.state_path(args.get('state_file'))
                current = args['state'] if args.get('state') is not None else read_state(path)
                result['decision'] = heal.decide(alert, task_vars.get('groups') or {}, the_engine(alert, task_vars),
                                                 current or '', args.get('settings'), time.time(), person)
                result['state_path'] = path
            elif step == 'finish':
                result['state'] = heal.finished(args.get('state'), args.get('decision'), args.get('outcome'),
                                                time.time(), args.get('settings'))
            else:
                result['record'] = heal.record(args.get('state'), args.get('decision'), args.get('settings'),
                                               time.time())
        except (heal.HealError, EventError) as exc:
            raise AnsibleActionFail('heal_guard: %s' % exc)
        result['changed'] = False
        return result
