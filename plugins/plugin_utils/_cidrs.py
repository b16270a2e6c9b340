# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CIDR lists with the standard library only (no ``netaddr``, which ``ansible.utils.ipaddr`` needs): which entries
are not an address or a CIDR, for the ``cidrs_by_family`` filter (plugins/filter/network.py).

``invalid_cidrs`` was a public filter; no role or playbook called it, so it is internal now. It still raises
``AnsibleFilterError`` with the ``invalid_cidrs:`` prefix, as before (``cidrs_by_family`` lets that error through).
"""

from __future__ import annotations

import ipaddress

from ansible.errors import AnsibleFilterError


def parse(value):
    """Return an ip_network for a CIDR or bare address, or None when it is not one."""
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        return None
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None


def invalid_cidrs(values):
    """Return the entries of a list that are not an IPv4/IPv6 address or CIDR."""
    if not isinstance(values, (list, tuple)):
        raise AnsibleFilterError("invalid_cidrs: expects a list, got %s" % type(values).__name__)
    return [v for v in values if parse(v) is None]
