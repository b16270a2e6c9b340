# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sweep_resweep and sweep_adopted filters: what a rollout sweeps again, and the sweeps it adopts (the sweep's own
decisions and records are its planner's: plugin_utils/_roles/draft_sweep.py). What has changed under a record since
(measured_on_drift) is plugin_utils._sweep_records's alone: the fleet view calls it.

The documentation of each filter is in the YAML file of the same name next to this one; the logic in
plugins/plugin_utils/_sweep_records.py, shared with the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

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


def sweep_resweep(instances):
    return _call('sweep_resweep', 'resweep_instances', instances)


def sweep_adopted(groups, names, canaries):
    return _call('sweep_adopted', 'adopted_sweeps', groups, names, canaries)


class FilterModule(object):
    def filters(self):
        return {'sweep_resweep': sweep_resweep, 'sweep_adopted': sweep_adopted}
