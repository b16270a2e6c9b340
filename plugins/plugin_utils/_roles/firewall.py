# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewall role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    cidr,
    ContextRule,
    each,
    exempt_iface,
    host_path,
    iface,
    is_number,
    name,
    port,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    refusal,
)


SSH_PORT = 22
HOST_PORT_KEYS = ('name', 'port', 'sources')


def not_ssh(v, ansible_port):
    """A firewall_host_ports port that is not SSH's: 22, or the host's ansible_port."""
    if not is_number(v):
        return None
    try:
        connection = int(ansible_port) if ansible_port not in (None, '') else None
    except (TypeError, ValueError):
        connection = None
    if v == SSH_PORT or v == connection:
        return ('is the SSH port (%s): the host-input allow-list never filters SSH; leave it out of firewall_host_ports'
                % ('22' if v == SSH_PORT else 'ansible_port'))
    return None


def host_source(v):
    """A source of a host port: an address or CIDR as firewall_allowed_cidrs takes them, never every address."""
    msg = cidr(v)
    if msg and msg.startswith('opens the engine ports'):
        return ('allows every address; name the sources, or leave the port out of firewall_host_ports to leave it '
                'to the host\'s own rules')
    return msg


def host_ports(entries):
    """The refusals of places in firewall_host_ports (each ``[i].key: value what is allowed``): an entry that is
    not a mapping of name, port and sources, a missing name or port, sources that are not a list, a name or a
    port given twice. The values of the keys are checked by the dotted POLICY entries."""
    out: list = []
    names: dict = {}
    ports: dict = {}
    for index, entry in enumerate(entries or []):
        where = '[%d]' % index
        if not isinstance(entry, dict):
            out.append(refusal(where, entry, 'must be a mapping of name, port and sources'))
            continue
        extra = sorted(str(k) for k in entry if k not in HOST_PORT_KEYS)
        if extra:
            out.append(refusal(where, entry, 'has the keys %s; an entry has name, port and sources' % ', '.join(extra)))
        for key in ('name', 'port'):
            if entry.get(key) in (None, ''):
                out.append(refusal('%s.%s' % (where, key), entry.get(key), 'is required'))
        sources = entry.get('sources')
        if sources is not None and not isinstance(sources, list):
            out.append(refusal(where + '.sources', sources, 'must be a list of addresses or CIDRs (empty: the host '
                                                            'itself only)'))
        for key, seen in (('name', names), ('port', ports)):
            value = entry.get(key)
            if isinstance(value, (string_types, int)) and value not in (None, ''):
                if value in seen:
                    out.append(refusal('%s.%s' % (where, key), value, 'is the %s of [%d] too; give each %s once'
                                       % (key, seen[value], key)))
                seen.setdefault(value, index)
    return out or None


def link_entries(entries):
    """The refusals of places in firewall_links: an entry that is not a mapping of interface and sources, a
    missing interface, sources that are not a list, an interface given twice."""
    out: list = []
    seen: dict = {}
    for index, entry in enumerate(entries or []):
        where = '[%d]' % index
        if not isinstance(entry, dict):
            out.append(refusal(where, entry, 'must be a mapping of interface and sources'))
            continue
        extra = sorted(str(k) for k in entry if k not in ('interface', 'sources'))
        if extra:
            out.append(refusal(where, entry, 'has the keys %s; an entry has interface and sources' % ', '.join(extra)))
        interface = entry.get('interface')
        if interface in (None, ''):
            out.append(refusal(where + '.interface', interface, 'is required'))
        elif isinstance(interface, string_types):
            if interface in seen:
                out.append(refusal(where + '.interface', interface, 'is the interface of [%d] too; give each once'
                                   % seen[interface]))
            seen.setdefault(interface, index)
        sources = entry.get('sources')
        if sources is not None and not isinstance(sources, list):
            out.append(refusal(where + '.sources', sources, "must be a list of the peers' addresses"))
    return out or None


POLICY: dict[str, Any] = {
    'firewall_engine_ports': [each(port)],
    'firewall_allowed_cidrs': [each(cidr)],
    'firewall_host_ports': [host_ports],
    'firewall_host_ports.name': [name],
    'firewall_host_ports.port': [port, ContextRule(not_ssh, 'ansible_port')],
    'firewall_host_ports.sources': [each(host_source)],
    'firewall_links': [link_entries],
    'firewall_links.interface': [iface],
    'firewall_links.sources': [each(host_source)],
    'firewall_iptables': [host_path],
    'firewall_ip6tables': [host_path],
    'firewall_interfaces': [each(iface)],
    'firewall_exempt_interfaces': [each(exempt_iface)],
    'firewall_rules_dir': [host_path],
    'firewall_unit_name': [name],
    'firewall_iptables_restore': [host_path],
    'firewall_ip6tables_restore': [host_path],
}
