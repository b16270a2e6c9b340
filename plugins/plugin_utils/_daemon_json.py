# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker_host role's daemon.json merge and its checks, from what daemon_json_state read on the host.

The fragments are: the hand-written daemon.json being adopted (``00-preexisting``), the files of the
fragment directory, then the fragments the role was given (a None value removes one), later ones winning by
name; they are merged sorted by name, mappings recursively, later fragments winning on lists and scalars.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._roles.docker_host import no_firewall_bypass

ADOPTED = '00-preexisting'
# the mode of what the role writes (owner and group root): the fragment directory, the fragments and daemon.json
MODES = {'dir': '0755', 'file': '0644'}
# daemon.json keys whose dockerd flag is spelled differently; any other key is its own flag name.
FLAG_NAMES = {
    'runtimes': 'add-runtime',
    'log-opts': 'log-opt',
    'registry-mirrors': 'registry-mirror',
    'insecure-registries': 'insecure-registry',
    'labels': 'label',
    'exec-opts': 'exec-opt',
    'hosts': 'host',
    'dns': 'dns',
}
_FLAG = re.compile(r'(?:^|\s)--([a-z0-9-]+)')


def _parse(text, where, problems):
    text = (text or '').strip()
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        problems.append('%s is not JSON: %s' % (where, exc))
        return None


def _merge(base, extra):
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def flag_conflicts(merged, exec_start):
    """The merged keys also given as dockerd flags in the service's ExecStart (dockerd would not start)."""
    flags = set(_FLAG.findall(exec_start or ''))
    return [key for key in merged if FLAG_NAMES.get(key, key) in flags]


def rendered(value):
    """A fragment or daemon.json as the role writes it: what ansible-core's to_nice_json(indent=2) gives, and a newline."""
    return json.dumps(value, indent=2, sort_keys=True, separators=(',', ': ')) + '\n'


def in_place(state, texts, removed, merged_text, fragment_dir, path):
    """Whether the host already has exactly what the role would write: the fragment directory, every wanted
    fragment and daemon.json with their text, mode and owner, no fragment to remove and no file to adopt."""
    modes = state.get('modes') or {}
    owned = ':root:root'
    if not state.get('fragment_dir_exists') or state.get('preexisting') is not None:
        return False
    if modes.get(fragment_dir) != MODES['dir'] + owned:
        return False
    on_disk = state.get('fragments') or {}
    for name, wanted_text in texts.items():
        if on_disk.get(name) != wanted_text or modes.get('%s/%s.json' % (fragment_dir, name)) != MODES['file'] + owned:
            return False
    if any(name in on_disk for name in removed):
        return False
    return state.get('current') == merged_text and modes.get(path) == MODES['file'] + owned


def plan(state, wanted, host='the host', fragment_dir='the fragment directory', path=None):
    """From daemon_json_state's result and the wanted fragments: {'merged': mapping or None, 'problems': [text],
    'texts': {fragment: its text}, 'merged_text': daemon.json's text, 'modes': MODES, 'in_place': bool}.

    Nothing is written while ``problems`` is not empty; nothing needs to be while ``in_place`` is true (it needs
    ``path``, daemon.json's path, to find its mode)."""
    out: dict[str, Any] = {'merged': None, 'problems': [], 'texts': {}, 'merged_text': None, 'modes': dict(MODES), 'in_place': False}
    problems = out['problems']
    texts = {}
    if state.get('preexisting') is not None:
        texts[ADOPTED] = ('the hand-written daemon.json', state['preexisting'])
    for name, text in sorted((state.get('fragments') or {}).items()):
        texts[name] = ('fragment %s/%s.json' % (fragment_dir, name), text)
    fragments = dict((name, _parse(text, where, problems)) for name, (where, text) in texts.items())
    fragments.update(wanted or {})
    merged: dict[str, Any] = {}
    for name in sorted(fragments):
        value = fragments[name]
        if value is None:
            continue
        if not isinstance(value, dict):
            problems.append('a fragment in %s is not a JSON object (%s: %s)' % (fragment_dir, name, type(value).__name__))
            continue
        merged = _merge(merged, value)
    if problems:
        return out
    bypass = no_firewall_bypass(merged)
    if bypass:
        problems.append('the merged daemon.json of %s (fragments in %s): %s. Remove the key from its fragment.'
                        % (host, fragment_dir, bypass))
    conflicts = flag_conflicts(merged, state.get('exec_start'))
    if conflicts:
        problems.append('daemon.json keys %s are also set as dockerd flags in the docker service ExecStart (%s); '
                        'docker would not start. Remove the flag from the systemd drop-in or the key from the '
                        'fragments.' % (', '.join(conflicts), state.get('exec_start') or ''))
    if problems:
        return dict(out, merged=merged)
    texts = dict((name, rendered(value)) for name, value in (wanted or {}).items() if value is not None)
    removed = [name for name, value in (wanted or {}).items() if value is None]
    out.update(merged=merged, texts=texts, merged_text=rendered(merged))
    out['in_place'] = path is not None and in_place(state, texts, removed, out['merged_text'], fragment_dir, path)
    return out
