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

import re

from ansible.module_utils.six import string_types

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

# --------------------------------------------------------------------------- secrets only in secret fields
# A secret is given in a no_log setting (the instance's api_key, inference_server_secret_env, model_cache_hf_token),
# which the role writes only to a 0600 file and never shows. An engine's command line (extra_args, docker_args) is in
# the world-readable unit file and the play's output, and the public environment (inference_server_env, an
# instance's env) is shown in the play's output too: a name there that says it holds a secret is refused, without its value.


# Words of a flag's or a variable's name (split at - and _) that say it holds a secret.
SECRET_WORDS = ('secret', 'password', 'passwd', 'apikey')


# TOKEN says so at the end of a name that counts no tokens (not --max-prompt-adapter-token, ..._MS_PER_TOKEN).
_COUNTING = ('max', 'min', 'num', 'per')


# A name ending so is the place of a secret (HF_TOKEN_PATH, --api-key-file), not the secret.
_PLACES = ('file', 'path', 'dir')


def _name_words(name):
    return [w for w in re.split(r'[-_]+', name.lower()) if w] if isinstance(name, string_types) else []


def secret_shaped(name):
    """Whether a flag (``--hf-token``) or an environment variable (``NGC_API_KEY``) is named as a secret: a word
    of its name (split at - and _) is SECRET, PASSWORD, PASSWD or APIKEY, or API then KEY, or the name ends in
    TOKEN and counts no tokens (MAX, MIN, NUM, PER); never a name ending in FILE, PATH or DIR. Words only:
    ``--tokenizer``, ``--max-num-batched-tokens``, ``TIKTOKEN_ENCODINGS_BASE`` are no secrets."""
    words = _name_words(name)
    if not words or words[-1] in _PLACES:
        return False
    if any(w in SECRET_WORDS for w in words) or any(a == 'api' and b == 'key' for a, b in zip(words, words[1:])):
        return True
    return words[-1] == 'token' and not any(w in _COUNTING for w in words)


def secret_home(name, engine_key):
    """The no_log setting a secret named so belongs in. ``engine_key``: the name the engine's own API key has
    there (--api-key on vLLM's command line, VLLM_API_KEY in its environment)."""
    words = _name_words(name)
    if name == engine_key:
        return "the instance's api_key (no_log; the role writes it as VLLM_API_KEY to the 0600 engine.env)"
    if words and words[-1] == 'token' and ('hf' in words or 'hub' in words or 'hugging' in words):
        return ('model_cache_hf_token (the engines run offline, HF_HUB_OFFLINE=1, on what model_cache downloads), or '
                'inference_server_secret_env as HF_TOKEN (no_log, written only to the 0600 engine.env)')
    return 'inference_server_secret_env (no_log, written only to the 0600 engine.env)'


def _flag(word):
    """The option of a command-line word (--api-key of --api-key=x), or None for a word that is no option."""
    return word.partition('=')[0] if isinstance(word, string_types) and word.startswith('-') else None


def _secret_flags(words):
    """The secret-shaped options of a list of command-line words, as given (--api-key, --hf_token)."""
    return [f for f in (_flag(w) for w in (words if isinstance(words, list) else [])) if secret_shaped(f)]


def secret_args(words):
    """An instance's extra_args: no secret-shaped option (--api-key, --hf-token, --password, ...), as
    ``--flag=value`` or ``--flag value``; the refusal names the option and the no_log setting to use instead."""
    flags = _secret_flags(words)
    if not flags:
        return None
    return ('has %s, a secret on the engine command line, which is in the world-readable unit file and the '
            "play's output; give it in %s" % (flags[0], secret_home(flags[0].lstrip('-').replace('_', '-'), 'api-key')))


def secret_env_names(env):
    """A public environment (inference_server_env, an instance's env): no secret-shaped name (HF_TOKEN,
    HUGGING_FACE_HUB_TOKEN, NGC_API_KEY, ...*PASSWORD*, ...*SECRET*...); the refusal names each and where it belongs,
    never its value."""
    bad = sorted(k for k in env if secret_shaped(k)) if isinstance(env, dict) else []
    if not bad:
        return None
    return ("has %s, named as %s; this environment is no secret, the play shows it in its output: give %s"
            % (', '.join(bad), 'secrets' if len(bad) > 1 else 'a secret',
               '; '.join('%s in %s' % (k, secret_home(k, 'VLLM_API_KEY')) for k in bad)))


def _masked_assignment(text):
    """NAME=value with the value hidden when NAME is named as a secret (docker's -e HF_TOKEN=...)."""
    name, sep, _value = text.partition('=')
    return '%s=%s' % (name, HIDDEN) if sep and secret_shaped(name) else text


def masked(value):
    """A value as a refusal may show it: in a list of words, each value of a secret-shaped option (--api-key=x,
    --hf-token x) and of a secret-named assignment (-e HF_TOKEN=x, --env=HF_TOKEN=x) hidden; in a mapping, the
    value of each secret-shaped key (an instance's api_key, an env's HF_TOKEN) hidden; recursively."""
    if isinstance(value, dict):
        return dict((k, HIDDEN if secret_shaped(k) and v not in (None, '') else masked(v))
                    for k, v in value.items())
    if not isinstance(value, list):
        return value
    out, hide_next = [], False
    for word in value:
        flag = _flag(word)
        if not isinstance(word, string_types):
            out.append(masked(word))
        elif hide_next and flag is None:
            out.append(HIDDEN)
        elif flag is not None and secret_shaped(flag):
            out.append('%s=%s' % (flag, HIDDEN) if '=' in word else word)
        elif flag is not None and '=' in word:
            out.append('%s=%s' % (flag, _masked_assignment(word.partition('=')[2])))
        else:
            out.append(_masked_assignment(word))
        hide_next = flag is not None and secret_shaped(flag) and '=' not in word
    return out


def without_secrets(value, option):
    """The value less the keys of its no_log suboptions (an instance's api_key), never returned."""
    secret_keys = [k for k, sub in (option.get('options') or {}).items() if (sub or {}).get('no_log')]
    if not secret_keys:
        return value

    def strip(item):
        return dict((k, v) for k, v in item.items() if k not in secret_keys) if isinstance(item, dict) else item
    return [strip(v) for v in value] if isinstance(value, list) else strip(value)
