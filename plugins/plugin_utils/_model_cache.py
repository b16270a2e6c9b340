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

The model lock (``model_cache_lock_dir``): a model pinned to a 40-hex commit has its lock at
``<lock_dir>/<org>/<name>@<commit>.json`` on the controller (``lock_path``); when it is there it is read
here and handed to the hf_snapshot module (``lock``), which checks everything against it; when it is not,
the first fetch records it. A branch or tag is not locked (a warning, once per model), and with
``model_cache_require_lock`` every model must be pinned and locked already.

The peer seed (``model_cache_peer_seed``) is a fact of the inventory, never of the play, so that a run limited to
some hosts (``-l``) decides what a full run decides: :func:`default_peer_seed` is its default, the first host, in
inventory order (``groups['all']``), of the hosts that cache models (:func:`cache_hosts`) whose
``model_cache_source`` is ``peer``; :func:`peer_seed` is a host's seed (its own setting, else that default) and
:func:`peers_of` the hosts that copy from a seed. The firewall role's rule for the seed's peer server
(plugin_utils/_firewall.py) is built from the same functions. That the seed is in the play is checked here
(``source_problems``), not assumed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible.module_utils.six import string_types
from ansible.utils.display import Display

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.model_cache import repo_id


COMMIT_RE = re.compile(r'^[0-9a-f]{40}$')
# The groups whose hosts cache no models: the shipped playbooks run this role on all:!gateways:!monitoring.
NOT_CACHING = ('gateways', 'monitoring')


class ModelListError(ValueError):
    pass


def lock_path(lock_dir, repo, revision):
    """Where the lock of ``repo`` at the commit ``revision`` is kept on the controller."""
    org, name = repo.split('/', 1)
    return os.path.join(lock_dir, org, '%s@%s.json' % (name, revision))


def read_lock(path):
    """The lock at ``path`` (a mapping with its files), or None when there is none yet."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        if getattr(exc, 'errno', None) == 2:
            return None
        raise ModelListError('cannot read the model lock %s: %s' % (path, exc))
    except ValueError as exc:
        raise ModelListError('the model lock %s is not JSON (%s): restore it from version control, or delete '
                             'it to record a new lock' % (path, exc))
    if not isinstance(data, dict) or not isinstance(data.get('files'), dict):
        raise ModelListError('the model lock %s has no files mapping: restore it from version control, or delete '
                             'it to record a new lock' % path)
    return data


def with_locks(items, settings, warn=None):
    """The items with ``lock_path`` (None when the revision is not a 40-hex commit) and ``lock`` (the lock
    read from it, or None). Without ``lock_dir`` in the settings the items are returned as they are."""
    lock_dir = settings.get('lock_dir')
    if not lock_dir:
        return items
    unpinned, unlocked = [], []
    for item in items:
        pinned = bool(COMMIT_RE.match(str(item.get('revision') or '')))
        item['lock_path'] = lock_path(lock_dir, item['repo_id'], item['revision']) if pinned else None
        item['lock'] = read_lock(item['lock_path']) if pinned else None
        if not pinned:
            unpinned.append('%s@%s' % (item['repo_id'], item['revision']))
        elif item['lock'] is None:
            unlocked.append(item['lock_path'])
    if settings.get('require_lock') and (unpinned or unlocked):
        problems = []
        if unpinned:
            problems.append('not pinned to a 40-hex commit id: %s (give each a revision that is a commit)'
                            % ', '.join(unpinned))
        if unlocked:
            problems.append('no lock at %s (run once with model_cache_require_lock: false to record it, then '
                            'review and commit it)' % ', '.join(unlocked))
        raise ModelListError('model_cache_require_lock is true and models are not locked: %s.' % '; '.join(problems))
    for name in unpinned:
        (warn or Display().warning)(
            'model_cache: %s is not locked: its revision is a branch or tag, so nothing records what it must hold; '
            'pin a 40-hex commit id to have its files recorded in %s and checked on every run' % (name, lock_dir))
    return items


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


def _hostvar(hostvars, host, name):
    hv = hostvars.get(host) if hasattr(hostvars, 'get') else None
    if not hv or name not in hv or hv[name] is None:
        return None
    return hv[name]


def source_of(hostvars, host):
    """A host's model_cache_source as the inventory gives it (host and group variables, extra vars), else the
    argument spec's default."""
    value = _hostvar(hostvars, host, 'model_cache_source')
    return str(value) if value is not None else role_spec.default('model_cache_source')


