# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
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
    name_keys,
    non_empty,
    not_root,
    own_dir,
    package,
    port,
    rng,
    secret_string,
    url_path,
    user,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    NAME_RE,
    NAME_WORDS,
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
    'monitoring_tune_loop_listen': [non_empty, bind_address],
    'monitoring_tune_loop_port': [port],
    'monitoring_tune_loop_token': [secret_string],
    'monitoring_tune_loop_inventory': [local_path],
    'monitoring_tune_loop_ssh_key': [local_path],
    'monitoring_tune_loop_collection': [local_path],
    'monitoring_tune_loop_wheelhouse': [local_path],
    'monitoring_tune_loop_vault_password_file': [local_path],
    'monitoring_tune_loop_pip_index_url': [http_url],
    'monitoring_tune_loop_requirements': [non_empty],
    'monitoring_tune_loop_dir': [host_path, own_dir('monitoring_tune_loop_dir')],
    'monitoring_tune_loop_user': [user, not_root],
    'monitoring_tune_loop_vars': [name_keys],
    'monitoring_tune_loop_java_package': [package],
}
