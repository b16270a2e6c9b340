# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The retune role's settings policy: none the settings engine applies. The role's decisions are the
specdec.serve.retune_guard action's, over plugin_utils/_retune.py, which checks the guards' settings itself (named,
with the value and what is allowed) before it reads the alert's host and instance: those two are data from an event,
read as given and never templated, so they are not settings of the role's argument spec and no planner reads them
from the play's variables."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

POLICY: dict[str, Any] = {}
