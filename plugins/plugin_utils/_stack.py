# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stack: hosts joined by a direct link (two DGX Sparks' QSFP cable between their ConnectX-7 ports, a
B200/GB200 host's fabric port) that serve one model together, with one of them the head.

The inventory names a stack as a group (``stack_link_group``); each member gives its own link interface and
address (``stack_link_interface``, ``stack_link_address``: the address with the link's prefix length). This
module decides, on the controller, everything the stack_link role writes and checks on a member: the stack's
members and head, the member's rank, its peers' link addresses, the payload of an unfragmented ping at the
full MTU, and the file of the host's network manager (systemd-networkd, or netplan on DGX OS and Ubuntu)
that makes the address and MTU persistent. Every refusal names the variable, the host, the value and what
is allowed, before any host changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.specdec.serve.plugins.module_utils.link_state import ping_payload
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import show

MANAGERS = ('networkd', 'netplan')
NETWORKD_DIR = '/etc/systemd/network'
NETPLAN_DIR = '/etc/netplan'
# One link per host: the file's name does not depend on the interface, so renaming the interface in the
# inventory replaces the file instead of leaving the old one configured.
FILE_NAME = '60-specdec-stack-link'


class StackError(ValueError):
    """A stack the inventory describes wrongly; the message says which variable of which host."""


def members(groups, group):
    """The hosts of the stack's group, sorted; StackError when the group is not an inventory group."""
    found = groups.get(group) if hasattr(groups, 'get') else None
    if found is None:
        raise StackError('stack_link_group: %s is not a group of the inventory' % show(group))
    return sorted(str(h) for h in found)


def head_of(group, hosts, head):
    """The stack's head: ``head`` when given (it must be a member), else the first member by name."""
    if head in (None, ''):
        return hosts[0]
    if head not in hosts:
        raise StackError("stack_link_head: %s is not a member of stack '%s' (members: %s)"
                         % (show(head), group, ', '.join(hosts)))
    return head


def link_address(host, value):
    """A member's ``stack_link_address`` as an ip_interface; StackError naming the host otherwise."""
    where = 'stack_link_address of %s' % host
    if not isinstance(value, str) or '/' not in value:
        raise StackError('%s: %s must be the link address with its prefix length, e.g. 192.168.100.10/24'
                         % (where, show(value)))
    try:
        iface = ipaddress.ip_interface(value)
    except ValueError:
        raise StackError('%s: %s is not an IPv4 or IPv6 address with a prefix length (e.g. 192.168.100.10/24, '
                         'fd00:100::10/64)' % (where, show(value)))
    ip, net = iface.ip, iface.network
    if ip.is_loopback or ip.is_multicast or ip.is_unspecified or ip.is_link_local:
        raise StackError('%s: %s is a loopback, multicast, unspecified or link-local address; the link needs a '
                         'unicast address of its own network' % (where, show(value)))
    if net.prefixlen == net.max_prefixlen:
        raise StackError('%s: %s has no room for a peer (/%d); give the link network its prefix length, e.g. /24'
                         % (where, show(value), net.prefixlen))
    if ip.version == 4 and net.prefixlen < 31 and ip in (net.network_address, net.broadcast_address):
        raise StackError('%s: %s is the network or broadcast address of %s' % (where, show(value), net))
    return iface


def networkd_file(group, interface, address, mtu):
    return ('# Managed by specdec.serve (role stack_link): the link of stack %s. Do not edit.\n'
            '[Match]\nName=%s\n\n'
            '[Link]\nMTUBytes=%d\nRequiredForOnline=no\n\n'
            '[Network]\nAddress=%s\nLinkLocalAddressing=no\nIPv6AcceptRA=no\nConfigureWithoutCarrier=yes\n'
            % (group, interface, mtu, address))


def netplan_file(group, interface, address, mtu):
    # netplan's YAML; every value here is a checked interface name, address or number
    return ('# Managed by specdec.serve (role stack_link): the link of stack %s. Do not edit.\n'
            'network:\n  version: 2\n  ethernets:\n    "%s":\n'
            '      dhcp4: false\n      dhcp6: false\n      accept-ra: false\n      link-local: []\n      optional: true\n'
            '      addresses: ["%s"]\n      mtu: %d\n'
            % (group, interface, address, mtu))


def peer_addresses(host, group, hosts, mine, addresses):
    """The other members' link addresses [{host, address}], each checked: set, a link address, on ``mine``'s
    network (``mine``: the host's own, an ip_interface), none twice."""
    network = mine.network
    peers = []
    seen = {str(mine.ip): host}
    for member in hosts:
        if member == host:
            continue
        if member not in addresses or addresses[member] in (None, ''):
            raise StackError("stack_link_address of %s: not set; every member of stack '%s' needs its link "
                             "address" % (member, group))
        theirs = link_address(member, addresses[member])
        if theirs.network != network:
            raise StackError("stack_link_address of %s: %s is not on %s's link network %s; every member of stack "
                             "'%s' must be on one network" % (member, show(addresses[member]), host, network, group))
        if str(theirs.ip) in seen:
            raise StackError("stack_link_address of %s: %s is also the address of %s"
                             % (member, theirs.ip, seen[str(theirs.ip)]))
        seen[str(theirs.ip)] = member
        peers.append({'host': member, 'address': str(theirs.ip)})
    return peers


def membership(host, settings, groups, addresses):
    """``host``'s place in its stack, every member checked: (the members by name, its own link address as an
    ip_interface, its peers [{host, address}]). ``settings`` holds group, interface and address (the host's
    stack_link settings); ``addresses`` {member: its stack_link_address as given}. The one check of a stack's
    members, for stack_link and for the firewall's default of firewall_links."""
    for key, example in (('group', 'the inventory group of the stack'), ('interface', 'e.g. enp1s0f0np0'),
                         ('address', 'e.g. 192.168.100.10/24')):
        if settings.get(key) in (None, ''):
            raise StackError('stack_link_%s: not set on %s (%s)' % (key, host, example))
    group = settings.get('group')
    hosts = members(groups, group)
    if host not in hosts:
        raise StackError("stack_link_group: %s is not a member of stack '%s' (members: %s)"
                         % (host, group, ', '.join(hosts)))
    if len(hosts) < 2:
        raise StackError("stack_link_group: stack '%s' has one host (%s); a stack needs at least two"
                         % (group, hosts[0]))
    mine = link_address(host, settings.get('address'))
    return hosts, mine, peer_addresses(host, group, hosts, mine, addresses)


def link_plan(host, settings, groups, addresses, netplan_present=False, default_interfaces=()):
    """What stack_link writes and checks on ``host``.

    ``settings``: the host's typed stack_link settings without the prefix (group, interface, address, head,
    mtu, manager); ``addresses``: {member: its stack_link_address as given}; ``netplan_present``: the host
    has netplan (manager ``auto`` then writes netplan's file); ``default_interfaces``: the interfaces of the
    host's default routes, which the link must not take over.
    """
    hosts, mine, peers = membership(host, settings, groups, addresses)
    group = settings.get('group')
    head = head_of(group, hosts, settings.get('head'))
    interface = settings.get('interface')
    if interface in default_interfaces:
        raise StackError("stack_link_interface: %s of %s carries the host's default route; the link needs an "
                         "interface of its own (the QSFP/ConnectX-7 port), or the host would lose its network"
                         % (show(interface), host))
    order = [head] + [h for h in hosts if h != head]  # ranks: the head is 0, the workers by name
    mtu = settings.get('mtu')
    manager = settings.get('manager') or 'auto'
    if manager == 'auto':
        manager = 'netplan' if netplan_present else 'networkd'
    if manager not in MANAGERS:
        raise StackError('stack_link_manager: %s must be auto, networkd or netplan' % show(manager))
    if manager == 'netplan':
        path, mode = '%s/%s.yaml' % (NETPLAN_DIR, FILE_NAME), '0600'
        content = netplan_file(group, interface, mine.with_prefixlen, mtu)
        apply = [['netplan', 'apply']]
    else:
        path, mode = '%s/%s.network' % (NETWORKD_DIR, FILE_NAME), '0644'
        content = networkd_file(group, interface, mine.with_prefixlen, mtu)
        apply = [['networkctl', 'reload'], ['networkctl', 'reconfigure', interface]]
    return {
        'group': group, 'members': order, 'head': head, 'rank': order.index(host),
        'role': 'head' if host == head else 'worker', 'interface': interface,
        'address': mine.with_prefixlen, 'ip': str(mine.ip), 'network': str(mine.network), 'family': mine.version,
        'mtu': mtu, 'ping_payload': ping_payload(mtu, mine.version), 'peers': peers, 'manager': manager,
        'path': path, 'mode': mode, 'content': content, 'apply': apply,
    }
