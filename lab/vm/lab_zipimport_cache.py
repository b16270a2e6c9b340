"""Compiled-code cache for modules imported from zip files, on the aarch64 lab hosts only.

Every Ansible task ships its module and module_utils to the host as a zip (AnsiballZ) and Python compiles
them from source on each import: a zip holds no bytecode. Native, that is a fraction of a second; under
full-system emulation (these hosts' CPU is emulated, lab/vmhost.py) it is seconds per task. This keeps the
compiled code of each source text (by its SHA-256) in /var/cache/lab-zipimport, so a task compiles only
what changed since the last. Loaded at interpreter start by lab_zipimport_cache.pth; what a module does,
and what it returns, is unchanged.
"""

import hashlib
import marshal
import os
import zipimport

_CACHE = "/var/cache/lab-zipimport"
_compile_source = zipimport._compile_source  # type: ignore[attr-defined]


def _cached_compile_source(pathname, source):
    digest = hashlib.sha256(source if isinstance(source, bytes) else source.encode()).hexdigest()
    path = os.path.join(_CACHE, digest[:2], digest)
    try:
        with open(path, "rb") as cached:
            return marshal.load(cached)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        partial = "%s.%d" % (path, os.getpid())
        with open(partial, "wb") as out:
            marshal.dump(code, out)
        os.replace(partial, path)
    except OSError:
        pass
    return code


zipimport._compile_source = _cached_compile_source  # type: ignore[attr-defined]
