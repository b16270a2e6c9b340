# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    each,
    host_port,
    name,
    no_dotdot_name,
    pattern,
    rng,
)


POLICY: dict[str, Any] = {
    'rollout_canary': [rng(1, 100000)],
    'rollout_batch': [pattern(re.compile(r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)\Z'),
                              'a host count or a percentage from 1% to 100%')],
    'rollout_min_free_gb': [rng(0.0, 1000000.0)],
    'rollout_gpu_count': [rng(0, 1024)],
    'rollout_min_driver_version': [pattern(re.compile(r'^[0-9]+(\.[0-9]+){0,3}\Z'), 'a driver version such as 580.65.06')],
    'rollout_run_id': [no_dotdot_name],
    'rollout_adopt_from': [host_port],
    'rollout_adopt_instances': [each(name)],
}
