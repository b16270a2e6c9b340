# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""setting_default filter: a role setting's default, read from the role's argument spec
(documentation in setting_default.yml; the reader is plugins/plugin_utils/_role_spec.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def setting_default(name, role=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    if not isinstance(name, str):
        raise AnsibleFilterError('setting_default: expects a setting name, got %s' % type(name).__name__)
    try:
        return role_spec.default(name, role)
    except role_spec.RoleSpecError as exc:
        raise AnsibleFilterError('setting_default: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'setting_default': setting_default}
