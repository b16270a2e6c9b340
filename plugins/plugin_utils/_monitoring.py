# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the monitoring and monitoring_exporter roles write, decided from the inventory and their settings
(their defaults are the roles' argument specs').

* :func:`check` types and checks the role's settings as the settings action does (their defaults and
  choices are the role's argument spec's, their bounds and patterns plugin_utils/_settings.py POLICY's),
  converts Prometheus durations (``30s``, ``5m``) to seconds and relates the acceptance window to the
  scrape and evaluation intervals; every error names the variable, the value and what is allowed.
* :func:`scrape_config` builds ``prometheus.yml`` from the inventory: the Prometheus and
  Alertmanager of the monitoring host itself, the specdec-exporter of every engine host, every vLLM
  instance's own ``/metrics`` (labelled with its host and instance name), and the HAProxy Prometheus
  endpoint of every host in the gateway group when that group exists.
* :func:`check_exporter` checks the monitoring_exporter role's settings; :func:`exporter_config` is the
  exporter's configuration on one engine host.
* :func:`rules` are the recording rules (acceptance length and rate, per-position acceptance,
  generated tokens/s, queueing, KV cache use, per host and instance) and the alerts.
* :func:`alert_tests` is a ``promtool test rules`` file that covers every alert with the configured
  durations; :func:`alert_bound` is the time the rules promise from an acceptance drop to the
  *speculation stopped paying* alert firing (and to its resolution).
* :func:`alertmanager_config` routes every alert to the configured webhooks.
* :func:`query_expressions`, :func:`metric_references`, :func:`exposition_labels` and
  :func:`unserved` say which engine metrics and labels the rules and the dashboard read, and which of
  them an engine's ``/metrics`` lacks (molecule real_engine checks vLLM's).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import ipaddress
import math
import os
import re

import yaml

from ansible_collections.specdec.serve.plugins.module_utils.bench_spec import parse_prometheus
from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting, _retune as retune, _role_spec as role_spec, _spec_profiles as spec_profiles
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_role, check_value
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    PORT_WORDS,
    host_address,
    is_port,
    refusal,
    seconds,
)

LABEL_KEYS = ('host', 'engine_instance')

# Settings of the monitoring role that this module reads (without the monitoring_ prefix); their defaults
# are the role's argument spec's.
SETTINGS = ('engine_group', 'gateway_group', 'gateway_metrics_port', 'gateway_metrics_path', 'prometheus_port',
            'alertmanager_port', 'scrape_interval', 'evaluation_interval', 'acceptance_window', 'acceptance_for',
            'acceptance_margin', 'acceptance_min_steps_per_s', 'engine_down_for', 'kv_cache_threshold', 'kv_cache_for',
            'queue_threshold', 'queue_for', 'alertmanager_webhooks', 'alertmanager_group_wait',
            'alertmanager_group_interval', 'alertmanager_repeat_interval', 'tools_dir', 'prometheus_listen',
            'prometheus_retention', 'alertmanager_listen', 'allow_unauthenticated_listen', 'web_client_user',
            'web_tls_cert', 'web_tls_key', 'tune_loop', 'tune_loop_listen', 'tune_loop_port', 'tune_loop_inventory',
            'tune_loop_ssh_key', 'tune_loop_collection', 'tune_loop_wheelhouse', 'tune_loop_pip_index_url',
            'tune_loop_requirements', 'tune_loop_dir', 'tune_loop_user', 'tune_loop_vars', 'tune_loop_java_package',
            'tune_loop_vault_password_file', 'packages', 'server_group')
# Settings of the monitoring_exporter role (without the monitoring_exporter_ prefix).
EXPORTER = 'monitoring_exporter'
EXPORTER_SETTINGS = ('listen', 'port', 'poll_interval', 'fact_file', 'dir', 'config_file')
# What the server reads of the exporter's: the port it scrapes where an engine host does not set its own, and
# the poll interval its alert bound counts; they enter check() as exporter_port and exporter_poll_interval.
EXPORTER_READ = ('port', 'poll_interval')
DURATIONS = ('scrape_interval', 'evaluation_interval', 'acceptance_window', 'acceptance_for', 'engine_down_for',
             'kv_cache_for', 'queue_for', 'alertmanager_group_wait', 'alertmanager_group_interval',
             'alertmanager_repeat_interval')


class MonitoringError(ValueError):
    def __init__(self, errors):
        self.errors = list(errors)
        super(MonitoringError, self).__init__('\n'.join(self.errors))


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check(settings, exporter=None, web_users=None, tune_loop_token=None):
    """Validated settings of the monitoring role: the spec's defaults of SETTINGS overlaid with `settings`
    (keys without the monitoring_ prefix; a key that is not a setting of the role passes unchanged), typed
    and checked by the settings' policy, plus ``<duration>_s`` (seconds) for every duration,
    ``rules_path``, ``exporter_port`` and ``exporter_poll_interval`` from `exporter` (the
    monitoring_exporter settings the monitoring host sees, without their prefix; see
    :func:`check_exporter`), and ``web_users``, the names (never the passwords) of `web_users`
    (monitoring_web_users, a secret the settings action does not return), with ``web_client_user`` the
    one Prometheus authenticates as, and ``tune_loop`` (see :func:`tune_loop_files`), whose token
    (monitoring_tune_loop_token, a secret the settings action does not return) is only told as set or not.
    Raises MonitoringError."""
    s = role_spec.defaults('monitoring', SETTINGS)
    given = dict((k, v) for k, v in (settings or {}).items() if v is not None)
    # the passwords are checked (never shown) and dropped here: only the names are kept
    users = given.pop('web_users', None)
    if web_users is not None:
        users = web_users
    raw_token = given.pop('tune_loop_token', None)
    token_set = _token_set(raw_token if tune_loop_token is None else tune_loop_token,
                           given.pop('tune_loop_token_set', None))
    ex_given = dict(exporter or {})
    for key in EXPORTER_READ:
        if 'exporter_' + key in given:
            ex_given.setdefault(key, given.pop('exporter_' + key))
    s.update(given)
    errors = []
    try:
        s.update(check_role('monitoring', given))
    except SettingsError as exc:
        errors.extend(exc.errors)
    try:
        ex = check_exporter(dict((k, ex_given[k]) for k in EXPORTER_READ if k in ex_given))
        s.update(('exporter_' + k, ex[k]) for k in EXPORTER_READ)
    except MonitoringError as exc:
        errors.extend(exc.errors)
    try:
        s['web_users'], s['web_client_user'] = _web_users(s, users)
    except MonitoringError as exc:
        errors.extend(exc.errors)
    if not errors:
        for key in DURATIONS:
            s[key + '_s'] = seconds(s[key])
        if s['evaluation_interval_s'] > s['acceptance_window_s'] or s['scrape_interval_s'] * 2 > s['acceptance_window_s']:
            errors.append(refusal('monitoring_acceptance_window', s['acceptance_window'],
                                  'must be at least two scrape intervals and one evaluation interval '
                                  '(monitoring_scrape_interval=%r, monitoring_evaluation_interval=%r)'
                                  % (s['scrape_interval'], s['evaluation_interval'])))
    if not errors:
        errors.extend(_listen_problems(s))
        errors.extend(_argument_problems(s))
        errors.extend(_tune_loop_problems(s, token_set))
    if errors:
        raise MonitoringError(errors)
    s['rules_path'] = RULES_PATH
    s['web'] = web_files(s)
    s['tune_loop_token_set'] = token_set
    s['tune_loop_files'] = tune_loop_files(s)
    # the distribution packages the monitoring host installs: the tune loop adds its Java runtime and venv
    s['packages_all'] = list(s.get('packages') or []) + (
        [p for p in (s['tune_loop_java_package'], 'python3-venv') if p not in (s.get('packages') or [])]
        if s['tune_loop'] else [])
    return s


