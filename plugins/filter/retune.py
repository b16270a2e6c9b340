# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""retune_finished, retune_outcome and retune_state_path filters: the tune loop's state, thin wrappers over
plugin_utils._retune (documentation in the YAML file of each name). The guards' decision is the action
specdec.serve.retune_guard (it reads the alert's values as given, never as templates)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def retune_finished(state, host_class, now=None, host=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
    try:
        return retune.finished(state, host_class, time.time() if now is None else now, host)
    except retune.RetuneError as exc:
        raise AnsibleFilterError('retune_finished: %s' % exc)


def retune_outcome(before, after):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
    try:
        return retune.outcome(before, after)
    except retune.RetuneError as exc:
        raise AnsibleFilterError('retune_outcome: %s' % exc)


def retune_state_path(given=None):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _retune as retune
    try:
        return retune.state_path(given)
    except retune.RetuneError as exc:
        raise AnsibleFilterError('retune_state_path: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'retune_finished': retune_finished, 'retune_outcome': retune_outcome, 'retune_state_path': retune_state_path}
