# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_plan and published_ports filters: thin wrappers over plugin_utils.serving_plan.

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.plugin_utils.serving_plan import (
    PlanError,
    build_plan,
    plan_changes,
    published_ports,
)


def serving_plan(instances, settings):
    """The deployment plan of inference_server, every instance checked and rendered."""
    try:
        return build_plan(instances, settings)
    except PlanError as exc:
        raise AnsibleFilterError('inference_server_instances refused on the controller (no host was changed):\n- %s'
                                 % '\n- '.join(exc.errors))


class FilterModule(object):
    def filters(self):
        return {'serving_plan': serving_plan, 'published_ports': published_ports, 'serving_changes': plan_changes}
