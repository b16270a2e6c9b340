# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door's plan: HAProxy backends from the inventory, checked on the controller.

``gateway_plan`` takes the engine hosts (their address and ``inference_server_instances``) and the
gateway settings, renders every instance the way the engine roles do (spec_config, through
fleet_plan) to learn the model name each engine answers to and its port, and returns one backend per
served model (its servers the host:port pairs serving it), the files the gateway writes (model map,
API-key digest map, the OpenAI-style error bodies, the /v1/models answer) and the settings the
template reads. The template (roles/gateway/templates/haproxy.cfg.j2) reads nothing else.

``key_digests`` turns the API keys into sha256 digests: the host keeps only those, so neither its
config nor its map can give a key back; HAProxy hashes the presented key (``sha2(256),hex,lower``)
and looks the digest up.

Every error names the variable, the bad value and what is allowed; all are reported at once. The
settings' defaults and choices are the gateway role's argument spec's (plugin_utils/_role_spec.py), their
bounds plugin_utils/_settings.py POLICY's: this module checks them through ``settings.check_role``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import hashlib
import ipaddress
import json
import os
import re

from ansible.module_utils.six import integer_types, string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import fleet_plan
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_role
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import SpecConfigError
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    NAME_WORDS,
    PORT_WORDS,
    is_name,
    is_port,
    refusal,
    show,
)

# What a model name may hold: safe unquoted in an HAProxy map file and ACL, and in a JSON string.
MODEL_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,127}\Z')
# Inventory host and instance names become HAProxy server names (<host>:<instance>): plain names, as
# are the API keys' names (vocabulary.NAME_RE).
ADDRESS_RE = re.compile(r'^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+|[A-Za-z0-9][A-Za-z0-9.-]{0,252})\Z')
# A key: printable ASCII without spaces (it travels in an HTTP header), long enough not to be guessed.
KEY_RE = re.compile(r'^[\x21-\x7e]{16,512}\Z')
# The readiness endpoint each engine answers 200 on once it serves (docs/engine_health.md).
HEALTH_PATHS = {'trtllm': '/health', 'vllm': '/health'}
# The OpenAI endpoints routed by the body's model field.
ROUTED_PATHS = ('/v1/completions', '/v1/chat/completions')

# HAProxy's reserve kept free in the buffer for header rewrites (tune.maxrewrite), and the margin for its own
# encoding of the request (HTX blocks) that req.hdrs,length does not count: a request without Content-Length
# whose headers and body reach tune.bufsize less both filled the buffer, and may not be whole (413).
MAXREWRITE = 1024
HTX_MARGIN = 2048
# The fetch that counts the body's top-level "model" keys (HAProxy Lua), written beside the maps.
LUA_SOURCE = os.path.join(role_spec.ROLES_DIR, 'gateway', 'files', 'model_keys.lua')
# Where a bind address also listens on loopback: the role's own readiness check reaches both frontends there.
WILDCARDS = ('0.0.0.0', '::')

# The gateway settings the plan and the template read (without the gateway_ prefix); their defaults are
# the role's argument spec's.
PLAN_SETTINGS = ('port', 'bind_address', 'tls', 'stats_port', 'stats_address', 'balance', 'timeout_connect_s', 'timeout_client_s', 'timeout_server_s',
                 'timeout_queue_s', 'timeout_http_request_s', 'check_interval_ms', 'check_fall', 'check_rise',
                 'request_buffer_kb', 'maxconn', 'require_keys', 'server_header')


