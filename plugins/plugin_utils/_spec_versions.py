# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine versions: parsing, ordering, the supported set and the ArcticInference pins.

The keys, types, literals, decoding types and trtllm-serve options of each engine version come from
the generated tables (spec_tables.py, engine_tables/*.json); every supported TensorRT-LLM family has
one. Nothing here lists the keys of a version. docs/spec_config.md says where each table comes from.
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
        # set by the render of an instance with judged_in_image_only: a release without a table of its own is
        # then rendered with another's (plugin_utils/_spec_tables.py: table_for, borrowed)
        self.judged_in_image = False
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


# TensorRT-LLM release lines we translate for (a .postN is its base release): every 1.1, 1.2 and 1.3 release. A release
# is judged on the controller only by a table of its own (plugin_utils/_spec_tables.py: table_for); one without is
# refused unless its instance opts into being judged in its image only.
TRTLLM_SUPPORTED = ('1.1.x', '1.2.x', '1.3.x')
# vLLM: any release in this range (each judged by its own table of the speculative config and the CLI).
VLLM_MIN = '0.9.0'
VLLM_BELOW = '1.0.0'

# One representative version per supported family, used by docs and tests.
TRTLLM_REPRESENTATIVE = ('1.1.0rc0', '1.2.0rc1', '1.2.0rc6', '1.2.0rc6.post1', '1.2.1', '1.3.0rc3')
VLLM_REPRESENTATIVE = ('0.10.1', '0.11.0', '0.14.1', '0.18.0', '0.31.0')


def trtllm_family(version):
    """The supported family of a TensorRT-LLM version, or None."""
    line = '%d.%d.x' % version.key[:2]
    return line if line in TRTLLM_SUPPORTED else None


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
