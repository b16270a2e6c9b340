# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Named serving profiles: every system of the hand recipes, as engine-neutral instance defaults.

An instance that names ``profile:`` gets the profile's ``instance`` mapping deep-merged under its
own keys (the instance wins). docs/spec_config.md lists them with their sources.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

# Programmatic dependent launch: recipes 000 and 001 start their container with
# `-e TRTLLM_ENABLE_PDL=1`; the DGX Spark (002, 003) and B200 (004) recipes do not. The profiles of
# 000 and 001 own it; nothing else sets it (an instance may, in its `env`).
_PDL = {'TRTLLM_ENABLE_PDL': '1'}

# TensorRT-LLM low-latency single-GPU keys shared by the gpt-oss recipes (000, 001).
_LOW_LATENCY = {
    'enable_attention_dp': False,
    'cuda_graph_config': {'max_batch_size': 1, 'enable_padding': True},
    'moe_config': {'backend': 'CUTLASS'},
}
_LOW_LATENCY_SPEC = dict(copy.deepcopy(_LOW_LATENCY), disable_overlap_scheduler=True, enable_autotuner=False,
                         kv_cache_config={'enable_block_reuse': False})

_GPT_OSS_LOW_LATENCY = {
    'engine': 'trtllm',
    'model': 'openai/gpt-oss-120b',
    'max_batch_size': 1,
    'tensor_parallel_size': 1,
    'expert_parallel_size': 1,
    'trust_remote_code': True,
    'gpu_memory_fraction': 0.9,
    'env': _PDL,
}

_VLLM_GPT_OSS = {
    'engine': 'vllm',
    'model': 'openai/gpt-oss-120b',
    'tensor_parallel_size': 1,
    'max_batch_size': 1,
    'max_seq_len': 131072,
    'gpu_memory_fraction': 0.97,
    'reasoning_parser': 'openai_gptoss',
    'tool_parser': 'openai',
}


def _with(base, **over):
    out = copy.deepcopy(base)
    out.update(copy.deepcopy(over))
    return out


