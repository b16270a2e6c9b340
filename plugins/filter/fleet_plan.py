# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_plan filter: a thin wrapper over plugin_utils._fleet (documentation in fleet_plan.yml). The preflight, the
rollout's batches and each host's outcome are the rollout role's planner's (plugin_utils/_roles/rollout.py, its
preflight, batches and status entries, over plugin_utils._fleet's rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _fleet():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet as fleet
    return fleet


def fleet_plan(instances, local_facts=None, keep_sweep_winners=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError
    try:
        return _fleet().fleet_plan(instances, local_facts, keep_sweep_winners)
    except SpecConfigError as exc:
        raise AnsibleFilterError('inference_server_instances: %s' % exc)
    except _fleet().KeepWinnersError as exc:
        raise AnsibleFilterError('rollout_keep_sweep_winners: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'fleet_plan': fleet_plan}
