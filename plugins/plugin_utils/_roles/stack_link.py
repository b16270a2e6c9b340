# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack_link role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
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
