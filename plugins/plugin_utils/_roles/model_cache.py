# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_cache role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its planner: the models to cache (:func:`models`, which the settings action calls and returns as ``plan``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    as_bool,
    BOOL_WORDS,
    both_or_neither,
    ContextRule,
    each,
    host_path,
    local_path,
    name_keys,
    needs_set,
    no_climb,
    per_architecture,
    plain_ip_form,
    port,
    ref,
    rng,
    sha256_values,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    REPO_ID_RE,
    show,
)


def repo_id(v):
    """A Hugging Face repo id org/name: it becomes <root>/org/name on the host, so no '..'."""
    if not isinstance(v, string_types) or not REPO_ID_RE.match(v) or '..' in v:
        return 'must be a Hugging Face repo id org/name (letters, digits, _ . -; no ..)'
    return None


MODEL_ENTRY_KEYS = ('repo_id', 'revision', 'allow_patterns', 'ignore_patterns', 'verify', 'refresh')


def _patterns(v):
    return None if v is None or (isinstance(v, list) and all(isinstance(p, string_types) and p for p in v)) \
        else 'must be a list of glob patterns (strings)'


def model_entry(v):
    """An entry of model_cache_models: a repo id, or a mapping with repo_id and the keys the hf_snapshot module
    takes (revision, allow_patterns, ignore_patterns, verify, refresh), each as that module accepts it."""
    if not isinstance(v, dict):
        return repo_id(v)
    if 'repo_id' not in v:
        return 'a mapping needs repo_id'
    unknown = sorted(str(k) for k in v if k not in MODEL_ENTRY_KEYS)
    if unknown:
        return 'has unknown keys %s (allowed: %s)' % (', '.join(unknown), ', '.join(MODEL_ENTRY_KEYS))
    verify = role_spec.choices('model_cache_verify')
    checks = [('repo_id', repo_id), ('revision', ref), ('allow_patterns', _patterns), ('ignore_patterns', _patterns),
              ('verify', lambda x: None if x in verify else 'is not one of %s' % ', '.join(verify)),
              ('refresh', lambda x: None if as_bool(x) is not None else 'must be a boolean: ' + BOOL_WORDS)]
    for key, check in checks:
        if key in v and (key == 'repo_id' or v[key] is not None):
            msg = check(v[key])
            if msg:
                return '%s %s %s' % (key, show(v[key]), msg)
    return None


POLICY: dict[str, Any] = {
    'model_cache_root': [host_path],
    'model_cache_tiktoken_dir': [host_path],
    'model_cache_default_revision': [ref],
    'model_cache_models': [each(model_entry)],
    'model_cache_hub_endpoint': {'url': 'model_cache_allow_http'},
    'model_cache_mirror_endpoint': {'url': 'model_cache_allow_http'},
    'model_cache_peer_port': [port],
    'model_cache_lock_dir': [local_path],
    'model_cache_peer_tls_cert': [local_path, ContextRule(both_or_neither('model_cache_peer_tls_key'), 'model_cache_peer_tls_key')],
    'model_cache_peer_tls_key': [local_path, ContextRule(both_or_neither('model_cache_peer_tls_cert'), 'model_cache_peer_tls_cert')],
    'model_cache_peer_tls_ca': [local_path, ContextRule(needs_set('model_cache_peer_tls_cert'), 'model_cache_peer_tls_cert')],
    'model_cache_peer_address': [plain_ip_form],
    'model_cache_tiktoken_base_url': {'url': 'model_cache_allow_http'},
    'model_cache_tiktoken_encodings': [name_keys, sha256_values],
    'model_cache_venv': [host_path],
    'model_cache_pip_index_url': {'url': 'model_cache_allow_http'},
    'model_cache_reserve_gb': [rng(0.0, 1000000.0)],
    'model_cache_max_workers': [rng(1, 64)],
    'model_cache_download_timeout': [rng(1, 604800)],
    'model_cache_poll_interval': [rng(1, 3600)],
    'model_cache_wheelhouse': [per_architecture(local_path)],
    'model_cache_instances.model': [no_climb],
    'model_cache_instances.speculative.draft_model': [no_climb],
}


def models(settings, warn=None, ctx=None):
    """The models to cache (plugin_utils/_model_cache.py, ``model_list``): named models first, then the instances'
    models and draft models, each with the role's defaults and the lock the controller holds for it. The source is
    checked against the play first (``ctx['play_hosts']``): a peer seed must be in the play, since it downloads for
    its peers. PlanRefusal names the setting."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._model_cache import ModelListError, model_list
    hosts = (ctx or {}).get('play_hosts')
    try:
        return model_list(settings, list(hosts) if hosts is not None else None)
    except ModelListError as exc:
        raise PlanRefusal([str(exc)])


# the planners the settings action calls, by entry
PLANNERS = {'main': models}