class GatewayError(ValueError):
    """Refused gateway input, one line each."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(GatewayError, self).__init__('\n'.join(self.errors))


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, integer_types):
        return value
    if isinstance(value, string_types) and re.match(r'^[0-9]{1,9}\Z', value.strip()):
        return int(value)
    return None


def check_settings(settings):
    """The gateway settings with the spec's defaults, typed, and the errors (gateway_<key> named)."""
    errors, out = [], role_spec.defaults('gateway', PLAN_SETTINGS)
    given = dict((k, v) for k, v in (settings or {}).items() if v is not None)
    for key in sorted(set(settings or {}) - set(PLAN_SETTINGS)):
        errors.append('gateway_%s: unknown setting (known: %s)' % (key, ', '.join(sorted(PLAN_SETTINGS))))
    try:
        out.update(check_role('gateway', dict((k, v) for k, v in given.items() if k in PLAN_SETTINGS)))
    except SettingsError as exc:
        errors.extend(exc.errors)
    if not errors and out['port'] == out['stats_port']:
        errors.append(refusal('gateway_stats_port', out['stats_port'],
                              'is also gateway_port; give the Prometheus endpoint its own port'))
    return out, errors


def key_problems(keys):
    """Why the API keys are refused (no key shown), or an empty list."""
    try:
        key_digests(keys)
    except GatewayError as exc:
        return exc.errors
    return []


def key_digests(keys):
    """[{name, digest}] for the API keys (strings, or dicts with key and an optional name)."""
    errors, out, seen, names = [], [], set(), set()
    if keys is None:
        keys = []
    if not isinstance(keys, list):
        raise GatewayError(['gateway_api_keys: must be a list of keys (strings or {name, key}), got a %s'
                            % type(keys).__name__])
    for index, item in enumerate(keys):
        where = 'gateway_api_keys[%d]' % index
        if isinstance(item, dict):
            unknown = sorted(set(item) - {'name', 'key'})
            if unknown:
                errors.append('%s: unknown key(s) %s (allowed: name, key)' % (where, ', '.join(unknown)))
                continue
            key, name = item.get('key'), item.get('name', 'key-%d' % (index + 1))
        else:
            key, name = item, 'key-%d' % (index + 1)
        # the key itself is never shown: only why it is refused
        if not isinstance(key, string_types) or not KEY_RE.match(key):
            errors.append('%s: the key must be 16 to 512 printable ASCII characters without spaces '
                          '(its value is not shown)' % where)
            continue
        if not is_name(name):
            errors.append(refusal(where + '.name', name, 'must be ' + NAME_WORDS))
            continue
        digest = hashlib.sha256(key.encode('ascii')).hexdigest()
        if digest in seen:
            errors.append('%s: the same key is listed twice' % where)
            continue
        if name in names:
            errors.append(refusal(where + '.name', name, 'is used twice'))
            continue
        seen.add(digest)
        names.add(name)
        out.append({'name': name, 'digest': digest})
    if errors:
        raise GatewayError(errors)
    return out


def _error_body(status, message, kind, code):
    return json.dumps({'error': {'message': message, 'type': kind, 'param': None, 'code': code}},
                      sort_keys=True, separators=(',', ':')) + '\n'


def error_bodies():
    """The OpenAI-style JSON error bodies the gateway answers with, by file name."""
    return {
        '401.json': _error_body(401, 'Invalid or missing API key: send Authorization: Bearer <key>.',
                                'invalid_request_error', 'invalid_api_key'),
        '404-model.json': _error_body(404, 'The model does not exist on this gateway; GET /v1/models lists them.',
                                      'invalid_request_error', 'model_not_found'),
        '404-path.json': _error_body(404, 'Not found: this gateway serves /v1/models, /v1/completions and '
                                          '/v1/chat/completions.', 'invalid_request_error', 'not_found'),
        '400-model.json': _error_body(400, 'The request body has no model field (a JSON object with "model" '
                                           'is required).', 'invalid_request_error', 'model_required'),
        '400-model-twice.json': _error_body(400, 'The request body has more than one "model" key in its top-level '
                                                 'object; send one.', 'invalid_request_error', 'model_ambiguous'),
        '413.json': _error_body(413, "The request body is larger than the gateway's routing buffer "
                                     '(gateway_request_buffer_kb): it is refused whole, never routed cut.',
                                'invalid_request_error', 'request_too_large'),
        '503.json': _error_body(503, 'No engine serving this model is available right now; retry later.',
                                'server_error', 'service_unavailable'),
    }


