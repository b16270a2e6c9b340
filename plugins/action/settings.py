# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of specdec.serve.settings: check a role's variables, return them typed, and the role's plan.

The documentation is in plugins/modules/settings.py; the checks in plugin_utils/_settings.py; a role's planner
(``plan`` in plugin_utils/_roles/<role>.py, where the role has one) decides once from the checked settings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._role_spec import RoleSpecError
from ansible_collections.specdec.serve.plugins.plugin_utils._role_spec import load_options as _load_options
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import (
    ROLE_POLICIES,
    SettingsError,
    check_settings,
    context_needs,
    for_architecture,
    typed_settings,
)

# each role's policy and planner module (plugin_utils/_roles/<role>.py); its PLANNERS by entry point, where it has
# them: planner(settings, warn, ctx) -> the role's plan; raises PlanRefusal (plugin_utils/_checks.py) naming each
# variable. ctx: the host, its facts (local facts apart, as local_facts), the variables of other roles the module
# names in PLAN_VARS, what the host reported (the task's ``reported``, for an entry that judges it) and the inventory
# (hostvars, templated as a planner reads them, groups and the play's hosts).
ROLE_MODULES = dict((module.__name__.rsplit('.', 1)[-1], module) for module in ROLE_POLICIES)

# Keys of every task result; no role setting may be named like one once its prefix is dropped.
RESULT_KEYS = frozenset(['changed', 'failed', 'msg', 'skipped', 'invocation', 'warnings', 'deprecations',
                         'diff', 'results', 'plan'])


def load_options(role):
    """The options of every entry point of a role, from its meta/argument_specs.yml (plugin_utils/_role_spec.py)."""
    try:
        return _load_options(role)
    except RoleSpecError as exc:
        raise AnsibleActionFail('settings: %s' % exc)


class ActionModule(ActionBase):
    """Check the role's variables on the controller; return the non-secret ones typed."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(['role', 'entry', 'reported'])

    _ctx: Optional[dict[str, Any]] = None

    def _context(self, module, entry, task_vars):
        """What a planner (and a default the inventory decides) reads besides the settings, once per task."""
        if self._ctx is None:
            facts = task_vars.get('ansible_facts') or {}
            # PLAN_VARS: the names, or {entry: the names} where an entry needs fewer (each is templated)
            plan_vars = getattr(module, 'PLAN_VARS', ())
            if isinstance(plan_vars, dict):
                plan_vars = plan_vars.get(entry, ())
            self._ctx = {'host': task_vars.get('inventory_hostname'), 'local_facts': facts.get('ansible_local') or {},
                         'facts': facts,
                         'vars': dict((k, self._templar.template(task_vars[k])) for k in plan_vars if k in task_vars),
                         'reported': self._task.args.get('reported'),
                         'hostvars': task_vars.get('hostvars') or {}, 'groups': task_vars.get('groups') or {},
                         'play_hosts': list(task_vars.get('ansible_play_hosts_all') or []),
                         'check_mode': bool(getattr(self._play_context, 'check_mode', False))}
        return self._ctx

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        self._ctx = None
        result = super(ActionModule, self).run(tmp, task_vars)
        own = getattr(self._task, '_role', None)
        own = own.get_name().split('.')[-1] if own else None
        role = self._task.args.get('role') or own
        if not role:
            raise AnsibleActionFail('settings: outside a role, give role: <name>')
        options = load_options(role)
        values = dict((k, task_vars[k]) for k in options if k in task_vars)
        values = self._templar.template(values)
        # settings of other roles that a rule reads (the firewall's IPv6 rules for the publish address): context only
        context = dict((k, self._templar.template(task_vars[k])) for k in context_needs(options) if k in task_vars)
        # every secret the play holds, this role's or another's, is hidden from what this check returns
        secret_vars = dict((k, self._templar.template(task_vars[k])) for k in redaction.secret_options()
                           if k in task_vars and k not in values)
        secrets = redaction.secret_values(dict(values, **secret_vars))
        module = ROLE_MODULES.get(role)
        entry = self._task.args.get('entry') or 'main'
        try:
            # a default the inventory decides (the role module's INVENTORY_DEFAULTS, for its main entry only): filled
            # in where the setting is unset, then checked as any value is
            if entry == 'main' and own in (None, role):
                for name, default in getattr(module, 'INVENTORY_DEFAULTS', ()):
                    if name in options and values.get(name) is None:
                        values[name] = default(values, self._context(module, entry, task_vars))
        except PlanRefusal as exc:
            result['failed'] = True
            given = dict(values, **secret_vars)
            given.update(self._ctx['vars'] if self._ctx else {})
            secrets = redaction.secret_values(given)
            result['msg'] = redaction.scrub('%s settings refused on the controller (no host was changed):\n- %s'
                                            % (role, '\n- '.join(exc.errors)), secrets)
            return result
        try:
            typed = check_settings(options, dict(context, **values))
            # a setting with one artifact per architecture: this host's (its gathered facts say which)
            typed = for_architecture(typed, (task_vars.get('ansible_facts') or {}).get('architecture'))
        except SettingsError as exc:
            result['failed'] = True
            result['msg'] = redaction.scrub('%s settings refused on the controller (no host was changed):\n- %s'
                                            % (role, '\n- '.join(exc.errors)), secrets)
            return result
        settings = redaction.without_secret_keys(typed_settings(role, typed))
        # a role's plan is made in that role: another role that reads its settings (the monitoring role the
        # exporter's) gets them typed, without a plan
        planner = getattr(module, 'PLANNERS', {}).get(entry)
        if planner and own in (None, role):
            warnings: list[str] = []
            ctx = self._context(module, entry, task_vars)
            # what the plan is made from may hold secrets of its own (an instance's API key): hidden too
            secrets = redaction.secret_values(dict(dict(values, **secret_vars), **ctx['vars']))
            try:
                plan = planner(settings, warnings.append, ctx)
            except PlanRefusal as exc:
                result['failed'] = True
                result['msg'] = redaction.scrub('%s refused on the controller (no host was changed):\n- %s'
                                                % (role, '\n- '.join(exc.errors)), secrets)
                return result
            except KeyError as exc:
                raise AnsibleActionFail('settings: the %s planner needs the setting %s_%s, which this entry point '
                                        '(%s) does not give' % (role, role, exc.args[0], self._task.args.get('entry')
                                                                or 'main'))
            if warnings:
                result['warnings'] = [redaction.scrub(w, secrets) for w in warnings]
            holds = getattr(module, 'PLAN_HOLDS_SECRETS', False)
            if holds is True or (not isinstance(holds, bool) and entry in holds):
                # a plan that carries secrets (the instances' API keys) is never shown; it is returned whole, for the
                # role to publish (set_fact, no_log), never as ansible_facts, which a fact cache would write to disk
                result.update(redaction.scrub(settings, secrets))
                result.update(plan=plan, changed=False, _ansible_no_log=True)
                return result
            settings['plan'] = plan
        result.update(redaction.scrub(settings, secrets))
        result['changed'] = False
        return result
