# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate every role's defaults/main.yml from its meta/argument_specs.yml.

The argument spec owns each setting (name, type, default, choices, description); defaults/main.yml is
derived from it: one entry per option, in the spec's order, its default as the spec gives it (an option
without one is null; a required option has no entry; a template the spec cannot hold comes from
meta/default_templates.yml), under the first sentence of its description::

    python3 scripts/role_defaults.py write [ROLE ...]    # (re)write the defaults files
    python3 scripts/role_defaults.py --check [ROLE ...]  # exit 1 when one differs from its spec

The specs are read by plugins/plugin_utils/_role_spec.py, the reader the settings action and the filters use.
"""

from __future__ import absolute_import, division, print_function

import argparse
import importlib.util
import os
import re
import sys
import textwrap

import yaml

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
ROLES_DIR = os.path.join(TOP, 'roles')
WIDTH = 100
HEADER = ('---\n'
          '# Generated from meta/argument_specs.yml, which owns every setting (type, default, choices, description):\n'
          '# change a default there, then run  python3 scripts/role_defaults.py write\n'
          '# (scripts/role_defaults.py --check, run by the unit tests, refuses a file that differs).\n')


def _role_spec():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'plugins', 'plugin_utils', '_role_spec.py')
    spec = importlib.util.spec_from_file_location('specdec_role_spec', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# C(x), V(x), O(x), M(x), ... as plain text; O(fqcn#role:entry:name) as the name; L(text,url) as the text.
_MARKUP = re.compile(r'\b([BCEIMOPUV])\(((?:[^()]|\([^()]*\))*)\)')
_LINK = re.compile(r'\bL\(([^,()]*),[^()]*\)')
# A sentence ends at '. ' before a capital, unless the period ends e.g., i.e. or etc.
_SENTENCE = re.compile(r'(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.\s+(?=[A-Z])')


def _plain(text):
    text = _LINK.sub(lambda m: m.group(1), text)
    return _MARKUP.sub(lambda m: m.group(2).rsplit(':', 1)[-1] if m.group(1) == 'O' and '#' in m.group(2)
                       else m.group(2), text)


def short_description(option):
    """The first sentence of an option's description, without markup."""
    text = option.get('description') or ''
    if isinstance(text, list):
        text = text[0] if text else ''
    text = ' '.join(_plain(str(text)).split())
    first = _SENTENCE.split(text, 1)[0]
    return first if first.endswith('.') or not first else first + '.'


class _Dumper(yaml.SafeDumper):
    """Block mappings, sequences indented under their key (yamllint's indentation); a long string folded."""

    def increase_indent(self, flow=False, indentless=False):
        return super(_Dumper, self).increase_indent(flow, False)


class _Folded(str):
    """A string too long for its line: folded (>-)."""


def _str(dumper, value):
    if isinstance(value, _Folded):
        style = '>'
    elif '\n' in value:
        style = '|'
    elif "'" in value and '"' not in value and '\\' not in value:
        style = '"'
    else:
        style = None
    return dumper.represent_scalar('tag:yaml.org,2002:str', str(value), style=style)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Folded, _str)


def _entry(name, value):
    """``name: value``: a collection on one line (flow) when it fits, else in block style; a string that
    does not fit folded."""
    if isinstance(value, str) and '\n' not in value and len(name) + len(value) + 4 > WIDTH:
        value = _Folded(value)
    if isinstance(value, (list, dict)) and value:
        flow = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, width=10 ** 6).strip()
        if len(name) + 2 + len(flow) <= WIDTH and '\n' not in flow:
            return '%s: %s\n' % (name, flow)
    return yaml.dump({name: value}, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=WIDTH,
                     allow_unicode=True)


def options(role, roles_dir=None):
    """(name, option) of every option of the role that has a defaults entry, in the spec's order."""
    return [(name, option) for name, option in _role_spec().load_options(role, roles_dir or ROLES_DIR).items()
            if not option.get('required')]


def render(role, roles_dir=None):
    """The text of roles/<role>/defaults/main.yml."""
    parts, values = [HEADER], {}
    for name, option in options(role, roles_dir):
        value = option.get('default')
        values[name] = value
        comment = textwrap.wrap(short_description(option), WIDTH - 2) or ['(no description)']
        parts.append('\n' + ''.join('# %s\n' % line for line in comment) + _entry(name, value))
    text = ''.join(parts)
    if yaml.safe_load(text) != (values or None):
        raise ValueError('%s: the generated defaults do not read back as the spec gives them' % role)
    return text


def _path(role, roles_dir):
    return os.path.join(roles_dir, role, 'defaults', 'main.yml')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--check', action='store_true', help='exit 1 when a defaults file differs from its spec')
    parser.add_argument('words', nargs='*', metavar='write | ROLE',
                        help='write: (re)write the files; then the roles (default: every role with an argument spec)')
    args = parser.parse_args(argv)
    write = bool(args.words) and args.words[0] == 'write'
    if write == args.check:
        parser.error('give write or --check')
    roles = args.words[1 if write else 0:] or _role_spec().roles(ROLES_DIR)
    stale = []
    for role in roles:
        text = render(role, ROLES_DIR)
        path = _path(role, ROLES_DIR)
        current = open(path).read() if os.path.exists(path) else None
        if current == text:
            continue
        if args.check:
            stale.append(os.path.relpath(path, TOP))
        else:
            with open(path, 'w') as handle:
                handle.write(text)
            print('wrote %s' % os.path.relpath(path, TOP))
    if stale:
        print('not generated from meta/argument_specs.yml (python3 scripts/role_defaults.py write): %s'
              % ', '.join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
