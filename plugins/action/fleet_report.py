# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of specdec.serve.fleet_report: build the fleet view and write its JSON, on the controller.

The documentation is in plugins/modules/fleet_report.py; the report in plugin_utils/_fleet_view.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url
from ansible.plugins.action import ActionBase

from ansible_collections.specdec.serve.plugins.module_utils.hf_manifest import utc_now
from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet_view as fleet_view
from ansible_collections.specdec.serve.plugins.plugin_utils._fleet_table import fleet_table
from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring_live import LIVE_QUERIES

_SETTINGS = ('title', 'hosts', 'status', 'report_dir', 'report_name', 'prometheus_url', 'prometheus_user',
             'prometheus_ca', 'live_margin')


def query_prometheus(url, timeout=10, user='', password='', ca=''):
    """{key: response} for every query of monitoring.LIVE_QUERIES, asked of the Prometheus at ``url`` (through
    the controller's proxy settings, as ansible.builtin.uri would), as ``user`` with basic authentication when
    one is given, verifying its certificate against ``ca`` when one is given."""
    responses = {}
    auth = dict(url_username=user, url_password=password, force_basic_auth=True) if user else {}
    for key, query in sorted(LIVE_QUERIES.items()):
        full = '%s/api/v1/query?query=%s' % (url.rstrip('/'), quote(query, safe=''))
        try:
            responses[key] = json.loads(open_url(full, timeout=timeout, ca_path=ca or None, **auth).read())
        except Exception as exc:  # any failure to read Prometheus is the task's failure, named
            raise AnsibleActionFail('fleet_report: could not read %s from Prometheus (%s): %s' % (query, full, exc))
    return responses


class ActionModule(ActionBase):
    """Rows from every host's fleet_view_host fact, the JSON written, the table returned."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(['settings', 'gateways'])

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        settings = self._task.args.get('settings')
        if not isinstance(settings, dict) or any(k not in settings for k in _SETTINGS):
            raise AnsibleActionFail('fleet_report: settings must be the registered result of specdec.serve.settings '
                                    'for fleet_view (keys %s)' % ', '.join(_SETTINGS))
        gateways = [r for r in (self._task.args.get('gateways') or []) if isinstance(r, dict)]
        hostvars = task_vars.get('hostvars') or {}
        records = {}
        for host in settings['hosts']:
            rec = hostvars[host].get('fleet_view_host') if host in hostvars else None
            records[host] = self._templar.template(rec) if rec is not None else None
        # the password is a secret: the settings check never returns it, it is read here
        password = self._templar.template(task_vars.get('fleet_view_prometheus_password') or '')
        live = query_prometheus(settings['prometheus_url'], user=settings['prometheus_user'], password=password,
                                ca=settings['prometheus_ca']) if settings['prometheus_url'] else None
        now = utc_now()
        report = fleet_view.build_report(settings['title'], now, settings['hosts'], settings['status'], records,
                                         live=live, live_margin=settings['live_margin'], gateways=gateways)
        path = os.path.join(settings['report_dir'], '%s.json' % settings['report_name'])
        fleet_view.write_report(path, fleet_view.report_json(report))
        heals = any(r.get('heals') for r in report['rows'])
        table = fleet_table(report['rows'], fleet_view.columns(live is not None, gateways, settings['status'], heals))
        heading = '%s (%s; JSON: %s)' % (settings['title'], now, path)
        result.update({'changed': False, 'path': path, 'report': report, 'lines': [heading] + table.splitlines(),
                       'ansible_facts': {'fleet_view_report': report}})
        return result
