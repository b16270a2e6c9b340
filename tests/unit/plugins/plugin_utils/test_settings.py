# -*- coding: utf-8 -*-
"""The settings layer: every role variable typed as the argument spec types it, and refused with
its name, its value and what is allowed when the collection's policy says no."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.action.settings import RESULT_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils._role_spec import load_options
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import (
    MULTILINE_OK,
    POLICY,
    SettingsError,
    check_role,
    check_settings,
    check_value,
    typed_settings,
)

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml')))
OPTIONS = dict((role, load_options(role)) for role in ROLES)
ALL = dict((name, (role, opt)) for role, opts in OPTIONS.items() for name, opt in opts.items())


def defaults(role):
    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml')) as handle:
        values = yaml.safe_load(handle) or {}
    # defaults that are templates are checked once templated; here, plain values only
    return dict((k, v) for k, v in values.items() if not (isinstance(v, str) and '{{' in v))


def refused(var, value, extra=None):
    role, _ = ALL[var]
    values = dict(extra or {})
    values[var] = value
    with pytest.raises(SettingsError) as err:
        check_settings(OPTIONS[role], values)
    text = str(err.value)
    assert text.startswith(var + ':') or text.startswith(var + '['), text
    return text


# --------------------------------------------------------------------------- the table itself

@pytest.mark.parametrize('role', ROLES)
def test_the_defaults_of_every_role_pass(role):
    typed = check_settings(OPTIONS[role], defaults(role))
    assert set(typed) <= set(OPTIONS[role])


def test_every_number_option_has_a_range_and_every_policy_names_an_option():
    numbers = [n for n, (_, o) in ALL.items() if o.get('type') in ('int', 'float')
               or (o.get('type') == 'list' and o.get('elements') in ('int', 'float'))]
    assert numbers
    missing = [n for n in numbers if n not in POLICY]
    assert missing == []
    assert sorted(set(k.split('.')[0] for k in POLICY) - set(ALL)) == []


def test_no_setting_shadows_a_result_key():
    for role, opts in OPTIONS.items():
        assert not set(typed_settings(role, dict.fromkeys(opts))) & RESULT_KEYS, role


# --------------------------------------------------------------------------- types, as -e gives them

@pytest.mark.parametrize('text, expected', [('false', False), ('no', False), ('0', False), ('off', False),
                                            ('true', True), ('yes', True), ('1', True), ('on', True)])
def test_booleans_from_the_command_line_are_typed(text, expected):
    typed = check_settings(OPTIONS['firewall'], {'firewall_open_engine_ports': text})
    assert typed['firewall_open_engine_ports'] is expected


def test_a_list_from_the_command_line_is_a_list_of_its_type():
    typed = check_settings(OPTIONS['firewall'], {'firewall_engine_ports': '8000,8001'})
    assert typed['firewall_engine_ports'] == [8000, 8001]


def test_an_int_from_the_command_line_is_an_int():
    typed = check_settings(OPTIONS['inference_server'], {'inference_server_health_timeout': '600'})
    assert typed['inference_server_health_timeout'] == 600


def test_secrets_are_checked_but_never_returned_or_shown():
    typed = check_settings(OPTIONS['model_cache'], {'model_cache_hf_token': 'hf_abc'})
    assert 'model_cache_hf_token' not in typed
    text = refused('model_cache_hf_token', 'hf_secret\nvalue')
    assert 'hf_secret' not in text and '(value hidden)' in text
    text = refused('inference_server_secret_env', {'HF_TOKEN': 'hf_secret\n'})
    assert 'hf_secret' not in text


def test_every_refusal_is_listed_at_once():
    with pytest.raises(SettingsError) as err:
        check_settings(OPTIONS['firewall'], {'firewall_engine_ports': [0], 'firewall_ipv6': 'maybe'})
    assert len(err.value.errors) == 2


# --------------------------------------------------------------------------- the battery

def _type_cases():
    cases = []
    for name, (_role, opt) in sorted(ALL.items()):
        kind = opt.get('type', 'str')
        if kind == 'bool':
            cases += [(name, v) for v in ('maybe', 'flase', [], {'a': 1}, 2)]
        elif kind == 'int':
            cases += [(name, v) for v in ('ten', True, [1], 1.5)]
        elif kind == 'float':
            cases += [(name, v) for v in ('fast', False, {'x': 1})]
        elif kind in ('str', 'path'):
            cases += [(name, v) for v in ('line\nbreak', 'nul\x00byte', ['a'], {'k': 'v'})
                      if name not in MULTILINE_OK or not isinstance(v, str)]
        elif kind == 'list':
            elements = opt.get('elements', 'str')
            cases += [(name, {'a': 1}), (name, ['ok', 'bad\nline'] if elements == 'str'
                                         else [['nested']] if elements == 'raw' else ['not-a-%s' % elements])]
        elif kind == 'dict':
            cases += [(name, 'not a mapping')]
            if name not in MULTILINE_OK:
                cases.append((name, {'key': 'line\nbreak'}))
        if opt.get('choices'):
            cases.append((name, 'no-such-choice'))
    return cases


TYPE_CASES = _type_cases()


@pytest.mark.parametrize('var, value', TYPE_CASES, ids=['%s=%r' % c for c in TYPE_CASES])
def test_malformed_types_are_refused_with_the_variable_named(var, value):
    refused(var, value)


def _range_cases():
    cases = []
    for name, rules in sorted(POLICY.items()):
        if isinstance(rules, dict):
            continue
        for rule in rules:
            bounds = getattr(rule, 'bounds', None)
            if not bounds:
                continue
            low, high = bounds
            top, keys = name.split('.')[0], name.split('.')[1:]
            kind = ALL[top][1].get('type')
            step = 1 if 'int' in (kind, ALL[top][1].get('elements')) or isinstance(low, int) else 0.5
            for bad in (low - step, high + step):
                if keys:  # a key inside each item of a list setting: {'port': bad}, {'speculative': {...}}
                    bad = {1: bad} if rule.__name__ == 'schedule_values' else bad
                    for key in reversed(keys):
                        bad = {key: bad}
                    cases.append((top, [dict(bad, name='a')]))
                elif kind == 'dict':
                    cases.append((name, {'key': bad}))
                else:
                    cases.append((name, [bad] if kind == 'list' else bad))
    return cases


RANGE_CASES = _range_cases()


@pytest.mark.parametrize('var, value', RANGE_CASES, ids=['%s=%r' % c for c in RANGE_CASES])
def test_numbers_out_of_range_are_refused_with_the_range(var, value):
    assert 'from' in refused(var, value)


PATHS = sorted(n for n, rules in POLICY.items() if not isinstance(rules, dict)
               and any(r.__name__ == 'host_path' for r in rules))


@pytest.mark.parametrize('var', PATHS)
@pytest.mark.parametrize('value', ['relative/dir', '/etc/specdec/../../etc', '/etc//specdec', '/etc/./x', '/etc/'])
def test_host_paths_must_be_absolute_and_normalised(var, value):
    refused(var, value)


URLS = sorted(n for n, rules in POLICY.items() if isinstance(rules, dict))


@pytest.mark.parametrize('var', URLS)
def test_plain_http_is_refused_unless_the_role_allows_it(var):
    role, opt = ALL[var]
    value = 'http://mirror.example/x'
    given = [value] if opt.get('type') == 'list' else value
    text = refused(var, given)
    assert POLICY[var]['url'] in text
    typed = check_settings(OPTIONS[role], {var: given, POLICY[var]['url']: 'true'})
    assert typed[var] == given


@pytest.mark.parametrize('var', URLS)
def test_a_url_must_be_a_url(var):
    opt = ALL[var][1]
    refused(var, ['ftp://x'] if opt.get('type') == 'list' else 'mirror.example/x')


@pytest.mark.parametrize('var, value', [
    ('firewall_allowed_cidrs', ['0.0.0.0/0']),
    ('firewall_allowed_cidrs', ['::/0']),
    ('firewall_allowed_cidrs', ['10.0.0.1/8']),
    ('firewall_allowed_cidrs', ['2001:db8::1/48']),
    ('firewall_allowed_cidrs', ['10.0.0.0/33']),
    ('firewall_allowed_cidrs', ['example.com']),
    ('firewall_allowed_cidrs', [' 10.0.0.0/8']),
    ('firewall_engine_ports', [0]),
    ('firewall_engine_ports', [65536]),
    ('firewall_engine_ports', ['http']),
    ('firewall_exempt_interfaces', ['e+']),
    ('firewall_exempt_interfaces', ['eth+']),
    ('firewall_exempt_interfaces', ['en+']),
    ('firewall_exempt_interfaces', ['+']),
    ('firewall_exempt_interfaces', ['wl+']),
    ('firewall_exempt_interfaces', ['bond+']),
    ('firewall_exempt_interfaces', ['a-name-too-long-for-linux']),
    ('firewall_interfaces', ['eth0 -j ACCEPT']),
    ('firewall_interfaces', ['a-name-too-long-for-linux']),
    ('firewall_unit_name', '../../etc/passwd'),
    ('firewall_unit_name', 'x y'),
    ('docker_host_daemon_options', {'iptables': False}),
    ('docker_host_daemon_options', {'iptables': 'false'}),
    ('docker_host_daemon_options', {'firewall-backend': 'nftables'}),
    ('docker_host_daemon_json_fragments', {'50-x': {'iptables': False}}),
    ('docker_host_daemon_json_fragments', {'../x': {}}),
    ('docker_host_daemon_json_fragments', {'x': 'not a mapping'}),
    ('docker_host_users', ['Root User']),
    ('docker_host_users', ['alice;rm']),
    ('docker_host_distribution_packages', ['docker.io; rm -rf /']),
    ('docker_host_insecure_registries', ['reg istry:5000']),
    ('container_toolkit_version', '1.17.8-1\nPin: release *'),
    ('container_toolkit_version', '1.17 8'),
    ('container_toolkit_version', 'latest'),
    ('container_toolkit_packages', []),
    ('container_toolkit_packages', ['Nvidia Toolkit']),
    ('container_toolkit_daemon_json_fragment', '..'),
    ('container_toolkit_daemon_json_fragment', '../../etc/docker/x'),
    ('container_toolkit_runtime_name', 'nvi dia'),
    ('container_toolkit_smoke_test_image', 'Ubuntu 24.04'),
    ('draft_sweep_run_id', '../../etc'),
    ('draft_sweep_run_id', '..'),
    ('draft_sweep_instance', 'a/b'),
    ('draft_sweep_draft_lens', []),
    ('draft_sweep_concurrency', []),
    ('fleet_view_report_name', '../fleet'),
    ('fleet_view_title', 'two\nlines'),
    ('inference_server_publish_address', '0.0.0.0 -p 22:22'),
    ('inference_server_publish_address', 'localhost'),
    ('inference_server_env', {'BAD NAME': 'x'}),
    ('inference_server_env', {'A': 'x\nB=y'}),
    ('inference_server_ulimits', {'memlock': 'unlimited'}),
    ('inference_server_ulimits', {'../x': 1}),
    ('inference_server_registry', 'nvcr.io/path with space'),
    ('inference_server_firewall_unit', '../x.service'),
    ('inference_server_docker_args', ['--label=a\nExecStartPre=/bin/sh']),
    ('model_cache_tiktoken_encodings', {'o200k_base.tiktoken': 'not-a-sha'}),
    ('model_cache_tiktoken_encodings', {'../o200k': 'a' * 64}),
    ('model_cache_default_revision', '../main'),
    ('model_cache_models', ['../../etc']),
    ('model_cache_models', ['org/..']),
    ('model_cache_models', ['org/name/extra']),
    ('model_cache_models', [{'revision': 'main'}]),
    ('model_cache_models', [{'repo_id': 'org/name', 'revision': '../x'}]),
    ('model_cache_default_revision', 'main\n'),
    ('model_cache_venv_requirements', ['huggingface_hub\n--index-url http://evil']),
    ('monitoring_acceptance_window', '5 minutes'),
    ('monitoring_acceptance_for', '0s'),
    ('monitoring_scrape_interval', '1m30s'),
    ('monitoring_engine_group', 'a b'),
    ('monitoring_gateway_metrics_path', 'metrics'),
    ('monitoring_alertmanager_webhooks', ['ftp://x']),
])
def test_policy_refusals_name_the_variable(var, value):
    refused(var, value)


def test_an_empty_exemption_list_and_the_docker_bridges_pass():
    typed = check_settings(OPTIONS['firewall'], {'firewall_exempt_interfaces': ['docker0', 'br-+', 'veth+']})
    assert typed['firewall_exempt_interfaces'] == ['docker0', 'br-+', 'veth+']


def test_the_battery_is_large():
    assert len(TYPE_CASES) + len(RANGE_CASES) + 5 * len(PATHS) + 2 * len(URLS) > 300


def test_report_dirs_are_resolved_against_the_directory_the_run_starts_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typed = check_settings(OPTIONS['fleet_view'], {'fleet_view_report_dir': 'reports'})
    assert typed['fleet_view_report_dir'] == str(tmp_path / 'reports')
    typed = check_settings(OPTIONS['draft_sweep'], {'draft_sweep_report_dir': '/srv/reports'})
    assert typed['draft_sweep_report_dir'] == '/srv/reports'


@pytest.mark.parametrize('role', ROLES)
def test_every_option_has_a_default_in_the_roles_defaults(role):
    """The settings check types what it finds: an option missing from defaults/main.yml is missing
    from the typed settings too (and a task reading it fails late)."""
    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml')) as handle:
        have = set(yaml.safe_load(handle) or {})
    assert sorted(set(OPTIONS[role]) - have) == []


def test_a_rollout_outcome_may_carry_a_multi_line_error_into_the_report():
    status = {'fleet-01': {'status': 'rolled back', 'error': 'engine failed:\nTraceback ...\nRuntimeError'}}
    assert check_settings(OPTIONS['fleet_view'], {'fleet_view_status': status})['fleet_view_status'] == status
    refused('fleet_view_title', 'Rollout\nSTOPPED')


# --------------------------------------------------------------------------- for the modules that take settings

def test_check_role_types_and_checks_short_names_and_leaves_out_the_rest():
    """gateway.py and monitoring.py check their settings here instead of holding a second range."""
    assert check_role('gateway', {'port': '8443', 'tls': 'no', 'colour': 'red'}) == {'port': 8443, 'tls': False}
    with pytest.raises(SettingsError) as err:
        check_role('gateway', {'port': 0, 'check_fall': 101})
    assert err.value.errors == ['gateway_check_fall: 101 must be from 1 to 100',
                                'gateway_port: 0 must be a port number from 1 to 65535']


def test_check_value_names_the_value_as_the_caller_knows_it():
    assert check_value('draft_sweep_min_runs', '5') == 5
    with pytest.raises(SettingsError, match=r'^min_runs \(draft_sweep_min_runs\): 0 must be from 1 to 100$'):
        check_value('draft_sweep_min_runs', 0, label='min_runs (draft_sweep_min_runs)')