def binds(address, port):
    """HAProxy bind addresses for an address setting and a port: the address, and 127.0.0.1 beside a
    specific one (the role's readiness check and the host's own probes use loopback)."""
    text = str(ipaddress.ip_address(address))
    out = ['[%s]:%d' % (text, port) if ':' in text else '%s:%d' % (text, port)]
    if text == '::':
        out[0] += ' v4v6'
    elif text not in WILDCARDS and text != '127.0.0.1':
        out.append('127.0.0.1:%d' % port)
    return out


def _engine_key_problems(where, instances):
    """An instance with an api_key cannot be behind the gateway: the gateway sends no Authorization to the engines,
    so it would refuse every request. The key is never shown."""
    out = []
    for index, inst in enumerate(instances):
        if not isinstance(inst, dict) or inst.get('state', 'present') == 'absent' or inst.get('api_key') in (None, ''):
            continue
        out.append('%s.inference_server_instances[%s].api_key: set (value not shown), but the gateway sends no key to '
                   'the engines (it removes Authorization), so this engine would refuse every request it routes; remove '
                   "the instance's api_key (gateway_api_keys guard the front door) or leave the host out of "
                   'gateway_engine_hosts' % (where, inst.get('name', index)))
    return out


def _lua_source():
    with open(LUA_SOURCE) as handle:
        return handle.read()


def backend_name(model):
    return 'model_' + re.sub(r'[^A-Za-z0-9_.:-]', '_', model)


def _stack_instances(entry, host, instances):
    """The names of the instances ``host`` serves across a stack as a worker: the gateway routes them to the head
    only (``entry['stack']``: the stack's members and its head, stack_link_head or the first member by name)."""
    stack_of = entry.get('stack') or {}
    members = sorted(str(m) for m in stack_of.get('members') or [])
    if not members:
        return set()
    head = stack_of.get('head') or members[0]
    if host == head:
        return set()
    return set(i.get('name') for i in instances if isinstance(i, dict) and i.get('stack'))


def engines_from(engine_hosts, hostvars, groups):
    """The gateway plan's engines ({host: entry}) from the inventory: each host of ``engine_hosts`` (the typed
    gateway_engine_hosts) with ``inventory`` (false for a name the inventory does not have), ``listed`` (true where
    gateway_engine_hosts is not its default, every host outside the gateways group, so that the plan refuses a listed
    host without instances), its ``address`` (gateway_backend_address, else its default IPv4 address from its facts),
    its ``instances`` and, for a member of a stack, the stack's ``members`` and ``head`` (an instance served across a
    stack is routed to the head only); where the host published what it serves in this run (the rollout role's fact
    ``rollout_plan``), its instances as rendered there (``rendered``), which the plan reads instead of rendering them
    again. ``hostvars`` and ``groups`` are Ansible's (mappings)."""
    everyone = [h for h in (groups.get('all') or []) if h not in (groups.get('gateways') or [])]
    listed = sorted(engine_hosts or []) != sorted(everyone)
    out: dict[str, Any] = {}
    for host in engine_hosts or []:
        if host not in hostvars:
            out[host] = {'inventory': False}
            continue
        found = hostvars[host]
        facts = found['ansible_facts'] if 'ansible_facts' in found else {}
        address = (found['gateway_backend_address'] if 'gateway_backend_address' in found
                   else ((facts or {}).get('default_ipv4') or {}).get('address'))
        group = found['stack_link_group'] if 'stack_link_group' in found else ''
        stack = None
        if group:
            stack = {'members': list(groups.get(group) or []),
                     'head': found['stack_link_head'] if 'stack_link_head' in found else ''}
        out[host] = {'inventory': True, 'listed': listed, 'address': address,
                     'instances': found['inference_server_instances'] if 'inference_server_instances' in found else [],
                     'stack': stack}
        published = found['rollout_plan'] if 'rollout_plan' in found else None
        if isinstance(published, dict) and isinstance(published.get('rendered'), list):
            out[host]['rendered'] = published['rendered']
    return out


