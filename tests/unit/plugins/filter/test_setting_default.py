# -*- coding: utf-8 -*-
"""setting_default: a role setting's default from its argument spec, for a fallback in a play or another role."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.setting_default import FilterModule, setting_default
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec


def test_the_default_is_the_specs():
    assert setting_default('inference_server_image_archive') == role_spec.option('inference_server_image_archive')['default']
    # a default that follows another setting (meta/default_templates.yml) is its owner's default
    assert role_spec.option('inference_server_models_dir')['default'].startswith('{{ model_cache_root')
    assert setting_default('inference_server_models_dir') == role_spec.option('model_cache_root')['default']
    assert setting_default('gateway_socket') == role_spec.option('gateway_socket', 'gateway')['default']
    assert setting_default('fleet_view_live_margin', 'fleet_view') == role_spec.default('fleet_view_live_margin')
    assert FilterModule().filters()['setting_default'] is setting_default


@pytest.mark.parametrize('name, role, said', [
    ('no_such_setting', None, 'not a setting of any role'),
    ('gateway_port', 'firewall', 'gateway_port: not a setting of role firewall'),
    (['gateway_port'], None, 'expects a setting name'),
])
def test_an_unknown_setting_is_refused(name, role, said):
    with pytest.raises(AnsibleFilterError, match=said):
        setting_default(name, role)
