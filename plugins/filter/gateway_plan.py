# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gateway_plan, gateway_key_problems, gateway_rows and gateway_section filters: thin wrappers over plugin_utils._gateway
(documentation in the YAML file of each name)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _gateway():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _gateway as gateway
    return gateway


def gateway_plan(engines, settings=None, keys=None):
    gateway = _gateway()
    try:
        return gateway.gateway_plan(engines, settings, keys)
    except gateway.GatewayError as exc:
        raise AnsibleFilterError('the gateway plan is refused:\n%s' % exc)


def key_problems(*args, **kwargs):
    return _gateway().key_problems(*args, **kwargs)


def gateway_rows(*args, **kwargs):
    return _gateway().gateway_rows(*args, **kwargs)


def gateway_section(*args, **kwargs):
    return _gateway().gateway_section(*args, **kwargs)


class FilterModule(object):
    def filters(self):
        return {'gateway_plan': gateway_plan, 'gateway_key_problems': key_problems, 'gateway_rows': gateway_rows,
                'gateway_section': gateway_section}
