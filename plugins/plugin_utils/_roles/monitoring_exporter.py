# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring_exporter role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    bind_address,
    host_path,
    port,
    rng,
)


POLICY: dict[str, Any] = {
    'monitoring_exporter_port': [port],
    'monitoring_exporter_poll_interval': [rng(0.05, 60)],
    'monitoring_exporter_probe_interval': [rng(0, 3600)],
    'monitoring_exporter_probe_deadline': [rng(1, 600)],
    'monitoring_exporter_listen': [bind_address],
    'monitoring_exporter_dir': [host_path],
    'monitoring_exporter_config_file': [host_path],
    'monitoring_exporter_fact_file': [host_path],
}
