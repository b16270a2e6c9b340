# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's settings policy (what its argument spec cannot say: ranges, patterns, paths, the checks that
read another setting, one entry per setting, applied by the settings engine, plugin_utils/_settings.py) and its
planner: what a host serves, renders and caches, decided once and published as the fact ``rollout_plan``
(:func:`plan`; the settings action calls it for the role's ``plan`` entry point, whose tasks ``main`` imports)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    each,
    host_port,
    name,
    no_dotdot_name,
    pattern,
    rng,
)


POLICY: dict[str, Any] = {
    'rollout_canary': [rng(1, 100000)],
    'rollout_batch': [pattern(re.compile(r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)\Z'),
                              'a host count or a percentage from 1% to 100%')],
    'rollout_min_free_gb': [rng(0.0, 1000000.0)],
    'rollout_gpu_count': [rng(0, 1024)],
    'rollout_min_driver_version': [pattern(re.compile(r'^[0-9]+(\.[0-9]+){0,3}\Z'), 'a driver version such as 580.65.06')],
    'rollout_run_id': [no_dotdot_name],
    'rollout_adopt_from': [host_port],
    'rollout_adopt_instances': [each(name)],
}


def plan(settings, warn=None, ctx=None):
    """What this host serves, renders and caches (plugin_utils/_fleet.py, fleet_plan): ``serving`` (the instances
    whose state is not absent, each with the winner a sweep applied here while the inventory names the method and
    draft model it swept, unless ``keep_sweep_winners`` is false), ``rendered`` (spec_config of each, in order),
    ``cache`` and ``models`` (what model_cache fetches), ``instances`` (serving, then those to remove).

    ``ctx``: ``vars`` (``inference_server_instances``, as the host has it, API keys included) and ``local_facts``
    (``ansible_facts.ansible_local``). PlanRefusal names the instance and the key a render refuses."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import KeepWinnersError, fleet_plan
    from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import SpecConfigError
    ctx = ctx or {}
    instances = (ctx.get('vars') or {}).get('inference_server_instances')
    try:
        return fleet_plan(instances if instances is not None else [], ctx.get('local_facts') or {},
                          settings['keep_sweep_winners'])
    except SpecConfigError as exc:
        raise PlanRefusal(['inference_server_instances: %s' % exc])
    except KeepWinnersError as exc:
        raise PlanRefusal(['rollout_keep_sweep_winners: %s' % exc])


# the planners the settings action calls, by the role's entry point
PLANNERS = {'plan': plan}
# the variables of other roles a plan is made from (the settings action templates them for the planner)
PLAN_VARS = ('inference_server_instances',)
# the plan carries the instances' API keys to inference_server: the settings action never shows it (the role
# publishes it as the fact rollout_plan, no_log, for every role and playbook of the play to read)
PLAN_HOLDS_SECRETS = True
