# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The heal role's settings policy: the range of its restart limit. The role's decisions are the
specdec.serve.heal_guard action's, over plugin_utils/_heal.py, which checks the guards' settings itself (named, with
the value and what is allowed) before it reads the alert's host and instance: those two are data from an event, read
as given and never templated, so they are not settings of the role's argument spec and no planner reads them from
the play's variables."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import rng

POLICY: dict[str, Any] = {
    # plugin_utils/_heal.py checks the guards' settings again, for the action's own callers
    'heal_restart_limit': [rng(1, 1000)],
}
