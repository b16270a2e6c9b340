# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gateway_plan, gateway_key_problems, gateway_rows and gateway_section filters: thin wrappers over plugin_utils.gateway
(documentation in the YAML file of each name)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.plugin_utils.gateway import GatewayError, gateway_rows, gateway_section, key_problems
from ansible_collections.specdec.serve.plugins.plugin_utils.gateway import gateway_plan as _gateway_plan


def gateway_plan(engines, settings=None, keys=None):
    try:
        return _gateway_plan(engines, settings, keys)
    except GatewayError as exc:
        raise AnsibleFilterError('the gateway plan is refused:\n%s' % exc)


class FilterModule(object):
    def filters(self):
        return {'gateway_plan': gateway_plan, 'gateway_key_problems': key_problems, 'gateway_rows': gateway_rows,
                'gateway_section': gateway_section}