PROFILES = {
    'trtllm-gpt-oss-120b-low-latency': {
        'description': 'gpt-oss-120b on one GPU, low latency, no speculation: CUTLASS MoE, CUDA graph for '
                       'batch size 1 with padding, batch 1.',
        'seeds': ['000', '001'],
        'instance': _with(_GPT_OSS_LOW_LATENCY, speculative={'method': 'none'},
                          llm_api_options=_LOW_LATENCY),
    },
    'trtllm-gpt-oss-120b-eagle3': {
        'description': 'gpt-oss-120b + nvidia/gpt-oss-120b-Eagle3 (EAGLE-3, max_draft_len 3), low latency, '
                       'overlap scheduler and autotuner off, no KV block reuse.',
        'seeds': ['000'],
        'instance': _with(_GPT_OSS_LOW_LATENCY,
                          speculative={'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3',
                                       'max_draft_len': 3},
                          llm_api_options=_LOW_LATENCY_SPEC),
    },
    'trtllm-gpt-oss-120b-eagle3-v2': {
        'description': 'As trtllm-gpt-oss-120b-eagle3 with the nvidia/gpt-oss-120b-Eagle3-v2 head (better '
                       'below 8k context) and KV cache 0.95, as its recipe runs it.',
        'seeds': ['001'],
        'instance': _with(_GPT_OSS_LOW_LATENCY, gpu_memory_fraction=0.95,
                          speculative={'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3-v2',
                                       'max_draft_len': 3},
                          llm_api_options=_LOW_LATENCY_SPEC),
    },
    'trtllm-gpt-oss-120b-eagle3-long-context': {
        'description': 'DGX Spark recipe: gpt-oss-120b + nvidia/gpt-oss-120b-Eagle3-long-context, '
                       'max_draft_len 5, batch 1, overlap scheduler on, KV cache 0.9 without block reuse.',
        'seeds': ['002'],
        'instance': {
            'engine': 'trtllm',
            'model': 'openai/gpt-oss-120b',
            'max_batch_size': 1,
            'tensor_parallel_size': 1,
            'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3-long-context',
                            'max_draft_len': 5},
            'llm_api_options': {
                'enable_attention_dp': False,
                'disable_overlap_scheduler': False,
                'enable_autotuner': False,
                'cuda_graph_config': {'max_batch_size': 1},
                'kv_cache_config': {'free_gpu_memory_fraction': 0.9, 'enable_block_reuse': False},
            },
        },
    },
    'trtllm-llama-3.3-70b-fp4-draft-target': {
        'description': 'DGX Spark recipe: nvidia/Llama-3.3-70B-Instruct-FP4 verified by draft model '
                       'nvidia/Llama-3.1-8B-Instruct-FP4 (DraftTarget, max_draft_len 4), batch 1.',
        'seeds': ['002', '003'],
        'instance': {
            'engine': 'trtllm',
            'model': 'nvidia/Llama-3.3-70B-Instruct-FP4',
            'max_batch_size': 1,
            'tensor_parallel_size': 1,
            'gpu_memory_fraction': 0.9,
            'speculative': {'method': 'draft_target', 'draft_model': 'nvidia/Llama-3.1-8B-Instruct-FP4',
                            'max_draft_len': 4},
            'llm_api_options': {
                'print_iter_log': False,
                'disable_overlap_scheduler': True,
                'kv_cache_config': {'enable_block_reuse': False},
            },
        },
    },
    'trtllm-gpt-oss-120b-eagle3-b200': {
        'description': 'Production gpt-oss-120b + Eagle3 (max_draft_len 3) on 8x B200/GB200: TP8, EP4, '
                       'TRTLLM MoE, batch 10, 131072 tokens and sequence, KV cache 0.8, Torch sampler.',
        'seeds': ['004'],
        'instance': {
            'engine': 'trtllm',
            'model': 'openai/gpt-oss-120b',
            'max_batch_size': 10,
            'tensor_parallel_size': 8,
            'expert_parallel_size': 4,
            'max_num_tokens': 131072,
            'max_seq_len': 131072,
            'trust_remote_code': True,
            'sampler': 'torch',
            'speculative': {'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3},
            'llm_api_options': {
                'trust_remote_code': True,
                'kv_cache_config': {'enable_block_reuse': False, 'free_gpu_memory_fraction': 0.8},
                'cuda_graph_config': {'max_batch_size': 10},
                'moe_config': {'backend': 'TRTLLM'},
            },
        },
    },
    'vllm-gpt-oss-120b': {
        'description': 'vLLM gpt-oss-120b baseline, batch 1, 131072 context, 0.97 GPU memory, with the '
                       'gpt-oss reasoning and tool-call parsers and automatic tool choice.',
        'seeds': ['001'],
        'min_version': '0.11.0',
        'instance': _with(_VLLM_GPT_OSS, speculative={'method': 'none'}),
    },
    'vllm-gpt-oss-120b-eagle3': {
        'description': 'vLLM gpt-oss-120b + nvidia/gpt-oss-120b-Eagle3, 3 speculative tokens, draft TP 1.',
        'seeds': ['001'],
        'min_version': '0.11.0',
        'instance': _with(_VLLM_GPT_OSS, speculative={
            'method': 'eagle3', 'draft_model': 'nvidia/gpt-oss-120b-Eagle3', 'max_draft_len': 3,
            'options': {'draft_tensor_parallel_size': 1}}),
    },
    'vllm-qwen3-32b-eagle3': {
        'description': 'vLLM Qwen/Qwen3-32B served as "Qwen3-32B" + RedHatAI/Qwen3-32B-speculator.eagle3, '
                       '3 speculative tokens, deepseek_r1 reasoning parser.',
        'seeds': ['001'],
        'min_version': '0.11.0',
        'instance': {
            'engine': 'vllm',
            'model': 'Qwen/Qwen3-32B',
            'served_model_name': 'Qwen3-32B',
            'reasoning_parser': 'deepseek_r1',
            'speculative': {'method': 'eagle3', 'draft_model': 'RedHatAI/Qwen3-32B-speculator.eagle3',
                            'max_draft_len': 3},
        },
    },
    'vllm-gpt-oss-120b-arctic-suffix': {
        'description': 'vLLM gpt-oss-120b + Snowflake Arctic LSTM speculator (3 tokens) hybrid with suffix '
                       'decoding, through the ArcticInference plugin (its exact vllm pin must match the image; '
                       'the GptOss reasoning-parser name is that of the vLLM 0.10.1 the plugin pins).',
        'seeds': ['001'],
        'min_version': '0.10.1',
        'max_version': '0.10.1',
        'instance': {
            'engine': 'vllm',
            'model': 'openai/gpt-oss-120b',
            'tensor_parallel_size': 1,
            'max_batch_size': 1,
            'max_seq_len': 131072,
            'gpu_memory_fraction': 0.97,
            'reasoning_parser': 'GptOss',
            'speculative': {'method': 'arctic', 'draft_model': 'Snowflake/Arctic-LSTM-Speculator-gpt-oss-120b',
                            'max_draft_len': 3, 'suffix_decoding': True},
        },
    },
}


def list_profiles():
    """Name -> {engine, description, seeds, min_version, max_version} for every profile."""
    out = {}
    for name in sorted(PROFILES):
        prof = PROFILES[name]
        out[name] = {
            'engine': prof['instance']['engine'],
            'description': prof['description'],
            'seeds': list(prof['seeds']),
            'min_version': prof.get('min_version'),
            'max_version': prof.get('max_version'),
        }
    return out


def profiles_for(engine=None):
    """The named profiles (optionally of one engine): name -> engine, description, seeds, versions.

    It was the public ``specdec.serve.spec_profiles`` filter; no role or playbook called it, so it is internal now.
    A bad engine is still an ``AnsibleFilterError`` with the ``spec_profiles:`` prefix, as before."""
    profiles = list_profiles()
    if engine in (None, ''):
        return profiles
    if engine not in ('trtllm', 'vllm'):
        from ansible.errors import AnsibleFilterError
        raise AnsibleFilterError("spec_profiles: engine must be 'trtllm' or 'vllm', got %r" % (engine,))
    return dict((k, v) for k, v in profiles.items() if v['engine'] == engine)


def get_profile(name):
    """A deep copy of the profile's instance defaults, or None when there is no such profile."""
    prof = PROFILES.get(name)
    return None if prof is None else copy.deepcopy(prof['instance'])


def profile_meta(name):
    return PROFILES.get(name)
