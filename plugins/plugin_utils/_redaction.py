# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one redaction rule: what is a secret, and how a result or a message is made free of it.

A secret is the value of an option the roles' argument specs mark ``no_log`` (a top-level setting such as
``inference_server_secret_env``, or a key of the dicts of a list setting, such as an instance's ``api_key``).
The specs are the one owner of that mark (plugin_utils/_role_spec.py); nothing here lists a secret by name.

- :func:`secret_keys` gives the keys that are secret wherever a dict holds them (``api_key``): a value
  returned to a play (the settings action's typed settings) loses them (:func:`without_secret_keys`),
  whatever option the dict came in (``draft_sweep_instances`` has no sub-spec of its own).
- :func:`secret_values` gives every secret string in a set of variables; :func:`scrub` replaces each in a
  message or a structure with :data:`HIDDEN`, so that a refusal quoting a value (an instance, a list) shows
  no secret even when the secret sits beside the bad value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec

HIDDEN = '********'
# a value this short is no secret anyone would use, and replacing it would mangle every message
MIN_SECRET_CHARS = 6


def _options():
    for role in role_spec.roles():
        for name, option in role_spec.load_options(role).items():
            yield name, option or {}


def secret_options():
    """The names of the top-level settings marked no_log, sorted."""
    return sorted(name for name, option in _options() if option.get('no_log'))


def secret_keys():
    """The keys marked no_log in the sub-options of any setting (an instance's api_key), sorted."""
    keys = set()

    def walk(options):
        for key, sub in (options or {}).items():
            sub = sub or {}
            if sub.get('no_log'):
                keys.add(key)
            walk(sub.get('options'))
    for option in dict(_options()).values():
        walk(option.get('options'))
    return sorted(keys)


def _strings(value):
    """Every string leaf of a value (dict values and list items, recursively)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def secret_values(variables, options=None, keys=None):
    """Every secret string in ``variables`` (a name -> value mapping): the leaves of each no_log setting,
    and the values of the secret keys anywhere in any other value. Longest first, so that a secret holding
    another is replaced whole."""
    options = secret_options() if options is None else options
    keys = secret_keys() if keys is None else keys
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key in keys:
                    found.update(_strings(item))
                else:
                    walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
    for name, value in variables.items():
        if name in options:
            found.update(_strings(value))
        else:
            walk(value)
    return sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=lambda s: (-len(s), s))


def without_secret_keys(value, keys=None):
    """The value with every secret key removed from every dict in it."""
    keys = secret_keys() if keys is None else keys
    if isinstance(value, dict):
        return dict((k, without_secret_keys(v, keys)) for k, v in value.items() if k not in keys)
    if isinstance(value, list):
        return [without_secret_keys(v, keys) for v in value]
    return value


def scrub(value, secrets):
    """The value (a string, or a structure of them) with each secret string replaced by HIDDEN."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, HIDDEN)
        return value
    if isinstance(value, dict):
        return dict((k, scrub(v, secrets)) for k, v in value.items())
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value
