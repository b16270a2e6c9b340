# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack_link role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its planner: the stack and this member's link (:func:`layout`, the role's ``layout`` entry, which the settings
action calls and the role publishes as ``stack_link_layout``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    as_bool,
    group,
    iface,
    link_iface,
    pattern,
    rng,
)


POLICY: dict[str, Any] = {
    'stack_link_group': [group],
    'stack_link_interface': [iface, link_iface],
    'stack_link_head': [pattern(re.compile(r'^[A-Za-z0-9_.:-]+\Z'), 'an inventory host name (a member of the stack)')],
    'stack_link_mtu': [rng(1280, 9216)],
    'stack_link_verify_wait': [rng(0, 600)],
}


def layout(settings, warn=None, ctx=None):
    """What the role writes and checks on this member of its stack (plugin_utils/_stack.py, ``link_plan``): the
    stack's members (the head first), the host's rank and role, its peers' link addresses, the ICMP payload of an
    unfragmented ping at the full MTU, and the network manager's file that makes the link persistent with the
    commands that apply it.

    ``ctx``: ``host``, ``groups`` and ``hostvars`` (each member's ``stack_link_address``), ``facts`` (the
    interfaces of the default routes, which the link may not be) and ``reported`` (``{'netplan': bool}``: the host
    has netplan). PlanRefusal names the variable, the host and the value."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack as stack
    ctx = ctx or {}
    groups, hostvars = ctx.get('groups') or {}, ctx.get('hostvars') or {}
    facts, reported = ctx.get('facts') or {}, ctx.get('reported') or {}
    try:
        hosts = stack.members(groups, settings['group']) if settings['group'] else []
        addresses = {}
        for member in hosts:
            found = hostvars[member] if member in hostvars else {}
            addresses[member] = found['stack_link_address'] if 'stack_link_address' in found else None
        defaults = [(facts.get(route) or {}).get('interface') or '' for route in ('default_ipv4', 'default_ipv6')]
        return stack.link_plan(str(ctx.get('host')), dict(settings), dict(groups), addresses,
                               as_bool(reported.get('netplan'), False), [str(i) for i in defaults if i])
    except stack.StackError as exc:
        raise PlanRefusal([str(exc)])


# the planners the settings action calls, by entry
PLANNERS = {'layout': layout}
