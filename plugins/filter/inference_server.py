# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_expected_files and serving_failure_message filters: what the inference_server role's
tasks decide.

The documentation of each filter is in the YAML file of the same name next to this one; the logic in
plugins/plugin_utils/_inference_server.py, shared with the unit tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.validation import check_type_bool

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def serving_expected_files(instance, stat, env=None, unit=None, facts=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import expected_files
    if not isinstance(instance, dict) or not isinstance(stat, dict):
        raise AnsibleFilterError('serving_expected_files: the instance and the stat table must be mappings')
    if instance.get('state') != 'absent' and (env is None or unit is None):
        raise AnsibleFilterError('serving_expected_files: env and unit (the texts of the files) are required')
    try:
        return expected_files(instance, stat, env, unit, facts=facts)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError('serving_expected_files: %s: %s' % (type(exc).__name__, exc))


def serving_failure_message(failure, unit, rollback=True, can_roll_back=False, previous_health=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import failure_message
    try:
        return failure_message(failure, unit, check_type_bool(rollback), check_type_bool(can_roll_back),
                               previous_health=previous_health)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('serving_failure_message: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'serving_expected_files': serving_expected_files, 'serving_failure_message': serving_failure_message}
