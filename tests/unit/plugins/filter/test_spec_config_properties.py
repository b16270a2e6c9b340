"""Property tests: for every engine table the collection ships, instances generated from the table itself
(its versions, its TorchLlmArgs / SpeculativeConfig fields and the kinds of their values, its decoding types,
its trtllm-serve and vllm options) and from wrong kinds of values (a string where an integer goes, negative
and huge numbers, nested lists and mappings, None, unicode, unknown keys) go through every entry that takes
a serving instance from the user: the spec_config filter, the settings check of inference_server_instances
(and of the settings that share its shape), the planners of inference_server and rollout, and the monitoring_exporter plan
filters. Each returns its result or refuses with the collection's own error, whose message names the setting;
any other exception (KeyError, TypeError, RecursionError, ...) fails the test, and so does a filter's refusal
that wraps one under another setting's name.

The tables are enumerated from the code that loads them (spec_tables.table_versions, over index.json), and a
test keeps every table file listed there, so a new table is covered the day it lands. Runs are reproducible
(derandomize) and write no example database; SPECDEC_PROPERTY_EXAMPLES scales the examples of each test.
"""

from __future__ import annotations

import functools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.monitoring_exporter import plan as exporter_plan
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import inference_server as inference_server_role
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import rollout as rollout_role
from ansible_collections.specdec.serve.plugins.filter.spec_config import spec_config
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as role_settings
from ansible_collections.specdec.serve.plugins.plugin_utils import _spec_tables as spec_tables
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import DEFAULT_IGNORE_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_instance import (
    INSTANCE_KEYS,
    MAX_NESTING,
    METHODS,
    SAMPLERS,
    SPECULATIVE_KEYS,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_profiles import PROFILES
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_schema import ARCTIC_SPEC_KEYS
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import (
    ARCTIC_INFERENCE_VLLM_PINS,
    ENGINES,
    TRTLLM,
)

# every table the collection ships, from the code that loads the tables: one release per file (releases that share
# a file have the same facts; the file is named for its first)
TABLES = [(engine, text) for engine in ENGINES for text in spec_tables.table_versions(engine)
          if spec_tables.index()['tables'][engine][text]['file'] == '%s-%s.json' % (engine, text)]
# 60 per table: the 37 table files get 2,220 examples in all, about the 1,950 that the 13 tables shipped before
# every vLLM release had its own got at 150 each; SPECDEC_PROPERTY_EXAMPLES=1000 for a deeper run
EXAMPLES = int(os.environ.get('SPECDEC_PROPERTY_EXAMPLES', '60'))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _one_per_spec(names):
    """One setting of each argument spec among these (the settings NESTED_AS names share the rules of
    inference_server_instances; those with the same suboptions are checked alike)."""
    found = {}
    for var in names:
        found.setdefault(repr(sorted((role_spec.option(var).get('options') or {}).items())), var)
    return list(found.values())


# the settings whose value is a list of instances
INSTANCE_SETTINGS = _one_per_spec(['inference_server_instances'] + sorted(role_settings.NESTED_AS))


def test_every_shipped_table_is_enumerated():
    """index.json lists every table file, so TABLES (what the tests below run over) is every table shipped."""
    files = sorted(f for f in os.listdir(spec_tables.TABLE_DIR) if f.endswith('.json') and f != 'index.json')
    listed = sorted(spec_tables.index()['tables'][engine][text]['file'] for engine, text in TABLES)
    assert files == listed and len(TABLES) >= 13
    assert {engine for engine, _text in TABLES} == set(ENGINES)


# --------------------------------------------------------------------------- wrong kinds of values

ODD_STRINGS = ['', ' ', '-1', '0', '1', '1e309', 'nan', 'true', 'null', '..', '../x', 'a/../b', '/', 'org/name/x',
               'é', '模型', '\U0001f600', '\n', 'a\x00b', '%s', '{{ x }}', "a'b", 'x' * 300]
JUNK_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([-1, 0, 2 ** 31, 2 ** 63, 10 ** 30, -(10 ** 30)]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10), st.sampled_from(ODD_STRINGS),
    st.dates(), st.sets(st.integers(0, 3), max_size=2), st.tuples(st.integers(0, 3)))  # YAML dates; Python-only types
