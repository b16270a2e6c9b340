# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of specdec.serve.retune_guard: the tune loop's decisions on the controller (plugin_utils/_retune.py),
one step each: whether the alert's host is re-tuned now (the guards, reading the state file), what the re-tune's sweep
found, and the state once it is over.

The alert's values (``retune_host``, ``retune_instance``) come from an event, through extra vars, and extra vars
are templates: this action reads them as they were given, never templated, and refuses any that is not a plain
name before anything else uses it. The documentation is in plugins/modules/retune_guard.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.specdec.serve.plugins.plugin_utils import _guard_state as guard_state
from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
from ansible_collections.specdec.serve.plugins.plugin_utils._event import EventError, labels_from, shown

# the alert's labels, as the rulebooks give them to the play
ALERT_VARS = (('retune_host', 'host'), ('retune_instance', 'engine_instance'))


def alert_from(task_vars):
    """{host, engine_instance} from the raw extra vars, each a plain name; raises AnsibleActionFail."""
    try:
        return labels_from(task_vars, ALERT_VARS, 'nothing was re-tuned')
    except EventError as exc:
        raise AnsibleActionFail('retune_guard: %s' % exc)


def read_state(path):
    """The state file's text on the controller ('' when there is none yet)."""
    return guard_state.read_state(path, 'retune', retune.RetuneError)


STEPS = ('decide', 'outcome', 'finish')


class ActionModule(ActionBase):
    """The tune loop's decisions, on the controller: the guards', what the re-tune found, the state once over."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(['step', 'state', 'state_file', 'settings', 'backends', 'drained', 'before', 'after',
                             'class', 'host'])

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        step = args.get('step') or 'decide'
        if step not in STEPS:
            raise AnsibleActionFail('retune_guard: step: %s must be one of %s' % (shown(step), ', '.join(STEPS)))
        try:
            if step == 'decide':
                alert = alert_from(task_vars)
                path = retune.state_path(args.get('state_file'))
                current = args['state'] if args.get('state') is not None else read_state(path)
                result['decision'] = retune.decide(alert, task_vars.get('groups') or {}, current or '',
                                                   args.get('settings'), args.get('backends'), args.get('drained'),
                                                   time.time())
                result['state_path'] = path
            elif step == 'outcome':
                result['outcome'] = retune.outcome(args.get('before') or {}, args.get('after'))
            else:
                result['state'] = retune.finished(args.get('state'), args.get('class'), time.time(), args.get('host'))
        except retune.RetuneError as exc:
            raise AnsibleActionFail('retune_guard: %s' % exc)
        result['changed'] = False
        return result
