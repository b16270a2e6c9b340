# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_view role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    ContextRule,
    http_url,
    local_path,
    name,
    needs_set,
    no_dotdot_name,
    rng,
)


POLICY: dict[str, Any] = {
    'fleet_view_health_timeout': [rng(1, 3600)],
    'fleet_view_log_lines': [rng(0, 10000)],
    'fleet_view_report_dir': [local_path],
    'fleet_view_report_name': [no_dotdot_name],
    'fleet_view_live_margin': [rng(0, 0.99)],
    'fleet_view_prometheus_url': [http_url],
    'fleet_view_prometheus_user': [name, ContextRule(needs_set('fleet_view_prometheus_password'),
                                                     'fleet_view_prometheus_password')],
    'fleet_view_prometheus_ca': [local_path],
}
