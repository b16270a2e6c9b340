# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_view role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its collect step's planner: the instances a host's local facts list (:func:`instances`) and, judged from their
health probes, the rows of the host's ``fleet_view_host`` fact (:func:`rows`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    ContextRule,
    http_url,
    local_path,
    name,
    needs_set,
    no_dotdot_name,
    rng,
)


POLICY: dict[str, Any] = {
    'fleet_view_health_timeout': [rng(1, 3600)],
    'fleet_view_log_lines': [rng(0, 10000)],
    'fleet_view_report_dir': [local_path],
    'fleet_view_report_name': [no_dotdot_name],
    'fleet_view_live_margin': [rng(0, 0.99)],
    'fleet_view_prometheus_url': [http_url],
    'fleet_view_prometheus_user': [name, ContextRule(needs_set('fleet_view_prometheus_password'),
                                                     'fleet_view_prometheus_password')],
    'fleet_view_prometheus_ca': [local_path],
}


def instances(settings, warn=None, ctx=None):
    """``instances``: the instances of the host's specdec_serving local fact, sorted by name (as Jinja's dictsort
    sorts, without regard to case); ``serving_facts``: whether the host has that fact at all."""
    local = (ctx or {}).get('local_facts') or {}
    serving = local.get('specdec_serving')
    found = (serving or {}).get('instances') if isinstance(serving, dict) else None
    found = found if isinstance(found, dict) else {}
    names = sorted(found, key=lambda k: str(k).lower())
    return {'instances': [found[k] for k in names], 'serving_facts': serving is not None}


def rows(settings, warn=None, ctx=None):
    """The ``instances`` of the host's ``fleet_view_host`` fact (plugin_utils/_fleet_view.py,
    ``collected_instances``): each instance of :func:`instances` with its health (``ctx['reported']``: the
    engine_health results, one per instance, in order), its entry of the specdec_sweep local fact and of the
    specdec_heal local fact (the heal's record, where a heal restarted or drained it)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet_view import collected_instances
    ctx = ctx or {}
    health = ctx.get('reported')
    if not isinstance(health, list):
        raise PlanRefusal(['the health probes (reported) must be the list of engine_health results, got %s'
                           % type(health).__name__])
    sweeps = (ctx.get('local_facts') or {}).get('specdec_sweep')
    heals = (ctx.get('local_facts') or {}).get('specdec_heal')
    return collected_instances(instances(settings, warn, ctx)['instances'], health,
                               sweeps if isinstance(sweeps, dict) else {}, heals if isinstance(heals, dict) else {})


# the planners the settings action calls, by entry
PLANNERS = {'instances': instances, 'rows': rows}
