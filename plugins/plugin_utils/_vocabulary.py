# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The words every part of the collection shares, written once (stdlib only).

* A plain name: what may become a file, directory, unit, container, HAProxy server or key name on a host
  (``NAME_RE``, up to ``NAME_MAX`` characters, the limit a file or unit name needs), and a Hugging Face
  repo id (two of them, ``org/name``).
* An inventory group name, a TCP port, a Prometheus duration.
* The paths inside an engine container (where the role mounts the models, the tiktoken encodings and
  the engine's YAML).
* The one wording of a refusal: ``<variable>: <bad value> <what is allowed>`` (:func:`refusal`).

A role setting's default is not here: the role's meta/argument_specs.yml owns it (plugin_utils/_role_spec.py
reads it); its bounds are in plugin_utils/_settings.py POLICY.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

# --------------------------------------------------------------------------- names

NAME_MAX = 128
NAME_PATTERN = '[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}' % (NAME_MAX - 1)
NAME_RE = re.compile(r'^%s\Z' % NAME_PATTERN)
NAME_WORDS = 'a name of letters, digits and _ . - (starting with a letter or digit, at most %d)' % NAME_MAX
# org/name, each part a plain name of at most 96 characters (the hub's own limit).
REPO_ID_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}\Z')
# An inventory group (Ansible's own rule is looser about the first character than a plain name).
GROUP_RE = re.compile(r'^[A-Za-z0-9_.-]+\Z')


def is_name(value):
    """A plain name (a string matching NAME_RE)."""
    return isinstance(value, str) and NAME_RE.match(value) is not None


# --------------------------------------------------------------------------- numbers

PORT_MIN, PORT_MAX = 1, 65535
PORT_WORDS = 'a port number from %d to %d' % (PORT_MIN, PORT_MAX)


def host_address(hostvars, host, keys=('monitoring_address', 'ansible_host')):
    """The address by which the other hosts reach `host`: the first of its variables `keys` that is set
    (default: the monitoring role's ``monitoring_address``, else ``ansible_host``), else its name.
    `hostvars`: {host: {variable: value}}."""
    hv = hostvars.get(host) or {}
    for key in keys:
        value = hv.get(key)
        if value:
            return str(value)
    return str(host)


def plain_hostvars(hostvars, hosts, keys, facts=()):
    """{host: {variable: value}} of only the variables `keys` of `hosts` (and, with `facts`, those facts under
    ``ansible_facts``), as plain data: Ansible's hostvars template a value each time it is read, so a planner reads
    each one it needs once, and nothing else."""
    out = {}
    for host in hosts:
        found = hostvars[host] if host in hostvars else {}
        out[host] = dict((k, found[k]) for k in keys if k in found)
        if facts:
            gathered = found['ansible_facts'] if 'ansible_facts' in found else {}
            out[host]['ansible_facts'] = dict((k, gathered[k]) for k in facts if k in gathered)
    return out


def is_port(value):
    """An int (not a bool) that is a TCP port."""
    return isinstance(value, int) and not isinstance(value, bool) and PORT_MIN <= value <= PORT_MAX


DURATION_RE = re.compile(r'^([0-9]+)(ms|s|m|h|d)\Z')
DURATION_UNITS = {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}
DURATION_WORDS = 'a Prometheus duration above 0, one unit: 500ms, 30s, 5m, 2h, 1d'


def seconds(text):
    """Seconds of a Prometheus duration (one unit: ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``)."""
    match = DURATION_RE.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError('not a duration')
    return int(match.group(1)) * DURATION_UNITS[match.group(2)]


NUMBER_RE = re.compile(r'^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\Z')


def number(value):
    """A finite number as a float: an int or float (never a bool), or the text of a plain decimal number (what
    ``-e name=0.3`` gives a raw setting); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and NUMBER_RE.match(value.strip()):
        return float(value.strip())
    return None


# --------------------------------------------------------------------------- paths in the engine container

CONTAINER_MODELS_DIR = '/models'
CONTAINER_TIKTOKEN_DIR = '/tiktoken'
CONTAINER_CONFIG = '/etc/specdec/engine.yaml'
# a stack's SSH trust (stack_trust's directory, mounted read-only): the head's key and known_hosts, a worker's
# host key and authorized_keys
CONTAINER_STACK_DIR = '/etc/specdec/trust'
# the head's MPI hostfile (the instance's own file, mounted read-only)
CONTAINER_HOSTFILE = '/etc/specdec/hostfile'


# --------------------------------------------------------------------------- the wording of a refusal

def show(value, secret=False):
    """A value as a message shows it: its repr, cut at 80 characters, or hidden."""
    if secret:
        return '(value hidden)'
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def refusal(variable, value, allowed, secret=False):
    """``<variable>: <bad value> <what is allowed>``, the one form of every refusal of a value."""
    return '%s: %s %s' % (variable, show(value, secret), allowed)
