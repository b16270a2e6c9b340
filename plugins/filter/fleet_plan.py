# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_plan, rollout_status, rollout_preview and rollout_batches filters: thin wrappers over plugin_utils._fleet
(documentation in the YAML file of each name). The preflight is the rollout role's planner's (plugin_utils/_roles/
rollout.py, its preflight entry, over plugin_utils._fleet's rules)."""

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


def rollout_status(*args, **kwargs):
    return _fleet().rollout_status(*args, **kwargs)


def rollout_batches(hosts, changes, hostvars, groups, canary, batch):
    """The rollout's order and batches, a stack counting as one member (plugin_utils/_fleet.py): the stack of a
    host is the group named by its stack_link_group when one of its rollout_instances has ``stack``."""
    stacks = []
    for host in hosts or []:
        hv = hostvars[host] if host in hostvars else {}
        group = hv['stack_link_group'] if 'stack_link_group' in hv else None
        instances = hv['rollout_instances'] if 'rollout_instances' in hv else []
        served = group and any(hasattr(i, 'get') and i.get('stack') for i in instances or [])
        stacks.append(sorted(groups.get(group) or []) if served else [])
    try:
        return _fleet().rollout_batches(list(hosts or []), list(changes or []), stacks, canary, batch)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('rollout_batches: %s' % exc)


def rollout_preview(*args, **kwargs):
    try:
        return _fleet().rollout_preview(*args, **kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        raise AnsibleFilterError('rollout_preview: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'fleet_plan': fleet_plan,
                'rollout_status': rollout_status, 'rollout_preview': rollout_preview, 'rollout_batches': rollout_batches}
