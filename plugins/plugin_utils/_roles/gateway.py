# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
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
