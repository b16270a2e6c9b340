# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the host roles, with the standard library only: what a host's probes print (dpkg's package
status, the toolkit's apt sources) and the model cache's peer seed.

The firewall splits its CIDR lists by family in its planner (plugin_utils/_roles/firewall.py), without the
``netaddr`` package that ``ansible.utils.ipaddr`` needs. What lets published ports bypass DOCKER-USER is
docker_host's own check (plugin_utils/_roles/docker_host.py).
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def packages_missing(dpkg_status, names, version=''):
    """The packages of `names` that are not installed (or, given `version`, not at that version), by
    `dpkg-query -W -f='${Package} ${db:Status-Abbrev} ${Version}\\n'` output (the version field may be
    left out when no version is asked for): a package is installed only on a line of its own name whose
    status starts with `ii`; a package dpkg does not know is on no line (dpkg-query says so on stderr)."""
    if not isinstance(dpkg_status, str):
        raise AnsibleFilterError("packages_missing: expects dpkg-query's output, got %s" % type(dpkg_status).__name__)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise AnsibleFilterError("packages_missing: expects a list of package names, got %r" % (names,))
    if not isinstance(version, str):
        raise AnsibleFilterError("packages_missing: version must be a string, got %r" % (version,))
    installed = set()
    for line in dpkg_status.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].startswith('ii') and (not version or fields[2:3] == [version]):
            installed.add(fields[0].split(':')[0])
    return [n for n in names if n.split(':')[0] not in installed]


def apt_upgrade_hold(packages, role):
    """The text of an apt.conf.d file that holds `packages` from unattended-upgrades: one
    ``Unattended-Upgrade::Package-Blacklist`` entry per package, anchored and escaped (unattended-upgrades matches
    them as regular expressions; apt appends every file's entries to one list, so other files' entries stay),
    under a comment naming `role` as its owner."""
    if not isinstance(packages, (list, tuple)) or not all(isinstance(n, str) and n.strip() for n in packages):
        raise AnsibleFilterError("apt_upgrade_hold: expects a list of package names, got %r" % (packages,))
    if not isinstance(role, str) or not role:
        raise AnsibleFilterError("apt_upgrade_hold: expects the owning role's name, got %r" % (role,))
    entries = ''.join('    "^%s$";\n' % re.escape(n.strip()) for n in packages)
    return ('// Managed by %s: upgrading these packages restarts what serves, so unattended-upgrades leaves them\n'
            '// to an administrator (or the role, pinned).\n'
            'Unattended-Upgrade::Package-Blacklist {\n%s};\n' % (role, entries))


def model_cache_peer_seed(hostvars, groups, host=None):
    """The model cache's peer seed from the inventory: without `host`, the default of model_cache_peer_seed (the
    first host, in inventory order, that caches models in peer mode); with it, that host's seed (its own
    model_cache_peer_seed, else the default). plugin_utils/_model_cache.py decides; the firewall asks it too."""
    if not hasattr(groups, 'get') or not isinstance(groups.get('all', []), (list, tuple)):
        raise AnsibleFilterError("model_cache_peer_seed: expects the inventory groups (groups), got %s"
                                 % type(groups).__name__)
    if not hasattr(hostvars, 'get'):
        raise AnsibleFilterError("model_cache_peer_seed: expects hostvars, got %s" % type(hostvars).__name__)
    if host is not None and not isinstance(host, str):
        raise AnsibleFilterError("model_cache_peer_seed: host must be a host name, got %s" % type(host).__name__)
    from ansible_collections.specdec.serve.plugins.plugin_utils import _model_cache as model_cache
    # plain data, the settings it needs only (Ansible's hostvars template a value when it is read); the seeds are
    # not read for the default, which is itself the default of model_cache_peer_seed
    keys = ('model_cache_source',) if host is None else ('model_cache_source', 'model_cache_peer_seed')
    plain = {}
    for name in groups.get('all') or []:
        hv = hostvars.get(name) or {}
        plain[str(name)] = dict((k, hv[k]) for k in keys if k in hv)
    if host is None:
        return model_cache.default_peer_seed(plain, groups)
    return model_cache.peer_seed(plain, groups, host)


class FilterModule(object):
    """The host roles' filters."""

    def filters(self):
        return {
            "packages_missing": packages_missing,
            "apt_upgrade_hold": apt_upgrade_hold,
            "model_cache_peer_seed": model_cache_peer_seed,
        }
