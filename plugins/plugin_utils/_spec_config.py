# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine-neutral serving spec -> the exact config file and command line of one engine version.

Entry point: ``render(instance, models_dir='/models', config_path='/etc/specdec/engine.yaml')``.
It raises SpecConfigError (a ValueError) with a message that names the instance, the key, the
engine version and the fix. docs/spec_config.md describes the input, the outputs and every rule.
Runs on the controller (filter plugin); PyYAML is needed only to render ``config_yaml``.
The instance's keys, their checks and its merge with its profile are plugin_utils/_spec_instance.py's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import posixpath
from typing import Any

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - the controller always has PyYAML
    HAS_YAML = False

from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import (
    ARCTIC_INFERENCE_VLLM_PINS,
    SpecConfigError,
    TRTLLM,
    VLLM,
    EngineVersion,
    arctic_release_for,
    resolve_version,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_schema import (
    check_draft_len_schedule,
    validate_trtllm_config,
    validate_vllm_speculative,
    _Ctx,
)
from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_instance import Instance, schedule_keys, deep_merge
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_profiles import PROFILES
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_tables import (
    accepted_names,
    borrowed,
    cli_choices,
    cli_elsewhere,
    decoding_class,
    other_versions_hint,
    table_for,
    trtllm_cli_rows,
    version_ranges,
)

__all__ = ['render', 'SpecConfigError', 'DEFAULT_MODELS_DIR', 'DEFAULT_CONFIG_PATH', 'DEFAULT_IGNORE_KEYS']

DEFAULT_MODELS_DIR = vocabulary.CONTAINER_MODELS_DIR
DEFAULT_CONFIG_PATH = vocabulary.CONTAINER_CONFIG
DEFAULT_HOST = '0.0.0.0'
DEFAULT_PORT = 8000
# Keys of an instance that other parts (the inference_server role) own; spec_config ignores them.
DEFAULT_IGNORE_KEYS = ('gpus', 'gpu_request', 'state', 'api_key', 'volumes', 'docker_args', 'health_timeout',
                       'health_generate', 'restart_sec', 'stack', 'gpus_per_node')


# ----------------------------------------------------------------------------------- helpers

def model_path(ref, models_dir):
    """HF id 'org/name' -> '<models_dir>/org/name'; an absolute path is kept as given."""
    if ref.startswith('/'):
        return posixpath.normpath(ref)
    parts = ref.split('/')
    if len(parts) > 2 or any(p in ('', '.', '..') for p in parts):
        raise ValueError(ref)
    return posixpath.join(models_dir, *parts)


def _num(v):
    return repr(v) if isinstance(v, float) else str(v)


def _spec_summary(inst, models_dir):
    spec = inst.get('speculative')
    method = spec['method']
    if method == 'none':
        return {'method': 'none', 'max_draft_len': 0, 'draft_model': None, 'draft_model_path': None}
    needs_model = method in ('eagle3', 'draft_target', 'arctic')
    draft = spec.get('draft_model')
    if needs_model and not draft:
        inst.fail('speculative.draft_model', "is required for method '%s'" % method)
    if method not in ('suffix',) and not spec.get('max_draft_len'):
        inst.fail('speculative.max_draft_len', "is required for method '%s' (an integer > 0)" % method)
    path = None
    if draft:
        try:
            path = model_path(draft, models_dir)
        except ValueError:
            inst.fail('speculative.draft_model', "must be a Hugging Face id 'org/name' or an absolute path (got %r)"
                      % draft)
    return {'method': method, 'max_draft_len': spec.get('max_draft_len', 0), 'draft_model': draft,
            'draft_model_path': path}


def _check_extra_args(inst, version, args, owned, known=None):
    """Raise for options that spec_config sets itself, and for options the version's trtllm-serve lacks
    (``known``: option name -> takes a value, from the version's table)."""
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith('-'):
            inst.fail('extra_args', "has the bare word %r; give options as '--name value' or '--name=value'" % word)
        name, has_eq, _value = word.partition('=')
        norm = name.replace('_', '-') if version.engine == VLLM else name
        if norm in owned:
            inst.fail('extra_args', 'must not set %s: spec_config sets it from the instance key %s'
                      % (name, owned[norm]))
        if known is None:
            continue
        if name not in known:
            elsewhere = cli_elsewhere(version.engine, name)
            ending = 's' if len(elsewhere) == 1 else ''
            hint = ('; TensorRT-LLM %s accept%s it' % (version_ranges(version.engine, elsewhere), ending)
                    if elsewhere else '')
            inst.fail('extra_args', 'has %s, which is not a trtllm-serve option of %s%s'
                      % (name, version.title(), hint))
        if known[name] and not has_eq:
            if i >= len(args):
                inst.fail('extra_args', 'has %s without a value' % name)
            i += 1


# ----------------------------------------------------------------------------------- TRT-LLM

_TRTLLM_OWNED = {
    '--host': 'host', '--port': 'port', '--backend': '(always pytorch)',
    '--extra_llm_api_options': '(the config file)', '--config': '(the config file)',
    '--tp_size': 'tensor_parallel_size', '--tensor_parallel_size': 'tensor_parallel_size',
    '--pp_size': 'pipeline_parallel_size', '--pipeline_parallel_size': 'pipeline_parallel_size',
    '--ep_size': 'expert_parallel_size', '--moe_expert_parallel_size': 'expert_parallel_size',
    '--max_batch_size': 'max_batch_size', '--max_num_tokens': 'max_num_tokens', '--max_seq_len': 'max_seq_len',
    '--kv_cache_free_gpu_memory_fraction': 'gpu_memory_fraction',
    '--free_gpu_memory_fraction': 'gpu_memory_fraction', '--trust_remote_code': 'trust_remote_code',
    '--reasoning_parser': 'reasoning_parser', '--tool_parser': 'tool_parser', '--log_level': 'log_level',
}

# YAML key (dotted) -> instance key whose CLI option it would silently override (YAML wins in trtllm-serve)
_TRTLLM_YAML_OVER_CLI = {
    'max_batch_size': 'max_batch_size', 'max_num_tokens': 'max_num_tokens', 'max_seq_len': 'max_seq_len',
    'tensor_parallel_size': 'tensor_parallel_size', 'pipeline_parallel_size': 'pipeline_parallel_size',
    'moe_expert_parallel_size': 'expert_parallel_size',
    'trust_remote_code': 'trust_remote_code', 'reasoning_parser': 'reasoning_parser',
    'kv_cache_config.free_gpu_memory_fraction': 'gpu_memory_fraction',
}


def _trtllm_speculative(inst, version, summary):
    spec = inst.get('speculative')
    method = summary['method']
    n = spec.get('max_draft_len')
    if method == 'none':
        return None
    if method in ('suffix', 'arctic'):
        inst.fail('speculative.method', "'%s' is vLLM-only (TensorRT-LLM has no %s decoding); use eagle3, "
                  "draft_target, ngram or mtp" % (method, method))
    if method in ('eagle3', 'draft_target'):
        if method == 'eagle3':
            # EAGLE-3 is decoding_type Eagle up to 1.2.x and Eagle3 from 1.3: the version's table says which
            dispatch = table_for(version)['dispatch']['TorchLlmArgs.speculative_config']['classes']
            dtype = 'Eagle3' if 'Eagle3' in dispatch else 'Eagle'
        else:
            # DraftTarget up to 1.3.0rc3 (a from_dict table); from 1.3.0rc13 the discriminated union takes only
            # the class's literal, Draft_Target: the version's table says which
            dispatch = table_for(version)['dispatch']['TorchLlmArgs.speculative_config']['classes']
            dtype = 'DraftTarget' if 'DraftTarget' in dispatch else next(
                (k for k, c in sorted(dispatch.items()) if c == 'DraftTargetDecodingConfig'), 'DraftTarget')
        out = {'decoding_type': dtype, 'max_draft_len': n, 'speculative_model_dir': summary['draft_model_path']}
    elif method == 'ngram':
        out = {'decoding_type': 'NGram', 'max_draft_len': n,
               'max_matching_ngram_size': spec.get('ngram_size', 3)}
    else:  # mtp
        out = {'decoding_type': 'MTP', 'num_nextn_predict_layers': n}
    if 'draft_len_schedule' in spec:
        # whether the version takes a schedule is a field of the class its decoding_type dispatches to (the
        # 1.3 table has no DecodingBaseConfig entry: the base class is never built from a YAML file)
        table = table_for(version)
        cls = decoding_class(table, out['decoding_type'])
        if cls is None or 'draft_len_schedule' not in accepted_names(table, cls):
            found = other_versions_hint(TRTLLM, table['version'])(cls, 'draft_len_schedule') if cls else ''
            inst.fail('speculative.draft_len_schedule', 'is not accepted by %s (its %s has no draft_len_schedule%s); '
                      'remove it or use a release that has it (got %s)'
                      % (version.title(), cls or 'decoding_type %s' % out['decoding_type'],
                         ('; %s' % found) if found else '', vocabulary.show(spec['draft_len_schedule'])))
        check_draft_len_schedule(_Ctx(inst.name, version), 'speculative.draft_len_schedule',
                                 spec['draft_len_schedule'], n)
        out['draft_len_schedule'] = spec['draft_len_schedule']
    if method == 'ngram' and not isinstance(out['max_matching_ngram_size'], int):
        inst.fail('speculative.ngram_size', 'must be an integer > 0')
    return deep_merge(out, spec.get('options', {}))


def _dotted(cfg, dotted):
    cur = cfg
    for part in dotted.split('.'):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _render_trtllm(inst, version, models_dir, config_path, summary, target):
    cfg = {}
    spec_cfg = _trtllm_speculative(inst, version, summary)
    if spec_cfg is not None:
        cfg['speculative_config'] = spec_cfg
    sampler = inst.get('sampler', 'auto')
    if sampler != 'auto':
        # the release's own key: use_torch_sampler up to 1.1.0rc0, sampler_type from 1.1.0rc5 (the tables say which)
        names = accepted_names(table_for(version), 'TorchLlmArgs')
        if 'use_torch_sampler' in names and 'sampler_type' not in names:
            cfg['use_torch_sampler'] = sampler == 'torch'
        elif borrowed(version) or 'sampler_type' in names:
            cfg['sampler_type'] = 'TorchSampler' if sampler == 'torch' else 'TRTLLMSampler'
        else:
            # 1.3.0rc27 removed sampler_type: the engine picks its sampler
            inst.fail('sampler', "'%s' cannot be set on %s: its LLM API has no sampler_type (removed upstream; the "
                      "engine picks the sampler); remove it or use sampler: auto" % (sampler, version.title()))
    raw = inst.get('llm_api_options', {})
    if isinstance(raw.get('speculative_config'), dict) and isinstance(
            raw['speculative_config'].get('draft_len_schedule'), dict):
        raw = copy.deepcopy(raw)
        raw['speculative_config']['draft_len_schedule'] = schedule_keys(raw['speculative_config']['draft_len_schedule'])
    cfg = deep_merge(cfg, raw)
    # project policy (TensorRT-LLM accepts false): without iteration stats /metrics is empty on the
    # PyTorch backend, and engine_health and the draft sweeps read it
    if cfg.get('enable_iter_perf_stats') is False:
        inst.fail('llm_api_options.enable_iter_perf_stats', 'must stay true: without it trtllm-serve serves no '
                  '/metrics iteration stats, which health checks and draft sweeps read; remove the key')
    cfg['enable_iter_perf_stats'] = True
    inst.warnings.extend(validate_trtllm_config(inst.name, version, cfg))

    # project policy: trtllm-serve lets the YAML override the command line silently; refuse a conflict
    for dotted, key in sorted(_TRTLLM_YAML_OVER_CLI.items()):
        yval = _dotted(cfg, dotted)
        ival = inst.get(key)
        if yval is not None and ival is not None and yval != ival:
            inst.fail(key, 'is %r but llm_api_options.%s is %r; trtllm-serve lets the YAML override the command '
                      'line, so set only one of them (or the same value)' % (ival, dotted, yval))

    if inst.get('served_model_name') and inst.get('served_model_name') != posixpath.basename(target):
        inst.fail('served_model_name', "cannot be set for TensorRT-LLM: trtllm-serve has no --served_model_name and "
                  "/v1/models reports the model directory's basename '%s'" % posixpath.basename(target))
    ctx_version = version.title()
    args = [target, '--host', inst.get('host', DEFAULT_HOST), '--port', str(inst.get('port', DEFAULT_PORT)),
            '--backend', 'pytorch']
    for key, opt in (('tensor_parallel_size', '--tp_size'), ('pipeline_parallel_size', '--pp_size'),
                     ('expert_parallel_size', '--ep_size'),
                     ('max_batch_size', '--max_batch_size'), ('max_num_tokens', '--max_num_tokens'),
                     ('max_seq_len', '--max_seq_len'),
                     ('gpu_memory_fraction', '--kv_cache_free_gpu_memory_fraction')):
        if inst.get(key) is not None:
            args += [opt, _num(inst.get(key))]
    if inst.get('trust_remote_code'):
        args.append('--trust_remote_code')
    table = table_for(version)
    for key, opt in (('reasoning_parser', '--reasoning_parser'), ('tool_parser', '--tool_parser'),
                     ('log_level', '--log_level')):
        value = inst.get(key)
        if value is None:
            continue
        allowed = cli_choices(table, opt)
        if allowed is None:
            elsewhere = cli_elsewhere(TRTLLM, opt)
            hint = ('; TensorRT-LLM %s has it' % version_ranges(TRTLLM, elsewhere)) if elsewhere else ''
            inst.fail(key, 'is not accepted by %s (its trtllm-serve has no %s%s); remove it or use a newer image'
                      % (ctx_version, opt, hint))
        if value not in allowed:
            inst.fail(key, "'%s' is not a %s choice of %s (allowed: %s)" % (value, opt, ctx_version, ', '.join(allowed)))
        args += [opt, value]
    args += ['--extra_llm_api_options', config_path]
    extra = inst.get('extra_args', [])
    cli = trtllm_cli_rows(table)
    _check_extra_args(inst, version, extra, _TRTLLM_OWNED, cli)
    args += extra
    if not HAS_YAML:
        raise SpecConfigError('PyYAML is required on the controller to render the TensorRT-LLM config')
    header = ("# extra_llm_api_options of trtllm-serve for instance '%s' (%s), rendered by specdec.serve.spec_config;"
              " do not edit\n" % (inst.name, ctx_version))
    body = yaml.safe_dump(cfg, default_flow_style=False, sort_keys=True, width=1000)
    return cfg, header + body, ['trtllm-serve'] + args, {}, posixpath.basename(target), []


# ----------------------------------------------------------------------------------- vLLM

_VLLM_OWNED = {
    '--host': 'host', '--port': 'port', '--served-model-name': 'served_model_name',
    '--speculative-config': 'speculative', '--tensor-parallel-size': 'tensor_parallel_size',
    '-tp': 'tensor_parallel_size', '--pipeline-parallel-size': 'pipeline_parallel_size',
    '-pp': 'pipeline_parallel_size', '--max-num-seqs': 'max_batch_size', '--max-model-len': 'max_seq_len',
    '--max-num-batched-tokens': 'max_num_tokens', '--gpu-memory-utilization': 'gpu_memory_fraction',
    '--trust-remote-code': 'trust_remote_code', '--reasoning-parser': 'reasoning_parser',
    '--tool-call-parser': 'tool_parser', '--enable-auto-tool-choice': 'tool_parser', '--model': 'model',
}


def _vllm_schedule(schedule, max_batch_size):
    """TRT-LLM style {batch size: k} (k applies from that batch size up) -> vLLM [start, end, k] triples."""
    keys = sorted(schedule)
    out = []
    for i, start in enumerate(keys):
        if i + 1 < len(keys):
            end = keys[i + 1] - 1
        else:
            end = max(start, max_batch_size or start)
        out.append([start, end, schedule[start]])
    return out


def _render_vllm(inst, version, models_dir, summary, target):
    for key, why in (('expert_parallel_size', "vLLM has no expert parallel size; add extra_args: "
                                              "['--enable-expert-parallel'] (EP = TP x DP there)"),
                     ('sampler', 'it is a TensorRT-LLM key; remove it'),
                     ('llm_api_options', 'it holds TensorRT-LLM LLM API keys; use extra_args (and speculative.options) '
                                         'for vLLM')):
        if inst.get(key) not in (None, {}):
            inst.fail(key, 'is not accepted for engine vllm: %s' % why)
    served = inst.get('served_model_name') or inst.get('model')
    args = ['serve', target, '--served-model-name', served, '--host', inst.get('host', DEFAULT_HOST),
            '--port', str(inst.get('port', DEFAULT_PORT))]
    for key, opt in (('tensor_parallel_size', '--tensor-parallel-size'),
                     ('pipeline_parallel_size', '--pipeline-parallel-size'), ('max_batch_size', '--max-num-seqs'),
                     ('max_seq_len', '--max-model-len'), ('max_num_tokens', '--max-num-batched-tokens'),
                     ('gpu_memory_fraction', '--gpu-memory-utilization')):
        if inst.get(key) is not None:
            args += [opt, _num(inst.get(key))]
    if inst.get('trust_remote_code'):
        args.append('--trust-remote-code')
    if inst.get('reasoning_parser'):
        args += ['--reasoning-parser', inst.get('reasoning_parser')]
    if inst.get('tool_parser'):
        args += ['--tool-call-parser', inst.get('tool_parser'), '--enable-auto-tool-choice']
    env = {}
    if inst.get('log_level'):
        env['VLLM_LOGGING_LEVEL'] = inst.get('log_level').upper()
    requirements = []
    spec = inst.get('speculative')
    method = summary['method']
    if method != 'none':
        n = spec.get('max_draft_len')
        plugin = method == 'arctic' or spec.get('arctic_inference_version') is not None
        if spec.get('suffix_decoding') is not None and method != 'arctic':
            inst.fail('speculative.suffix_decoding', "applies to method 'arctic' only (the hybrid of the Arctic "
                      "speculator and suffix decoding); for suffix decoding alone use method 'suffix'")
        sc: dict[str, Any] = {'method': {'eagle3': 'eagle3', 'draft_target': 'draft_model', 'ngram': 'ngram', 'mtp': 'mtp',
                                         'suffix': 'suffix', 'arctic': 'arctic'}[method]}
        if summary['draft_model_path'] and method in ('eagle3', 'draft_target', 'arctic', 'mtp'):
            sc['model'] = summary['draft_model_path']
        if n:
            sc['num_speculative_tokens'] = n
        if method == 'ngram':
            sc['prompt_lookup_max'] = spec.get('ngram_size', 3)
            sc['prompt_lookup_min'] = 1
        if method == 'arctic' and spec.get('suffix_decoding') is not None:
            sc['enable_suffix_decoding'] = spec['suffix_decoding']
        if 'draft_len_schedule' in spec:
            check_draft_len_schedule(_Ctx(inst.name, version), 'speculative.draft_len_schedule',
                                     spec['draft_len_schedule'], n)
            sc['num_speculative_tokens_per_batch_size'] = _vllm_schedule(spec['draft_len_schedule'],
                                                                         inst.get('max_batch_size'))
        sc = deep_merge(sc, spec.get('options', {}))
        if plugin:
            release = spec.get('arctic_inference_version') or arctic_release_for(version)
            pins = ', '.join('%s -> vllm==%s' % kv for kv in sorted(ARCTIC_INFERENCE_VLLM_PINS.items()))
            if release is None:
                inst.fail('speculative.method', "'%s' needs the ArcticInference plugin, and no arctic-inference release "
                          'pins vllm==%s (releases: %s); use a vllm image of one of those versions'
                          % (method, version.text, pins))
            pin = ARCTIC_INFERENCE_VLLM_PINS.get(release)
            if pin is None:
                inst.fail('speculative.arctic_inference_version', "'%s' is not a known arctic-inference release "
                          '(known: %s)' % (release, pins))
            if EngineVersion(VLLM, pin) != version:
                good = arctic_release_for(version)
                inst.fail('speculative.arctic_inference_version',
                          "is %s, which pins vllm==%s exactly (its plugin raises RuntimeError otherwise), but the "
                          "image is %s; use a vllm %s image%s"
                          % (release, pin, version.title(), pin,
                             (' or arctic-inference %s' % good) if good else ''))
            env['ARCTIC_INFERENCE_ENABLED'] = '1'
            requirements.append('arctic-inference==%s' % release)
        elif method == 'suffix':
            requirements.append('arctic-inference')
        validate_vllm_speculative(inst.name, version, sc, plugin, inst.get('tensor_parallel_size'))
        args += ['--speculative-config', json.dumps(sc, sort_keys=True)]
    extra = inst.get('extra_args', [])
    _check_extra_args(inst, version, extra, _VLLM_OWNED)
    args += extra
    return {}, '', ['vllm'] + args, env, served, requirements


# ----------------------------------------------------------------------------------- entry point

def render(instance, models_dir=DEFAULT_MODELS_DIR, config_path=DEFAULT_CONFIG_PATH, ignore_keys=None):
    """Translate one engine-neutral instance. See docs/spec_config.md for the returned keys."""
    ignore = set(DEFAULT_IGNORE_KEYS)
    ignore.update(ignore_keys or [])
    if not isinstance(models_dir, str) or not models_dir.startswith('/'):
        raise SpecConfigError('models_dir must be an absolute path inside the container (got %r)' % (models_dir,))
    if not isinstance(config_path, str) or not config_path.startswith('/'):
        raise SpecConfigError('config_path must be an absolute path inside the container (got %r)' % (config_path,))
    inst = Instance(instance, ignore)
    engine = inst.get('engine')
    try:
        version = resolve_version(engine, inst.get('engine_version'), inst.get('image'))
        version.judged_in_image = inst.get('judged_in_image_only') is True
        table = table_for(version)
    except SpecConfigError as exc:
        inst.fail('engine_version', '- %s' % exc)
    if borrowed(version):
        inst.warnings.append(
            "instance '%s': %s has no engine table of its own and judged_in_image_only is set: the engine check in "
            "its image alone judges its configuration (the controller's checks are skipped; the %s table only "
            "supplied the names it is rendered with)" % (inst.name, version.title(), table['version']))
    meta = PROFILES.get(inst.profile) if inst.profile else None
    if meta:
        lo, hi = meta.get('min_version'), meta.get('max_version')
        if (lo and version < lo) or (hi and version > hi):
            inst.fail('profile', "'%s' is made for %s versions %s to %s, not %s"
                      % (inst.profile, engine, lo or 'any', hi or 'any', version.text))
    try:
        target = model_path(inst.get('model'), models_dir)
    except ValueError:
        inst.fail('model', "must be a Hugging Face id 'org/name' or an absolute path (got %r)" % inst.get('model'))
    summary = _spec_summary(inst, models_dir)
    if engine == TRTLLM:
        config, config_yaml, command, env, served, reqs = _render_trtllm(
            inst, version, models_dir, config_path, summary, target)
    else:
        config, config_yaml, command, env, served, reqs = _render_vllm(inst, version, models_dir, summary, target)
    full_env = dict((k, _num(v) if not isinstance(v, str) else v) for k, v in inst.get('env', {}).items())
    for key, value in env.items():
        if key in full_env and full_env[key] != value:
            inst.fail('env.%s' % key, 'is %r but the engine needs %r' % (full_env[key], value))
        full_env[key] = value
    return {
        'name': inst.get('name'),
        'engine': engine,
        'version': version.text,
        # the generated table the config was checked against (another release's when it has none of its own and
        # the instance is judged in its image only)
        'table_version': table['version'],
        'profile': inst.profile,
        'config': config,
        'config_yaml': config_yaml,
        'config_path': config_path if engine == TRTLLM else None,
        'args': command[1:],
        'command': command,
        'env': dict(sorted(full_env.items())),
        'model_path': target,
        'served_model_name': served,
        'health_model_id': served,
        'port': inst.get('port', DEFAULT_PORT),
        'speculative': summary,
        'image_requirements': reqs,
        'warnings': list(inst.warnings),
    }
