# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-version schemas of the engine configs, checked on the controller.

TensorRT-LLM's LLM API models are pydantic with ``extra = "forbid"``: an unknown key (or a key of
another release) stops ``trtllm-serve`` at start-up. vLLM builds its SpeculativeConfig from the
``--speculative-config`` JSON (older releases silently ignore unknown keys there, newer ones forbid
them). A bad spec must fail before any host is touched, with the key, the version and the fix.

Three kinds of rule live here, and the code says which is which:

* upstream, from the generated tables (spec_tables.py, engine_tables/*.json): every key, alias, type,
  literal, bound, which classes forbid extras, the decoding_type dispatch. Used for every version
  that has a table.
* upstream, from validators the tables do not capture (asserts and field validators in the engine):
  marked "upstream validator".
* project policy, stricter than the engine on purpose: marked "project policy", with the reason.

A supported TensorRT-LLM release is judged by a table of its own: 1.3.0rc3 generated from its source, 1.1.0rc0,
1.2.0rc1, 1.2.0rc6 and 1.2.1 from the facts of each release's rendered llm_args and trtllm-serve pages, the
other tabled releases from a condensed transcription of their rendered llm_args page (engine_tables/index.json
says which, and why a release has none). No key list of any version is written here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import (
    SpecConfigError,
    TRTLLM,
    VLLM,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_tables import (
    TableValidator,
    accepted_names,
    borrowed,
    other_versions_hint,
    table_for,
)

_NUM = (int, float)


# --------------------------------------------------------------------------- value checks
# Each check returns None when the value is fine, else a short text saying what is allowed.

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, _NUM) and not isinstance(v, bool)


def BOOL(v):
    return None if isinstance(v, bool) else 'must be true or false'


def STR(v):
    return None if isinstance(v, str) and v != '' else 'must be a non-empty string'


def POSINT(v):
    return None if _is_int(v) and v > 0 else 'must be an integer > 0'


def NONNEG_INT(v):
    return None if _is_int(v) and v >= 0 else 'must be an integer >= 0'


def NONNEG(v):
    return None if _is_num(v) and v >= 0 else 'must be a number >= 0'


def FRACTION(v):
    return None if _is_num(v) and 0 < v <= 1 else 'must be a fraction in (0, 1]'


def UNIT(v):
    return None if _is_num(v) and 0 <= v <= 1 else 'must be a number in [0, 1]'


def DICT(v):
    return None if isinstance(v, dict) else 'must be a mapping'


def choice(*allowed):
    def check(v):
        return None if v in allowed else 'must be one of: %s' % ', '.join(str(a) for a in allowed)
    return check


class K:
    """One key of a hand-kept (policy) schema: its value check."""

    def __init__(self, check):
        self.check = check


class _Ctx:
    def __init__(self, instance, version):
        self.instance = instance
        self.version = version

    def fail(self, path, text):
        raise SpecConfigError("instance '%s': %s %s" % (self.instance, path, text))


def _check_cuda_graph(ctx, cg):
    # upstream validator: CudaGraphConfig rejects a max_batch_size other than the largest batch size
    sizes = cg.get('batch_sizes')
    mbs = cg.get('max_batch_size')
    if sizes and mbs not in (None, 0) and mbs != max(sizes):
        ctx.fail('cuda_graph_config.max_batch_size',
                 'is %r but batch_sizes ends at %r; %s rejects the mismatch: set one of them only'
                 % (mbs, max(sizes), ctx.version.title()))


def check_draft_len_schedule(ctx, path, schedule, max_draft_len):
    """draft_len_schedule: {batch size: draft len}; key 1 == max_draft_len, all values <= it."""
    for key, value in schedule.items():
        if not _is_int(key) or key < 1:
            ctx.fail(path, 'keys must be batch sizes (integers >= 1), got %r' % (key,))
        if not _is_int(value) or value < 0:
            ctx.fail('%s[%s]' % (path, key), 'must be a draft length (integer >= 0), got %r' % (value,))
        if max_draft_len is not None and value > max_draft_len:
            ctx.fail('%s[%s]' % (path, key), 'is %d, above max_draft_len %d; every value must be <= max_draft_len'
                     % (value, max_draft_len))
    if 1 not in schedule:
        ctx.fail(path, 'must contain batch size 1 (mapped to max_draft_len %s)' % (max_draft_len,))
    if max_draft_len is not None and schedule[1] != max_draft_len:
        ctx.fail('%s[1]' % path, 'is %d but must equal max_draft_len %d' % (schedule[1], max_draft_len))


# upstream validators: decoding types that need a draft model, and a max_draft_len > 0
_NEEDS_DRAFT_MODEL = ('Eagle', 'Eagle3', 'DraftTarget')
_NEEDS_DRAFT_LEN = ('Eagle', 'Eagle3', 'DraftTarget', 'NGram')


def _speculative_rules(ctx, spec, dtype):
    """Rules on a speculative_config beyond what the table says of its keys and types."""
    mdl = spec.get('max_draft_len')
    # upstream validator: TorchLlmArgs.validate_speculative_config asserts max_draft_len > 0 (1.3; 1.2.x
    # checks only that it is set, and a 0 draft length would not speculate: project policy there)
    if dtype in _NEEDS_DRAFT_LEN and (mdl is None or mdl <= 0):
        ctx.fail('speculative_config.max_draft_len', 'must be set to an integer > 0 for decoding_type %s (got %r)'
                 % (dtype, mdl))
    # project policy: both alias names at once are ambiguous (pydantic silently takes one of them)
    if 'speculative_model' in spec and 'speculative_model_dir' in spec:
        ctx.fail('speculative_config.speculative_model', 'and speculative_model_dir are aliases; set only one')
    # upstream validator: a draft model / EAGLE head is asserted for these decoding types
    if dtype in _NEEDS_DRAFT_MODEL and not (spec.get('speculative_model') or spec.get('speculative_model_dir')):
        ctx.fail('speculative_config.speculative_model_dir', 'is required for decoding_type %s (the draft model '
                 'or EAGLE head directory)' % dtype)
    if dtype == 'NGram' and not spec.get('max_matching_ngram_size'):
        ctx.fail('speculative_config.max_matching_ngram_size', 'must be set to an integer > 0 for NGram')
    if dtype == 'SaveState' and not spec.get('output_directory'):
        ctx.fail('speculative_config.output_directory', 'is required for SaveState')
    # upstream validator: DecodingBaseConfig.validate_draft_len_schedule_and_sort
    if 'draft_len_schedule' in spec:
        check_draft_len_schedule(ctx, 'speculative_config.draft_len_schedule', spec['draft_len_schedule'], mdl)


def validate_trtllm_config(instance, version, config):
    """Raise SpecConfigError for anything in an extra_llm_api_options dict the version rejects. Keys
    that trtllm-serve drops on the pytorch backend (the table's ``serve_drops_for_pytorch``, e.g.
    ``build_config`` from 1.3) are removed from config; returns the warnings that say so."""
    if borrowed(version):
        return []  # no table of its own: the engine check in its image judges it (plugin_utils/_spec_tables.py)
    ctx = _Ctx(instance, version)
    table = table_for(version)
    warnings = []
    root = accepted_names(table, table['root'])
    for key in table.get('serve_drops_for_pytorch', []):
        if key in config and key not in root:
            del config[key]
            warnings.append("instance '%s': %s is dropped: trtllm-serve of %s drops it on the pytorch backend "
                            '(launch_server), and TorchLlmArgs has no such field' % (instance, key, version.title()))
    _validate_trtllm_with_table(ctx, table, config)
    return warnings


# Decoding types that cannot come from a YAML file, whatever the table says.
_TRTLLM_YAML_REFUSED = {
    # project policy: UserProvidedDecodingConfig needs a Python drafter object
    'UserProvided': 'UserProvided needs a Python drafter object and cannot be set from YAML',
    'User_Provided': 'User_Provided needs a Python drafter object and cannot be set from YAML',
    # project policy: the 1.3 table says these classes refuse the pytorch backend (supports_backend); the
    # older releases' tables come from facts that leave out methods, so the rule is kept here for all
    'Medusa': 'project policy: specdec.serve serves on the pytorch backend, which TensorRT-LLM\'s Medusa '
              'decoder does not support',
    'Lookahead': 'project policy: specdec.serve serves on the pytorch backend, which TensorRT-LLM\'s Lookahead '
                 'decoder does not support',
}


def _validate_trtllm_with_table(ctx, table, config):
    validator = TableValidator(table, ctx.version, ctx.fail, backend='pytorch',
                               hints=other_versions_hint(TRTLLM, table['version']))
    spec = config.get('speculative_config')
    dispatch = table['dispatch']['TorchLlmArgs.speculative_config']['classes']
    dtype = spec.get('decoding_type') if isinstance(spec, dict) else None
    if not isinstance(dtype, str):
        dtype = None  # not a name (a list, a mapping): the table's dispatch below refuses it
    # a table that records the class's backends (supports_backend) decides; the policy rule covers the others
    if dtype in _TRTLLM_YAML_REFUSED and not (dtype in dispatch and table['classes'][dispatch[dtype]].get('backends')):
        ctx.fail('speculative_config.decoding_type', "'%s': %s" % (dtype, _TRTLLM_YAML_REFUSED[dtype]))
    if dtype == 'Eagle3' and 'Eagle3' not in dispatch:
        ctx.fail('speculative_config.decoding_type', "'Eagle3' is not a decoding_type of %s; EAGLE-3 is requested "
                 'as decoding_type: Eagle there (the instance key speculative.method: eagle3 does this for you)'
                 % validator.title)
    validator.check_class('', table['root'], config, root=True)
    # project policy: a KV fraction of 0 is accepted by the engine (0..1) but reserves no cache
    kv = config.get('kv_cache_config')
    if isinstance(kv, dict) and kv.get('free_gpu_memory_fraction') is not None:
        problem = FRACTION(kv['free_gpu_memory_fraction'])
        if problem:
            ctx.fail('kv_cache_config.free_gpu_memory_fraction', '%s (got %r)' % (problem, kv['free_gpu_memory_fraction']))
    # project policy: sampler_type is typed Union[str, SamplerType] upstream, so pydantic takes any
    # string, but only the SamplerType values select a sampler
    sampler_values = table['enums'].get('SamplerType')
    if 'sampler_type' in config and sampler_values and config['sampler_type'] not in sampler_values:
        ctx.fail('sampler_type', 'must be one of: %s (got %r)' % (', '.join(sampler_values), config['sampler_type']))
    # upstream validator: stream_interval must be > 0
    if 'stream_interval' in config:
        problem = POSINT(config['stream_interval'])
        if problem:
            ctx.fail('stream_interval', '%s (got %r)' % (problem, config['stream_interval']))
    if isinstance(config.get('cuda_graph_config'), dict):
        _check_cuda_graph(ctx, config['cuda_graph_config'])
    if isinstance(spec, dict):
        dispatch = table['dispatch']['TorchLlmArgs.speculative_config']
        cls = validator.dispatch_class('speculative_config', dispatch, spec)
        dtype = table['classes'][cls].get('classvars', {}).get('decoding_type', spec['decoding_type'])
        dtype = {'Draft_Target': 'DraftTarget', 'User_Provided': 'UserProvided'}.get(dtype, dtype)
        _speculative_rules(ctx, spec, dtype)


# --------------------------------------------------------------------------- vLLM speculative config

ARCTIC_METHODS = ('arctic', 'suffix')

# keys that only the ArcticInference plugin's ArcticSpeculativeConfig accepts (hand-transcribed: the plugin
# is not tabled)
ARCTIC_SPEC_KEYS = {
    'enable_suffix_decoding': K(BOOL), 'suffix_cache_max_depth': K(POSINT), 'suffix_max_spec_factor': K(NONNEG),
    'suffix_max_spec_offset': K(NONNEG), 'suffix_min_token_prob': K(UNIT),
    'suffix_cache_max_requests': K(NONNEG_INT), 'disable_by_batch_size': K(POSINT),
    'hard_disable_by_batch_size': K(POSINT),
}


def validate_vllm_speculative(instance, version, spec, arctic, tensor_parallel_size):
    """Raise SpecConfigError for a --speculative-config the vLLM (+ plugin) version would reject."""
    if borrowed(version):
        return  # no table of its own: the engine check in its image judges it (plugin_utils/_spec_tables.py)
    ctx = _Ctx(instance, version)
    table = table_for(version)
    validator = TableValidator(table, version, ctx.fail, hints=other_versions_hint(VLLM, table['version']))
    method = spec.get('method')
    methods = list(table['speculative_methods'])
    # the ArcticInference plugin replaces SpeculativeConfig with its own, which adds these methods
    allowed = methods + [m for m in ARCTIC_METHODS if arctic and m not in methods]
    if method not in allowed:
        extra = '' if arctic or method not in ARCTIC_METHODS else \
            " ('%s' exists here only through the ArcticInference plugin: set speculative.method: arctic, or " \
            "speculative.arctic_inference_version)" % method
        ctx.fail('speculative_config.method', "'%s' is not a speculative method of %s (allowed: %s)%s"
                 % (method, version.title(), ', '.join(allowed), extra))
    entry = table['classes'][table['root']]
    accepted = validator.fields_of(table['root'])
    internal = set(table.get('set_by_engine', []))
    internal.update(name for name, field in entry['fields'].items() if field['type'].get('internal'))
    for key in sorted(spec, key=str):
        path = 'speculative_config.%s' % key
        if key in internal:
            # project policy: vLLM fills these itself (engine objects, or keys create_speculative_config sets)
            ctx.fail(path, 'is set by vLLM itself and cannot be given in --speculative-config')
        if key == 'method':
            continue  # checked above against the table's literal (plus the plugin's methods)
        if key in accepted:
            validator.check_field(path, table['root'], accepted[key], spec[key])
            continue
        if arctic and key in ARCTIC_SPEC_KEYS:
            problem = ARCTIC_SPEC_KEYS[key].check(spec[key])
            if problem:
                ctx.fail(path, '%s (got %r)' % (problem, spec[key]))
            continue
        hint = ''
        if key in ARCTIC_SPEC_KEYS:
            hint = ' (it belongs to the ArcticInference plugin: use speculative.method arctic, or ' \
                   'speculative.arctic_inference_version with method suffix)'
        if key == 'tensor_parallel_size':
            hint = ' (use draft_tensor_parallel_size)'
        if key == 'num_speculative_tokens_per_batch_size':
            hint = ' (it comes from speculative.draft_len_schedule: remove that)'
        why = 'vLLM rejects unknown keys there' if entry['extra'] == 'forbid' else \
            'vLLM would silently ignore it; refused as project policy so a typo cannot pass'
        other = validator.hints(table['root'], key)
        ctx.fail(path, 'is not a known key of the %s speculative config%s%s: %s; known keys: %s'
                 % (version.title(), (' (%s)' % other) if other else '', hint, why,
                    ', '.join(sorted(set(accepted) - internal))))
    # project policy below unless marked: the fields exist, these values would fail later or mean nothing
    if method in ('eagle', 'eagle3', 'draft_model', 'arctic', 'medusa', 'mlp_speculator') and not spec.get('model'):
        ctx.fail('speculative_config.model', "is required for method '%s'" % method)
    if method not in ('suffix', 'mtp') and not spec.get('num_speculative_tokens'):
        ctx.fail('speculative_config.num_speculative_tokens', "must be an integer > 0 for method '%s'" % method)
    # upstream validator: "Can only be 1 or the same as the target model's tensor parallel size"
    dtp = spec.get('draft_tensor_parallel_size')
    if dtp is not None and dtp not in (1, tensor_parallel_size or 1):
        ctx.fail('speculative_config.draft_tensor_parallel_size', 'must be 1 or the target tensor parallel size %s '
                 '(got %r)' % (tensor_parallel_size or 1, dtp))
    lo, hi = spec.get('prompt_lookup_min'), spec.get('prompt_lookup_max')
    if lo is not None and hi is not None and lo > hi:
        ctx.fail('speculative_config.prompt_lookup_min', 'is %d, above prompt_lookup_max %d' % (lo, hi))
    sched = spec.get('num_speculative_tokens_per_batch_size')
    if sched is not None:
        ok = isinstance(sched, list) and all(
            isinstance(t, list) and len(t) == 3 and all(_is_int(x) for x in t) and 1 <= t[0] <= t[1] and t[2] >= 0
            for t in sched)
        if not ok:
            ctx.fail('speculative_config.num_speculative_tokens_per_batch_size',
                     'must be a list of [start, end_inclusive, k] integer triples (got %r)' % (sched,))
        nst = spec.get('num_speculative_tokens')
        for t in sched:
            if nst is not None and t[2] > nst:
                ctx.fail('speculative_config.num_speculative_tokens_per_batch_size',
                         'entry %r has k=%d above num_speculative_tokens %d' % (t, t[2], nst))
