# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its planner: the front door's backends, maps and key digests from the inventory (:func:`plan`, the ``plan`` entry,
plugin_utils/_gateway.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    bind_address,
    each,
    host_path,
    ip_or_empty,
    name,
    non_empty,
    port,
    rng,
)


def api_keys(keys):
    """gateway_api_keys: a list of keys, each a string or a {name, key} mapping whose key is a string."""
    if not isinstance(keys, list):
        return 'must be a list of keys, each a string or a {name, key} mapping'
    for index, item in enumerate(keys):
        key = item.get('key') if isinstance(item, dict) else item
        if not isinstance(key, string_types):
            return ('item %d (value hidden) is a %s; each key must be a string or a {name, key} mapping whose key is a '
                    'string' % (index, type(key).__name__))
    return None


POLICY: dict[str, Any] = {
    # raw in the argument spec: a secret is checked as given, never converted
    'gateway_api_keys': [api_keys],
    'gateway_drain_instances': [each(name)],
    'gateway_port': [port],
    'gateway_bind_address': [non_empty, ip_or_empty],
    'gateway_stats_port': [port],
    'gateway_stats_address': [non_empty, bind_address],
    'gateway_timeout_connect_s': [rng(1, 3600)],
    'gateway_timeout_client_s': [rng(1, 86400)],
    'gateway_timeout_server_s': [rng(1, 86400)],
    'gateway_timeout_queue_s': [rng(1, 3600)],
    'gateway_timeout_http_request_s': [rng(1, 3600)],
    'gateway_check_interval_ms': [rng(100, 600000)],
    'gateway_check_fall': [rng(1, 100)],
    'gateway_check_rise': [rng(1, 100)],
    'gateway_request_buffer_kb': [rng(16, 4096)],
    'gateway_maxconn': [rng(1, 1000000)],
    'gateway_drain_timeout': [rng(0, 86400)],
    'gateway_up_timeout': [rng(1, 3600)],
    'gateway_config_dir': [host_path],
    'gateway_socket': [host_path],
}


# the settings the gateway plan reads (plugin_utils/_gateway.py, check_settings)
PLAN_SETTINGS = ('port', 'bind_address', 'tls', 'stats_port', 'stats_address', 'balance', 'timeout_connect_s',
                 'timeout_client_s', 'timeout_server_s', 'timeout_queue_s', 'timeout_http_request_s',
                 'check_interval_ms', 'check_fall', 'check_rise', 'request_buffer_kb', 'maxconn', 'require_keys',
                 'server_header')


def plan(settings, warn=None, ctx=None):
    """The gateway's plan (plugin_utils/_gateway.py, ``gateway_plan``): one backend per served model with the
    engine hosts serving it, read from the inventory (``ctx['hostvars']`` and ``ctx['groups']``: each host's
    instances, or what the rollout role published for it in this run), the maps, the error bodies and the API
    keys' digests (``ctx['vars']['gateway_api_keys']``), with ``summary`` (each model and its servers, no key).

    PlanRefusal names every variable: the keys' problems first (never a key), then the engines' and the
    settings' (a plan without a backend among them)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import (
        GatewayError, engines_from, gateway_plan, key_problems)
    ctx = ctx or {}
    keys = (ctx.get('vars') or {}).get('gateway_api_keys') or []
    problems = key_problems(keys)
    if problems:
        raise PlanRefusal(problems)
    try:
        engines = engines_from(settings['engine_hosts'], ctx.get('hostvars') or {}, ctx.get('groups') or {})
        out = gateway_plan(engines, dict((k, settings[k]) for k in PLAN_SETTINGS), keys)
    except GatewayError as exc:
        raise PlanRefusal(exc.errors)
    out['summary'] = ['%s: %s' % (b['model'], ', '.join(s['name'] for s in b['servers'])) for b in out['backends']]
    return out


# the planners the settings action calls, by entry; the variables they read
PLANNERS = {'plan': plan}
PLAN_VARS = ('gateway_api_keys',)
# the plan holds the API keys' digests: the settings action never shows it; the role publishes it (no_log)
PLAN_HOLDS_SECRETS = True
