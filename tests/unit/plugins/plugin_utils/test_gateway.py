# -*- coding: utf-8 -*-
"""gateway_plan: HAProxy backends from the inventory, the key digests, and the rendered haproxy.cfg."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import jinja2
import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import (
    GatewayError,
    gateway_plan,
    key_digests,
)

TEMPLATES = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'gateway', 'templates')
TRT = {'name': 'gpt-oss-120b', 'profile': 'trtllm-gpt-oss-120b-eagle3-b200',
       'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc0', 'port': 8000}
VLLM = {'name': 'qwen', 'engine': 'vllm', 'image': 'vllm/vllm-openai:v0.11.0', 'model': 'Qwen/Qwen3-8B',
        'served_model_name': 'Qwen/Qwen3-8B', 'port': 8001}
KEY = 'sk-lab-0123456789abcdef'


def engines(*hosts, **extra):
    out = dict((h, {'address': '10.0.0.%d' % (i + 11), 'instances': [TRT]}) for i, h in enumerate(hosts))
    out.update(extra)
    return out


def plan(eng, settings=None, keys=(KEY,)):
    return gateway_plan(eng, settings or {}, list(keys))


def test_one_backend_per_model_with_every_host_serving_it():
    p = plan(engines('h1', 'h2', h3={'address': '10.0.0.20', 'instances': [TRT, VLLM]}))
    assert [b['model'] for b in p['backends']] == ['Qwen/Qwen3-8B', 'gpt-oss-120b']
    qwen, gpt = p['backends']
    assert qwen['name'] == 'model_Qwen_Qwen3-8B' and qwen['engine'] == 'vllm' and qwen['health_path'] == '/health'
    assert [(s['name'], s['address'], s['port']) for s in qwen['servers']] == [('h3:qwen', '10.0.0.20', 8001)]
    assert [s['name'] for s in gpt['servers']] == ['h1:gpt-oss-120b', 'h2:gpt-oss-120b', 'h3:gpt-oss-120b']
    assert p['servers_by_host']['h3'] == ['model_Qwen_Qwen3-8B/h3:qwen', 'model_gpt-oss-120b/h3:gpt-oss-120b']
    assert p['files']['models.map'] == 'Qwen/Qwen3-8B model_Qwen_Qwen3-8B\ngpt-oss-120b model_gpt-oss-120b\n'
    models = json.loads(p['files']['models.json'])
    assert [m['id'] for m in models['data']] == ['Qwen/Qwen3-8B', 'gpt-oss-120b'] and models['object'] == 'list'
    assert p['settings']['balance'] == 'leastconn' and p['settings']['tls'] is True


def test_absent_instances_and_hosts_without_instances_serve_nothing():
    gone = dict(TRT, state='absent')
    p = plan(engines('h1', h2={'address': '10.0.0.2', 'instances': [gone]}, h3={'address': '10.0.0.3'}))
    assert [s['host'] for s in p['backends'][0]['servers']] == ['h1']
    assert p['servers_by_host']['h2'] == [] and p['servers_by_host']['h3'] == []


def test_error_bodies_are_openai_style_json():
    files = plan(engines('h1'))['files']
    for name in ('401.json', '404-model.json', '404-path.json', '400-model.json', '400-model-twice.json', '413.json',
                 '503.json'):
        err = json.loads(files['errors/' + name])['error']
        assert set(err) == {'message', 'type', 'param', 'code'}, name
    assert json.loads(files['errors/404-model.json'])['error']['code'] == 'model_not_found'
    assert json.loads(files['errors/401.json'])['error']['code'] == 'invalid_api_key'
    assert json.loads(files['errors/400-model-twice.json'])['error']['code'] == 'model_ambiguous'
    assert json.loads(files['errors/413.json'])['error']['code'] == 'request_too_large'
    head, body = files['errors/503.http'].split('\r\n\r\n', 1)
    assert head.startswith('HTTP/1.0 503 ') and 'Content-Type: application/json' in head and json.loads(body)


def test_keys_are_kept_only_as_digests():
    p = plan(engines('h1'), keys=[KEY, {'name': 'team-b', 'key': 'another-key-0123456789'}])
    assert KEY not in json.dumps(p) and 'another-key-0123456789' not in json.dumps(p)
    assert p['keys_map'].splitlines() == ['%s key-1' % hashlib.sha256(KEY.encode()).hexdigest(),
                                          '%s team-b' % hashlib.sha256(b'another-key-0123456789').hexdigest()]
    assert p['key_names'] == ['key-1', 'team-b']


@pytest.mark.parametrize('keys, needle', [
    (['short'], 'gateway_api_keys[0]: the key must be 16 to 512'),
    (['has a space in it 12345'], 'gateway_api_keys[0]: the key must be'),
    ([KEY, KEY], 'gateway_api_keys[1]: the same key is listed twice'),
    ([{'key': KEY, 'name': 'bad name'}], "gateway_api_keys[0].name: 'bad name'"),
    ([{'key': KEY, 'owner': 'x'}], 'gateway_api_keys[0]: unknown key(s) owner'),
    ([{'key': KEY, 'name': 'a'}, {'key': 'other-key-0123456789', 'name': 'a'}], 'gateway_api_keys[1].name'),
])
def test_bad_keys_are_refused_without_showing_them(keys, needle):
    with pytest.raises(GatewayError) as exc:
        key_digests(keys)
    assert needle in str(exc.value)
    assert 'has a space in it' not in str(exc.value) and 'short' not in str(exc.value).replace('shown', '')


def test_keys_are_required_unless_turned_off():
    with pytest.raises(GatewayError, match='gateway_api_keys: empty while gateway_require_keys is true'):
        plan(engines('h1'), keys=[])
    assert plan(engines('h1'), {'require_keys': False}, keys=[])['keys_map'] == ''


@pytest.mark.parametrize('eng, needle', [
    ({'h1': {'address': '10.0.0.1', 'instances': [dict(VLLM, served_model_name="bad'model")]}},
     "served model name \"bad'model\" cannot be routed"),
    ({'h1': {'address': '10.0.0.1', 'instances': [dict(VLLM, served_model_name='two words')]}}, 'cannot be routed'),
    ({'h1': {'address': 'not an address', 'instances': [TRT]}}, "hostvars['h1']: address 'not an address'"),
    ({'h1': {'address': None, 'instances': [TRT]}}, 'gateway_backend_address'),
    ({'h 1': {'address': '10.0.0.1', 'instances': [TRT]}}, "hostvars['h 1']: the host name"),
    ({'h1': {'address': '10.0.0.1', 'instances': [TRT]}, 'h2': {'address': '10.0.0.1', 'instances': [TRT]}},
     '10.0.0.1:8000 is also'),
    ({'h1': {'address': '10.0.0.1', 'instances': [dict(TRT, port=70000)]}}, 'port'),
    ({'h1': {'address': '10.0.0.1'}}, 'no engine host serves any instance'),
    ({'h1': {'address': '10.0.0.1', 'instances': [dict(TRT, max_batch_size='lots')]}},
     "hostvars['h1'].inference_server_instances"),
])
def test_bad_inventory_is_refused_naming_the_variable(eng, needle):
    with pytest.raises(GatewayError) as exc:
        plan(eng)
    assert needle in str(exc.value)


def test_two_models_cannot_share_a_backend_name():
    a = dict(VLLM, name='a', served_model_name='org/m', port=8001)
    b = dict(VLLM, name='b', served_model_name='org_m', port=8002)
    with pytest.raises(GatewayError, match='both map to backend model_org_m'):
        plan({'h1': {'address': '10.0.0.1', 'instances': [a, b]}})


# The settings are checked as the role's settings check does (plugin_utils/_settings.py), in its wording.
@pytest.mark.parametrize('settings, needle', [
    ({'port': 0}, 'gateway_port: 0 must be a port number from 1 to 65535'),
    ({'port': 'x'}, "gateway_port: 'x' must be an integer"),
    ({'balance': 'source'}, "gateway_balance: 'source' is not one of leastconn"),
    ({'tls': 'maybe'}, "gateway_tls: 'maybe' must be a boolean"),
    ({'stats_port': 8443}, 'gateway_stats_port: 8443 is also gateway_port'),
    ({'colour': 1}, 'gateway_colour: unknown setting'),
    ({'request_buffer_kb': 8}, 'gateway_request_buffer_kb: 8 must be from 16 to 4096'),
])
def test_bad_settings_are_refused(settings, needle):
    with pytest.raises(GatewayError) as exc:
        plan(engines('h1'), settings)
    assert needle in str(exc.value)


def test_all_errors_are_reported_at_once():
    with pytest.raises(GatewayError) as exc:
        plan({'h1': {'address': 'bad address', 'instances': [TRT]}}, {'port': 0}, keys=['short'])
    assert len(exc.value.errors) == 3


def render(p, directory='/etc/haproxy/specdec'):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return env.get_template('haproxy.cfg.j2').render(gateway_cfg_plan=p, gateway_cfg_dir=directory,
                                                      gateway_cfg_socket='/run/haproxy/admin.sock')


def test_the_config_routes_by_model_checks_health_and_keeps_no_key():
    p = plan(engines('h1', 'h2'), {'timeout_server_s': 1200})
    cfg = render(p)
    assert KEY not in cfg and hashlib.sha256(KEY.encode()).hexdigest() not in cfg
    assert '    bind 0.0.0.0:8443 ssl crt /etc/haproxy/specdec/gateway.pem alpn h2,http/1.1\n' in cfg
    assert "req.body,json_query('$.model')" in cfg and 'option http-buffer-request' in cfg
    assert 'sha2(256),hex,lower,map(/etc/haproxy/specdec/api-keys.map)' in cfg
    assert 'http-request return status 401 content-type application/json' in cfg
    assert 'file /etc/haproxy/specdec/errors/404-model.json' in cfg
    assert 'acl routed path /v1/completions /v1/chat/completions' in cfg
    assert 'stats socket /run/haproxy/admin.sock mode 600 level admin' in cfg
    assert 'http-request use-service prometheus-exporter' in cfg
    # the exporter on loopback only by default, never on every address
    prometheus = cfg.split('frontend prometheus', 1)[1].split('\nbackend ', 1)[0]
    assert [line.strip() for line in prometheus.splitlines() if line.strip().startswith('bind')] == ['bind 127.0.0.1:8404']
    assert 'timeout server 1200s' in cfg and 'balance leastconn' in cfg
    assert 'http-check send meth GET uri /health' in cfg
    assert '    server h1:gpt-oss-120b 10.0.0.11:8000\n' in cfg and '    server h2:gpt-oss-120b 10.0.0.12:8000\n' in cfg
    assert 'http-request del-header authorization' in cfg


def test_plain_http_and_no_keys_when_asked():
    cfg = render(plan(engines('h1'), {'tls': False, 'require_keys': False, 'port': 8080}, keys=[]))
    assert '    bind 0.0.0.0:8080\n' in cfg and 'ssl crt' not in cfg and 'status 401' not in cfg


HAPROXY = shutil.which('haproxy') or shutil.which('haproxy', path='/usr/sbin')


@pytest.mark.skipif(not HAPROXY, reason='haproxy is not installed here (the gateway role runs haproxy -c on the host)')
def test_haproxy_accepts_the_config(tmp_path):
    p = plan(engines('h1', 'h2', h3={'address': '10.0.0.20', 'instances': [TRT, VLLM]}), {'tls': False})
    (tmp_path / 'errors').mkdir()
    for name, text in p['files'].items():
        (tmp_path / name).write_text(text)
    (tmp_path / 'api-keys.map').write_text(p['keys_map'])
    cfg = render(p, str(tmp_path)).replace('    user haproxy\n', '').replace('    group haproxy\n', '')
    (tmp_path / 'haproxy.cfg').write_text(cfg.replace('admin.sock', str(tmp_path / 'admin.sock')))
    proc = subprocess.run([HAPROXY, '-c', '-f', str(tmp_path / 'haproxy.cfg')], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_fleet_view_rows_get_each_gateways_state():
    from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import gateway_rows, gateway_section
    results = [
        {'item': 'gw1', 'servers': [{'backend': 'model_m', 'server': 'h1:m', 'status': 'DRAIN', 'sessions': 2},
                                    {'backend': 'model_m', 'server': 'h2:m', 'status': 'UP', 'sessions': 0}]},
        {'item': 'gw2', 'failed': True, 'msg': 'cannot read the gateway runtime API'},
        {'item': 'gw3', 'skipped': True},
    ]
    rows = [{'host': 'h1', 'instance': 'm'}, {'host': 'h3', 'instance': 'm'}, {'host': 'h4', 'health': 'not checked'}]
    out = gateway_rows(rows, results)
    assert out[0]['gateway'] == 'gw1: DRAIN (2 in flight); gw2: not checked'
    assert out[1]['gateway'] == 'gw1: not routed; gw2: not checked'
    assert 'gateway' not in out[2]
    assert gateway_rows(rows[:1], [])[0]['gateway'] is None
    section = gateway_section(results)
    assert sorted(section) == ['gw1', 'gw2'] and section['gw2']['error'].startswith('cannot read')


def test_key_and_host_names_are_plain_names_of_one_limit():
    """Key names share the plain-name pattern of host, instance and file names (vocabulary.NAME_RE, up to
    128 characters; key names alone were limited to 64)."""
    assert key_digests([{'key': KEY, 'name': 'k' * 128}])[0]['name'] == 'k' * 128
    with pytest.raises(GatewayError, match=r"gateway_api_keys\[0\]\.name: 'kkk.* must be a name of letters"):
        key_digests([{'key': KEY, 'name': 'k' * 129}])
    assert plan({'h' * 128: {'address': '10.0.0.1', 'instances': [TRT]}})['backends']


# gateway_engine_hosts: a name the inventory does not have is refused, and so is a listed host without instances
# (the role marks `inventory` false and `listed` true when the list is not its default).
def test_an_unknown_engine_host_is_refused_naming_the_variable_and_the_hosts():
    eng = engines('h1', **{'fleet-5': {'inventory': False}, 'sprak-01': {'inventory': False}})
    with pytest.raises(GatewayError) as exc:
        plan(eng)
    assert "gateway_engine_hosts: 'fleet-5', 'sprak-01' are not in the inventory" in str(exc.value)
    with pytest.raises(GatewayError, match="gateway_engine_hosts: 'x' is not in the inventory"):
        plan(engines('h1', x={'inventory': False}))


def test_a_listed_host_without_instances_is_refused_and_skipped_by_default():
    listed = dict((h, dict(e, inventory=True, listed=True)) for h, e in engines('h1').items())
    listed['gw'] = {'inventory': True, 'listed': True, 'address': None, 'instances': []}
    with pytest.raises(GatewayError) as exc:
        plan(listed)
    assert "gateway_engine_hosts: 'gw' has no inference_server_instances" in str(exc.value)
    # the default list (every host outside the gateways group): a host without instances is skipped
    default = dict(listed, gw={'inventory': True, 'listed': False, 'address': None, 'instances': []})
    assert plan(default)['servers_by_host']['gw'] == []


def test_an_engine_with_its_own_api_key_is_refused_without_showing_the_key():
    secret = 'engine-secret-0123456789'
    eng = {'h1': {'address': '10.0.0.1', 'instances': [dict(VLLM, api_key=secret)]}}
    with pytest.raises(GatewayError) as exc:
        plan(eng)
    text = str(exc.value)
    assert "hostvars['h1'].inference_server_instances[qwen].api_key: set (value not shown)" in text
    assert 'gateway_engine_hosts' in text and secret not in text
    # an instance being removed, or an empty key, is no refusal
    assert plan({'h1': {'address': '10.0.0.1', 'instances': [TRT, dict(VLLM, api_key=secret, state='absent')]}})
    assert plan({'h1': {'address': '10.0.0.1', 'instances': [dict(VLLM, api_key='')]}})


@pytest.mark.parametrize('settings, openai, prometheus', [
    ({}, ['0.0.0.0:8443'], ['127.0.0.1:8404']),
    ({'bind_address': '10.0.0.5', 'stats_address': '10.0.0.5'}, ['10.0.0.5:8443', '127.0.0.1:8443'],
     ['10.0.0.5:8404', '127.0.0.1:8404']),
    ({'bind_address': '::', 'stats_address': 'fd00::5'}, ['[::]:8443 v4v6'], ['[fd00::5]:8404', '127.0.0.1:8404']),
])
def test_each_frontend_binds_the_address_set(settings, openai, prometheus):
    binds = plan(engines('h1'), settings)['binds']
    assert binds == {'openai': openai, 'prometheus': prometheus}
    cfg = render(plan(engines('h1'), dict(settings, tls=False)))
    for address in openai + prometheus:
        assert '    bind %s\n' % address in cfg


@pytest.mark.parametrize('settings, needle', [
    ({'stats_address': ''}, "gateway_stats_address: '' must not be empty"),
    ({'stats_address': 'gw.example'}, "gateway_stats_address: 'gw.example' must be an IP address"),
    # the exporter listens as the other listeners do: on one address, never every one (bind_address)
    ({'stats_address': '0.0.0.0'}, "gateway_stats_address: '0.0.0.0' listens on every interface; name the one address"),
    ({'stats_address': '::'}, "gateway_stats_address: '::' listens on every interface"),
    ({'bind_address': '10.0.0.0/8'}, "gateway_bind_address: '10.0.0.0/8' must be an IP address"),
])
def test_bind_addresses_are_ip_addresses(settings, needle):
    with pytest.raises(GatewayError) as exc:
        plan(engines('h1'), settings)
    assert needle in str(exc.value)


def test_the_front_door_refuses_what_it_cannot_route_unambiguously():
    p = plan(engines('h1'), {'request_buffer_kb': 64})
    cfg = render(p)
    # the auth scheme in any case, in the 401 condition and where the key is taken out
    assert 'regsub("^bearer +","",i)' in cfg and '{ req.fhdr(authorization) -m reg -i "^bearer +[^ ]" }' in cfg
    # a body not whole in the buffer: 413, whatever its model field
    assert 'tune.bufsize 65536\n' in cfg and 'tune.maxrewrite 1024\n' in cfg
    assert ('http-request return status 413 content-type application/json file /etc/haproxy/specdec/errors/413.json '
            'if { req.body_size,sub(txn.body_len) gt 0 } || { req.hdr_val(content-length),sub(txn.body_len) gt 0 } '
            '|| { var(txn.request_len) -m int ge %d }' % (65536 - 1024 - 2048)) in cfg
    # two top-level model keys: 400, before the model is read
    assert 'lua-load /etc/haproxy/specdec/model-keys.lua\n' in cfg
    assert cfg.index('errors/400-model-twice.json if { lua.model_keys -m int gt 1 }') < cfg.index("json_query('$.model')")
    assert cfg.index('errors/413.json') < cfg.index('lua.model_keys -m int')
    assert "core.register_fetches('model_keys'" in p['files']['model-keys.lua']


def test_the_engines_are_read_from_the_inventory_as_the_role_gives_them():
    from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import engines_from
    inst = [{'name': 'a', 'port': 8000}]
    hostvars = {
        'e1': {'inference_server_instances': inst, 'ansible_facts': {'default_ipv4': {'address': '10.0.0.1'}}},
        'e2': {'inference_server_instances': inst, 'gateway_backend_address': '10.9.9.9',
               'ansible_facts': {'default_ipv4': {'address': '10.0.0.2'}}},
        's1': {'inference_server_instances': inst, 'stack_link_group': 'stack-a', 'stack_link_head': 's1'},
        'idle': {},
        'gw': {},
    }
    groups = {'all': ['e1', 'e2', 's1', 'idle', 'gw'], 'gateways': ['gw'], 'stack-a': ['s1', 's2']}
    everyone = engines_from(['e1', 'e2', 's1', 'idle'], hostvars, groups)
    assert everyone['e1'] == {'inventory': True, 'listed': False, 'address': '10.0.0.1', 'instances': inst, 'stack': None}
    assert everyone['e2']['address'] == '10.9.9.9'  # the inventory's backend address wins over the facts
    assert everyone['s1']['stack'] == {'members': ['s1', 's2'], 'head': 's1'} and everyone['s1']['address'] is None
    assert everyone['idle'] == {'inventory': True, 'listed': False, 'address': None, 'instances': [], 'stack': None}
    named = engines_from(['e1', 'nowhere'], hostvars, groups)
    assert named['e1']['listed'] is True and named['nowhere'] == {'inventory': False}


def test_a_host_that_published_what_it_serves_is_not_rendered_again(monkeypatch):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _gateway
    from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import fleet_plan
    inst = {'name': 'gpt-oss-120b', 'engine': 'trtllm', 'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6',
            'model': 'openai/gpt-oss-120b', 'port': 8000}
    published = fleet_plan([inst], {}, False)
    hostvars = {'e1': {'inference_server_instances': [inst], 'gateway_backend_address': '10.0.0.1',
                       'rollout_plan': published},
                'e2': {'inference_server_instances': [inst], 'gateway_backend_address': '10.0.0.2'}}
    engines = _gateway.engines_from(['e1', 'e2'], hostvars, {'all': ['e1', 'e2']})
    assert engines['e1']['rendered'] == published['rendered'] and 'rendered' not in engines['e2']
    rendered = []
    original = _gateway.fleet_plan
    monkeypatch.setattr(_gateway, 'fleet_plan', lambda i, *a: rendered.append(len(i)) or original(i, *a))
    plan = _gateway.gateway_plan(engines, {'require_keys': False}, [])
    assert rendered == [1]  # e2 alone, which published nothing
    (backend,) = plan['backends']
    assert sorted(s['name'] for s in backend['servers']) == ['e1:gpt-oss-120b', 'e2:gpt-oss-120b']