def cache_hosts(groups):
    """The inventory's hosts that cache models, in inventory order: ``groups['all']`` but the hosts of
    NOT_CACHING (gateways and monitoring hosts serve no engines)."""
    groups = groups or {}
    skip = set(h for g in NOT_CACHING for h in groups.get(g) or [])
    return [str(h) for h in groups.get('all') or [] if h not in skip]


def default_peer_seed(hostvars, groups):
    """The default of model_cache_peer_seed: the first host of :func:`cache_hosts` (inventory order) whose
    model_cache_source is ``peer``; when the inventory puts none in peer mode (a play's vars set it), the first
    host of :func:`cache_hosts`; '' when there is none (source_problems then refuses peer mode)."""
    hosts = cache_hosts(groups)
    for host in hosts:
        if source_of(hostvars, host) == 'peer':
            return host
    return hosts[0] if hosts else ''


def peer_seed(hostvars, groups, host):
    """The seed ``host`` copies from: its model_cache_peer_seed as the inventory gives it, else
    :func:`default_peer_seed`."""
    value = _hostvar(hostvars, host, 'model_cache_peer_seed')
    return str(value) if value is not None else default_peer_seed(hostvars, groups)


def peers_of(hostvars, groups, seed):
    """The hosts of :func:`cache_hosts` in peer mode whose seed is ``seed``, the seed left out, in inventory
    order: the hosts that copy from it, whether or not they are in the play."""
    default = default_peer_seed(hostvars, groups)
    out = []
    for host in cache_hosts(groups):
        if host == seed or source_of(hostvars, host) != 'peer':
            continue
        own = _hostvar(hostvars, host, 'model_cache_peer_seed')
        if (str(own) if own is not None else default) == seed:
            out.append(host)
    return out


def source_problems(settings, play_hosts):
    """What refuses the settings' source on this play (each a sentence): mirror mode without a mirror,
    peer mode without a seed, a peer seed that is not one of the play's hosts (it downloads for its peers in
    the same run)."""
    problems = []
    play_hosts = [str(h) for h in play_hosts]
    if settings.get('source') == 'mirror' and not settings.get('mirror_endpoint'):
        problems.append('model_cache_source=mirror needs model_cache_mirror_endpoint (it is empty).')
    seed = settings.get('peer_seed')
    if settings.get('source') == 'peer' and not seed:
        problems.append("model_cache_source=peer needs a seed, and model_cache_peer_seed is empty (its default is a "
                        "host of the inventory that caches models, and there is none outside the gateways and "
                        "monitoring groups); set model_cache_peer_seed to the host that downloads.")
    elif settings.get('source') == 'peer' and seed not in play_hosts:
        problems.append("model_cache_peer_seed=%s is not one of the play's hosts (%s): the seed downloads for its "
                        "peers in the same run; add %s to the limit (-l), or set model_cache_peer_seed to a host of "
                        "the play." % (json.dumps(seed), ', '.join(play_hosts), seed))
    if settings.get('source') == 'peer':
        for key in ('peer_tls_cert', 'peer_tls_key', 'peer_tls_ca'):
            path = settings.get(key)
            if path and not os.path.isfile(path):
                problems.append('model_cache_%s=%s is not a file on the controller.' % (key, json.dumps(path)))
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
    return with_locks(out, settings)
