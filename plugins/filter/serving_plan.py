# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_plan, published_ports, serving_changes and images_to_load filters: thin wrappers over
plugin_utils._serving_plan and plugin_utils._image_archive.

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _plan():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _serving_plan as serving_plan
    return serving_plan


def serving_plan(instances, settings, stack=None, published=None):
    """The deployment plan of inference_server, every instance checked and rendered (once: what the play's
    published fleet plan rendered is taken from it)."""
    plan = _plan()
    try:
        entries = plan.build_plan(instances, settings, dict(stack or {}), published)
    except plan.PlanError as exc:
        raise AnsibleFilterError('inference_server_instances refused on the controller (no host was changed):\n- %s'
                                 % '\n- '.join(exc.errors))
    for entry in entries:
        for text in (entry['spec'] or {}).get('warnings', []):
            Display().warning(text)
    return entries


def published_ports(*args, **kwargs):
    return _plan().published_ports(*args, **kwargs)


def plan_changes(*args, **kwargs):
    return _plan().plan_changes(*args, **kwargs)


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
        return {'serving_plan': serving_plan, 'published_ports': published_ports, 'serving_changes': plan_changes,
                'images_to_load': images_to_load}
