# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sweep_workloads filter: the workloads of a draft-length sweep, checked and filled in.

The documentation lives in sweep_workloads.yml next to this file; the logic in
plugins/plugin_utils/_sweep_workloads.py, shared with the settings check and the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def sweep_workloads(workloads, defaults=None, rule="worst_case"):
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_workloads import WorkloadsError, resolve
    try:
        return resolve(workloads, defaults or {}, rule)
    except WorkloadsError as exc:
        raise AnsibleFilterError("sweep_workloads: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"sweep_workloads": sweep_workloads}
