"""Model arguments: a local directory or a Hugging Face id found in the HF cache layout.

The emulator never downloads: the lab's hosts get weights ahead of time, like an air-gapped fleet.
"""

import json
import os
import re

from .trtllm_args import EngineConfigError

TIKTOKEN_FILES = ("o200k_base.tiktoken", "cl100k_base.tiktoken")
# The sha256 values tiktoken pins for the published encodings.
TIKTOKEN_SHA256 = {
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
HARMONY_ERROR = "error downloading or loading vocab file: failed to download or load vocab file"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?$")


class ResolvedModel:
    def __init__(self, arg, path, config):
        self.arg = arg            # as given on the command line
        self.path = path          # directory holding config.json
        self.config = config      # parsed config.json
        self.model_type = config.get("model_type")
        self.basename = os.path.basename(os.path.normpath(arg)) if os.path.isdir(arg) else arg

    @property
    def emulator_profile(self):
        """Optional `emulator.json` next to config.json (see clock.Profile)."""
        p = os.path.join(self.path, "emulator.json")
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as fh:
                return json.load(fh)
        return {}


def hf_home(env=None):
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return os.path.join(home, "hub")


def _snapshot(repo_id, revision=None, env=None):
    base = os.path.join(hf_home(env), "models--" + repo_id.replace("/", "--"))
    if not os.path.isdir(base):
        return None
    rev = revision or "main"
    ref = os.path.join(base, "refs", rev)
    commit = rev
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as fh:
            commit = fh.read().strip()
    snap = os.path.join(base, "snapshots", commit)
    if os.path.isdir(snap):
        return snap
    snaps = os.path.join(base, "snapshots")
    if revision is None and os.path.isdir(snaps):
        found = sorted(os.listdir(snaps))
        if len(found) == 1:
            return os.path.join(snaps, found[0])
    return None


def resolve(arg, revision=None, what="model", env=None):
    """Return a ResolvedModel or raise EngineConfigError worded like huggingface_hub/transformers."""
    path = None
    if os.path.isdir(arg):
        path = arg
    elif arg.startswith(("/", ".", "~")) or not _REPO_ID.match(arg) or arg.count("/") > 1:
        raise EngineConfigError(
            "huggingface_hub.errors.HFValidationError",
            "Repo id must be in the form 'repo_name' or 'namespace/repo_name': '%s'. "
            "Use `repo_type` argument if needed." % arg)
    else:
        path = _snapshot(arg, revision, env)
        if path is None:
            if (os.environ if env is None else env).get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
                raise EngineConfigError(
                    "huggingface_hub.errors.LocalEntryNotFoundError",
                    "Cannot find the requested files in the disk cache and outgoing traffic has been "
                    "disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' "
                    "to False.")
            raise EngineConfigError(
                "OSError",
                "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find "
                "them in the cached files. Check your internet connection or see how to run the library "
                "in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.")
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        raise EngineConfigError(
            "OSError",
            "%s does not appear to have a file named config.json. Checkout "
            "'https://huggingface.co/%s/tree/main' for available files." % (path, arg.strip("/")))
    try:
        with open(cfg, encoding="utf-8") as fh:
            config = json.load(fh)
    except ValueError as exc:
        raise EngineConfigError("json.decoder.JSONDecodeError", str(exc))
    if not isinstance(config, dict):
        raise EngineConfigError("ValueError", "%s is not a model configuration" % cfg)
    return ResolvedModel(arg, path, config)


def check_harmony_encodings(env=None):
    """gpt-oss chat goes through openai_harmony, which loads o200k_base at start-up.

    With no TIKTOKEN_ENCODINGS_BASE it would download (no network here); with one, the files must
    be there. SPECDEC_EMU_TIKTOKEN_VERIFY=1 also checks the published sha256.
    """
    env = os.environ if env is None else env
    base = env.get("TIKTOKEN_ENCODINGS_BASE")
    if not base:
        raise EngineConfigError("openai_harmony.HarmonyError", HARMONY_ERROR)
    verify = env.get("SPECDEC_EMU_TIKTOKEN_VERIFY", "0") == "1"
    for name in TIKTOKEN_FILES:
        p = os.path.join(base, name)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            raise EngineConfigError("openai_harmony.HarmonyError", HARMONY_ERROR)
        if verify:
            import hashlib
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != TIKTOKEN_SHA256[name]:
                raise EngineConfigError("openai_harmony.HarmonyError", HARMONY_ERROR)
