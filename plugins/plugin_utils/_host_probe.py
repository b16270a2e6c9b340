# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One read-only probe of what a role keeps on a host, and its comparison with what the role writes.

A role that can tell from one look whether it has anything to do runs ``ansible.builtin.command``
with :func:`argv` (a POSIX ``sh`` script, no module payload to build) and gives its output and the
expected state to :func:`drift`; the write tasks run only for what differs. The roles ask about:

- ``units``: systemd units, printed ``unit NAME ACTIVE ENABLED`` (``none`` where systemctl says nothing);
- ``execs``: executables, ``exec PATH yes|no``;
- ``dirs``: directories, ``dir PATH MODE:OWNER:GROUP`` or ``dir PATH -``;
- ``files``: regular files, ``file PATH MODE:OWNER:GROUP SHA1``; ``file PATH dir -`` when something
  that is not a regular file is there, ``file PATH - -`` when nothing is;
- ``imports``: ``{python: modules}``, ``import PYTHON ok|failed`` (the interpreter imports them all).

Modes print as ``stat -c %a`` does (``644``, no leading zero). Paths may hold spaces; a line's fixed
fields are split from the right.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

SCRIPT = r"""while [ "$#" -gt 1 ]; do
  k=$1; p=$2; shift 2
  case $k in
    unit)
      a=$(systemctl is-active "$p" 2>/dev/null); e=$(systemctl is-enabled "$p" 2>/dev/null)
      printf 'unit %s %s %s\n' "$p" "${a:-none}" "${e:-none}";;
    exec) if [ -f "$p" ] && [ -x "$p" ]; then echo "exec $p yes"; else echo "exec $p no"; fi;;
    dir) if [ -d "$p" ]; then echo "dir $p $(stat -c %a:%U:%G "$p")"; else echo "dir $p -"; fi;;
    file)
      if [ -f "$p" ]; then echo "file $p $(stat -c %a:%U:%G "$p") $(sha1sum < "$p" | cut -c1-40)"
      elif [ -e "$p" ]; then echo "file $p dir -"
      else echo "file $p - -"; fi;;
    import:*)
      if [ -x "$p" ] && "$p" -c "import ${k#import:}" >/dev/null 2>&1; then echo "import $p ok"; else echo "import $p failed"; fi;;
  esac
done"""

KINDS = ("unit", "exec", "dir", "file", "import")
# the fixed fields after the path on each kind's line
_FIELDS = {"unit": 2, "exec": 1, "dir": 1, "file": 2, "import": 1}
_MODULES = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(,[A-Za-z_][A-Za-z0-9_.]*)*$")
_UNIT = re.compile(r"^[A-Za-z0-9@_.:\\-]+$")


class ProbeError(ValueError):
    """A request the probe cannot answer."""


def _paths(name, values):
    values = list(values or [])
    for v in values:
        if not isinstance(v, str) or not v.startswith("/") or "\n" in v:
            raise ProbeError("%s: %r is not an absolute path on one line" % (name, v))
    return values


def _imports(imports):
    imports = dict(imports or {})
    for python, modules in imports.items():
        _paths("imports", [python])
        if not isinstance(modules, str) or not _MODULES.match(modules.replace(" ", "")):
            raise ProbeError("imports: %r is not a comma-separated list of module names" % (modules,))
    return imports


def argv(units=(), execs=(), dirs=(), files=(), imports=None):
    """The command's argv: ``sh -c SCRIPT host-probe KIND ARG ...``."""
    for unit in units or []:
        if not isinstance(unit, str) or not _UNIT.match(unit):
            raise ProbeError("units: %r is not a systemd unit name" % (unit,))
    args = []
    for kind, values in (("unit", list(units or [])), ("exec", _paths("execs", execs)),
                         ("dir", _paths("dirs", dirs)), ("file", _paths("files", files))):
        for value in values:
            args += [kind, value]
    for python, modules in _imports(imports).items():
        args += ["import:" + modules.replace(" ", ""), python]
    return ["sh", "-c", SCRIPT, "host-probe"] + args


def parse(lines):
    """The probe's output: {kind: {path or unit: the rest of its line}}."""
    found: dict[str, dict[str, str]] = dict((kind, {}) for kind in KINDS)
    for line in lines or []:
        kind, rest = (line.split(" ", 1) + [""])[:2]
        if kind not in found:
            continue
        fields = rest.rsplit(" ", _FIELDS[kind])
        if len(fields) == _FIELDS[kind] + 1:
            found[kind][fields[0]] = " ".join(fields[1:])
    return found


def _owner(spec, name):
    if not isinstance(spec, dict):
        raise ProbeError("%s: expected a dict with mode, owner and group, got %r" % (name, spec))
    try:
        mode = "%o" % int(str(spec["mode"]), 8)
    except (KeyError, ValueError):
        raise ProbeError("%s: mode must be an octal string such as '0644', got %r" % (name, spec.get("mode")))
    return "%s:%s:%s" % (mode, spec.get("owner", "root"), spec.get("group", "root"))


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def expected(units=None, execs=(), dirs=None, files=None, imports=None):
    """{kind: {path: line rest}} as :func:`parse` gives it for a host that is as wanted.

    ``units`` {name: 'ACTIVE ENABLED'}; ``dirs`` {path: {mode, owner, group}}; ``files`` {path: {mode,
    owner, group, and content (text) or sha1}}, or None for a path that must not be there.
    """
    want: dict[str, dict[str, str]] = dict((kind, {}) for kind in KINDS)
    for unit, state in (units or {}).items():
        want["unit"][unit] = state
    for path in _paths("execs", execs):
        want["exec"][path] = "yes"
    for path, spec in (dirs or {}).items():
        want["dir"][_paths("dirs", [path])[0]] = _owner(spec, path)
    for path, spec in (files or {}).items():
        _paths("files", [path])
        if spec is None:
            want["file"][path] = "- -"
            continue
        digest = spec.get("sha1") if isinstance(spec, dict) and "content" not in spec else None
        if digest is None:
            if not isinstance(spec, dict) or not isinstance(spec.get("content"), str):
                raise ProbeError("%s: expected content (text) or sha1" % path)
            digest = sha1(spec["content"])
        want["file"][path] = "%s %s" % (_owner(spec, path), digest)
    for python in _imports(imports):
        want["import"][python] = "ok"
    return want


def drift(lines, **wanted):
    """What differs from :func:`expected` (same keywords): sorted ``'KIND PATH'`` strings, [] when none.

    Only what is asked about is compared: one probe's output can be read in parts.
    """
    found = parse(lines)
    off = []
    for kind, paths in expected(**wanted).items():
        for path, state in paths.items():
            if found[kind].get(path) != state:
                off.append("%s %s" % (kind, path))
    return sorted(off)