def _token_set(token, told):
    """Whether the tune loop's token is set: `token` (the secret itself, checked) when given, else what a
    checked settings mapping says (`told`, its ``tune_loop_token_set``); never the token."""
    if token is not None:
        if not isinstance(token, str):
            raise MonitoringError(['monitoring_tune_loop_token: (value hidden) must be a string'])
        if token and (len(token) < 16 or any(c.isspace() or not c.isprintable() for c in token)):
            raise MonitoringError(['monitoring_tune_loop_token: (value hidden) must be at least 16 printable '
                                   'characters without whitespace (it travels in an Authorization header)'])
        return bool(token)
    return bool(told)


def _web_users(s, users):
    """The user names of monitoring_web_users (checked by its policy: names, and passwords as strings
    of 1 to 72 bytes, never shown) and the client user; `users` may be the names only, as a checked
    settings mapping holds them."""
    if users is None:
        users = []
    if isinstance(users, dict):
        try:
            check_value('monitoring_web_users', users)
        except SettingsError as exc:
            raise MonitoringError(exc.errors)
        names = sorted(users)
    elif isinstance(users, (list, tuple)) and all(isinstance(n, str) for n in users):
        names = sorted(users)
    else:
        raise MonitoringError(['monitoring_web_users: (value hidden) must be a mapping of user name to password'])
    client = s['web_client_user'] or (names[0] if len(names) == 1 else '')
    if names and client not in names:
        raise MonitoringError([refusal('monitoring_web_client_user', s['web_client_user'],
                                       'must name one of monitoring_web_users (%s): the user Prometheus authenticates as'
                                       % ', '.join(names))])
    if client and not names:
        raise MonitoringError([refusal('monitoring_web_client_user', client, 'is set while monitoring_web_users is empty')])
    return names, client


def check_exporter(settings):
    """Validated settings of the monitoring_exporter role: the spec's defaults of EXPORTER_SETTINGS overlaid
    with `settings` (keys without the monitoring_exporter_ prefix; others pass unchanged), typed and checked
    by the settings' policy, and the paths that reach its unit and its validate command checked for them.
    Raises MonitoringError."""
    s = role_spec.defaults(EXPORTER, EXPORTER_SETTINGS)
    given = dict((k, v) for k, v in (settings or {}).items() if v is not None)
    s.update(given)
    try:
        s.update(check_role(EXPORTER, given))
    except SettingsError as exc:
        raise MonitoringError(exc.errors)
    errors = []
    for key in ('dir', 'config_file'):
        for context in ('unit', 'command'):
            msg = quoting.problem(s[key], context)
            if msg:
                errors.append(refusal('%s_%s' % (EXPORTER, key), s[key], msg))
                break
    if errors:
        raise MonitoringError(errors)
    return s


# --------------------------------------------------------------------------- listeners, command lines

# Beyond loopback, Prometheus and Alertmanager ask for basic authentication over TLS (their web
# configuration file, see web_config), or this setting acknowledges that they answer anyone.
ALLOW_UNAUTHENTICATED = 'monitoring_allow_unauthenticated_listen'


def _loopback(address):
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _listen_problems(s):
    out = []
    secured = bool(s['web_users']) and bool(s['web_tls_cert'])
    for daemon, key in (('Prometheus', 'prometheus_listen'), ('Alertmanager', 'alertmanager_listen')):
        if not _loopback(s[key]) and not secured and not s['allow_unauthenticated_listen']:
            out.append(refusal('monitoring_' + key, s[key],
                               'is beyond loopback, where %s would answer %s: set monitoring_web_users and '
                               'monitoring_web_tls_cert/_key (basic authentication over TLS), keep 127.0.0.1 (the '
                               'monitoring host\'s own clients), or set %s: true to accept that'
                               % (daemon, 'anyone without authentication' if not s['web_users'] else
                                  'with passwords in clear text', ALLOW_UNAUTHENTICATED)))
    for key in ('web_tls_cert', 'web_tls_key'):
        if s[key] and not os.path.isfile(s[key]):
            out.append(refusal('monitoring_' + key, s[key], 'is not a file on the controller'))
    return out


def _hostport(address, port):
    return _target(str(address), int(port))


def daemon_args(s, daemon):
    """[(variable or None, flag)] of the command line of `daemon` (prometheus, alertmanager), each flag
    with the variable its value comes from."""
    web = [(None, '--web.config.file=' + WEB_CONFIG)] if web_enabled(s) else []
    if daemon == 'prometheus':
        return [(None, '--config.file=/etc/prometheus/prometheus.yml'),
                ('monitoring_prometheus_listen', '--web.listen-address=' + _hostport(s['prometheus_listen'], s['prometheus_port'])),
                ('monitoring_prometheus_retention', '--storage.tsdb.retention.time=%s' % s['prometheus_retention'])] + web
    if daemon == 'alertmanager':
        return [(None, '--config.file=/etc/prometheus/alertmanager.yml'),
                ('monitoring_alertmanager_listen',
                 '--web.listen-address=' + _hostport(s['alertmanager_listen'], s['alertmanager_port'])),
                (None, '--cluster.listen-address=')] + web
    raise ValueError('no command line of %r' % (daemon,))


# --------------------------------------------------------------------------- web configuration

# Prometheus's and Alertmanager's web configuration file (one for both: Debian runs both as the user
# prometheus), the TLS certificate and key it names, and the client password prometheus.yml names.
WEB_CONFIG = '/etc/prometheus/web-config.yml'
WEB_TLS_CERT = '/etc/prometheus/web-tls.crt'
WEB_TLS_KEY = '/etc/prometheus/web-tls.key'
WEB_CLIENT_PASSWORD = '/etc/prometheus/web-client.password'
BCRYPT_ROUNDS = 12


def web_enabled(s):
    """Whether Prometheus and Alertmanager run with a web configuration file (users or TLS set)."""
    return bool(s['web_users'] or s['web_tls_cert'])


def web_files(s):
    """The files of the web configuration on the monitoring host: where each goes, which apply (``tls``,
    ``auth``, ``enabled``), and those that do not (``unused``), which the role removes."""
    tls, auth = bool(s['web_tls_cert']), bool(s['web_users'])
    unused = ([] if tls else [WEB_TLS_CERT, WEB_TLS_KEY]) + ([] if auth else [WEB_CLIENT_PASSWORD]) + \
        ([] if tls or auth else [WEB_CONFIG])
    return {'enabled': tls or auth, 'tls': tls, 'auth': auth, 'config': WEB_CONFIG, 'tls_cert': WEB_TLS_CERT,
            'tls_key': WEB_TLS_KEY, 'client_password': WEB_CLIENT_PASSWORD, 'unused': unused}


def _web_client(s):
    """How Prometheus reaches itself and Alertmanager: https with the served certificate as its CA, and
    basic authentication as the client user, its password read from a file (none in prometheus.yml)."""
    out: dict[str, Any] = {}
    if s['web_tls_cert']:
        out.update(scheme='https', tls_config={'ca_file': WEB_TLS_CERT})
    if s['web_users']:
        out['basic_auth'] = {'username': s['web_client_user'], 'password_file': WEB_CLIENT_PASSWORD}
    return out


