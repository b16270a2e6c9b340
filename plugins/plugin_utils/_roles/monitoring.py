# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its planner: everything the monitoring host writes, decided once on the controller (:func:`main`: the settings
checked together, the rules and their promtool tests, the scrape config from the inventory, Alertmanager's config
with the tune loop's webhook where the monitoring_tune_loop role runs one, the daemons' command lines) and the web
configuration with its bcrypt hashes (:func:`web`, never shown)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    bind_address,
    both_or_neither,
    ContextRule,
    duration,
    each,
    group,
    host_path,
    http_url,
    local_path,
    name,
    non_empty,
    package,
    port,
    rng,
    url_path,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    NAME_RE,
    NAME_WORDS,
    plain_hostvars,
    show,
)


# bcrypt hashes the first 72 bytes of a password and refuses longer ones
BCRYPT_MAX = 72


def web_users(v):
    """monitoring_web_users: user name -> password; the names are said, never the passwords."""
    if not isinstance(v, dict):
        return 'must be a mapping of user name to password'
    bad_names = [k for k in v if not isinstance(k, string_types) or not NAME_RE.match(k)]
    if bad_names:
        return 'has user names that are not %s: %s' % (NAME_WORDS, ', '.join(show(k) for k in bad_names))
    bad = [k for k, x in sorted(v.items()) if not isinstance(x, string_types) or not x
           or len(x.encode('utf-8')) > BCRYPT_MAX]
    return ('has passwords (values hidden) that are not strings of 1 to %d bytes: %s'
            % (BCRYPT_MAX, ', '.join(bad))) if bad else None


POLICY: dict[str, Any] = {
    'monitoring_server_group': [group],
    'monitoring_engine_group': [group],
    'monitoring_gateway_group': [group],
    'monitoring_gateway_metrics_path': [url_path],
    'monitoring_gateway_metrics_port': [port],
    'monitoring_prometheus_listen': [non_empty, bind_address],
    'monitoring_alertmanager_listen': [non_empty, bind_address],
    'monitoring_prometheus_retention': [duration],
    'monitoring_dashboard_dir': [host_path],
    'monitoring_tools_dir': [host_path],
    'monitoring_web_users': [web_users],
    'monitoring_web_client_user': [name],
    'monitoring_web_tls_cert': [local_path, ContextRule(both_or_neither('monitoring_web_tls_key'), 'monitoring_web_tls_key')],
    'monitoring_web_tls_key': [local_path, ContextRule(both_or_neither('monitoring_web_tls_cert'), 'monitoring_web_tls_cert')],
    'monitoring_packages': [non_empty, each(package)],
    'monitoring_prometheus_port': [port],
    'monitoring_alertmanager_port': [port],
    'monitoring_acceptance_margin': [rng(0, 0.99)],
    'monitoring_acceptance_min_steps_per_s': [rng(0, 1000000000)],
    'monitoring_kv_cache_threshold': [rng(0.01, 1)],
    'monitoring_queue_threshold': [rng(0, 1000000000)],
    'monitoring_scrape_interval': [duration],
    'monitoring_evaluation_interval': [duration],
    'monitoring_acceptance_window': [duration],
    'monitoring_acceptance_for': [duration],
    'monitoring_engine_down_for': [duration],
    'monitoring_engine_wedged_for': [duration],
    'monitoring_kv_cache_for': [duration],
    'monitoring_queue_for': [duration],
    'monitoring_alertmanager_webhooks': [each(http_url)],
    'monitoring_alertmanager_group_wait': [duration],
    'monitoring_alertmanager_group_interval': [duration],
    'monitoring_alertmanager_repeat_interval': [duration],
}


# the host variables the scrape config reads
HOST_READ = ('monitoring_address', 'monitoring_exporter_listen', 'monitoring_exporter_port', 'ansible_host',
             'inference_server_instances', 'gateway_stats_port', 'gateway_stats_address')


def _inventory(ctx):
    """Only the host variables the plans read, as plain data (hostvars template a value when it is read)."""
    hosts: set = set()
    for members in (ctx.get('groups') or {}).values():
        hosts.update(members or [])
    return plain_hostvars(ctx.get('hostvars') or {}, hosts, HOST_READ)


def _checked(settings, ctx):
    """The settings checked together (plugin_utils/_monitoring.py, ``check``), with the exporter's as the monitoring
    host sees them (``ctx['vars']['_monitoring_exporter_seen']``) and the web users (a secret) read from
    ``ctx['vars']``, only ever told as names."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import check
    found = ctx.get('vars') or {}
    return check(settings, found.get('_monitoring_exporter_seen'), found.get('monitoring_web_users'))


def _refusing(decide):
    """``decide``'s result; its MonitoringError (one line per variable) or a bad value as a PlanRefusal."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import MonitoringError
    try:
        return decide()
    except MonitoringError as exc:
        raise PlanRefusal(exc.errors)
    except (TypeError, ValueError, AttributeError) as exc:
        raise PlanRefusal([str(exc)])


def main(settings, warn=None, ctx=None):
    """``cfg`` (the checked settings), ``rules`` and ``alert_tests`` (the alerting rules and their promtool tests),
    ``scrape`` (prometheus.yml from the inventory), ``alertmanager`` (its config: with the tune loop on, its webhook,
    from the monitoring_tune_loop role's settings as this host typed them, ``ctx['vars']['_monitoring_tune_loop_seen']``)
    and ``env`` (each daemon's command line, by daemon)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as monitoring
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as monitoring_rules
    from ansible_collections.specdec.serve.plugins.plugin_utils._tune_loop import webhook
    ctx = ctx or {}

    def decide():
        cfg = _checked(settings, ctx)
        inventory, groups, host = _inventory(ctx), dict(ctx.get('groups') or {}), ctx.get('host')
        return {'cfg': cfg, 'rules': monitoring_rules.rules(cfg), 'alert_tests': monitoring_rules.alert_tests(cfg),
                'scrape': monitoring.scrape_config(inventory, groups, host, cfg),
                'alertmanager': monitoring.alertmanager_config(
                    cfg, webhook((ctx.get('vars') or {}).get('_monitoring_tune_loop_seen'))),
                'env': dict((d, monitoring.daemon_env(cfg, d)) for d in ('prometheus', 'alertmanager'))}
    return _refusing(decide)


def web(settings, warn=None, ctx=None):
    """The web configuration's text (plugin_utils/_monitoring.py, ``web_config``): the users' bcrypt hashes, a hash
    of the installed file (``ctx['reported']``, its text, '' where there is none) kept while it still matches its
    password. Never shown."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import web_config
    ctx = ctx or {}
    return _refusing(lambda: web_config(_checked(settings, ctx), (ctx.get('vars') or {}).get('monitoring_web_users'),
                                        ctx.get('reported') or ''))


# the planners the settings action calls, by entry; the variables they read (the exporter's and the tune loop's
# settings as this host typed them, and the web users, a secret)
PLANNERS = {'main': main, 'web': web}
PLAN_VARS = ('_monitoring_exporter_seen', '_monitoring_tune_loop_seen', 'monitoring_web_users')
# the entries whose plan holds secrets (the web configuration's hashes): never shown
PLAN_HOLDS_SECRETS = ('web',)
