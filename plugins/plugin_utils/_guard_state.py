# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tune loop's two guards share (plugin_utils/_retune.py, the re-tune's; plugin_utils/_heal.py, the heal's):
their state file on the controller (its path, its text read and parsed), the alert's host's class among the
inventory's host classes, and how a time and a number are checked and shown. Each refusal names the guard's own
variable (``retune_*`` or ``heal_*``) through ``prefix`` and raises the guard's own error class."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import math
import os

from ansible_collections.specdec.serve.plugins.plugin_utils._event import shown
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import refusal


def is_number(value):
    """A finite int or float, never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def when(epoch):
    """Epoch seconds as the guards' reasons show them (UTC)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def state_path(given, default, prefix, error):
    """The state file: ``<prefix>_state_file`` when given (an absolute path), else ``default``."""
    if given in (None, ''):
        return default
    if not isinstance(given, str) or not given.startswith('/') or '\n' in given:
        raise error(refusal('%s_state_file' % prefix, given, 'must be an absolute path on the controller'))
    return given


def read_state(path, prefix, error):
    """The state file's text on the controller ('' when there is none yet)."""
    if not os.path.exists(path):
        return ''
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise error('%s_state_file: %s cannot be read (%s)' % (prefix, shown(path), exc))


def parsed(given, prefix, error):
    """The state as given: a mapping, or the state file's text parsed (empty text: no state yet, ``{}``)."""
    if given is None:
        return {}
    if isinstance(given, (str, bytes)):
        text = given.decode('utf-8', 'replace') if isinstance(given, bytes) else given
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except ValueError as exc:
            raise error('%s_state_file: its content is not JSON (%s)' % (prefix, exc))
    return given


def host_class(host, groups, classes, prefix, error):
    """The host's class: the one group of ``classes`` (in ``groups``, {group: [hosts]}) it is in."""
    if not isinstance(groups, dict):
        raise error(refusal('groups', groups, 'must be the inventory\'s groups ({group: [hosts]})'))
    known = set(h for hosts in groups.values() if isinstance(hosts, (list, tuple)) for h in hosts)
    if host not in known:
        raise error(refusal('%s_host' % prefix, host, 'is not a host of the inventory'))
    found = [c for c in classes if host in (groups.get(c) or [])]
    if not found:
        raise error(refusal('%s_host' % prefix, host, 'is in none of the host classes of %s_classes (%s)'
                            % (prefix, ', '.join(classes))))
    if len(found) > 1:
        raise error(refusal('%s_host' % prefix, host, 'is in more than one host class of %s_classes (%s): a host '
                            'belongs to one class' % (prefix, ', '.join(found))))
    return found[0]