HASHABLE_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 2 ** 40), st.floats(allow_nan=False),
                          st.text(max_size=8), st.sampled_from(ODD_STRINGS))
JUNK = st.recursive(JUNK_SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                         st.dictionaries(HASHABLE_JUNK, kids, max_size=3)),
                    max_leaves=6)


@st.composite
def deep(draw):
    """A list or mapping nested past spec_config's MAX_NESTING (test_deeply_nested_values goes to the depths JSON
    still delivers)."""
    depth = draw(st.integers(min_value=MAX_NESTING - 2, max_value=MAX_NESTING + 30))
    shape = draw(st.sampled_from(['list', 'dict', 'both']))
    value = draw(JUNK_SCALARS)
    for level in range(depth):
        value = [value] if shape == 'list' or (shape == 'both' and level % 2) else {'k': value}
    return value


def mostly(good, bad=None, odds=3):
    """Usually (odds to 1) a value of the right kind, sometimes a wrong one. (st.one_of would not do: it draws
    each distinct branch alike, repeated ones included.)"""
    bad = WRONG if bad is None else bad
    return st.sampled_from([True] * odds + [False]).flatmap(lambda right: good if right else bad)


WRONG = mostly(JUNK, deep(), odds=7)


# --------------------------------------------------------------------------- values of a table's types

class TableValues:
    """Strategies for the values of one table's fields, from the table's own type descriptions."""

    def __init__(self, table):
        self.table = table
        self._classes = {}

    def of(self, ty, depth=0):
        kind = ty['kind']
        if kind == 'union':
            return st.one_of([self.of(option, depth) for option in ty['options']])
        if kind == 'bool':
            return st.booleans()
        if kind == 'int':
            return st.one_of(st.integers(0, 64), st.integers(), st.sampled_from([-1, 2 ** 63]))
        if kind == 'float':
            return st.one_of(st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True), st.integers(-2, 2))
        if kind in ('str', 'path'):
            return st.one_of(st.sampled_from(['auto', 'x', '/x', 'TorchSampler']), st.text(max_size=8))
        if kind == 'literal':
            return st.sampled_from(ty['values'])
        if kind == 'enum':
            values = list(self.table['enums'].get(ty['name']) or ['x'])
            return st.sampled_from(values + [str(v).lower() for v in values])
        if kind == 'list':
            return st.lists(self.of(ty['item'], depth + 1), max_size=3)
        if kind == 'dict':
            key = self.of(ty['key'], depth + 1) if ty['key']['kind'] in ('int', 'str', 'literal', 'enum') else HASHABLE_JUNK
            return st.dictionaries(key, self.of(ty['value'], depth + 1), max_size=3)
        if kind == 'class':
            return self.of_class(ty['name'], depth + 1)
        if kind == 'none':
            return st.none()
        return JUNK  # any, opaque

    def of_class(self, cls, depth=0):
        """A mapping of some of the class's accepted keys (aliases included), each with a value of its type."""
        if depth > 2 or cls not in self.table['classes']:
            return st.just({})
        key = (cls, depth)
        if key not in self._classes:
            fields = self.table['classes'][cls]['fields']
            accepted = spec_tables.accepted_names(self.table, cls)
            values = {}
            for name, field_name in accepted.items():
                dispatch = self.table.get('dispatch', {}).get('%s.%s' % (cls, field_name))
                values[name] = mostly(self.dispatched(dispatch, depth) if dispatch else self.of(fields[field_name]['type'], depth))
            names = sorted(values)
            self._classes[key] = st.lists(st.sampled_from(names), unique=True, max_size=3).flatmap(
                lambda chosen: st.fixed_dictionaries(dict((n, values[n]) for n in chosen)))
        return self._classes[key]

    def dispatched(self, dispatch, depth=0):
        """A mapping for a from_dict dispatch: its key (a decoding_type, any case, or a wrong one) and the fields
        of the class it picks."""
        kinds = sorted(dispatch['classes'])
        kind = mostly(st.sampled_from(kinds + [k.lower() for k in kinds] + ['Eagle3', 'Eagle']))

        def build(name):
            cls = dispatch['classes'].get(name, dispatch['classes'][kinds[0]])
            return st.tuples(self.of_class(cls, depth + 1), st.booleans()).map(
                lambda pair: dict(pair[0], **{dispatch['key']: name}) if pair[1] or not pair[0] else pair[0])
        return kind.flatmap(lambda name: build(name) if isinstance(name, str) else st.just({dispatch['key']: name}))


