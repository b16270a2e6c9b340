# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The images_to_load filter: a thin wrapper over plugin_utils._image_archive. inference_server's plan, and what a
run would change, are its planner's (plugin_utils/_roles/inference_server.py).

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def images_to_load(images, host_ids, archive_ids):
    """The images inference_server loads from its archive (plugin_utils/_image_archive.py)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import images_to_load as decide
    try:
        return decide(images, host_ids, archive_ids)
    except ImageArchiveError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'images_to_load': images_to_load}