def gateway_plan(engines, settings=None, keys=None):
    """The gateway's plan from the engine hosts ({host: {address, instances}}) and its settings."""
    conf, errors = check_settings(settings)
    if not isinstance(engines, dict):
        raise GatewayError(['gateway_engines: must be a mapping of host to {address, instances}, got a %s'
                            % type(engines).__name__])
    backends: dict[str, Any] = {}
    endpoints: dict[str, Any] = {}
    server_names: dict[str, Any] = {}
    unknown, idle = [], []
    for host in sorted(engines):
        entry = engines[host] or {}
        where = 'hostvars[%r]' % host
        # a host of gateway_engine_hosts the inventory does not have, or one named there that serves nothing
        if entry.get('inventory') is False:
            unknown.append(host)
            continue
        instances = entry.get('instances') or []
        if not instances:
            if entry.get('listed'):
                idle.append(host)
            continue
        if not is_name(host):
            errors.append('%s: the host name must be %s (it names an HAProxy server)' % (where, NAME_WORDS))
            continue
        address = entry.get('address')
        if not isinstance(address, string_types) or not ADDRESS_RE.match(address):
            errors.append('%s: address %s is not an IPv4/IPv6 address or host name (gateway_backend_address)'
                          % (where, show(address)))
            continue
        try:
            # what the host serves as its published plan rendered it (engines_from), else rendered here
            rendered = (entry['rendered'] if isinstance(entry.get('rendered'), list)
                        else fleet_plan(instances, {}, False)['rendered'])
        except (SpecConfigError, TypeError, ValueError) as exc:
            errors.append('%s.inference_server_instances: %s' % (where, exc))
            continue
        errors.extend(_engine_key_problems(where, instances))
        served_by_head = _stack_instances(entry, host, instances)
        for inst in rendered:
            if inst.get('name') in served_by_head:
                continue  # a worker of a stack: its head serves the instance
            iwhere = '%s.inference_server_instances[%s]' % (where, inst.get('name'))
            model, port, engine = inst.get('served_model_name'), _int(inst.get('port')), inst.get('engine')
            if not isinstance(model, string_types) or not MODEL_RE.match(model):
                errors.append('%s: the served model name %s cannot be routed: use letters, digits and . _ : / + - '
                              '(up to 128, first a letter or digit)' % (iwhere, show(model)))
                continue
            if not is_port(port):
                errors.append(refusal(iwhere + '.port', inst.get('port'), 'must be ' + PORT_WORDS))
                continue
            server = '%s:%s' % (host, inst.get('name'))
            endpoint = '%s:%d' % (address, port)
            if endpoint in endpoints:
                errors.append('%s: %s is also %s (one engine per address and port)'
                              % (iwhere, endpoint, endpoints[endpoint]))
                continue
            endpoints[endpoint] = iwhere
            name = backend_name(model)
            if name in server_names and server_names[name] != model:
                errors.append('%s: model %s and model %s both map to backend %s; rename one'
                              % (iwhere, show(model), show(server_names[name]), name))
                continue
            server_names[name] = model
            backend = backends.setdefault(model, {'name': name, 'model': model, 'engine': engine,
                                                  'health_path': HEALTH_PATHS.get(engine, '/health'),
                                                  'servers': []})
            if HEALTH_PATHS.get(engine, '/health') != backend['health_path']:
                errors.append('%s: engine %s checks %s, the other servers of %s check %s' % (
                    iwhere, engine, HEALTH_PATHS.get(engine), model, backend['health_path']))
                continue
            backend['servers'].append({'name': server, 'host': host, 'instance': inst.get('name'),
                                       'address': address, 'port': port})
    if unknown:
        errors.append('gateway_engine_hosts: %s %s not in the inventory; name the engine hosts as the inventory does'
                      % (', '.join(show(h) for h in unknown), 'is' if len(unknown) == 1 else 'are'))
    if idle:
        errors.append('gateway_engine_hosts: %s %s no inference_server_instances (nothing to route to); list only engine '
                      'hosts, or leave gateway_engine_hosts at its default (every host outside the gateways group, '
                      'where hosts without instances are skipped)'
                      % (', '.join(show(h) for h in idle), 'has' if len(idle) == 1 else 'have'))
    if not errors and not backends:
        errors.append('gateway_engines: no engine host serves any instance (none of %s has '
                      'inference_server_instances)' % (', '.join(sorted(engines)) or 'no host'))
    digests = []
    try:
        digests = key_digests(keys)
    except GatewayError as exc:
        errors.extend(exc.errors)
    if not errors and conf['require_keys'] and not digests:
        errors.append('gateway_api_keys: empty while gateway_require_keys is true; give the keys (from Vault), '
                      'or set gateway_require_keys: false to serve without keys')
    if errors:
        raise GatewayError(errors)
    ordered = [backends[m] for m in sorted(backends)]
    models = {'object': 'list', 'data': [{'id': b['model'], 'object': 'model', 'created': 0, 'owned_by': 'specdec'}
                                         for b in ordered]}
    files = dict(('errors/' + name, body) for name, body in error_bodies().items())
    files['errors/503.http'] = ('HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n'
                                'Cache-Control: no-cache\r\nConnection: close\r\n\r\n') + files['errors/503.json']
    files['model-keys.lua'] = _lua_source()
    files['models.json'] = json.dumps(models, sort_keys=True, separators=(',', ':')) + '\n'
    files['models.map'] = ''.join('%s %s\n' % (b['model'], b['name']) for b in ordered)
    return {
        'settings': conf,
        'backends': ordered,
        'routed_paths': list(ROUTED_PATHS),
        'binds': {'openai': binds(conf['bind_address'], conf['port']),
                  'prometheus': binds(conf['stats_address'], conf['stats_port'])},
        # tune.maxrewrite, and the request size (headers and body) from which a body without Content-Length
        # may not be whole in the buffer (413)
        'body': {'maxrewrite': MAXREWRITE, 'full_at': conf['request_buffer_kb'] * 1024 - MAXREWRITE - HTX_MARGIN},
        # relative to the gateway's directory (gateway_config_dir)
        'files': files,
        # one line per key: its digest and its name; never a key
        'keys_map': ''.join('%s %s\n' % (d['digest'], d['name']) for d in digests),
        'key_names': [d['name'] for d in digests],
        'servers_by_host': dict((h, sorted('%s/%s' % (b['name'], s['name']) for b in ordered for s in b['servers']
                                           if s['host'] == h)) for h in sorted(engines)),
    }


