# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state of a stack link on a host, read from ``ip -json`` (iproute2), and what differs from its plan.

Runs on the host (the link_check module), standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json


def parse_link(text, interface):
    """``ip -json addr show dev IFACE`` -> {exists, admin_up, carrier, operstate, mtu, addresses}.

    ``addresses`` are the interface's global addresses as ``address/prefix``; link-local ones are left out.
    Empty or unparsable output (the interface does not exist) gives ``exists`` false.
    """
    try:
        entries = json.loads(text) if text.strip() else []
    except ValueError:
        entries = []
    entry = next((e for e in entries if isinstance(e, dict) and e.get('ifname') == interface), None)
    if entry is None:
        return {'exists': False, 'admin_up': False, 'carrier': False, 'operstate': 'ABSENT', 'mtu': None,
                'addresses': []}
    flags = entry.get('flags') or []
    addresses = []
    for info in entry.get('addr_info') or []:
        if info.get('scope') == 'link':
            continue
        if 'local' in info and 'prefixlen' in info:
            addresses.append('%s/%s' % (info['local'], info['prefixlen']))
    return {'exists': True, 'admin_up': 'UP' in flags, 'carrier': 'LOWER_UP' in flags,
            'operstate': str(entry.get('operstate', 'UNKNOWN')), 'mtu': entry.get('mtu'), 'addresses': addresses}


def _same_address(have, want):
    try:
        return ipaddress.ip_interface(have) == ipaddress.ip_interface(want)
    except ValueError:
        return False


def problems(state, interface, address, mtu):
    """What differs between the link's state and its plan, one sentence each (empty when none)."""
    if not state['exists']:
        return ['%s: no such interface on the host' % interface]
    found = []
    if not state['admin_up']:
        found.append('%s: down (administratively)' % interface)
    elif not state['carrier']:
        found.append('%s: no carrier (is the cable plugged in, the peer up?)' % interface)
    if state['mtu'] != mtu:
        found.append('%s: MTU %s, want %d' % (interface, state['mtu'], mtu))
    if not any(_same_address(a, address) for a in state['addresses']):
        found.append('%s: %s not configured (has %s)' % (interface, address, ', '.join(state['addresses']) or 'none'))
    return found


# IPv4 header 20 + ICMP header 8; IPv6 header 40 + ICMPv6 header 8.
_PING_OVERHEAD = {4: 28, 6: 48}


def family(address):
    """4 or 6, of an address with or without its prefix length."""
    return ipaddress.ip_interface(address).version


def ping_payload(mtu, version):
    """ICMP payload bytes of a ping whose packet is exactly ``mtu`` bytes."""
    return mtu - _PING_OVERHEAD[version]


def ping_argv(peer, interface, payload, family, count=2, timeout=2):
    """iputils ping: ``count`` echo requests of ``payload`` bytes with the don't-fragment bit, out of ``interface``."""
    return ['ping', '-%d' % family, '-n', '-q', '-c', str(count), '-W', str(timeout), '-M', 'do', '-s', str(payload),
            '-I', interface, peer]


def ping_summary(output):
    """The last non-empty line of ping's output (its statistics, or its error)."""
    lines = [line.strip() for line in (output or '').splitlines() if line.strip()]
    return lines[-1] if lines else 'no output'
