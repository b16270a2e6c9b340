# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine truth from upstream: the generated per-version tables and a validator that reads them.

``engine_tables/<engine>-<version>.json`` are written by ``scripts/engine_tables.py`` from the engines'
own source (TensorRT-LLM ``llm_args.py``: ``TorchLlmArgs`` and every config class it reaches; vLLM:
``SpeculativeConfig``). ``engine_tables/index.json`` lists them, with the versions that could not be
sourced. Nothing here is written by hand: a new engine version is a new run of the generator.

Which table governs a version: its own, and only its own. TensorRT-LLM's ``.postN`` releases are their base
release (``1.2.0rc6.post1`` -> ``1.2.0rc6``: upstream publishes one set of pages for both); vLLM's ``0.9.0.1`` is a
release of its own. Consecutive releases with identical facts share one file, which lists the others in
``also_releases``; ``load_table`` returns it under the release asked for.

A supported release without a table is refused, unless its instance sets ``judged_in_image_only: true``: then
the newest table below it (or the oldest, for a release older than every table) supplies the names the config
is rendered with, its checks are skipped, and a warning names the release and says that the engine check in its
image is what judges it (see ``borrowed``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import (
    ENGINE_TITLES,
    TRTLLM,
    EngineVersion,
    SpecConfigError,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import show

TABLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'engine_tables')

_CACHE: dict[str, Any] = {}


def _load(name):
    if name not in _CACHE:
        with open(os.path.join(TABLE_DIR, name), encoding='utf-8') as handle:
            _CACHE[name] = json.load(handle)
    return _CACHE[name]


def index():
    return _load('index.json')


def table_versions(engine):
    """The sourced versions of an engine, oldest first."""
    versions = list(index().get('tables', {}).get(engine, {}))
    return sorted(versions, key=lambda v: EngineVersion(engine, v).key)


def load_table(engine, version_text):
    """The table of a tabled release, under that release's version and provenance (a shared file holds the first
    release's and lists the others in ``also_releases``)."""
    table = _load(index()['tables'][engine][version_text]['file'])
    if table['version'] == version_text:
        return table
    return dict(table, version=version_text, source=table['also_releases'][version_text])


def _own_version(version):
    """The text a release's own table is listed under."""
    return version.base if version.engine == TRTLLM else version.text


def has_table(version):
    return _own_version(version) in index().get('tables', {}).get(version.engine, {})


def borrowed(version):
    """Whether an EngineVersion is rendered with another release's table (no table of its own, and its instance
    opted into being judged in its image only)."""
    return not has_table(version) and getattr(version, 'judged_in_image', False)


def table_for(version):
    """The table that governs an EngineVersion: its own.

    Without one, SpecConfigError names the release and the two ways on (a table from the generator, or
    ``judged_in_image_only``); with that opt-in (``version.judged_in_image``), the newest table below the release,
    or the oldest when every table is newer, whose checks the callers then skip (``borrowed``).
    """
    engine = version.engine
    if has_table(version):
        return load_table(engine, _own_version(version))
    versions = table_versions(engine)
    if not getattr(version, 'judged_in_image', False) or not versions:
        why = index().get('not_sourced', {}).get(engine, {}).get(_own_version(version))
        raise SpecConfigError(
            '%s %s has no engine table of its own (%stabled: %s), so the controller cannot judge its configuration; '
            'generate its table (scripts/engine_tables.py), use a tabled release, or set judged_in_image_only: true '
            'on the instance to have the engine check in its image judge it alone'
            % (ENGINE_TITLES[engine], version.text, ('%s; ' % why) if why else '', version_ranges(engine, versions)))
    below = [v for v in versions if EngineVersion(engine, v) <= version]
    return load_table(engine, (below or versions[:1])[-1])


def version_ranges(engine, versions):
    """Tabled versions in few words: a run of four or more consecutive tabled releases as 'first to last'."""
    ordered = table_versions(engine)
    runs: list[list[str]] = []
    for text in sorted(versions, key=ordered.index):
        if runs and ordered.index(text) == ordered.index(runs[-1][-1]) + 1:
            runs[-1].append(text)
        else:
            runs.append([text])
    return ', '.join(', '.join(run) if len(run) < 4 else '%s to %s' % (run[0], run[-1]) for run in runs)


def decoding_class(table, decoding_type, backend='pytorch'):
    """The class a TensorRT-LLM table's ``speculative_config`` dispatch builds for a decoding_type on a backend
    (its backend overrides first: 1.3 builds Eagle as Eagle3DecodingConfig on pytorch), or None when the
    table's dispatch has no such decoding_type or the class is not tabled."""
    dispatch = table['dispatch']['TorchLlmArgs.speculative_config']
    override = dispatch.get('backend_overrides', {}).get(decoding_type, {})
    cls = override.get(backend) or override.get('*') or dispatch['classes'].get(decoding_type)
    return cls if cls in table['classes'] else None


def trtllm_cli_rows(table):
    """{option name: takes a value} of the table's trtllm-serve options, aliases included."""
    rows = {}
    for name, opt in table['cli']['options'].items():
        for key in [name] + opt.get('aliases', []):
            rows[key] = not opt.get('flag')
    return rows


def cli_choices(table, option):
    """The choices of a trtllm-serve option in the table (given by any of its names): a list, [] for an
    option without choices, None when the version has no such option."""
    for name, opt in table['cli']['options'].items():
        if option == name or option in opt.get('aliases', []):
            return list(opt.get('choices') or [])
    return None


def cli_elsewhere(engine, option):
    """The tabled versions whose CLI has the option (for hints)."""
    return [v for v in table_versions(engine)
            if option in trtllm_cli_rows(load_table(engine, v))] if engine == TRTLLM else []


# ----------------------------------------------------------------------------------- types

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def describe(ty, table):
    """A short human text for a type of the table."""
    kind = ty['kind']
    if kind == 'union':
        parts = [describe(o, table) for o in ty['options'] if o['kind'] != 'none']
        text = ' or '.join(parts) if parts else 'null'
        return text + (' (or null)' if any(o['kind'] == 'none' for o in ty['options']) else '')
    if kind == 'literal':
        return 'one of: %s' % ', '.join(str(v) for v in ty['values'])
    if kind == 'enum':
        return 'one of: %s' % ', '.join(str(v) for v in table['enums'].get(ty['name'], []))
    if kind == 'list':
        return 'a list of %s' % describe(ty['item'], table)
    if kind == 'dict':
        return 'a mapping of %s to %s' % (describe(ty['key'], table), describe(ty['value'], table))
    if kind == 'class':
        return 'a mapping (%s)' % ty['name']
    return {'bool': 'true or false', 'int': 'an integer', 'float': 'a number', 'str': 'a string',
            'path': 'a path string', 'none': 'null', 'any': 'any value'}.get(kind, 'a %s value' % ty.get('name', kind))


def matches(ty, value, table):
    """True when value has the type (structure only; nested classes are checked by the validator)."""
    kind = ty['kind']
    if kind in ('any', 'opaque'):
        return True
    if kind == 'none':
        return value is None
    if kind == 'bool':
        return isinstance(value, bool)
    if kind == 'int':
        return _is_int(value)
    if kind == 'float':
        return _is_num(value)
    if kind in ('str', 'path'):
        return isinstance(value, str)
    if kind == 'literal':
        return any(value == v and type(value) is type(v) for v in ty['values'])
    if kind == 'enum':
        return value in table['enums'].get(ty['name'], []) and not isinstance(value, bool)
    if kind == 'union':
        return any(matches(o, value, table) for o in ty['options'])
    if kind == 'list':
        return isinstance(value, list) and all(matches(ty['item'], x, table) for x in value)
    if kind == 'dict':
        if not isinstance(value, dict):
            return False
        key_ty = ty['key']
        for k, v in value.items():
            if not (matches(key_ty, k, table) or (key_ty['kind'] == 'int' and isinstance(k, str) and k.isdigit())):
                return False
            if not matches(ty['value'], v, table):
                return False
        return True
    if kind == 'class':
        return isinstance(value, dict)
    return False


def _classes_in(ty):
    opts = ty['options'] if ty['kind'] == 'union' else [ty]
    return [o['name'] for o in opts if o['kind'] == 'class']


def example_value(ty, table):
    """A value of the type (for tests and docs): the first option that has one."""
    kind = ty['kind']
    if kind == 'union':
        for opt in ty['options']:
            if opt['kind'] != 'none':
                return example_value(opt, table)
        return None
    return {
        'bool': True, 'int': 1, 'float': 0.5, 'str': 'x', 'path': '/x', 'none': None, 'any': 'x', 'opaque': 'x',
        'literal': ty.get('values', [None])[0], 'enum': (table['enums'].get(ty.get('name'), []) or [None])[0],
        'list': [example_value(ty['item'], table)] if kind == 'list' else None,
        'dict': {example_value(ty['key'], table): example_value(ty['value'], table)} if kind == 'dict' else None,
        'class': {},
    }[kind]


def accepted_names(table, cls):
    """{accepted key: field name} of a class: a field's ``accepted_names`` where the table records them
    (pydantic without ``populate_by_name`` takes an aliased field only under its aliases), else its
    name and aliases."""
    out = {}
    for name, field in table['classes'][cls]['fields'].items():
        for key in field.get('accepted_names') or [name] + field.get('aliases', []):
            out[key] = name
    return out


def value_rule_problem(field, value):
    """What upstream's validator says of a value, for the rules the tables name (None when fine)."""
    rule = field.get('value_rule')
    if not rule:
        return None
    if rule['rule'] == 'enum_name_case_insensitive':
        # upstream: the field validator looks up ``value.upper()`` among the enum's member names
        if isinstance(value, str) and value.upper() in rule['names']:
            return None
        return 'must be a %s name, in any case: one of %s' % (rule['enum'], ', '.join(rule['names']))
    return None


class TableValidator:
    """Checks a mapping against one class of a table: unknown keys, types, literals, bounds, nesting.

    ``fail(path, text)`` raises; ``title`` is e.g. ``TensorRT-LLM 1.3.0rc3``. Unknown keys of a class
    that upstream forbids extras for are upstream errors; of a class that ignores extras they are
    refused as project policy (a typo must not be dropped silently), and the message says which.
    """

    def __init__(self, table, version, fail, backend='pytorch', hints=None):
        self.table = table
        self.version = version
        self.fail = fail
        self.backend = backend
        self.hints = hints  # callable(class_name, key) -> text about other versions, or None

    @property
    def title(self):
        return '%s %s' % (ENGINE_TITLES[self.table['engine']], self.version.text)

    def fields_of(self, cls):
        """{accepted key: field name} of a class, aliases included."""
        return accepted_names(self.table, cls)

    def check_class(self, path, cls, data, skip=(), root=False):
        entry = self.table['classes'][cls]
        accepted = self.fields_of(cls)
        for key in sorted(data, key=str):
            if key in skip:
                continue
            kpath = '%s%s' % (path, key)
            if key not in accepted:
                self.unknown(kpath, cls, key, entry)
            self.check_field(kpath, cls, accepted[key], data[key])
        if not root:
            for name, field in sorted(entry['fields'].items()):
                names = field.get('accepted_names') or [name] + field.get('aliases', [])
                if field.get('required') and not any(n in data for n in names) and name not in skip:
                    self.fail('%s%s' % (path, name), 'is required by %s in %s' % (cls, self.title))

    def unknown(self, path, cls, key, entry):
        allowed = ', '.join(sorted(self.fields_of(cls)))
        hint = self.hints(cls, key) if self.hints else ''
        if entry['extra'] == 'forbid':
            why = '%s rejects unknown keys in %s (extra="forbid")' % (self.title, cls)
        else:
            why = ('%s would silently ignore it (%s does not forbid extra keys); refused as project policy so a '
                   'typo cannot pass' % (self.title, cls))
        self.fail(path, 'is not a field of %s in %s%s: %s; allowed: %s'
                  % (cls, self.title, (' (%s)' % hint) if hint else '', why, allowed))

    def check_field(self, path, cls, name, value):
        field = self.table['classes'][cls]['fields'][name]
        ty = field['type']
        dispatch = self.table.get('dispatch', {}).get('%s.%s' % (cls, name))
        if dispatch is not None and isinstance(value, dict):
            self.check_dispatch(path, dispatch, value)
            return
        if not matches(ty, value, self.table):
            self.fail(path, 'must be %s in %s (got %r)' % (describe(ty, self.table), self.title, value))
        problem = value_rule_problem(field, value)
        if problem:
            self.fail(path, '%s in %s (got %r; upstream validator)' % (problem, self.title, value))
        bounds = field.get('bounds') or {}
        if _is_num(value):
            for op, limit in sorted(bounds.items()):
                ok = {'ge': value >= limit, 'gt': value > limit, 'le': value <= limit, 'lt': value < limit}[op]
                if not ok:
                    sign = {'ge': '>=', 'gt': '>', 'le': '<=', 'lt': '<'}[op]
                    self.fail(path, 'must be %s %s in %s (got %r)' % (sign, limit, self.title, value))
        mapped = [o['value']['name'] for o in (ty['options'] if ty['kind'] == 'union' else [ty])
                  if o['kind'] == 'dict' and o['value']['kind'] == 'class']
        if isinstance(value, dict) and len(mapped) == 1:
            # a mapping of names to one class (1.3.0rc28's multimodal_config.encoder_cuda_graph): each value is one
            for key, item in sorted(value.items(), key=lambda kv: str(kv[0])):
                if isinstance(item, dict):
                    self.check_class('%s.%s.' % (path, key), mapped[0], item)
            return
        if isinstance(value, dict):
            classes = _classes_in(ty)
            if len(classes) == 1:
                self.check_class(path + '.', classes[0], value)
            elif len(classes) > 1:
                errors = []
                for cname in classes:
                    try:
                        self.check_class(path + '.', cname, value)
                        return
                    except ValueError as exc:
                        errors.append(str(exc))
                self.fail(path, 'matches none of %s in %s' % (', '.join(classes), self.title))

    def dispatch_class(self, path, dispatch, value):
        """The class a from_dict dispatch picks for value (raises when it picks none)."""
        key = dispatch['key']
        kind = value.get(key)
        classes = dispatch['classes']
        inferred = dispatch.get('inferred')
        if kind is None and inferred:
            # a before-validator fills in a missing tag (1.3.0rc18's cuda_graph_config: encode when an encoder key is
            # set, else decode)
            kind = inferred['value'] if any(value.get(k) not in (None, 0) for k in inferred['when_any']) \
                else inferred['otherwise']
        if kind is None:
            self.fail('%s.%s' % (path, key), 'is required (one of: %s)' % ', '.join(sorted(classes)))
        if not isinstance(kind, str):
            self.fail('%s.%s' % (path, key), 'must be a string, one of: %s (got %s)' % (', '.join(sorted(classes)), show(kind)))
        lookup = dict((k.lower(), v) for k, v in classes.items()) if dispatch.get('case_insensitive') else classes
        probe = kind.lower() if dispatch.get('case_insensitive') and isinstance(kind, str) else kind
        override = dispatch.get('backend_overrides', {}).get(kind, {})
        cls = override.get(self.backend) or override.get('*') or lookup.get(probe)
        if cls is None:
            self.fail('%s.%s' % (path, key), "'%s' is not a %s of %s (accepted: %s)"
                      % (kind, key, self.title, ', '.join(sorted(classes))))
        rule = self.table['classes'][cls].get('backends') or {}
        if (rule.get('unsupported') and self.backend in rule['unsupported']) or (
                rule.get('supported') and self.backend not in rule['supported']):
            self.fail('%s.%s' % (path, key), "'%s' (%s) does not support the %s backend in %s"
                      % (kind, cls, self.backend, self.title))
        return cls

    def check_dispatch(self, path, dispatch, value):
        cls = self.dispatch_class(path, dispatch, value)
        self.check_class(path + '.', cls, value, skip=(dispatch['key'],))


def other_versions_hint(engine, current_version):
    """A hints callable: where else (in the sourced tables) a class has the key."""
    def hint(cls, key):
        found = []
        for text in table_versions(engine):
            if text == current_version:
                continue
            table = load_table(engine, text)
            entry = table['classes'].get(cls)
            if entry is None:
                continue
            if key in accepted_names(table, cls):
                found.append(text)
        if not found:
            return ''
        return 'accepted by the sourced %s %s table%s' % (ENGINE_TITLES[engine], version_ranges(engine, found),
                                                          's' if len(found) > 1 else '')
    return hint
