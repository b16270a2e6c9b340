"""Engine version strings and comparison (1.1.0rc0 < 1.2.0rc1 < 1.2.0rc6 < 1.2.1 < 1.3.0rc3)."""

import os
import re

TRTLLM_VERSIONS = ("1.1.0rc0", "1.2.0rc1", "1.2.0rc6", "1.2.1", "1.3.0rc3")
VLLM_VERSIONS = ("0.11.0",)
DEFAULT_TRTLLM_VERSION = "1.2.0rc6"
DEFAULT_VLLM_VERSION = "0.11.0"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(rc|a|b|dev)(\d+))?(?:\.post(\d+))?")


def parse(version):
    """Return a sortable key; a release sorts after its release candidates."""
    m = _VERSION_RE.match(str(version).strip())
    if not m:
        raise ValueError("unparsable engine version: %r" % (version,))
    major, minor, patch, pre, prenum, post = m.groups()
    pre_key = (1, 0) if pre is None else (0, int(prenum or 0))
    return (int(major), int(minor), int(patch or 0)) + pre_key + (int(post or 0),)


def at_least(version, floor):
    return parse(version) >= parse(floor)


def engine_version(engine, env=None):
    """Version to emulate: SPECDEC_EMU_VERSION overrides ENGINE_VERSION (baked into each image)."""
    env = os.environ if env is None else env
    default = DEFAULT_TRTLLM_VERSION if engine == "trtllm" else DEFAULT_VLLM_VERSION
    version = env.get("SPECDEC_EMU_VERSION") or env.get("ENGINE_VERSION") or default
    parse(version)
    return version
