# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring_exporter role's settings policy (what its argument spec cannot say: ranges, patterns, paths, one entry
per setting, applied by the settings engine, plugin_utils/_settings.py) and its planner: everything the role writes,
decided once from the checked settings (:func:`plan`, which the settings action calls and returns as ``plan``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    bind_address,
    host_path,
    port,
    rng,
)


POLICY: dict[str, Any] = {
    'monitoring_exporter_port': [port],
    'monitoring_exporter_poll_interval': [rng(0.05, 60)],
    'monitoring_exporter_probe_interval': [rng(0, 3600)],
    'monitoring_exporter_probe_deadline': [rng(1, 600)],
    'monitoring_exporter_listen': [bind_address],
    'monitoring_exporter_dir': [host_path],
    'monitoring_exporter_config_file': [host_path],
    'monitoring_exporter_fact_file': [host_path],
}


def plan(settings, warn=None, ctx=None):
    """The exporter on this host, decided once: ``settings`` (checked together, plugin_utils/_monitoring.py
    check_exporter), ``config`` (its JSON configuration: where it listens, the engines it reads), ``url`` (the local
    fact serve_bench reads), ``exec`` (its unit's ExecStart=) and ``validate`` (the command that checks a new
    configuration before it replaces the old one), every word quoted by the one quoting rule.

    It listens on the host's inventory address (``monitoring_address``, else ``ansible_host``, else the inventory
    name, from ``ctx``) unless monitoring_exporter_listen names another. PlanRefusal names each setting."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as monitoring
    from ansible_collections.specdec.serve.plugins.plugin_utils._quoting import quote
    ctx = ctx or {}
    found = ctx.get('vars') or {}
    address = next((found[name] for name in PLAN_VARS if name in found), ctx.get('host'))
    try:
        checked = monitoring.check_exporter(settings)
        return {'settings': checked, 'config': monitoring.exporter_config(checked['instances'], checked, address),
                'url': monitoring.exporter_url(checked, address), 'exec': monitoring.exporter_exec(checked),
                'validate': '/usr/bin/python3 %s --check --config %%s'
                            % quote(checked['dir'] + '/specdec_exporter.py', 'command')}
    except monitoring.MonitoringError as exc:
        raise PlanRefusal(exc.errors)
    except (TypeError, ValueError) as exc:
        raise PlanRefusal(['monitoring_exporter: %s' % exc])


# the planners the settings action calls, by the role's entry point
PLANNERS = {'main': plan}
# the host's inventory address, first found (the settings action templates them for the planner)
PLAN_VARS = ('monitoring_address', 'ansible_host')
