# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs: the one owner of every role setting's name, type, default and choices.

``roles/<role>/meta/argument_specs.yml`` declares each setting; ``roles/<role>/defaults/main.yml`` is
generated from it (scripts/role_defaults.py), and Python reads a default or the choices here, never from a
copy of its own. A default that is a template the spec cannot hold (the docs tooling reads the default of a
list as its elements' type) is in ``roles/<role>/meta/default_templates.yml``, for a setting whose spec
gives none; :func:`load_options` joins it to the setting as its default.

Read here by the settings action (:func:`load_options`), the modules that take settings (gateway,
monitoring, bench_select, serving_plan, fleet) and the ``setting_default`` filter, which gives a play or
another role a setting's default where the role's own defaults are not loaded.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import copy
import os

import yaml

# libyaml's loader where PyYAML has it (about ten times faster; a role reads its spec on every run)
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'roles'))
_CACHE: dict[str, Any] = {}


class RoleSpecError(ValueError):
    """No such role, or no such setting."""


def _path(role, roles_dir, name='argument_specs.yml'):
    return os.path.join(roles_dir, role, 'meta', name)


def _read(path, what):
    """The YAML of a file, read again only when it changed."""
    info = os.stat(path)
    stamp = (info.st_mtime_ns, info.st_size)
    cached = _CACHE.get(path)
    if cached is None or cached[0] != stamp:
        with open(path) as handle:
            data = yaml.load(handle, Loader=_LOADER) or {}
        if not isinstance(data, dict):
            raise RoleSpecError('%s: %s is not a mapping' % (path, what))
        _CACHE[path] = cached = (stamp, data)
    return cached[1]


def roles(roles_dir=ROLES_DIR):
    """The roles that have an argument spec, sorted."""
    return sorted(r for r in os.listdir(roles_dir) if os.path.isfile(_path(r, roles_dir)))


def entry_points(role, roles_dir=ROLES_DIR):
    """The role's argument_specs mapping (entry point -> its spec), as the file has it."""
    path = _path(role, roles_dir)
    if not os.path.isfile(path):
        raise RoleSpecError('no argument spec for role %r (%s)' % (role, path))
    return _read(path, 'the argument spec').get('argument_specs') or {}


def default_templates(role, roles_dir=ROLES_DIR):
    """{setting: template} of roles/<role>/meta/default_templates.yml (empty without the file)."""
    path = _path(role, roles_dir, 'default_templates.yml')
    return _read(path, 'the default templates') if os.path.isfile(path) else {}


def load_options(role, roles_dir=ROLES_DIR):
    """The options of every entry point of a role, merged (the first entry point's wins on a name).

    Every entry point checks them all (each has a default in defaults/main.yml), so that an entry
    point included from another (docker_host's daemon_json from main) registers the same settings.
    The mapping is shared: read it, do not change it.
    """
    options: dict[str, Any] = {}
    for entry in entry_points(role, roles_dir).values():
        for name, option in (entry.get('options') or {}).items():
            options.setdefault(name, option or {})
    for name, template in default_templates(role, roles_dir).items():
        if name not in options or 'default' in options[name]:
            raise RoleSpecError('%s (meta/default_templates.yml of role %s): %s' % (
                name, role, 'not a setting of the role' if name not in options else 'its argument spec gives a default too'))
        owner = template.get('follows') if isinstance(template, dict) else None
        if isinstance(template, dict) and (list(template) != ['follows'] or not isinstance(owner, str)):
            raise RoleSpecError('%s (meta/default_templates.yml of role %s): a mapping must be {follows: <setting>}'
                                % (name, role))
        if owner is None:
            options[name] = dict(options[name], default=template)
        else:
            # the owner's value where the play has it, else the owner's default
            options[name] = dict(options[name], follows=owner,
                                 default="{{ %s | default('%s' | specdec.serve.setting_default) }}" % (owner, owner))
    return options


# A setting named as its role is the role's switch (monitoring_tune_loop: run the tune loop or not): Python reads it as
# ``enabled``, as it reads every other setting without the role's prefix.
SWITCH = 'enabled'


def short_name(role, name):
    """A setting's name as Python reads it: without the role's prefix (gateway_port -> port); the role's switch, the
    setting named as the role, is ``enabled``."""
    if name == role:
        return SWITCH
    return name[len(role) + 1:] if name.startswith(role + '_') else name


def full_name(role, short, roles_dir=ROLES_DIR):
    """The setting a short name stands for in a role (:func:`short_name` reversed)."""
    if short == SWITCH and role in load_options(role, roles_dir):
        return role
    return '%s_%s' % (role, short)


def role_of(name, roles_dir=ROLES_DIR):
    """The role that declares a setting: the longest role name that prefixes it (fleet_view_* is fleet_view's, not another role's that prefixes it), or
    that it is (a role's switch)."""
    for role in sorted(roles(roles_dir), key=len, reverse=True):
        if (name == role or name.startswith(role + '_')) and name in load_options(role, roles_dir):
            return role
    raise RoleSpecError('%s: not a setting of any role of this collection' % name)


def option(name, role=None, roles_dir=ROLES_DIR):
    """The spec of one setting (type, default, choices, ...)."""
    role = role or role_of(name, roles_dir)
    found = load_options(role, roles_dir).get(name)
    if found is None:
        raise RoleSpecError('%s: not a setting of role %s' % (name, role))
    return found


def follows(name, role=None, roles_dir=ROLES_DIR):
    """The setting whose value a setting's default follows (``{follows: <setting>}`` in meta/default_templates.yml),
    else None."""
    return option(name, role, roles_dir).get('follows')


def _resolved(found, roles_dir, seen=()):
    """The default of an option as found: for one that follows another setting, that setting's default."""
    owner = found.get('follows')
    if owner is None:
        return copy.deepcopy(found.get('default'))
    if owner in seen:
        raise RoleSpecError('%s: its default follows itself' % owner)
    return _resolved(option(owner, None, roles_dir), roles_dir, seen + (owner,))


def default(name, role=None, roles_dir=ROLES_DIR):
    """A setting's default, as its spec gives it (None when it gives none; the owner's default for one that follows
    another setting); a copy, safe to change."""
    return _resolved(option(name, role, roles_dir), roles_dir)


def value_of(name, found, roles_dir=ROLES_DIR):
    """A setting's value as a host has it: ``found[name]`` where set (not None), else, for a default that follows
    another setting, that setting's value in `found`, else the default."""
    if found.get(name) is not None:
        return copy.deepcopy(found[name])
    owner = follows(name, None, roles_dir)
    if owner is not None:
        return value_of(owner, found, roles_dir)
    return default(name, None, roles_dir)


def choices(name, role=None, roles_dir=ROLES_DIR):
    """A setting's choices (a list; empty when any value of its type is allowed)."""
    return list(option(name, role, roles_dir).get('choices') or [])


def defaults(role, names=None, roles_dir=ROLES_DIR):
    """{name without the role prefix: default} of the role's settings (those named, else all); copies."""
    options = load_options(role, roles_dir)
    wanted = [full_name(role, n, roles_dir) for n in names] if names is not None else list(options)
    out = {}
    for full in wanted:
        if full not in options:
            raise RoleSpecError('%s: not a setting of role %s' % (full, role))
        out[short_name(role, full)] = _resolved(options[full], roles_dir)
    return out