def cli_words(table):
    """extra_args: the table's own trtllm-serve / vllm serve options (aliases too) with values, and wrong words."""
    options = table.get('cli', {}).get('options', {})  # trtllm: name -> option; vllm: the names
    aliases = [a for opt in options.values() for a in opt.get('aliases', [])] if isinstance(options, dict) else []
    names = sorted(set(list(options) + aliases))
    word = st.one_of(st.sampled_from(names or ['--x']), st.sampled_from(names or ['--x']).map(lambda n: n + '=1'),
                     st.sampled_from(['1', '0.5', 'auto', '--', '-', '--unknown-option', '']), st.text(max_size=6))
    return st.lists(word, max_size=4)


def cli_choice(table, option):
    choices = spec_tables.cli_choices(table, option) if table['engine'] == TRTLLM else None
    return st.sampled_from(choices) if choices else st.sampled_from(['deepseek-r1', 'qwen3', 'info', 'debug'])


def sometimes(draw, odds):
    """True about once in ``odds`` draws (st.integers leans towards its lower bound, st.sampled_from does not)."""
    return draw(st.sampled_from(range(odds))) == 0


@st.composite
def speculative(draw, table, values):
    """speculative: a method, its draft model and lengths, a schedule (usually a valid one), and raw options
    from the table's speculative classes."""
    spec = {'method': draw(mostly(st.sampled_from(METHODS), odds=8))}
    if not sometimes(draw, 3):
        spec['draft_model'] = draw(mostly(st.sampled_from(['org/draft', '/drafts/eagle', 'nvidia/gpt-oss-120b-Eagle3']),
                                          odds=8))
    n = draw(st.sampled_from(range(1, 9)))
    if not sometimes(draw, 5):
        spec['max_draft_len'] = draw(mostly(st.just(n), odds=8))
    if sometimes(draw, 2):
        valid = st.dictionaries(st.integers(2, 256), st.sampled_from(range(n + 1)), max_size=3).map(lambda s: {**s, 1: n})
        any_ints = st.dictionaries(st.one_of(st.integers(-2, 300), st.integers(1, 64).map(str)), st.integers(-1, 70),
                                   max_size=4)
        spec['draft_len_schedule'] = draw(mostly(mostly(valid, any_ints, odds=3)))
    if sometimes(draw, 4):
        spec['ngram_size'] = draw(mostly(st.integers(1, 8)))
    if sometimes(draw, 5):
        spec['suffix_decoding'] = draw(mostly(st.booleans()))
    if sometimes(draw, 5):
        spec['arctic_inference_version'] = draw(mostly(st.sampled_from(sorted(ARCTIC_INFERENCE_VLLM_PINS) + ['9.9.9'])))
    if sometimes(draw, 3):
        if table['engine'] == TRTLLM:
            classes = sorted(set(table['dispatch']['TorchLlmArgs.speculative_config']['classes'].values()))
            spec['options'] = draw(mostly(st.sampled_from(classes).flatmap(lambda cls: values.of_class(cls, 1))))
        else:
            arctic = st.fixed_dictionaries({}, optional=dict((k, st.one_of(st.integers(0, 8), st.floats(0, 1),
                                                                            st.booleans())) for k in ARCTIC_SPEC_KEYS))
            spec['options'] = draw(mostly(mostly(values.of_class(table['root'], 1), arctic, odds=1)))
    return spec


