# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The draft_sweep role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    DRAFT_LEN,
    each,
    host_path,
    local_path,
    name,
    no_dotdot_name,
    non_empty,
    rng,
)


POLICY: dict[str, Any] = {
    'draft_sweep_instance': [name],
    'draft_sweep_draft_lens': [non_empty, each(DRAFT_LEN)],
    'draft_sweep_concurrency': [non_empty, each(rng(1, 4096))],
    'draft_sweep_repetitions': [rng(1, 100)],
    'draft_sweep_requests_per_worker': [rng(1, 100000)],
    'draft_sweep_warmup_requests_per_worker': [rng(0, 10000)],
    'draft_sweep_max_tokens': [rng(1, 1048576)],
    'draft_sweep_temperature': [rng(0.0, 2.0)],
    'draft_sweep_request_timeout': [rng(1, 86400)],
    'draft_sweep_min_runs': [rng(1, 100)],
    'draft_sweep_max_rel_mad': [rng(0.0, 1.0)],
    'draft_sweep_mad_k': [rng(0.0, 100.0)],
    'draft_sweep_rel_tol': [rng(0.0, 1.0)],
    'draft_sweep_equivalence_min_prefix': [rng(1, 1048576)],
    'draft_sweep_equivalence_prompts': [rng(1, 8)],
    'draft_sweep_equivalence_max_tokens': [rng(1, 65536)],
    'draft_sweep_workloads': [_sweep_workloads.check],
    'draft_sweep_workload_rule': [_sweep_workloads.check_rule],
    'draft_sweep_report_dir': [local_path],
    'draft_sweep_run_id': [no_dotdot_name],
    'draft_sweep_state_dir': [host_path],
    'draft_sweep_fact_file': [host_path],
}
