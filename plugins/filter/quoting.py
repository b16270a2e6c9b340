# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The quote_for filter: a value written for the place it lands (an environment file, a unit's
command line, a command line split without a shell, a whitespace-split word). The documentation lives
in quote_for.yml next to this file; the logic in plugins/plugin_utils/_quoting.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def quote_for(value, context):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting
    try:
        return quoting.quote(value, context)
    except ValueError as exc:
        raise AnsibleFilterError('quote_for(%r): %s' % (context, exc))


class FilterModule(object):
    def filters(self):
        return {'quote_for': quote_for}
