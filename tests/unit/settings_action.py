"""Run the settings action (plugins/action/settings.py) as a role's task would, without a play: the tests' helper."""

from __future__ import annotations

from types import SimpleNamespace

from ansible.template import Templar

from ansible_collections.specdec.serve.plugins.action.settings import ActionModule


def run(role, entry=None, own=None, reported=None, **task_vars):
    """The action's result for `role` (its `entry`, given what the host `reported`), called from within the role
    `own` (None: outside a role)."""
    args = {'role': role}
    if entry:
        args['entry'] = entry
    if reported is not None:
        args['reported'] = reported
    owner = SimpleNamespace(get_name=lambda: 'specdec.serve.' + own) if own else None
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action='specdec.serve.settings', _role=owner)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir='/nonexistent'))
    return ActionModule(task, connection, None, None, Templar(loader=None), None).run(task_vars=task_vars)
