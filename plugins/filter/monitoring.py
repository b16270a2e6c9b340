# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the monitoring and monitoring_exporter roles: settings, prometheus.yml, rules, their promtool
tests, Alertmanager's configuration and the exporter's. The documentation lives in monitoring_*.yml next to
this file; the logic in plugins/plugin_utils/_monitoring.py (the rules and their tests in _monitoring_rules.py,
the tune loop in _tune_loop.py, the live view in _monitoring_live.py), shared with the unit tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def _m():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring as monitoring
    return monitoring


def _rules():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as monitoring_rules
    return monitoring_rules


def _tune_loop():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _tune_loop as tune_loop
    return tune_loop


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


# the host variables the scrape config reads
READ = ('monitoring_address', 'monitoring_exporter_listen', 'monitoring_exporter_port', 'ansible_host', 'inference_server_instances',
        'gateway_stats_port', 'gateway_stats_address', 'monitoring_ssh_port')
# the facts the tune loop reads (a host's SSH keys)
FACTS = tuple('ssh_host_key_%s_public%s' % (kind, tail) for kind in ('ed25519', 'ecdsa', 'rsa') for tail in ('', '_keytype'))


def _plain(hostvars, groups):
    """Only the variables the scrape config reads, as plain data (hostvars template on access)."""
    hosts: set = set()
    for members in (groups or {}).values():
        hosts.update(members or [])
    out = {}
    for host in hosts:
        hv = hostvars[host] if host in hostvars else {}
        out[host] = dict((k, hv[k]) for k in READ if k in hv)
        facts = hv['ansible_facts'] if 'ansible_facts' in hv else {}
        out[host]['ansible_facts'] = dict((k, facts[k]) for k in FACTS if k in facts)
    return out


def monitoring_settings(settings, exporter=None, web_users=None, tune_loop_token=None):
    return _call('monitoring_settings', _m().check, settings, exporter, web_users, tune_loop_token)


def monitoring_tune_loop_plan(settings, hostvars, groups, java_files=None, monitoring_host=None):
    return _call('monitoring_tune_loop_plan',
                 lambda: _tune_loop().tune_loop(settings, _plain(hostvars, groups), dict(groups), java_files, monitoring_host))


def monitoring_scrape_config(settings, hostvars, groups, monitoring_host):
    return _call('monitoring_scrape_config', lambda: _m().scrape_config(_plain(hostvars, groups), dict(groups),
                                                                        monitoring_host, settings))


def monitoring_web_config(settings, users, current=''):
    return _call('monitoring_web_config', _m().web_config, settings, users, current)


def monitoring_daemon_env(settings, daemon):
    return _call('monitoring_daemon_env', _m().daemon_env, settings, daemon)


def monitoring_rules(settings):
    return _call('monitoring_rules', _rules().rules, settings)


def monitoring_alert_tests(settings, rule_file='rules.yml'):
    return _call('monitoring_alert_tests', _rules().alert_tests, settings, rule_file)


def monitoring_alertmanager_config(settings):
    return _call('monitoring_alertmanager_config', _m().alertmanager_config, settings)


def monitoring_live_view(rows, responses, margin=None):
    return _call('monitoring_live_view', _live().live_view, rows, responses, margin)


class FilterModule(object):
    def filters(self):
        return {
            'monitoring_settings': monitoring_settings,
            'monitoring_scrape_config': monitoring_scrape_config,
            'monitoring_daemon_env': monitoring_daemon_env,
            'monitoring_web_config': monitoring_web_config,
            'monitoring_rules': monitoring_rules,
            'monitoring_alert_tests': monitoring_alert_tests,
            'monitoring_alertmanager_config': monitoring_alertmanager_config,
            'monitoring_live_view': monitoring_live_view,
            'monitoring_tune_loop_plan': monitoring_tune_loop_plan,
        }
