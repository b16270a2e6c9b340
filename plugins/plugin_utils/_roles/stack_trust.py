# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack_trust role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    host_path,
    own_dir,
    port,
)


POLICY: dict[str, Any] = {
    'stack_trust_dir': [host_path, own_dir('stack_trust_dir', config=True)],
    'stack_trust_ssh_port': [port],
}


def _layout(ctx):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    layout: Any = (ctx.get('vars') or {}).get('stack_link_layout')
    if not isinstance(layout, dict) or layout.get('role') not in stack_serving.KEY_FILES:
        raise PlanRefusal(['stack_link_layout: the layout of the stack_link role (a mapping with role head or worker) '
                           'is needed first, got %r' % (layout,)])
    return layout


def keys(settings, warn=None, ctx=None):
    """This member's own key (``key``: the head's client key, a worker's sshd host key, the files the engines
    read) and its comment (``comment``), from the stack's layout (``ctx['vars']['stack_link_layout']``)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    ctx = ctx or {}
    layout = _layout(ctx)
    return {'key': '%s/%s' % (settings['dir'], stack_serving.key_file(layout)),
            'comment': 'specdec-stack-%s-%s' % (layout.get('group'), ctx.get('host'))}


def trust(settings, warn=None, ctx=None):
    """The stack's trust on this member, {file name: text} (the head's ``known_hosts``, a worker's
    ``authorized_keys``; plugin_utils/_stack_serving.py, ``trust_files``), from the public key each member shared
    (``hostvars[member].stack_trust_public_key``). In check mode a member without a key yet is no refusal."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    ctx = ctx or {}
    layout, hostvars = _layout(ctx), ctx.get('hostvars') or {}
    public = {}
    for member in layout.get('members') or []:
        found = hostvars[member] if member in hostvars else {}
        public[member] = found['stack_trust_public_key'] if 'stack_trust_public_key' in found else None
    try:
        return stack_serving.trust_files(dict(layout), public, int(settings['ssh_port']), bool(ctx.get('check_mode')))
    except stack_serving.TrustError as exc:
        raise PlanRefusal(['stack_trust_public_key: %s' % exc])


# the planners the settings action calls, by entry; the variables of other roles they read
PLANNERS = {'main': keys, 'trust': trust}
PLAN_VARS = ('stack_link_layout',)
