# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter monitoring_live_view: the fleet view's live columns from Prometheus' answers (documented in
monitoring_live_view.yml next to this file; the logic in plugins/plugin_utils/_monitoring_live.py). What the
monitoring role writes is its planner's (plugins/plugin_utils/_roles/monitoring.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _m():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as monitoring
    return monitoring


def _live():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_live as monitoring_live
    return monitoring_live


def _call(name, func, *args):
    try:
        return func(*args)
    except _m().MonitoringError as exc:
        raise AnsibleFilterError('%s: settings refused on the controller:\n- %s' % (name, '\n- '.join(exc.errors)))
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError('%s: %s' % (name, exc))


def monitoring_live_view(rows, responses, margin=None):
    return _call('monitoring_live_view', _live().live_view, rows, responses, margin)


class FilterModule(object):
    def filters(self):
        return {'monitoring_live_view': monitoring_live_view}
