# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_view_instances filter: the instances a host serves, with their health and last sweep.

The documentation lives in fleet_view_instances.yml next to this file; the logic in
plugins/plugin_utils/_fleet_view.py, which builds the fleet view's rows from what it returns.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def fleet_view_instances(instances, health, sweeps=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet_view import collected_instances
    if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
        raise AnsibleFilterError('fleet_view_instances: the instances must be a list of mappings')
    if not isinstance(health, list):
        raise AnsibleFilterError('fleet_view_instances: the health results must be a list')
    return collected_instances(instances, health, sweeps if isinstance(sweeps, dict) else {})


class FilterModule(object):
    def filters(self):
        return {'fleet_view_instances': fleet_view_instances}
