# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine versions: parsing, ordering, the supported set and the hand-kept feature table.

The keys, types and literals of each engine version come from the generated tables
(spec_tables.py, engine_tables/*.json) where a version has one. What is kept here by hand: the
supported set, the decoding-type and trtllm-serve option rows of the TensorRT-LLM releases that
have no table yet (transcribed from their llm_args / trtllm-serve pages), and the ArcticInference
pins. docs/spec_config.md says which versions use which.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

TRTLLM = 'trtllm'
VLLM = 'vllm'
ENGINES = (TRTLLM, VLLM)
ENGINE_TITLES = {TRTLLM: 'TensorRT-LLM', VLLM: 'vLLM'}


class SpecConfigError(ValueError):
    """A spec that the target engine/version would reject, explained for the user."""


_TRT_RE = re.compile(r'^v?(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?(?:\.post(\d+))?$')
_VLLM_RE = re.compile(r'^v?(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:rc(\d+))?(?:\.post(\d+))?$')
_TAG_VERSION_RE = re.compile(r'^(v?\d+\.\d+\.\d+(?:\.\d+)?(?:rc\d+)?(?:\.post\d+)?)(?:[-_+].*)?$')
_FINAL = 1 << 30  # a final release sorts after every rc of the same version


class EngineVersion:
    """A parsed engine version that compares like a release number."""

    def __init__(self, engine, text):
        self.engine = engine
        self.text = str(text).strip()
        if engine == TRTLLM:
            m = _TRT_RE.match(self.text)
            if not m:
                raise SpecConfigError(
                    "'%s' is not a TensorRT-LLM version (expected e.g. 1.2.0rc6, 1.2.0rc6.post1 or 1.2.1)" % self.text)
            major, minor, patch, rc, post = m.groups()
            self.key = (int(major), int(minor), int(patch), 0,
                        int(rc) if rc is not None else _FINAL, int(post or 0))
        elif engine == VLLM:
            m = _VLLM_RE.match(self.text)
            if not m:
                raise SpecConfigError("'%s' is not a vLLM version (expected e.g. 0.11.0 or v0.11.0)" % self.text)
            major, minor, patch, micro, rc, post = m.groups()
            self.key = (int(major), int(minor), int(patch), int(micro or 0),
                        int(rc) if rc is not None else _FINAL, int(post or 0))
        else:
            raise SpecConfigError("unknown engine '%s' (allowed: %s)" % (engine, ', '.join(ENGINES)))
        if self.text.startswith('v'):
            self.text = self.text[1:]

    @property
    def base(self):
        """The version without its .postN suffix, as text."""
        return re.sub(r'\.post\d+$', '', self.text)

    def _cmp_key(self, other):
        if isinstance(other, EngineVersion):
            return other.key
        return EngineVersion(self.engine, other).key

    def __ge__(self, other):
        return self.key >= self._cmp_key(other)

    def __lt__(self, other):
        return self.key < self._cmp_key(other)

    def __le__(self, other):
        return self.key <= self._cmp_key(other)

    def __gt__(self, other):
        return self.key > self._cmp_key(other)

    def __eq__(self, other):
        return self.key == self._cmp_key(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((self.engine, self.key))

    def __str__(self):
        return self.text

    def __repr__(self):
        return 'EngineVersion(%r, %r)' % (self.engine, self.text)

    def title(self):
        return '%s %s' % (ENGINE_TITLES[self.engine], self.text)


# TensorRT-LLM releases whose strictness (llm_args schema, CLI) we know. A .postN of any of them is
# accepted with the same schema; 1.3.x means every 1.3 release (schema of the 1.3.0rc3 code).
TRTLLM_SUPPORTED = ('1.1.0rc0', '1.2.0rc1', '1.2.0rc6', '1.2.1', '1.3.x')
# vLLM: no per-key strictness table beyond the speculative config; any release in this range.
VLLM_MIN = '0.9.0'
VLLM_BELOW = '1.0.0'

# One representative version per supported family, used by docs and tests.
TRTLLM_REPRESENTATIVE = ('1.1.0rc0', '1.2.0rc1', '1.2.0rc6', '1.2.0rc6.post1', '1.2.1', '1.3.0rc3', '1.3.0')
VLLM_REPRESENTATIVE = ('0.10.1', '0.11.0', '0.14.1', '0.18.0')


def trtllm_family(version):
    """The supported family of a TensorRT-LLM version, or None."""
    base = version.base
    if base in TRTLLM_SUPPORTED:
        return base
    if version.key[:2] == (1, 3):
        return '1.3.x'
    return None


def check_supported(version):
    """Raise SpecConfigError unless the version is one we can translate for."""
    if version.engine == TRTLLM:
        if trtllm_family(version) is None:
            raise SpecConfigError(
                "TensorRT-LLM %s is not a supported version (supported: %s, each also as .postN); TensorRT-LLM "
                "rejects unknown keys and its schema changes between release candidates, so set engine_version "
                "to one of these or use an image of one" % (version.text, ', '.join(TRTLLM_SUPPORTED)))
    else:
        if not (version >= VLLM_MIN and version < VLLM_BELOW):
            raise SpecConfigError("vLLM %s is not supported (supported: %s <= version < %s)"
                                  % (version.text, VLLM_MIN, VLLM_BELOW))


def version_from_image(image):
    """The version in an image reference's tag, or None.

    ``nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6`` -> ``1.2.0rc6``;
    ``vllm/vllm-openai:v0.11.0`` -> ``0.11.0``; ``repo/x:1.2.1-arm64`` -> ``1.2.1``;
    no tag, ``latest`` or ``spark-single-gpu-dev`` -> None.
    """
    if not image:
        return None
    ref = str(image).split('@', 1)[0]
    last = ref.rsplit('/', 1)[-1]
    if ':' not in last:
        return None
    tag = last.rsplit(':', 1)[1]
    m = _TAG_VERSION_RE.match(tag)
    if not m:
        return None
    text = m.group(1)
    return text[1:] if text.startswith('v') else text


def resolve_version(engine, engine_version=None, image=None):
    """EngineVersion from an explicit engine_version, else from the image tag; validated."""
    text = engine_version
    source = 'engine_version'
    if text in (None, ''):
        text = version_from_image(image)
        source = "the tag of image '%s'" % image
        if text is None:
            raise SpecConfigError(
                "cannot tell the %s version: engine_version is not set and the image tag of '%s' is not a "
                "version; set engine_version (e.g. %s)"
                % (ENGINE_TITLES.get(engine, engine), image, '1.2.0rc6' if engine == TRTLLM else '0.11.0'))
    try:
        version = EngineVersion(engine, text)
    except SpecConfigError as exc:
        raise SpecConfigError('%s (from %s)' % (exc, source))
    check_supported(version)
    return version


# ---------------------------------------------------------------------------------------------
# TensorRT-LLM version table. (since, removed_in): present when since <= v < removed_in.
# ---------------------------------------------------------------------------------------------

def available(version, since=None, removed_in=None):
    if since is not None and version < since:
        return False
    if removed_in is not None and version >= removed_in:
        return False
    return True


# EAGLE-3 is requested as decoding_type Eagle up to 1.2.x and Eagle3 from 1.3 (PR #10124).
TRTLLM_EAGLE3_DECODING_TYPE_SINCE = '1.3.0rc0'

# decoding_type -> (since, removed_in, note on the pytorch backend or None)
TRTLLM_DECODING_TYPES = {
    'MTP': (None, None, None),
    'Eagle': (None, None, None),
    'Eagle3': (TRTLLM_EAGLE3_DECODING_TYPE_SINCE, None, None),
    'NGram': (None, None, None),
    'DraftTarget': (None, None, None),
    'AUTO': (None, None, None),
    'SaveState': ('1.2.0rc1', None, None),
    'Medusa': (None, None, 'Medusa is rejected by the pytorch backend that specdec.serve runs'),
    'Lookahead': (None, None, 'Lookahead is rejected by the pytorch backend that specdec.serve runs'),
    'UserProvided': (None, None, 'UserProvided needs a Python drafter object and cannot be set from YAML'),
}


def trtllm_decoding_types(version):
    return sorted(k for k, (since, removed, _note) in TRTLLM_DECODING_TYPES.items()
                  if available(version, since, removed))


# trtllm-serve options: name -> (since, removed_in, takes_value, canonical)
TRTLLM_CLI = {
    '--tokenizer': (None, None, True, None),
    '--custom_tokenizer': ('1.2.1', None, True, None),
    '--host': (None, None, True, None),
    '--port': (None, None, True, None),
    '--backend': (None, None, True, None),
    '--custom_module_dirs': ('1.2.0rc6', None, True, None),
    '--log_level': (None, None, True, None),
    '--max_beam_width': (None, None, True, None),
    '--max_batch_size': (None, None, True, None),
    '--max_num_tokens': (None, None, True, None),
    '--max_seq_len': (None, None, True, None),
    '--tp_size': (None, None, True, None),
    '--tensor_parallel_size': ('1.2.0rc6', None, True, '--tp_size'),
    '--pp_size': (None, None, True, None),
    '--pipeline_parallel_size': ('1.2.0rc6', None, True, '--pp_size'),
    '--cp_size': ('1.2.0rc6', None, True, None),
    '--context_parallel_size': ('1.2.0rc6', None, True, '--cp_size'),
    '--ep_size': (None, None, True, None),
    '--moe_expert_parallel_size': (None, None, True, '--ep_size'),
    '--cluster_size': (None, None, True, None),
    '--moe_cluster_parallel_size': (None, None, True, '--cluster_size'),
    '--gpus_per_node': (None, None, True, None),
    '--kv_cache_free_gpu_memory_fraction': (None, None, True, None),
    '--free_gpu_memory_fraction': ('1.2.0rc6', None, True, '--kv_cache_free_gpu_memory_fraction'),
    '--num_postprocess_workers': (None, None, True, None),
    '--trust_remote_code': (None, None, False, None),
    '--revision': ('1.2.0rc6', None, True, None),
    '--extra_llm_api_options': (None, None, True, None),
    '--config': ('1.2.0rc6', None, True, '--extra_llm_api_options'),
    '--reasoning_parser': (None, None, True, None),
    '--tool_parser': ('1.2.0rc6', None, True, None),
    '--metadata_server_config_file': (None, None, True, None),
    '--server_role': (None, None, True, None),
    '--fail_fast_on_attention_window_too_large': (None, None, False, None),
    '--enable_chunked_prefill': ('1.2.0rc1', None, False, None),
    '--otlp_traces_endpoint': ('1.2.0rc6', None, True, None),
    '--disagg_cluster_uri': ('1.2.0rc6', None, True, None),
    '--media_io_kwargs': ('1.2.0rc6', None, True, None),
    '--chat_template': ('1.2.0rc6', None, True, None),
    '--grpc': ('1.3.0rc0', None, False, None),
}

# --reasoning_parser / --tool_parser choices: list of (since, choices); the last matching row wins.
TRTLLM_REASONING_PARSERS = [(None, ('deepseek-r1',)), ('1.2.0rc6', ('deepseek-r1', 'qwen3', 'nano-v3'))]
TRTLLM_TOOL_PARSERS = [('1.2.0rc6', ('qwen3', 'qwen3_coder', 'kimi_k2'))]


def choices_for(version, rows):
    found = None
    for since, choices in rows:
        if since is None or version >= since:
            found = choices
    return found


# ---------------------------------------------------------------------------------------------
# vLLM / ArcticInference
# ---------------------------------------------------------------------------------------------

# Which vLLM releases accept `num_speculative_tokens_per_batch_size` (the dynamic K schedule) and every
# other --speculative-config key is read from the generated tables (spec_tables.py), not kept here.

# arctic-inference release -> the exact vllm version its [vllm] extra pins (the plugin raises
# RuntimeError at start-up unless vllm.__version__ equals it). From the release tags of
# snowflakedb/ArcticInference (pyproject.toml at each tag).
ARCTIC_INFERENCE_VLLM_PINS = {
    '0.0.6': '0.8.4',
    '0.0.7': '0.8.4',
    '0.0.8': '0.9.0.1',
    '0.0.9': '0.9.2',
    '0.1.0': '0.10.1',
    '0.1.2': '0.11.0',
    '0.2.0': '0.18.0',
}


def arctic_release_for(vllm_version):
    """The newest arctic-inference release pinned to exactly this vllm version, or None."""
    matches = [rel for rel, pin in ARCTIC_INFERENCE_VLLM_PINS.items()
               if EngineVersion(VLLM, pin) == vllm_version]
    if not matches:
        return None
    return sorted(matches, key=lambda r: tuple(int(p) for p in r.split('.')))[-1]
