# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""firewall_host_ports, firewall_links and firewall_gateway_addresses filters (the firewall role's defaults that
the inventory decides) firewall_probe_argv and firewall_loaded_drift (the loaded host-input chain against its file), thin wrappers
over plugin_utils/_firewall.py.

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _hosts(groups):
    if not hasattr(groups, 'get') or not hasattr(groups, 'values'):
        raise AnsibleFilterError('expects the inventory groups (groups), got %s' % type(groups).__name__)
    hosts: set = set()
    for members in groups.values():
        hosts.update(members or [])
    return sorted(hosts)


def firewall_host_ports(hostvars, groups, host, allowed_cidrs=None, instances=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    try:
        hosts = _hosts(groups)
        if allowed_cidrs is not None and (isinstance(allowed_cidrs, str) or not isinstance(allowed_cidrs, (list, tuple))):
            raise AnsibleFilterError('allowed_cidrs must be a list, got %s' % type(allowed_cidrs).__name__)
        return firewall.host_ports(firewall.plain_hostvars(hostvars, hosts), dict(groups), str(host),
                                   list(allowed_cidrs or []),
                                   None if instances is None else list(instances))
    except firewall.FirewallError as exc:
        raise AnsibleFilterError(str(exc))
    except AnsibleFilterError as exc:
        raise AnsibleFilterError('firewall_host_ports: %s' % exc.message)


def firewall_links(hostvars, groups, host):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    try:
        hosts = _hosts(groups)
        return firewall.links(firewall.plain_hostvars(hostvars, hosts), dict(groups), str(host))
    except firewall.FirewallError as exc:
        raise AnsibleFilterError(str(exc))
    except AnsibleFilterError as exc:
        raise AnsibleFilterError('firewall_links: %s' % exc.message)


def firewall_gateway_addresses(hostvars, groups):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    hosts = _hosts(groups) if groups else []
    return firewall.gateway_addresses(firewall.plain_hostvars(hostvars, hosts), dict(groups or {}))


def firewall_probe_argv(argv, tools, chain='SPECDEC-INPUT'):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    try:
        return firewall.probe_argv(argv, tools, chain)
    except firewall.FirewallError as exc:
        raise AnsibleFilterError(str(exc))


def firewall_loaded_drift(listing, expected, chain='SPECDEC-INPUT'):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    if not isinstance(expected, dict):
        raise AnsibleFilterError('firewall_loaded_drift: expected must map a family (4, 6) to its rules file, got %s'
                                 % type(expected).__name__)
    return firewall.loaded_drift(listing, expected, chain)


class FilterModule(object):
    def filters(self):
        return {'firewall_host_ports': firewall_host_ports,
                'firewall_links': firewall_links,
                'firewall_gateway_addresses': firewall_gateway_addresses,
                'firewall_loaded_drift': firewall_loaded_drift,
                'firewall_probe_argv': firewall_probe_argv}
