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
* :func:`alertmanager_config` routes every alert to the configured webhooks (and to the tune loop's
  listener, the monitoring_tune_loop role's, plugin_utils/_tune_loop.py, when it is on).

The rules, their promtool tests and the alert's bound are plugin_utils/_monitoring_rules.py's; the fleet view's live columns
plugin_utils/_monitoring_live.py's; what the queries read of an engine
plugin_utils/_monitoring_references.py's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import ipaddress
import os

import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting, _role_spec as role_spec, _spec_profiles as spec_profiles
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
            'acceptance_margin', 'acceptance_min_steps_per_s', 'engine_down_for', 'engine_wedged_for', 'kv_cache_threshold',
            'kv_cache_for',
            'queue_threshold', 'queue_for', 'alertmanager_webhooks', 'alertmanager_group_wait',
            'alertmanager_group_interval', 'alertmanager_repeat_interval', 'tools_dir', 'prometheus_listen',
            'prometheus_retention', 'alertmanager_listen', 'allow_unauthenticated_listen', 'web_client_user',
            'web_tls_cert', 'web_tls_key', 'packages', 'server_group')
# Settings of the monitoring_exporter role (without the monitoring_exporter_ prefix).
EXPORTER = 'monitoring_exporter'
EXPORTER_SETTINGS = ('listen', 'port', 'poll_interval', 'fact_file', 'dir', 'config_file', 'probe_interval',
                     'probe_deadline')
# What the server reads of the exporter's: the port it scrapes where an engine host does not set its own, and
# the poll and probe intervals its alert bounds count; they enter check() as exporter_<name>.
EXPORTER_READ = ('port', 'poll_interval', 'probe_interval', 'probe_deadline')
DURATIONS = ('scrape_interval', 'evaluation_interval', 'acceptance_window', 'acceptance_for', 'engine_down_for',
             'engine_wedged_for', 'kv_cache_for', 'queue_for', 'alertmanager_group_wait', 'alertmanager_group_interval',
             'alertmanager_repeat_interval')


class MonitoringError(ValueError):
    def __init__(self, errors):
        self.errors = list(errors)
        super(MonitoringError, self).__init__('\n'.join(self.errors))


def check(settings, exporter=None, web_users=None):
    """Validated settings of the monitoring role: the spec's defaults of SETTINGS overlaid with `settings`
    (keys without the monitoring_ prefix; a key that is not a setting of the role passes unchanged), typed
    and checked by the settings' policy, plus ``<duration>_s`` (seconds) for every duration,
    ``rules_path``, ``exporter_port`` and ``exporter_poll_interval`` from `exporter` (the
    monitoring_exporter settings the monitoring host sees, without their prefix; see
    :func:`check_exporter`), and ``web_users``, the names (never the passwords) of `web_users`
    (monitoring_web_users, a secret the settings action does not return), with ``web_client_user`` the
    one Prometheus authenticates as. Raises MonitoringError."""
    s = role_spec.defaults('monitoring', SETTINGS)
    given = dict((k, v) for k, v in (settings or {}).items() if v is not None)
    # the passwords are checked (never shown) and dropped here: only the names are kept
    users = given.pop('web_users', None)
    if web_users is not None:
        users = web_users
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
    if errors:
        raise MonitoringError(errors)
    s['rules_path'] = RULES_PATH
    s['web'] = web_files(s)
    return s


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


def hostport(address, port):
    return _target(str(address), int(port))


def daemon_args(s, daemon):
    """[(variable or None, flag)] of the command line of `daemon` (prometheus, alertmanager), each flag
    with the variable its value comes from."""
    web = [(None, '--web.config.file=' + WEB_CONFIG)] if web_enabled(s) else []
    if daemon == 'prometheus':
        return [(None, '--config.file=/etc/prometheus/prometheus.yml'),
                ('monitoring_prometheus_listen', '--web.listen-address=' + hostport(s['prometheus_listen'], s['prometheus_port'])),
                ('monitoring_prometheus_retention', '--storage.tsdb.retention.time=%s' % s['prometheus_retention'])] + web
    if daemon == 'alertmanager':
        return [(None, '--config.file=/etc/prometheus/alertmanager.yml'),
                ('monitoring_alertmanager_listen',
                 '--web.listen-address=' + hostport(s['alertmanager_listen'], s['alertmanager_port'])),
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
    return 'http://' + hostport(exporter_listen(settings, address), s['port'])


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
              'static_configs': [{'targets': [hostport(s['prometheus_listen'], s['prometheus_port'])], 'labels': dict(me)}]},
             **_web_client(s)),
        dict({'job_name': 'alertmanager',
              'static_configs': [{'targets': [hostport(s['alertmanager_listen'], s['alertmanager_port'])], 'labels': dict(me)}]},
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
    alertmanager = hostport(s['alertmanager_listen'], s['alertmanager_port'])
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
        'probe_interval': float(s['probe_interval']), 'probe_deadline': float(s['probe_deadline']),
        'instances': [{'name': name, 'engine': engine, 'url': 'http://127.0.0.1:%d' % port}
                      for name, engine, port in engine_instances(instances, 'monitoring_exporter_instances')],
    }


def alertmanager_config(settings, loop=None):
    """alertmanager.yml: one route to the configured webhooks and, with `loop` (the tune loop's webhook where it is
    on: plugin_utils/_tune_loop.py ``webhook``), the tune loop's listener (its bearer token read from a file, never
    written here); none: alerts are only kept and shown."""
    s = check(settings)
    receiver: dict[str, Any] = {'name': 'specdec'}
    hooks: list[dict[str, Any]] = [{'url': url, 'send_resolved': True} for url in s['alertmanager_webhooks']]
    if loop:
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
