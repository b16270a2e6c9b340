# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One engine-neutral serving instance, merged with its profile and checked before any engine renders it.

``INSTANCE_KEYS`` and ``SPECULATIVE_KEYS`` are the keys an instance and its ``speculative`` mapping take, each
with its check (``METHODS``, ``SAMPLERS``); :func:`plain` copies a value into plain data (``NotPlain`` refuses
other types and nesting deeper than ``MAX_NESTING``); :func:`deep_merge` lays an instance over its profile;
``Instance`` is the merged, checked instance whose ``fail()`` names it. plugin_utils/_spec_config.py renders
it for one engine version.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
from typing import NoReturn

from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import ENGINES, SpecConfigError
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_schema import BOOL, DICT, FRACTION, POSINT, STR, choice
from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_profiles import get_profile, PROFILES

METHODS = ('none', 'eagle3', 'draft_target', 'ngram', 'mtp', 'suffix', 'arctic')
SAMPLERS = ('auto', 'torch', 'trtllm')
_ENV_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')


def _port(v):
    return None if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536 else \
        'must be a TCP port (1-65535)'


def _str_list(v):
    return None if isinstance(v, list) and all(isinstance(x, str) for x in v) else 'must be a list of strings'


def _version_text(v):
    return None if isinstance(v, str) and v else 'must be a version string such as "1.2.0rc6" (quote it in YAML)'


INSTANCE_KEYS = {
    'name': STR, 'engine': choice(*ENGINES), 'image': STR, 'engine_version': _version_text, 'profile': STR,
    'model': STR, 'port': _port, 'host': STR, 'env': DICT,
    'max_batch_size': POSINT, 'max_num_tokens': POSINT, 'max_seq_len': POSINT,
    'tensor_parallel_size': POSINT, 'pipeline_parallel_size': POSINT, 'expert_parallel_size': POSINT,
    'gpu_memory_fraction': FRACTION,
    'trust_remote_code': BOOL, 'reasoning_parser': STR, 'tool_parser': STR, 'served_model_name': STR,
    'sampler': choice(*SAMPLERS), 'log_level': STR, 'speculative': DICT, 'llm_api_options': DICT,
    'extra_args': _str_list, 'judged_in_image_only': BOOL,
}

SPECULATIVE_KEYS = {
    'method': choice(*METHODS), 'draft_model': STR, 'max_draft_len': POSINT, 'draft_len_schedule': DICT,
    'ngram_size': POSINT, 'suffix_decoding': BOOL, 'arctic_inference_version': _version_text,
    'options': DICT,
}


# No engine setting nests lists or mappings this deep; a deeper value (JSON delivers a thousand levels) is refused
# before the checks, which recurse, meet it.
MAX_NESTING = 32


class NotPlain(SpecConfigError):
    """A value plain() refuses: ``path`` is where it is (``llm_api_options.kv_cache_config``), ``text`` why."""

    def __init__(self, path, text):
        super(NotPlain, self).__init__('%s %s' % ('the value' if path is None else path, text))
        self.path = path
        self.text = text


def plain(data, path=None, depth=0):
    """A copy made of plain dict/list/str/int/float/bool/None (Ansible passes str subclasses); raises NotPlain for
    a value of another type (a YAML date, a set) or one nested deeper than MAX_NESTING lists or mappings."""
    if isinstance(data, (dict, list, tuple)) and depth >= MAX_NESTING:
        where = path if path is None or len(path) <= 80 else path[:77] + '...'
        raise NotPlain(where, 'nests lists or mappings deeper than %d levels; no engine setting does' % MAX_NESTING)
    if isinstance(data, dict):
        return dict((plain(k, path, depth + 1), plain(v, str(k) if path is None else '%s.%s' % (path, k), depth + 1))
                    for k, v in data.items())
    if isinstance(data, (list, tuple)):
        return [plain(x, '%s[%d]' % (path or '', i), depth + 1) for i, x in enumerate(data)]
    if isinstance(data, bool) or data is None:
        return data
    if isinstance(data, int):
        return int(data)
    if isinstance(data, float):
        return float(data)
    if isinstance(data, str):
        return str(data)
    raise NotPlain(path, 'is a %s, which no instance key takes: give a string, number, boolean, list or mapping '
                         '(got %s)' % (type(data).__name__, vocabulary.show(data)))


def deep_merge(base, override):
    """base updated by override: mappings merge recursively, anything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def schedule_keys(schedule):
    """YAML/Jinja may turn integer keys into strings; '4' -> 4."""
    out = {}
    for k, v in schedule.items():
        if isinstance(k, str) and k.isdigit():
            k = int(k)
        out[k] = v
    return out


class Instance:
    """The merged, checked instance with a fail() that names it."""

    def __init__(self, raw, ignore_keys):
        if not isinstance(raw, dict):
            raise SpecConfigError('an instance must be a mapping, got %s' % type(raw).__name__)
        name = raw.get('name')
        self.name = str(name) if isinstance(name, str) and name else '<unnamed>'
        try:
            raw = plain(raw)
        except NotPlain as exc:
            self.fail('the instance' if exc.path is None else exc.path, exc.text)
        self.warnings = []  # what the rendering changed on purpose, for the filters to show
        profile = raw.get('profile')
        if profile not in (None, ''):
            defaults = get_profile(profile) if isinstance(profile, str) else None
            if defaults is None:
                self.fail('profile', '%s is not a known profile (known: %s)' % (vocabulary.show(profile), ', '.join(sorted(PROFILES))))
            raw = deep_merge(defaults, raw)
        self.profile = profile or None
        data = {}
        for key, value in raw.items():
            if key in ignore_keys or value is None:
                continue
            check = INSTANCE_KEYS.get(key)
            if check is None:
                self.fail(key, 'is not an instance key spec_config knows (known: %s; keys owned elsewhere are '
                          'passed in ignore_keys)' % ', '.join(sorted(INSTANCE_KEYS)))
            problem = check(value)
            if problem:
                self.fail(key, '%s (got %s)' % (problem, vocabulary.show(value)))
            data[key] = value
        for key in ('name', 'engine', 'model'):
            if key not in data:
                self.fail(key, 'is required')
        if not vocabulary.is_name(data['name']):
            self.fail('name', 'must be %s (got %s)' % (vocabulary.NAME_WORDS, vocabulary.show(data['name'])))
        spec = dict((k, v) for k, v in data.get('speculative', {}).items() if v is not None)
        for key, value in spec.items():
            check = SPECULATIVE_KEYS.get(key)
            if check is None:
                self.fail('speculative.%s' % (key,), 'is not a speculative key (known: %s; raw engine keys go in '
                          'speculative.options)' % ', '.join(sorted(SPECULATIVE_KEYS)))
            if key == 'draft_len_schedule' and isinstance(value, dict):
                value = spec[key] = schedule_keys(value)
            problem = check(value)
            if problem:
                self.fail('speculative.' + key, '%s (got %s)' % (problem, vocabulary.show(value)))
        spec.setdefault('method', 'none')
        data['speculative'] = spec
        for key, value in data.get('env', {}).items():
            if not isinstance(key, str) or not _ENV_RE.match(key):
                self.fail('env', 'has %r, which is not an environment variable name' % (key,))
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                self.fail('env.%s' % key, 'must be a string (quote "1", "true"), got %r' % (value,))
        self.data = data

    def get(self, key, default=None):
        return self.data.get(key, default)

    def fail(self, key, text) -> NoReturn:
        raise SpecConfigError("instance '%s': %s %s" % (self.name, key, text))
