# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""draft_select filter: pick the fastest draft length from sweep measurements; sweep_schedule_plan and
sweep_schedule_verdict: what a sweep that applies schedules serves, and whether it keeps it as measured.

The documentation lives in the .yml files of the same names next to this file; the logic in
plugins/plugin_utils/_bench_select.py (the schedule's plan and verdict in _sweep_schedule.py), shared with the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def draft_select(measurements, objective=None, min_runs=None, max_rel_mad=None, k=None,
                 rel_tol=None, include_baseline=None, max_batch=None, excluded=None, rule=None,
                 client_limited=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import SelectError, select_workloads
    try:
        return select_workloads(measurements, rule=rule or "worst_case",
                                objective=objective, min_runs=min_runs, max_rel_mad=max_rel_mad, k=k,
                                rel_tol=rel_tol, include_baseline=include_baseline, max_batch=max_batch,
                                excluded=excluded, client_limited=client_limited)
    except (SelectError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("draft_select: %s" % exc)


def sweep_schedule_plan(result, apply_schedule=True):
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import SelectError
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_plan
    try:
        return schedule_plan(result, apply_schedule)
    except (SelectError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("sweep_schedule_plan: %s" % exc)


def sweep_schedule_verdict(result, served, plan):
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import SelectError
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_verdict
    try:
        return schedule_verdict(result, served, plan)
    except (SelectError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("sweep_schedule_verdict: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"draft_select": draft_select, "sweep_schedule_plan": sweep_schedule_plan,
                "sweep_schedule_verdict": sweep_schedule_verdict}