def web_config(settings, users, current=''):
    """The web configuration file of Prometheus and Alertmanager (YAML text): TLS 1.2 or later with the
    installed certificate and key, and every user of `users` (monitoring_web_users, name -> password)
    with a bcrypt hash of the password, made on the controller. A hash of `current` (the installed
    file's text) that still matches its password is kept, so an unchanged password changes nothing."""
    s = check(settings, web_users=users)
    # plain strings: a play's values are str subclasses (tagged, unsafe) that YAML cannot represent
    users = dict((str(k), str(v)) for k, v in (users or {}).items())
    doc: dict[str, Any] = {}
    if s['web_tls_cert']:
        doc['tls_server_config'] = {'cert_file': WEB_TLS_CERT, 'key_file': WEB_TLS_KEY, 'min_version': 'TLS12'}
    if users:
        try:
            import bcrypt
        except ImportError:
            raise MonitoringError(['monitoring_web_users: hashing the passwords needs the Python package bcrypt on '
                                   'the controller (pip install bcrypt)'])
        try:
            known = (yaml.safe_load(current or '') or {}).get('basic_auth_users') or {}
        except (yaml.YAMLError, AttributeError):
            known = {}
        hashed = {}
        for name in sorted(users):
            password, old = users[name].encode('utf-8'), known.get(name) if isinstance(known, dict) else None
            try:
                keep = isinstance(old, str) and bcrypt.checkpw(password, old.encode('ascii'))
            except ValueError:
                keep = False
            hashed[name] = old if keep else bcrypt.hashpw(password, bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode('ascii')
        doc['basic_auth_users'] = hashed
    return '# Managed by specdec.serve.monitoring\n' + yaml.safe_dump(doc, default_flow_style=False, sort_keys=True)


def _argument_problems(s):
    """Refusals of the values that would not stay one argument of a command line this role writes."""
    out = []
    for daemon in ('prometheus', 'alertmanager'):
        for var, flag in daemon_args(s, daemon):
            msg = quoting.problem(flag.split('=', 1)[1], 'split') if var else None
            if msg:
                out.append(refusal(var, s[var[len('monitoring_'):]], msg))
    msg = quoting.problem(s['tools_dir'], 'command')
    if msg:
        out.append(refusal('monitoring_tools_dir', s['tools_dir'], msg))
    return out


def daemon_env(settings, daemon):
    """/etc/default/<package> of `daemon`: ARGS, the words Debian's unit passes to it (an unbraced
    $ARGS, split at whitespace, never unquoted: every word is checked, none is quoted)."""
    s = check(settings)
    try:
        words = quoting.split_words([flag for var, flag in daemon_args(s, daemon)])
        return quoting.env_file([('ARGS', words)], header='Managed by specdec.serve.monitoring')
    except quoting.QuotingError as exc:
        raise MonitoringError(['%s command line: %s' % (daemon, exc)])


def exporter_listen(settings, address):
    """The address the exporter of a host binds: monitoring_exporter_listen, else `address` (the
    host's inventory address, the one the monitoring host scrapes), which must then be an IP
    address of the host; never the wildcard. `settings` are the exporter's (:func:`check_exporter`)."""
    s = check_exporter(settings)
    if s['listen']:
        return s['listen']
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        ip = None
    if ip is None or ip.is_unspecified:
        raise MonitoringError([refusal(
            'monitoring_exporter_listen', '',
            'leaves the exporter on the host\'s inventory address, and %r is not an IP address of the host: set '
            'monitoring_address (the address the monitoring host scrapes) or monitoring_exporter_listen to one' % (address,))])
    return str(ip)


def exporter_url(settings, address):
    """The exporter's base URL for the clients on its own host (the local fact serve_bench reads)."""
    s = check_exporter(settings)
    return 'http://' + _hostport(exporter_listen(settings, address), s['port'])


def exporter_exec(settings):
    """The exporter unit's ExecStart= command line, every argument quoted for a unit."""
    s = check_exporter(settings)
    argv = ['/usr/bin/python3', s['dir'] + '/specdec_exporter.py', '--config', s['config_file']]
    return ' '.join(quoting.quote(a, 'unit') for a in argv)


# --------------------------------------------------------------------------- inventory -> targets

def _gateway_port(hostvars, host, s):
    """The gateway role's HAProxy Prometheus port of a host (gateway_stats_port), else the setting."""
    port = (hostvars.get(host) or {}).get('gateway_stats_port')
    if is_port(port):
        return port
    return s['gateway_metrics_port']


def _gateway_target(hostvars, host, monitoring_host, s):
    """Where the monitoring host scrapes a gateway's HAProxy exporter: the gateway role's gateway_stats_address
    (its default, loopback, serves only a Prometheus on the gateway itself)."""
    hv = hostvars.get(host) or {}
    address = hv.get('gateway_stats_address') or role_spec.default('gateway_stats_address')
    try:
        loopback = ipaddress.ip_address(str(address)).is_loopback
    except ValueError:
        raise MonitoringError([refusal('%s: gateway_stats_address' % host, address, 'must be an IP address of the gateway')])
    if not loopback:
        return _target(str(address), _gateway_port(hostvars, host, s))
    if host == monitoring_host:
        return _target(str(address), _gateway_port(hostvars, host, s))
    raise MonitoringError(['%s: gateway_stats_address=%s: HAProxy\'s metrics listen on loopback there, which %s cannot '
                           'scrape; set gateway_stats_address to the address %s scrapes the gateway at (%s)'
                           % (host, address, monitoring_host, monitoring_host, host_address(hostvars, host))])


def _target(address, port):
    return '[%s]:%d' % (address, port) if ':' in address else '%s:%d' % (address, port)


def engine_instances(instances, var='inference_server_instances'):
    """The served instances of a host (state not absent) as (name, engine, port); `var` names them in a refusal."""
    out = []
    for index, inst in enumerate(instances or []):
        if not isinstance(inst, dict):
            raise MonitoringError(['%s[%d]: must be a mapping, got %r' % (var, index, inst)])
        if inst.get('state', 'present') == 'absent':
            continue
        profile = inst.get('profile')
        if isinstance(profile, str) and profile:
            # an instance of a profile (inventories' host classes) takes its engine and port from it, as spec_config does
            base = spec_profiles.get_profile(profile)
            if base is None:
                raise MonitoringError([refusal('%s[%d].profile' % (var, index), profile, 'is not a known profile')])
            merged = dict(base)
            merged.update((k, v) for k, v in inst.items() if v is not None)  # any key, not only keyword names
            inst = merged
        engine, port = inst.get('engine'), inst.get('port')
        if engine not in ('trtllm', 'vllm'):
            raise MonitoringError([refusal('%s[%d].engine' % (var, index), engine, 'must be trtllm or vllm')])
        if not is_port(port):
            raise MonitoringError([refusal('%s[%d].port' % (var, index), port, 'must be ' + PORT_WORDS)])
        out.append((str(inst.get('name')), engine, port))
    return out


def scrape_config(hostvars, groups, monitoring_host, settings):
    """prometheus.yml as a mapping. `hostvars`: host -> its variables (only monitoring_address,
    ansible_host, inference_server_instances, monitoring_exporter_listen and _port, and the gateway's
    stats address and port are read); `groups`: the inventory's groups."""
    s = check(settings)
    engines = sorted(groups.get(s['engine_group']) or [])
    gateways = sorted(groups.get(s['gateway_group']) or [])
    me = {'host': monitoring_host}
    jobs = [
        dict({'job_name': 'prometheus',
              'static_configs': [{'targets': [_hostport(s['prometheus_listen'], s['prometheus_port'])], 'labels': dict(me)}]},
             **_web_client(s)),
        dict({'job_name': 'alertmanager',
              'static_configs': [{'targets': [_hostport(s['alertmanager_listen'], s['alertmanager_port'])], 'labels': dict(me)}]},
             **_web_client(s)),
    ]
    exporters, vllm = [], []
    for host in engines:
        address = host_address(hostvars, host)
        instances = engine_instances((hostvars.get(host) or {}).get('inference_server_instances'))
        # where the host's exporter listens (its own monitoring_exporter_listen, else its address)
        listen = host_address(hostvars, host, ('monitoring_exporter_listen',)) if (hostvars.get(host) or {}).get(
            'monitoring_exporter_listen') else address
        port = (hostvars.get(host) or {}).get('monitoring_exporter_port')
        if port is not None and not is_port(port):
            raise MonitoringError([refusal('monitoring_exporter_port', port, 'must be %s (host %s)' % (PORT_WORDS, host))])
        exporters.append({'targets': [_target(listen, s['exporter_port'] if port is None else int(port))],
                          'labels': {'host': host}})
        for name, engine, port in instances:
            if engine == 'vllm':
                vllm.append({'targets': [_target(address, port)],
                             'labels': {'host': host, 'engine_instance': name, 'engine': 'vllm'}})
    jobs.append({'job_name': 'specdec-exporter', 'static_configs': exporters})
    jobs.append({'job_name': 'specdec-vllm', 'static_configs': vllm})
    if gateways:
        jobs.append({'job_name': 'specdec-gateway', 'metrics_path': s['gateway_metrics_path'],
                     'static_configs': [{'targets': [_gateway_target(hostvars, h, monitoring_host, s)],
                                         'labels': {'host': h}} for h in gateways]})
    # an empty static_configs list is valid; drop jobs without targets to keep the file plain
    jobs = [j for j in jobs if j['static_configs']]
    alertmanager = _hostport(s['alertmanager_listen'], s['alertmanager_port'])
    return {
        'global': {'scrape_interval': s['scrape_interval'], 'evaluation_interval': s['evaluation_interval'],
                   'scrape_timeout': '%ds' % max(1, min(10, int(s['scrape_interval_s']))) if s['scrape_interval_s'] >= 1
                   else s['scrape_interval']},
        'alerting': {'alertmanagers': [dict({'static_configs': [{'targets': [alertmanager]}]}, **_web_client(s))]},
        'rule_files': [RULES_PATH],
        'scrape_configs': jobs,
    }


RULES_PATH = '/etc/prometheus/specdec/rules.yml'


def exporter_config(instances, settings, address=None):
    """The exporter's JSON configuration on an engine host, from its instances (monitoring_exporter_instances)
    and the exporter's settings; `address` is the host's inventory address (see :func:`exporter_listen`)."""
    s = check_exporter(settings)
    return {
        'listen': exporter_listen(settings, address), 'port': s['port'], 'poll_interval': float(s['poll_interval']),
        'timeout': 5.0, 'history': 20000, 'fact_file': s['fact_file'],
        'instances': [{'name': name, 'engine': engine, 'url': 'http://127.0.0.1:%d' % port}
                      for name, engine, port in engine_instances(instances, 'monitoring_exporter_instances')],
    }


# --------------------------------------------------------------------------- rules

BY = 'sum by (host, engine_instance) '


def _g(x):
    return ('%.4f' % x).rstrip('0').rstrip('.')


def annotations(alert, s):
    """Annotations of an alert (no $value in them, so promtool tests can state them exactly)."""
    who = '{{ $labels.host }}/{{ $labels.engine_instance }}'
    texts = {
        'SpeculationStoppedPaying': (
            'Speculation stopped paying on %s' % who,
            'Live acceptance length over %s is below %s of what the last applied draft-length sweep measured '
            'for this instance, for %s: the draft length the sweep chose no longer fits the traffic. Re-run '
            'the sweep (playbooks/sweep.yml) or look at what changed in the workload or the engine.'
            % (s['acceptance_window'], _g(1 - s['acceptance_margin']), s['acceptance_for'])),
        'SpecdecEngineDown': (
            'Engine %s is down' % who,
            'Its metrics endpoint (through the exporter, or scraped directly) has not answered for %s.'
            % s['engine_down_for']),
        'SpecdecEngineNotReady': (
            'Engine %s is not ready' % who,
            'Its /health has not answered 200 for %s.' % s['engine_down_for']),
        'SpecdecExporterDown': (
            'specdec-exporter on {{ $labels.host }} is down',
            'Prometheus has not scraped the exporter for %s: the engines of this host are not monitored.'
            % s['engine_down_for']),
        'SpecdecKVCacheNearFull': (
            'KV cache of %s is nearly full' % who,
            'KV cache use has been above %s for %s; requests will queue or be preempted.'
            % (_g(s['kv_cache_threshold']), s['kv_cache_for'])),
        'SpecdecRequestsQueueing': (
            'Requests queue on %s' % who,
            'More than %s requests have been waiting for %s: the engine is at its batch limit.'
            % (_g(s['queue_threshold']), s['queue_for'])),
    }
    summary, description = texts[alert]
    return {'summary': summary, 'description': description}


SEVERITY = {'SpeculationStoppedPaying': 'warning', 'SpecdecEngineDown': 'critical', 'SpecdecEngineNotReady': 'critical',
            'SpecdecExporterDown': 'warning', 'SpecdecKVCacheNearFull': 'warning', 'SpecdecRequestsQueueing': 'warning'}


def rules(settings):
    """The rules file (a mapping): group specdec-recording, then group specdec-alerts."""
    s = check(settings)
    w = s['acceptance_window']

    def rate(metric):
        return '%s(rate(%s[%s]))' % (BY, metric, w)

    rec = [
        # acceptance length: tokens per generation step (TensorRT-LLM, from avgNumDecodedTokensPerIter,
        # present even when specDecodingStats is null); 1 + accepted per draft (vLLM)
        ('specdec:acceptance_length:rate',
         '%s / %s' % (rate('specdec_engine_decoded_tokens_total'), rate('specdec_engine_generation_steps_total'))),
        ('specdec:acceptance_length:rate',
         '1 + %s / %s' % (rate('vllm:spec_decode_num_accepted_tokens_total'), rate('vllm:spec_decode_num_drafts_total'))),
        ('specdec:decoding_steps:rate', rate('specdec_engine_generation_steps_total')),
        ('specdec:decoding_steps:rate', rate('vllm:spec_decode_num_drafts_total')),
        ('specdec:acceptance_rate:rate',
         '%s / %s' % (rate('specdec_engine_accepted_draft_tokens_total'), rate('specdec_engine_draft_tokens_total'))),
        ('specdec:acceptance_rate:rate',
         '%s / %s' % (rate('vllm:spec_decode_num_accepted_tokens_total'), rate('vllm:spec_decode_num_draft_tokens_total'))),
        ('specdec:acceptance_rate_per_position:rate',
         'sum by (host, engine_instance, position) (rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[%s])) '
         '/ on (host, engine_instance) group_left() %s' % (w, rate('vllm:spec_decode_num_drafts_total'))),
        ('specdec:generated_tokens:rate', rate('specdec_engine_generated_tokens_total')),
        ('specdec:generated_tokens:rate', rate('vllm:generation_tokens_total')),
        ('specdec:queued_requests', BY + '(specdec_engine_queued_requests)'),
        ('specdec:queued_requests', BY + '(vllm:num_requests_waiting)'),
        ('specdec:running_requests', BY + '(specdec_engine_active_requests)'),
        ('specdec:running_requests', BY + '(vllm:num_requests_running)'),
        ('specdec:kv_cache_usage:ratio', 'max by (host, engine_instance) (specdec_engine_kv_cache_usage_ratio)'),
        ('specdec:kv_cache_usage:ratio',
         'max by (host, engine_instance) ({__name__=~"vllm:(kv|gpu)_cache_usage_perc"})'),
        ('specdec:acceptance_length:expected',
         'max by (host, engine_instance) (specdec_sweep_expected_acceptance_length)'),
    ]
    margin = 1 - s['acceptance_margin']
    alerts = [
        ('SpeculationStoppedPaying',
         'specdec:acceptance_length:rate < on (host, engine_instance) (specdec:acceptance_length:expected * %s) '
         'and on (host, engine_instance) specdec:decoding_steps:rate > %s' % (_g(margin), _g(s['acceptance_min_steps_per_s'])),
         s['acceptance_for']),
        ('SpecdecEngineDown',
         'min by (host, engine_instance) (specdec_engine_up{engine="trtllm"} == 0 or up{job="specdec-vllm"} == 0)',
         s['engine_down_for']),
        ('SpecdecEngineNotReady', 'min by (host, engine_instance) (specdec_engine_ready == 0)', s['engine_down_for']),
        ('SpecdecExporterDown', 'min by (host) (up{job="specdec-exporter"} == 0)', s['engine_down_for']),
        ('SpecdecKVCacheNearFull', 'specdec:kv_cache_usage:ratio > %s' % _g(s['kv_cache_threshold']), s['kv_cache_for']),
        ('SpecdecRequestsQueueing', 'specdec:queued_requests > %s' % _g(s['queue_threshold']), s['queue_for']),
    ]
    return {'groups': [
        {'name': 'specdec-recording', 'interval': s['evaluation_interval'],
         'rules': [{'record': name, 'expr': expr} for name, expr in rec]},
        {'name': 'specdec-alerts', 'interval': s['evaluation_interval'],
         'rules': [{'alert': name, 'expr': expr, 'for': dur, 'labels': {'severity': SEVERITY[name]},
                    'annotations': annotations(name, s)} for name, expr, dur in alerts]},
    ]}


def alert_bound(settings):
    """Seconds the rules promise, at most, from an acceptance drop on the engine to the
    SpeculationStoppedPaying alert firing in Alertmanager (``fire_s``) and from the recovery to its
    resolution (``resolve_s``), with the terms they add up from.

    The exporter reads the iteration (poll), Prometheus scrapes it (scrape), the rate window fills with
    the new acceptance (window), the recording and the alert rule see it (evaluation, twice: the groups
    are evaluated independently), the condition holds for ``for``, and Prometheus sends the alert to
    Alertmanager at that evaluation. Resolution needs no ``for``."""
    s = check(settings)
    terms = {'poll': float(s['exporter_poll_interval']), 'scrape': s['scrape_interval_s'], 'window': s['acceptance_window_s'],
             'evaluation': 2 * s['evaluation_interval_s'], 'for': s['acceptance_for_s']}
    fire = sum(terms.values())
    return {'fire_s': fire, 'resolve_s': fire - terms['for'], 'terms': terms}


# --------------------------------------------------------------------------- promtool tests

def _values(per_step, steps, start=0.0):
    out, value = [], start
    for inc in per_step[:steps]:
        out.append(value)
        value += inc
    return out


def _series(name, labels, values):
    lab = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
    return {'series': '%s{%s}' % (name, lab),
            'values': ' '.join(_g(v) if isinstance(v, float) else str(v) for v in values)}


def _expanded(alert, labels, s):
    ann = annotations(alert, s)
    out = {}
    for key, text in ann.items():
        for lk in ('host', 'engine_instance'):
            text = text.replace('{{ $labels.%s }}' % lk, labels.get(lk, ''))
        out[key] = text
    return out


def alert_tests(settings, rule_file='rules.yml'):
    """A ``promtool test rules`` file (mapping) for the rules of `settings`, covering every alert:
    it fires after its condition held for its ``for`` and not before; the speculation alert fires
    within alert_bound() of a drop, not for a drop inside the margin, and resolves after recovery."""
    s = check(settings)
    step = s['scrape_interval_s']
    ev = s['evaluation_interval_s']
    bound = alert_bound(s)
    n_win = int(-(-s['acceptance_window_s'] // step))

    def at(sec):
        # an evaluation time in whole evaluation intervals, as a duration promtool reads
        sec = int(-(-sec // ev) * ev)
        return '%ds' % sec

    def steps(sec):
        return int(-(-sec // step))

    host, inst = 'engine-01', 'target-a'
    trt = {'host': host, 'engine_instance': inst, 'engine': 'trtllm', 'job': 'specdec-exporter',
           'instance': 'engine-01:%d' % s['exporter_port']}
    vl = {'host': host, 'engine_instance': 'target-v', 'engine': 'vllm', 'job': 'specdec-vllm', 'instance': 'engine-01:8001'}
    exp_trt = dict(trt)
    exp_vl = dict(vl, job='specdec-exporter', instance=trt['instance'])
    alert_labels = {'host': host, 'engine_instance': inst}
    sev = {'severity': SEVERITY['SpeculationStoppedPaying']}

    # speculation: expected 4 tokens per step; healthy 4.0, inside the margin, dropped to 1.5, recovered
    warm = max(2 * n_win, steps(ev * 2) + n_win)
    drop_at = warm * step
    fire_by = drop_at + bound['fire_s']
    recover_at = fire_by + 2 * step
    recover_steps = steps(recover_at)
    end_steps = recover_steps + steps(bound['resolve_s'] + 4 * ev)
    per = []
    for i in range(end_steps + 1):
        t = i * step
        per.append(10 * (1.5 if drop_at <= t < recover_at else 4.0))
    inside = 10 * 4.0 * (1 - s['acceptance_margin'] / 2)
    spec_tests = {
        'interval': '%ds' % step,
        'input_series': [
            _series('specdec_engine_decoded_tokens_total', trt, _values(per, end_steps + 1)),
            _series('specdec_engine_generation_steps_total', trt, _values([10] * (end_steps + 1), end_steps + 1)),
            _series('specdec_sweep_expected_acceptance_length', exp_trt, [4] * (end_steps + 1)),
            # vLLM: inside the margin the whole time, never fires
            _series('vllm:spec_decode_num_accepted_tokens_total', vl, _values([inside - 10] * (end_steps + 1), end_steps + 1)),
            _series('vllm:spec_decode_num_drafts_total', vl, _values([10] * (end_steps + 1), end_steps + 1)),
            _series('specdec_sweep_expected_acceptance_length', exp_vl, [4] * (end_steps + 1)),
        ],
        'alert_rule_test': [
            {'eval_time': at(drop_at - ev), 'alertname': 'SpeculationStoppedPaying', 'exp_alerts': []},
            {'eval_time': at(max(drop_at + s['acceptance_for_s'] - 2 * ev, drop_at)), 'alertname': 'SpeculationStoppedPaying',
             'exp_alerts': []},
            {'eval_time': at(fire_by), 'alertname': 'SpeculationStoppedPaying',
             'exp_alerts': [{'exp_labels': dict(alert_labels, **sev),
                             'exp_annotations': _expanded('SpeculationStoppedPaying', alert_labels, s)}]},
            {'eval_time': at(recover_at + bound['resolve_s']), 'alertname': 'SpeculationStoppedPaying', 'exp_alerts': []},
        ],
        'promql_expr_test': [
            {'expr': 'specdec:acceptance_length:rate{engine_instance="target-a"}', 'eval_time': at(drop_at - ev),
             'exp_samples': [{'labels': 'specdec:acceptance_length:rate{host="%s",engine_instance="%s"}' % (host, inst),
                              'value': 4}]},
        ],
    }

    def down_test(alert, name, labels, bad_value, good_value, dur_s, exp):
        """A gauge good for two evaluation intervals, then bad: fires only after `dur_s`."""
        good_steps = steps(2 * ev) + 1
        total = good_steps + steps(dur_s + 4 * ev) + 2
        values = [good_value] * good_steps + [bad_value] * (total - good_steps)
        start = good_steps * step
        return {
            'interval': '%ds' % step,
            'input_series': [_series(name, labels, values)],
            'alert_rule_test': [
                {'eval_time': at(start + dur_s - 2 * ev) if dur_s > 2 * ev else at(start - ev), 'alertname': alert,
                 'exp_alerts': []},
                {'eval_time': at(start + dur_s + 2 * ev + step), 'alertname': alert,
                 'exp_alerts': [{'exp_labels': dict(exp, severity=SEVERITY[alert]), 'exp_annotations': _expanded(alert, exp, s)}]},
            ],
        }

    tests = [
        spec_tests,
        down_test('SpecdecEngineDown', 'specdec_engine_up', trt, 0, 1, s['engine_down_for_s'], alert_labels),
        down_test('SpecdecEngineDown', 'up', vl, 0, 1, s['engine_down_for_s'], {'host': host, 'engine_instance': 'target-v'}),
        down_test('SpecdecEngineNotReady', 'specdec_engine_ready', trt, 0, 1, s['engine_down_for_s'], alert_labels),
        down_test('SpecdecExporterDown', 'up', {'job': 'specdec-exporter', 'host': host, 'instance': trt['instance']},
                  0, 1, s['engine_down_for_s'], {'host': host}),
        down_test('SpecdecKVCacheNearFull', 'specdec_engine_kv_cache_usage_ratio', trt,
                  min(1.0, s['kv_cache_threshold'] + 0.05), max(0.0, s['kv_cache_threshold'] - 0.3), s['kv_cache_for_s'],
                  alert_labels),
        down_test('SpecdecRequestsQueueing', 'specdec_engine_queued_requests', trt, s['queue_threshold'] + 3, 0,
                  s['queue_for_s'], alert_labels),
    ]
    return {'rule_files': [rule_file], 'evaluation_interval': '%ds' % ev, 'tests': tests}


def alertmanager_config(settings):
    """alertmanager.yml: one route to the configured webhooks and, with monitoring_tune_loop, the tune loop's
    listener (its bearer token read from a file, never written here); none: alerts are only kept and shown."""
    s = check(settings)
    receiver: dict[str, Any] = {'name': 'specdec'}
    hooks: list[dict[str, Any]] = [{'url': url, 'send_resolved': True} for url in s['alertmanager_webhooks']]
    loop = s['tune_loop_files']
    if loop['enabled']:
        hook: dict[str, Any] = {'url': loop['url'], 'send_resolved': True}
        if loop['token_file']:
            hook['http_config'] = {'authorization': {'type': 'Bearer', 'credentials_file': loop['token_file']}}
        hooks.append(hook)
    if hooks:
        receiver['webhook_configs'] = hooks
    return {
        'route': {'receiver': 'specdec', 'group_by': ['alertname', 'host', 'engine_instance'],
                  'group_wait': s['alertmanager_group_wait'], 'group_interval': s['alertmanager_group_interval'],
                  'repeat_interval': s['alertmanager_repeat_interval']},
        'receivers': [receiver],
    }


# --------------------------------------------------------------------------- the tune loop

# The tune loop on the monitoring host (docs/tune_loop.md): ansible-rulebook runs the collection's rulebook
# specdec.serve.retune as a systemd service of its own user, from a venv, with the collection installed from
# its archive; Alertmanager posts to its listener. Its token (monitoring_tune_loop_token, else one generated on the
# host at the first run): in a file only the service's user can read (0400), and the file Alertmanager reads (0640
# root:prometheus), nowhere else. The vault password the copied inventory needs, when
# monitoring_tune_loop_vault_password_file gives one: a file only the service's user can read (0400) too.
# Least privilege: everything root executes (the venv, the collection, the archive, their directory) is root's
# and read-only to the service user; it writes only its .ssh, .ansible, reports and the guards' state.
TUNE_LOOP_UNIT = 'specdec-tune-loop.service'
TUNE_LOOP_ETC = '/etc/specdec/tune-loop'
TUNE_LOOP_TOKEN_FILE = '/etc/prometheus/tune-loop.token'
TUNE_LOOP_DATA_PATH = '/alerts'
# where the re-tune play keeps its guards' state (the default of retune_state_file)
RETUNE_STATE_DIR = os.path.dirname(retune.STATE_FILE)
CONNECTION_VARS = ('ansible_host', 'ansible_port', 'ansible_ssh_private_key_file', 'ansible_ssh_common_args')


def _tune_loop_problems(s, token_set):
    if not s['tune_loop']:
        return []
    out = []
    for key, what in (('tune_loop_inventory', 'the inventory (a file or directory on the controller) the re-tune '
                       'plays run against, copied to the monitoring host'),
                      ('tune_loop_ssh_key', 'the private key (on the controller) the tune loop connects to the '
                       'engine hosts and gateways with'),
                      ('tune_loop_collection', 'this collection\'s archive on the controller (ansible-galaxy '
                       'collection build or download), installed on the monitoring host')):
        if not s[key]:
            out.append(refusal('monitoring_' + key, s[key], 'must be set with monitoring_tune_loop: %s' % what))
        elif not os.path.exists(s[key]):
            out.append(refusal('monitoring_' + key, s[key], 'does not exist on the controller'))
    if s['tune_loop_collection'] and os.path.exists(s['tune_loop_collection']) and \
            not os.path.isfile(s['tune_loop_collection']):
        out.append(refusal('monitoring_tune_loop_collection', s['tune_loop_collection'],
                           'must be a file (the .tar.gz of ansible-galaxy collection build)'))
    vault = s.get('tune_loop_vault_password_file')
    if vault and not os.path.isfile(vault):
        out.append(refusal('monitoring_tune_loop_vault_password_file', vault, 'is not a file on the controller'))
    if s['tune_loop_wheelhouse'] and not os.path.isdir(s['tune_loop_wheelhouse']):
        out.append(refusal('monitoring_tune_loop_wheelhouse', s['tune_loop_wheelhouse'],
                           'is not a directory on the controller'))
    for key in ('tune_loop_dir',):
        for context in ('unit', 'command'):
            msg = quoting.problem(s[key], context)
            if msg:
                out.append(refusal('monitoring_' + key, s[key], msg))
                break
    return out


def tune_loop_files(s):
    """Where the tune loop's parts go on the monitoring host, its listener's URL, and what does not apply
    (``unused``, removed by the role). ``writable``: the only directories of its user; everything else is root's."""
    d = s['tune_loop_dir'].rstrip('/') or '/'
    enabled = bool(s['tune_loop'])
    vault = bool(s.get('tune_loop_vault_password_file'))
    return {
        'enabled': enabled, 'unit': TUNE_LOOP_UNIT, 'user': s['tune_loop_user'], 'dir': d,
        'venv': d + '/venv', 'wheels': d + '/wheels', 'collections': d + '/collections',
        'archive': d + '/specdec-serve.tar.gz', 'inventory': d + '/inventory', 'reports': d + '/reports',
        'ssh_dir': d + '/.ssh', 'ssh_key': d + '/.ssh/id_tune_loop', 'known_hosts': d + '/.ssh/known_hosts',
        'ansible_dir': d + '/.ansible',
        'writable': [d + '/.ssh', d + '/.ansible', d + '/reports', RETUNE_STATE_DIR],
        'etc': TUNE_LOOP_ETC, 'vars_file': TUNE_LOOP_ETC + '/vars.yml', 'requirements': TUNE_LOOP_ETC + '/requirements.txt',
        # readable by the service's user only (0400, its own), written by root
        'token_store': TUNE_LOOP_ETC + '/token', 'vault_store': TUNE_LOOP_ETC + '/vault-password' if vault else '',
        'state_dir': RETUNE_STATE_DIR, 'token_file': TUNE_LOOP_TOKEN_FILE if enabled else None,
        'url': 'http://%s%s' % (_hostport(s['tune_loop_listen'], s['tune_loop_port']), TUNE_LOOP_DATA_PATH),
        'unused': ([] if enabled else [TUNE_LOOP_TOKEN_FILE]) + ([] if enabled and vault else [TUNE_LOOP_ETC + '/vault-password']),
        # copy's source: a directory's contents (trailing slash), or the one file
        'inventory_src': (s['tune_loop_inventory'].rstrip('/') + '/') if os.path.isdir(s['tune_loop_inventory'] or '')
        else s['tune_loop_inventory'],
        # the rulebook gives the plays retune_report_dir as their report directories (extra vars: the fleet
        # playbooks' own default of fleet_report_dir is a vars file's, above the inventory); the token is read
        # from its own file, never written here
        'rulebook_vars': {'retune_listen_address': s['tune_loop_listen'], 'retune_listen_port': s['tune_loop_port'],
                          'retune_listen_data_path': TUNE_LOOP_DATA_PATH, 'retune_report_dir': d + '/reports',
                          'retune_listen_token_file': TUNE_LOOP_ETC + '/token'},
    }


def _known_host(address, port, facts):
    name = address if int(port) == 22 else '[%s]:%d' % (address, int(port))
    lines = []
    for kind in ('ed25519', 'ecdsa', 'rsa'):
        key = facts.get('ssh_host_key_%s_public' % kind)
        keytype = facts.get('ssh_host_key_%s_public_keytype' % kind)
        if key and keytype:
            lines.append('%s %s %s' % (name, keytype, key))
    return lines


def java_home(package_files):
    """The Java runtime's home, from the files of its package (dpkg-query -L): the directory above the one
    holding its ``java`` program under /usr/lib/jvm. Raises MonitoringError when there is none."""
    for line in package_files or []:
        path = str(line).strip()
        if path.startswith('/usr/lib/jvm/') and path.endswith('/bin/java'):
            return path[:-len('/bin/java')]
    raise MonitoringError(['monitoring_tune_loop_java_package: its package installs no /usr/lib/jvm/*/bin/java '
                           '(ansible-rulebook needs a Java 17 runtime)'])


def tune_loop(settings, hostvars, groups, java_files=None, monitoring_host=None):
    """What the tune loop needs of the inventory, decided on the controller: ``hosts``, those it connects to
    (every host of the inventory but the monitoring group's); ``inventory``, an inventory file laid over the
    copied one that connects to each of them as the monitoring host reaches it (``monitoring_address``, else
    ``ansible_host``; port ``monitoring_ssh_port``, else 22) with the tune loop's key and known hosts, and gives
    them and the controller monitoring_tune_loop_vars; ``known_hosts``, their
    SSH host keys (from their facts, gathered over the controller's own connection), and ``missing``, the
    hosts with none yet; with `java_files` (the Java package's files), ``java_home``; with `monitoring_host` (the
    host the loop runs on), ``key_from``: its address as the other hosts see it (``monitoring_address``, else
    ``ansible_host``), the only source their authorized_keys accept the loop's key from (an IP address).
    `hostvars`: {host: {variable: value}}, facts under ``ansible_facts``."""
    s = check(settings)
    files = s['tune_loop_files']
    # every host the plays may reach (the rollout's preflight reads every engine host, the drains every gateway),
    # less the monitoring hosts: the engine plays never run there, and this one is the controller
    monitors = set((groups or {}).get(s['server_group']) or [])
    hosts = [h for h in (groups or {}).get('all') or [] if h not in monitors]
    common = dict(s['tune_loop_vars'] or {})
    ssh_args = '-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes' % files['known_hosts']
    inventory_hosts = {}
    known, missing = [], []
    for host in hosts:
        hv = hostvars.get(host) or {}
        address = host_address(hostvars, host)
        port = hv.get('monitoring_ssh_port') or 22
        if not is_port(port):
            raise MonitoringError([refusal('monitoring_ssh_port', port, 'of %s must be %s' % (host, PORT_WORDS))])
        conn = {'ansible_host': address, 'ansible_port': int(port), 'ansible_ssh_private_key_file': files['ssh_key'],
                'ansible_ssh_common_args': ssh_args}
        inventory_hosts[host] = dict(common, **conn)
        lines = _known_host(address, port, hv.get('ansible_facts') or {})
        if lines:
            known.extend(lines)
        else:
            missing.append(host)
    out = {'hosts': hosts, 'missing': missing, 'known_hosts': ''.join(line + '\n' for line in known),
           'inventory': {'all': {'vars': common, 'hosts': inventory_hosts}}}
    if java_files is not None:
        out['java_home'] = java_home(java_files)
    if monitoring_host is not None:
        key_from = host_address(hostvars, monitoring_host)
        try:
            key_from = str(ipaddress.ip_address(key_from))
        except ValueError:
            raise MonitoringError([refusal('monitoring_address', key_from, 'of %s must be an IP address: the hosts accept the '
                                           "tune loop's key from that address only" % monitoring_host)])
        out['key_from'] = key_from
    # in check mode on a host without Java yet there are no files to read its home from
    out['unit'] = tune_loop_unit(files, out.get('java_home', ''))
    return out


def tune_loop_unit(files, home):
    """The tune loop unit's ExecStart= and Environment= values, each word through the one quoting rule (unit). The
    vault password, where there is one, is a file only the service's user reads (ANSIBLE_VAULT_PASSWORD_FILE)."""
    env = [('HOME', files['dir']), ('JAVA_HOME', home),
           ('PATH', files['venv'] + '/bin:/usr/sbin:/usr/bin:/sbin:/bin'),
           ('ANSIBLE_COLLECTIONS_PATH', files['collections']), ('ANSIBLE_NOCOLOR', '1'),
           ('ANSIBLE_LOCAL_TEMP', files['ansible_dir'] + '/tmp')]
    if files.get('vault_store'):
        env.append(('ANSIBLE_VAULT_PASSWORD_FILE', files['vault_store']))
    argv = [files['venv'] + '/bin/ansible-rulebook', '--rulebook', 'specdec.serve.retune', '-i', files['inventory'],
            '--vars', files['vars_file']]
    return {'exec': ' '.join(quoting.quote(w, 'unit') for w in argv),
            'environment': [quoting.quote('%s=%s' % kv, 'unit') for kv in env]}


# --------------------------------------------------------------------------- fleet view

LIVE_QUERIES = {
    'acceptance': 'specdec:acceptance_length:rate',
    'tokens': 'specdec:generated_tokens:rate',
    'expected': 'specdec:acceptance_length:expected',
}


def _vector(result):
    """{(host, engine_instance): float} of a Prometheus instant-query response (or its data.result)."""
    if isinstance(result, dict):
        if result.get('status') not in (None, 'success'):
            raise ValueError('Prometheus answered %r' % (result.get('error') or result.get('status'),))
        result = (result.get('data') or {}).get('result', [])
    out = {}
    for sample in result or []:
        metric = sample.get('metric') or {}
        try:
            value = float(sample['value'][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if math.isnan(value):  # no traffic in the window
            continue
        out[(metric.get('host'), metric.get('engine_instance'))] = value
    return out


def live_view(rows, responses, margin=None):
    """Fleet view rows with the live figures from Prometheus beside the last sweep's.

    `responses`: {'acceptance', 'tokens', 'expected'} -> the Prometheus responses to LIVE_QUERIES.
    Adds ``live_acceptance_length``, ``live_tokens_per_s`` and ``live_vs_sweep``: ``agrees`` when the
    live acceptance length is within `margin` (relative) of the sweep's, ``below sweep`` or ``above
    sweep`` when not, ``no traffic`` when the engine decoded nothing in the rules' window, ``no sweep``
    without a sweep figure. The sweep's figure is the one the alert rules use (the exporter's
    expectation), else the row's engine figure, else its client-side estimate. `margin` is the fleet_view
    role's fleet_view_live_margin (its default when None), checked as that setting is."""
    if not isinstance(rows, list):
        raise ValueError('rows must be a list of fleet view rows')
    margin = role_spec.default('fleet_view_live_margin') if margin is None else check_value(
        'fleet_view_live_margin', margin, label='margin')
    live = dict((k, _vector((responses or {}).get(k))) for k in LIVE_QUERIES)
    out = []
    for row in rows:
        row = dict(row)
        key = (row.get('host'), row.get('instance'))
        if row.get('instance') is None:
            out.append(row)
            continue
        acc, tok = live['acceptance'].get(key), live['tokens'].get(key)
        expected = live['expected'].get(key)
        for fallback in ('sweep_acceptance_length', 'sweep_acceptance_estimate'):
            if expected is None and _num(row.get(fallback)):
                expected = float(row[fallback])
        if acc is None:
            verdict = 'no traffic'
        elif expected is None:
            verdict = 'no sweep'
        elif acc < expected * (1 - margin):
            verdict = 'below sweep'
        elif acc > expected * (1 + margin):
            verdict = 'above sweep'
        else:
            verdict = 'agrees'
        row.update({'live_acceptance_length': None if acc is None else round(acc, 3),
                    'live_tokens_per_s': None if tok is None else round(tok, 1),
                    'live_expected_acceptance_length': expected, 'live_vs_sweep': verdict})
        out.append(row)
    return out


# --------------------------------------------------------------------------- what the queries read

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r'\{([^{}]*)\}')
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_CLAUSE = re.compile(r'\b(by|on|group_left|group_right)\s*\(([^()]*)\)')
_LABEL_VALUES = re.compile(r'\blabel_values\s*\(')


def query_expressions(rules_doc=None, dashboard=None):
    """[(where, PromQL)] of every query in a rules file (a mapping, as :func:`rules` returns) and a
    Grafana dashboard (its JSON as a mapping): each recording rule and alert, each panel target's
    ``expr`` and each templating variable's query."""
    out = []
    for group in (rules_doc or {}).get('groups') or []:
        for rule in group.get('rules') or []:
            out.append(('rule %s' % (rule.get('record') or rule.get('alert')), rule['expr']))
    for panel in (dashboard or {}).get('panels') or []:
        for target in panel.get('targets') or []:
            if target.get('expr'):
                out.append(('panel %s' % panel.get('title'), target['expr']))
    for var in ((dashboard or {}).get('templating') or {}).get('list') or []:
        query = var.get('query')
        query = query.get('query') if isinstance(query, dict) else query
        if query:
            out.append(('variable %s' % var.get('name'), query))
    return out


def _closing(text, start):
    """Index of the parenthesis that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == '(':
            depth += 1
        elif text[i] == ')':
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _opening(text, end):
    """Index of the parenthesis that opens the one closing at ``end``."""
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == ')':
            depth += 1
        elif text[i] == '(':
            depth -= 1
            if depth == 0:
                return i
    return 0


def _labels(text):
    return [w.strip() for w in text.split(',') if w.strip()]


def metric_references(expressions, prefix):
    """The metric names starting with ``prefix`` that PromQL ``expressions`` read, and the label names
    each reading needs, as ``{"names": {name: [labels]}, "patterns": {regex: [labels]}}``.

    ``expressions`` is a list of strings or of (where, expr). A selector's name is taken as written
    (a counter read as ``<name>_total`` is that sample name); ``{__name__=~"..."}`` selectors whose
    regex starts with ``prefix`` are ``patterns``. A reading needs the labels its own matchers name,
    those of every ``by (...)`` aggregation around it, those of the ``on (...)``, ``group_left (...)``
    and ``group_right (...)`` clauses of its expression (both sides of a match need them), and the
    label a ``label_values(selector, label)`` asks for. ``without`` and ``ignoring`` need nothing.
    """
    names: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    for item in expressions:
        expr = item[1] if isinstance(item, (list, tuple)) else item
        # the same length with every string blanked, so positions agree and no name is read from one
        bare = _STRING.sub(lambda m: '"' + ' ' * (len(m.group(0)) - 2) + '"', expr)
        spans = []  # (start, end, labels) of by-aggregations
        for m in _CLAUSE.finditer(bare):
            if m.group(1) != 'by':
                continue
            rest = bare[m.end():].lstrip()
            if rest.startswith('('):
                start = m.end() + (len(bare) - m.end() - len(rest))
                spans.append((start, _closing(bare, start), _labels(m.group(2))))
            else:
                before = bare[:m.start()].rstrip()
                if before.endswith(')'):
                    end = len(before) - 1
                    spans.append((_opening(bare, end), end, _labels(m.group(2))))
        common = [label for m in _CLAUSE.finditer(bare) if m.group(1) != 'by' for label in _labels(m.group(2))]
        for m in _LABEL_VALUES.finditer(bare):
            start = m.end() - 1
            inner = bare[start + 1:_closing(bare, start)]
            if ',' in inner:
                common.append(inner.rsplit(',', 1)[1].strip())

        def need(pos, matchers, common, spans):
            out = set(common) | set(matchers)
            for start, end, labels in spans:
                if start <= pos <= end:
                    out.update(labels)
            return out

        for m in _MATCHERS.finditer(expr):
            found = _MATCHER.findall(m.group(1))
            regex = [v for k, op, v in found if k == '__name__' and op == '=~' and v.startswith(prefix)]
            if regex:
                others = [k for k, op, v in found if k != '__name__']
                patterns.setdefault(regex[0], set()).update(need(m.start(), others, common, spans))
        name_re = re.compile(r'(?<![A-Za-z0-9_:])(%s[A-Za-z_][A-Za-z0-9_:]*)' % re.escape(prefix))
        for m in name_re.finditer(bare):
            matchers = []
            after = bare[m.end():]
            if after.startswith('{'):
                matchers = [k for k, op, v in _MATCHER.findall(expr[m.end():m.end() + after.index('}') + 1])]
            names.setdefault(m.group(1), set()).update(need(m.start(), matchers, common, spans))
    return {'names': dict((k, sorted(v)) for k, v in sorted(names.items())),
            'patterns': dict((k, sorted(v)) for k, v in sorted(patterns.items()))}


def exposition_labels(text):
    """{sample name: [label names]} of a Prometheus text exposition (``/metrics``), over all its
    samples; comments are skipped."""
    out: dict[str, Any] = {}
    for name, labels, dummy in parse_prometheus(text):
        out.setdefault(name, set()).update(labels)
    return dict((k, sorted(v)) for k, v in sorted(out.items()))


def unserved(references, served, provided=()):
    """What ``references`` (:func:`metric_references`) read that ``served`` (:func:`exposition_labels`)
    lacks, one sentence each; labels in ``provided`` (those the scrape adds: the target's labels,
    ``job``, ``instance``) are not asked of the engine."""
    problems = []
    for name, labels in sorted(references.get('names', {}).items()):
        if name not in served:
            problems.append('%s is not served' % name)
            continue
        missing = sorted(set(labels) - set(provided) - set(served[name]))
        if missing:
            problems.append('%s is served without label(s) %s' % (name, ', '.join(missing)))
    for regex, labels in sorted(references.get('patterns', {}).items()):
        matched = [n for n in served if re.match('(?:%s)\\Z' % regex, n)]
        if not matched:
            problems.append('no served name matches %s' % regex)
            continue
        wanted = set(labels) - set(provided)
        if not any(wanted <= set(served[n]) for n in matched):
            problems.append('no name matching %s is served with label(s) %s' % (regex, ', '.join(sorted(wanted))))
    return problems
