# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gateway_plan and gateway_key_problems filters: thin wrappers over plugin_utils._gateway (documentation in the
YAML file of each name). The gateways' view of their engines (gateway_rows, gateway_section) is plugin_utils._gateway's
alone: the fleet view (plugin_utils/_fleet_view.py) calls it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _gateway():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _gateway as gateway
    return gateway


def gateway_plan(engines, settings=None, keys=None, hostvars=None, groups=None):
    gateway = _gateway()
    try:
        if hostvars is not None:
            engines = gateway.engines_from(engines, hostvars, groups or {})
        return gateway.gateway_plan(engines, settings, keys)
    except gateway.GatewayError as exc:
        raise AnsibleFilterError('the gateway plan is refused:\n%s' % exc)


def key_problems(*args, **kwargs):
    return _gateway().key_problems(*args, **kwargs)


class FilterModule(object):
    def filters(self):
        return {'gateway_plan': gateway_plan, 'gateway_key_problems': key_problems}
