# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter for_architecture (a per-architecture setting's path for one host). The documentation lives in
for_architecture.yml next to this file; the architectures' table in plugins/module_utils/platforms.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


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
        return {'for_architecture': for_architecture}