def images(engine, versions):
    repo = 'nvcr.io/nvidia/tensorrt-llm/release' if engine == TRTLLM else 'vllm/vllm-openai'
    return st.sampled_from(['%s:%s%s' % (repo, '' if engine == TRTLLM else 'v', v) for v in versions] +
                           ['%s:latest' % repo, repo])


@functools.lru_cache(maxsize=None)
def instances(engine, text):
    """Instances for the table of (engine, text): the table's versions, fields, options and choices, a named
    profile of the engine at times, and up to two wrong values or unknown keys put anywhere."""
    table = spec_tables.load_table(engine, text)
    values = TableValues(table)
    versions = [text, text + '.post1'] + (['v' + text] if engine != TRTLLM else [])
    other = [e for e in ENGINES if e != engine]
    base = st.fixed_dictionaries({
        'name': mostly(st.one_of(st.sampled_from(['t', 'gpt-oss-120b', 'a.b_c-1']),
                                 st.from_regex(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,20}', fullmatch=True)), odds=8),
        'engine': mostly(st.just(engine), st.sampled_from(other) | WRONG, odds=8),
        'engine_version': mostly(st.sampled_from(versions), st.sampled_from(['1.3', '1.2.0rc3', 'latest']) | WRONG, odds=8),
        'model': mostly(st.sampled_from(['openai/gpt-oss-120b', 'Qwen/Qwen3-0.6B', '/models/m']), odds=8),
        'image': mostly(images(engine, versions), odds=8),
    })
    profiles = sorted(n for n, p in PROFILES.items() if p['instance'].get('engine') == engine)
    typed = {
        'profile': st.sampled_from(profiles) if profiles else st.just('none'),
        'port': st.integers(1, 65535),
        'host': st.sampled_from(['0.0.0.0', '127.0.0.1', '::']),
        'env': st.dictionaries(st.from_regex(r'[A-Z_][A-Z0-9_]{0,8}', fullmatch=True),
                               st.one_of(st.text(max_size=5), st.integers(0, 9)), max_size=2),
        'max_batch_size': st.integers(1, 512), 'max_num_tokens': st.integers(1, 65536),
        'max_seq_len': st.integers(1, 131072),
        'tensor_parallel_size': st.integers(1, 8), 'pipeline_parallel_size': st.integers(1, 4),
        'expert_parallel_size': st.integers(1, 8),
        'gpu_memory_fraction': st.floats(0.05, 1.0),
        'trust_remote_code': st.booleans(),
        'reasoning_parser': cli_choice(table, '--reasoning_parser'),
        'tool_parser': cli_choice(table, '--tool_parser'),
        'log_level': cli_choice(table, '--log_level'),
        'served_model_name': st.sampled_from(['gpt-oss-120b', 'served']),
        'sampler': st.sampled_from(SAMPLERS),
        'speculative': speculative(table, values),
        'llm_api_options': values.of_class(table['root']) if engine == TRTLLM else st.just({}),
        'extra_args': cli_words(table),
        # the keys inference_server owns beside them
        'gpus': st.sampled_from(['all', 'none', [0], [0, 1], '0,1']),
        'state': st.sampled_from(['started', 'absent']),
        'health_timeout': st.integers(1, 86400), 'restart_sec': st.integers(1, 3600),
        'health_generate': st.booleans(), 'volumes': st.just([]), 'docker_args': st.just([]),
        'gpu_request': st.sampled_from(['gpus', 'cdi']), 'api_key': st.sampled_from(['k-0123456789', '']),
        'stack': st.sampled_from(['gpu-stack', 'lab']), 'gpus_per_node': st.integers(1, 8),
    }
    if engine != TRTLLM:
        # TensorRT-LLM's own keys: refused for vLLM, they come only as the unknown or wrong keys below
        for key in ('expert_parallel_size', 'sampler', 'llm_api_options'):
            del typed[key]
    typed = dict((key, mostly(strategy, odds=8)) for key, strategy in typed.items())
    known = {'': sorted(INSTANCE_KEYS) + sorted(DEFAULT_IGNORE_KEYS),
             'speculative': sorted(SPECULATIVE_KEYS),
             'llm_api_options': sorted(spec_tables.accepted_names(table, table['root'])),
             'speculative.options': ['decoding_type', 'max_draft_len', 'method', 'num_speculative_tokens'],
             'env': ['TRTLLM_ENABLE_PDL']}
    keys = dict((place, mostly(st.sampled_from(names), HASHABLE_JUNK, odds=2)) for place, names in known.items())

    @st.composite
    def build(draw):
        inst = draw(base)
        for key in sorted(typed):
            if sometimes(draw, 4):
                inst[key] = draw(typed[key])
        for dummy in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
            place = draw(st.sampled_from(sorted(known)))
            target = inst
            for part in [p for p in place.split('.') if p]:
                if not isinstance(target.get(part), dict):
                    target[part] = {}
                target = target[part]
            target[draw(keys[place])] = draw(WRONG)
        return inst
    return build()


# --------------------------------------------------------------------------- the verdicts

# the first word of a spec_config refusal after "instance '<name>': " is an instance key or a key of the
# engine config it renders (speculative_config.max_draft_len, kv_cache_config.free_gpu_memory_fraction, ...)
CONFIG_ROOTS = set(INSTANCE_KEYS) | {'speculative_config'} | set().union(
    *(spec_tables.accepted_names(spec_tables.load_table(e, t), spec_tables.load_table(e, t)['root'])
      for e, t in TABLES if e == TRTLLM))


def _names_an_instance_key(text, inst):
    given = set(str(k) for k in inst)
    raw = inst.get('llm_api_options')
    if isinstance(raw, dict):
        given.update(str(k) for k in raw)
    spec = inst.get('speculative')
    if isinstance(spec, dict) and isinstance(spec.get('options'), dict):
        given.update(str(k) for k in spec['options'])
    return any(text.startswith(root) and text[len(root):len(root) + 1] in ('', ' ', '.', '[')
               for root in CONFIG_ROOTS | given)


def check_spec_config(inst):
    name = inst.get('name')
    prefix = "spec_config: instance '%s': " % (name if isinstance(name, str) and name else '<unnamed>')
    try:
        out = spec_config(inst)
    except AnsibleFilterError as exc:
        text = str(exc)
        assert text.startswith(prefix), text
        assert _names_an_instance_key(text[len(prefix):], inst), text
        return None
    assert isinstance(out, dict) and out['engine'] in ENGINES and out['command']
    return out


def check_settings(inst):
    for var in INSTANCE_SETTINGS:
        try:
            role_settings.check_value(var, [inst])
        except role_settings.SettingsError as exc:
            assert exc.errors and all(e.startswith(var) for e in exc.errors), exc.errors


def check_plans(inst):
    try:
        inference_server_role.PLANNERS['plan']({}, None, {'vars': {'inference_server_instances': [inst]}})
    except PlanRefusal as exc:
        assert exc.errors and all(line.startswith('inference_server_instances') for line in exc.errors), exc.errors
    try:
        rollout_role.PLANNERS['plan']({'keep_sweep_winners': False}, None, {'vars': {'inference_server_instances': [inst]}})
    except PlanRefusal as exc:
        assert exc.errors and all(line.startswith('inference_server_instances: ') for line in exc.errors), exc.errors


def check_monitoring(inst):
    """The exporter's configuration reads the engine, port and profile of each instance."""
    try:
        exporter_plan({'instances': [inst]}, ctx={'host': '10.0.0.1'})
    except PlanRefusal as exc:
        assert exc.errors[0].startswith('monitoring_exporter_instances'), str(exc)


@pytest.mark.parametrize('engine,text', TABLES, ids=['%s-%s' % t for t in TABLES])
@PROPERTY
@given(data=st.data())
def test_every_entry_gives_a_verdict_on_instances_of_the_table(engine, text, data):
    inst = data.draw(instances(engine, text), label='instance')
    check_spec_config(inst)
    check_settings(inst)
    check_plans(inst)
    check_monitoring(inst)


@pytest.mark.parametrize('depth', [MAX_NESTING - 1, MAX_NESTING, 300, 600, 900])
@pytest.mark.parametrize('where', ['name', 'env', 'llm_api_options.kv_cache_config', 'speculative.options', 'volumes'])
def test_deeply_nested_values(depth, where):
    """As deep as JSON delivers a value (json.loads takes these), every entry refuses it, or takes it where the
    depth is one a setting can have; none of them recurses into a RecursionError."""
    value = json.loads('[' * depth + '1' + ']' * depth)
    inst = {'name': 't', 'engine': 'trtllm', 'engine_version': '1.2.1', 'model': 'a/b',
            'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.2.1'}
    target = inst
    for part in where.split('.')[:-1]:
        target = target.setdefault(part, {})
    target[where.split('.')[-1]] = value
    if depth >= MAX_NESTING:
        with pytest.raises(AnsibleFilterError, match=r"^spec_config: instance '[^']+': %s\b.* nests lists or mappings deeper "
                                                     r"than %d levels" % (where.split('.')[0], MAX_NESTING)):
            spec_config(inst)
    else:
        check_spec_config(inst)
    check_settings(inst)
    check_plans(inst)
    check_monitoring(inst)


TRT = {'name': 't', 'engine': 'trtllm', 'engine_version': '1.3.0rc3', 'model': 'a/b',
       'image': 'nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc3'}
VLLM = {'name': 't', 'engine': 'vllm', 'engine_version': '0.11.0', 'model': 'a/b', 'image': 'vllm/vllm-openai:v0.11.0'}
# what the properties found (each was an internal error), with what spec_config says now
FOUND = [
    ('schedule-not-a-mapping', dict(TRT, speculative={'method': 'ngram', 'max_draft_len': 2, 'draft_len_schedule': [1, 2]}),
     "speculative.draft_len_schedule must be a mapping (got [1, 2])"),
    ('speculative-key-not-a-string', dict(TRT, speculative={True: 1}), 'speculative.True is not a speculative key'),
    ('decoding-type-not-a-string', dict(TRT, llm_api_options={'speculative_config': {'decoding_type': {'a': 1}}}),
     "speculative_config.decoding_type must be a string, one of: AUTO, DraftTarget, Eagle, Eagle3"),
    ('vllm-option-keys-of-two-types', dict(VLLM, speculative={'method': 'ngram', 'max_draft_len': 2,
                                                               'options': {1: 2, 'x': 3}}),
     'speculative_config.1 is not a known key of the vLLM 0.11.0 speculative config'),
    ('a-yaml-date', dict(TRT, llm_api_options={'kv_cache_config': {'x': __import__('datetime').date(2024, 1, 1)}}),
     'llm_api_options.kv_cache_config.x is a date, which no instance key takes'),
    ('too-deep', dict(TRT, env={'A': json.loads('[' * 600 + ']' * 600)}),
     "instance 't': env.A[0][0][0]"),
    ('profile-and-a-key-not-a-string', {'name': 't', 'profile': 'vllm-gpt-oss-120b', 'engine_version': '0.11.0', 1: 2},
     '1 is not an instance key spec_config knows'),
    ('volumes-not-a-list', dict(TRT, volumes=5, docker_args=7), None),
]


@pytest.mark.parametrize('case', FOUND, ids=[c[0] for c in FOUND])
def test_what_the_properties_found_gets_a_verdict(case):
    dummy, inst, fragment = case
    if fragment:
        with pytest.raises(AnsibleFilterError) as err:
            spec_config(inst)
        assert fragment in str(err.value) and len(str(err.value)) < 1000, str(err.value)
    check_spec_config(inst)
    check_settings(inst)
    check_plans(inst)
    check_monitoring(inst)


def test_settings_refuse_volumes_and_docker_args_that_are_not_lists():
    with pytest.raises(role_settings.SettingsError) as err:
        role_settings.check_value('inference_server_instances', [dict(TRT, volumes=5, docker_args='--privileged')])
    assert err.value.errors == [
        'inference_server_instances[0].docker_args: %r must be a list of docker run words (strings)' % '--privileged',
        'inference_server_instances[0].volumes: 5 must be a list of host:container[:options] strings']
