# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters debian_arch (a host's architecture as Debian and image platforms name it) and for_architecture
(a per-architecture setting's path for one host). The documentation lives in debian_arch.yml and
for_architecture.yml next to this file; the table in plugins/module_utils/platforms.py, which the
engine_check module reads too."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def debian_arch(machine):
    from ansible_collections.specdec.serve.plugins.module_utils.platforms import debian_arch as arch
    return arch(machine)


def for_architecture(value, machine, name):
    from ansible.errors import AnsibleFilterError
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import (
        SettingsError, check_value, for_architecture as resolve)
    try:
        return resolve({name: check_value(name, value)}, machine)[name]
    except SettingsError as exc:
        raise AnsibleFilterError('; '.join(exc.errors))


class FilterModule(object):
    def filters(self):
        return {'debian_arch': debian_arch, 'for_architecture': for_architecture}
