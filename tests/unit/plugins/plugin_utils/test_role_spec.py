# -*- coding: utf-8 -*-
"""role_spec: the roles' argument specs read once, the owner of every setting's default and choices."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')


def test_every_role_is_read():
    assert role_spec.roles() == sorted(d for d in os.listdir(os.path.join(ROOT, 'roles'))
                                       if os.path.isfile(os.path.join(ROOT, 'roles', d, 'meta', 'argument_specs.yml')))


def test_the_options_of_every_entry_point_are_merged():
    options = role_spec.load_options('gateway')
    assert 'gateway_port' in options and 'gateway_drain_instances' in options  # main, and drain/ready
    assert role_spec.entry_points('gateway') is role_spec.entry_points('gateway')  # read once while unchanged


def test_a_setting_belongs_to_the_longest_role_that_prefixes_it():
    assert role_spec.role_of('fleet_view_live_margin') == 'fleet_view'
    assert role_spec.role_of('rollout_min_free_gb') == 'rollout'
    with pytest.raises(role_spec.RoleSpecError, match='fleet_no_such: not a setting'):
        role_spec.role_of('fleet_no_such')
    with pytest.raises(role_spec.RoleSpecError, match='no argument spec for role'):
        role_spec.load_options('no_such_role')


def test_defaults_and_choices_are_the_specs_and_copies():
    with open(os.path.join(ROOT, 'roles', 'gateway', 'meta', 'argument_specs.yml')) as handle:
        main = yaml.safe_load(handle)['argument_specs']['main']['options']
    assert role_spec.default('gateway_socket') == main['gateway_socket']['default']
    assert role_spec.choices('gateway_balance') == main['gateway_balance']['choices']
    assert role_spec.defaults('gateway', ['port', 'tls']) == {'port': main['gateway_port']['default'],
                                                             'tls': main['gateway_tls']['default']}
    value = role_spec.default('firewall_exempt_interfaces')
    value.append('changed')
    assert 'changed' not in role_spec.default('firewall_exempt_interfaces')
    assert role_spec.default('draft_sweep_equivalence_min_prefix') is None  # the spec gives none


def test_a_default_the_spec_cannot_hold_is_its_template(tmp_path):
    assert role_spec.default('monitoring_exporter_instances') == '{{ inference_server_instances | default([]) }}'
    meta = tmp_path / 'r' / 'meta'
    meta.mkdir(parents=True)
    (meta / 'argument_specs.yml').write_text('argument_specs:\n  main:\n    options:\n'
                                             '      r_a: {type: list, default: []}\n      r_b: {type: list}\n')
    (meta / 'default_templates.yml').write_text('r_b: "{{ x }}"\n')
    assert role_spec.default('r_b', 'r', roles_dir=str(tmp_path)) == '{{ x }}'
    (meta / 'default_templates.yml').write_text('r_a: "{{ y | default(x) }}"\n')  # another size: read again
    with pytest.raises(role_spec.RoleSpecError, match='its argument spec gives a default too'):
        role_spec.load_options('r', roles_dir=str(tmp_path))


def test_a_default_that_follows_another_setting_reads_as_the_owners_default():
    assert role_spec.follows('monitoring_exporter_fact_file') == 'draft_sweep_fact_file'
    assert role_spec.follows('monitoring_gateway_metrics_port') == 'gateway_stats_port'
    assert role_spec.follows('gateway_stats_port') is None and role_spec.follows('draft_sweep_instances') is None
    # in a play, the owner's value where the play has it, else its default
    assert role_spec.option('inference_server_models_dir')['default'] == (
        "{{ model_cache_root | default('model_cache_root' | specdec.serve.setting_default) }}")
    assert role_spec.default('monitoring_gateway_metrics_port') == role_spec.default('gateway_stats_port') == 8404
    assert role_spec.defaults('monitoring_exporter', ['fact_file']) == {
        'fact_file': role_spec.default('draft_sweep_fact_file')}


@pytest.mark.parametrize('declared, said', [({'follows': 1}, 'a mapping must be {follows: <setting>}'),
                                            ({'follows': 'r_a', 'x': 1}, 'a mapping must be {follows: <setting>}')])
def test_a_follow_that_is_not_one_setting_is_refused(tmp_path, declared, said):
    meta = tmp_path / 'r' / 'meta'
    meta.mkdir(parents=True)
    (meta / 'argument_specs.yml').write_text(
        'argument_specs:\n  main:\n    options:\n      r_a: {type: str, default: x}\n      r_b: {type: str}\n')
    (meta / 'default_templates.yml').write_text(yaml.safe_dump({'r_b': declared}))
    with pytest.raises(role_spec.RoleSpecError, match=re.escape(said)):
        role_spec.load_options('r', str(tmp_path))


def test_a_hosts_value_of_a_following_setting_is_its_owners_where_it_sets_none():
    assert role_spec.value_of('inference_server_models_dir', {}) == role_spec.default('model_cache_root')
    assert role_spec.value_of('inference_server_models_dir', {'model_cache_root': '/data/models'}) == '/data/models'
    assert role_spec.value_of('inference_server_models_dir', {'model_cache_root': '/data/models',
                                                              'inference_server_models_dir': '/srv/m'}) == '/srv/m'
    assert role_spec.value_of('inference_server_image_archive', {}) == role_spec.default('inference_server_image_archive')
