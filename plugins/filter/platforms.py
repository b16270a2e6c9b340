# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter debian_arch: a host's architecture as Debian (and an image platform) names it. The documentation
lives in debian_arch.yml next to this file; the table in plugins/module_utils/platforms.py, which the
engine_check module reads too."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def debian_arch(machine):
    from ansible_collections.specdec.serve.plugins.module_utils.platforms import debian_arch as arch
    return arch(machine)


class FilterModule(object):
    def filters(self):
        return {'debian_arch': debian_arch}