def gateway_rows(rows, results):
    """The fleet view's rows with a `gateway` column: each gateway's state of the row's engine.

    ``results`` are the gateway_server query results of every gateway (a loop's ``results``: ``item``
    the gateway, ``servers`` its servers, or ``failed``/``msg``). A row's engine is the server named
    ``<host>:<instance>``; the column reads ``<gateway>: <STATUS> (<sessions> in flight)`` per gateway.
    """
    views = gateway_section(results)
    out = []
    for row in rows or []:
        row = dict(row)
        if row.get('instance'):
            name = '%s:%s' % (row.get('host'), row.get('instance'))
            parts = []
            for gw in sorted(views):
                view = views[gw]
                if view.get('error'):
                    parts.append('%s: not checked' % gw)
                    continue
                found = [s for s in view['servers'] if s.get('server') == name]
                parts.append('%s: %s' % (gw, ', '.join('%s (%d in flight)' % (s.get('status'), s.get('sessions', 0))
                                                       for s in found) if found else 'not routed'))
            row['gateway'] = '; '.join(parts) if parts else None
        out.append(row)
    return out


def gateway_section(results):
    """{gateway: {servers: [...], error: text or None}} from the gateway_server query results."""
    views: dict[Any, dict[str, Any]] = {}
    for res in results or []:
        if not isinstance(res, dict) or res.get('skipped'):
            continue
        gw = res.get('item')
        if res.get('failed') or res.get('unreachable') or 'servers' not in res:
            views[gw] = {'servers': [], 'error': res.get('msg') or 'unreachable'}
        else:
            views[gw] = {'servers': list(res.get('servers') or []), 'error': None}
    return views
