# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_probe_argv and host_probe_drift filters: thin wrappers over plugin_utils._host_probe.

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _call(name, *args, **kwargs):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _host_probe as host_probe
    try:
        return getattr(host_probe, name)(*args, **kwargs)
    except host_probe.ProbeError as exc:
        raise AnsibleFilterError("host_probe_%s: %s" % (name, exc))


def host_probe_argv(units=(), execs=(), dirs=(), files=(), imports=None):
    return _call("argv", units=units, execs=execs, dirs=dirs, files=files, imports=imports)


def host_probe_drift(lines, units=None, execs=(), dirs=None, files=None, imports=None):
    return _call("drift", lines, units=units, execs=execs, dirs=dirs, files=files, imports=imports)


class FilterModule(object):
    def filters(self):
        return {"host_probe_argv": host_probe_argv, "host_probe_drift": host_probe_drift}
