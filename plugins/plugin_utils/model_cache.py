# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_cache role's list of models to cache, from its checked settings.

The models named by ``model_cache_models`` come first, in their order; then the models and draft
models of ``model_cache_instances`` that no entry names (local paths, starting with ``/``, are
left out). Each becomes a mapping with the role's defaults (revision, patterns, verify, refresh)
under what the entry itself sets. Every repo id is checked as ``model_cache_models``' are
(``settings.repo_id``): it becomes ``<root>/<org>/<name>`` on the host. Given the play's hosts, the
source is checked against them first (``source_problems``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils.settings import repo_id


class ModelListError(ValueError):
    pass


def _instance_ids(instances):
    ids = []
    for index, inst in enumerate(instances or []):
        if not isinstance(inst, dict):
            raise ModelListError('model_cache_instances[%d] is a %s, not a mapping' % (index, type(inst).__name__))
        spec = inst.get('speculative') or {}
        for where, value in (('model', inst.get('model')),
                             ('speculative.draft_model', spec.get('draft_model') if isinstance(spec, dict) else None)):
            if not value:
                continue
            if not isinstance(value, string_types):
                raise ModelListError('model_cache_instances[%d].%s is a %s, not a repo id or a path'
                                     % (index, where, type(value).__name__))
            if value.startswith('/') or value in ids:
                continue
            bad = repo_id(value)
            if bad:
                raise ModelListError('model_cache_instances[%d] (%s).%s=%r %s, or a local path starting with /'
                                     % (index, inst.get('name', '?'), where, value, bad))
            ids.append(value)
    return ids


def source_problems(settings, play_hosts):
    """What refuses the settings' source on this play (each a sentence): mirror mode without a mirror,
    a peer seed that is not one of the play's hosts."""
    problems = []
    if settings.get('source') == 'mirror' and not settings.get('mirror_endpoint'):
        problems.append('model_cache_source=mirror needs model_cache_mirror_endpoint (it is empty).')
    if settings.get('source') == 'peer' and settings.get('peer_seed') not in play_hosts:
        problems.append("model_cache_peer_seed=%s is not one of the play's hosts (%s)."
                        % (json.dumps(settings.get('peer_seed')), ', '.join(play_hosts)))
    return problems


def model_list(settings, play_hosts=None):
    """The models to cache: one mapping each (repo_id, revision, allow_patterns, ignore_patterns,
    verify, refresh), entries of model_cache_models first. With the play's hosts, the source is
    checked against them first (source_problems)."""
    problems = source_problems(settings, list(play_hosts)) if play_hosts is not None else []
    if problems:
        raise ModelListError(' '.join(problems))
    defaults = {'revision': settings['default_revision'], 'allow_patterns': None,
                'ignore_patterns': settings['default_ignore_patterns'], 'verify': settings['verify'],
                'refresh': settings['refresh']}
    models = settings.get('models') or []
    named = [m if isinstance(m, string_types) else m['repo_id'] for m in models]
    out = []
    for entry in list(models) + [i for i in _instance_ids(settings.get('instances')) if i not in named]:
        item = dict(defaults)
        item.update(entry if isinstance(entry, dict) else {'repo_id': entry})
        out.append(item)
    return out
