# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sweep_instance, sweep_unmeasured, sweep_measured, sweep_error, sweep_winners, sweep_measured_on, sweep_resweep and
sweep_adopted filters: what the draft_sweep role decides and records (what runs now, the sweep's inputs, whether to
measure and a stack member's part are its planner's: plugin_utils/_roles/draft_sweep.py), what its record was measured on, and what a rollout sweeps again.
What has changed under a record since (measured_on_drift) is plugin_utils._sweep_records's alone: the fleet view
calls it.

The documentation of each filter is in the YAML file of the same name next to this one; the logic in
plugins/plugin_utils/_sweep_records.py, shared with the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import check_type_bool

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _records():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_records as sweep_records
    return sweep_records


def _call(name, function, *args, **kwargs):
    records = _records()
    try:
        return getattr(records, function)(*args, **kwargs)
    except (records.SweepRecordError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('%s: %s' % (name, exc))


def sweep_instance(original, declared, draft_len, schedule=None, apply_schedule=False):
    try:
        draft_len = int(draft_len)
    except (TypeError, ValueError):
        raise AnsibleFilterError('sweep_instance: the draft length must be an integer, got %r' % (draft_len,))
    return _call('sweep_instance', 'candidate_instance', original, declared, draft_len, schedule=schedule,
                 apply_schedule=check_type_bool(apply_schedule))


def sweep_unmeasured(workloads, concurrency, draft_len, error):
    return _call('sweep_unmeasured', 'unmeasured_records', workloads, concurrency, draft_len, error)


def sweep_measured(results, draft_len):
    return _call('sweep_measured', 'measured_records', results, draft_len)


def sweep_error(failure):
    return _call('sweep_error', 'failure_text', failure)


def sweep_winners(workloads):
    return _call('sweep_winners', 'workload_winners', workloads)


def sweep_measured_on(serving, instance, groups=None):
    return _call('sweep_measured_on', 'measured_on', serving, instance, groups)


def sweep_resweep(instances):
    return _call('sweep_resweep', 'resweep_instances', instances)


def sweep_adopted(groups, names, canaries):
    return _call('sweep_adopted', 'adopted_sweeps', groups, names, canaries)


class FilterModule(object):
    def filters(self):
        return {'sweep_instance': sweep_instance, 'sweep_unmeasured': sweep_unmeasured, 'sweep_measured': sweep_measured,
                'sweep_error': sweep_error, 'sweep_winners': sweep_winners, 'sweep_measured_on': sweep_measured_on,
                'sweep_resweep': sweep_resweep, 'sweep_adopted': sweep_adopted}
