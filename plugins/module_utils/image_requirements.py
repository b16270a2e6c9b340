# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python packages an engine image must hold (spec_config's ``image_requirements``): parse the
requirements, the command that lists the matching distributions inside the image, the parse of its
output and the verdict with its message. Standard library only (it runs on the engine hosts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# A requirement as spec_config writes it: a distribution name, optionally `==version`.
_REQ_RE = re.compile(r'^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[A-Za-z0-9._,\s-]*\])?\s*'
                     r'(?:==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*))?\s*$')
_RELEASE_RE = re.compile(r'^(?:v)?(\d+(?:\.\d+)*)(.*)$')

# Run inside the image as `python3 -c PROBE NAME...`: one JSON object, normalized name -> [name,
# version] of the installed distribution, or null when none is installed. It walks the distributions
# itself and normalizes their names (PEP 503), so `arctic-inference` finds `arctic_inference` on
# every Python 3.8+ (importlib.metadata normalizes lookups only from 3.10).
PROBE = '''import json, re, sys
from importlib import metadata
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
want = dict((norm(a), None) for a in sys.argv[1:])
for dist in metadata.distributions():
    name = dist.metadata["Name"] or ""
    key = norm(name)
    if key in want and want[key] is None:
        want[key] = [name, dist.version]
print(json.dumps(want, sort_keys=True))
'''


class RequirementError(ValueError):
    """A requirement this check cannot read."""


# The options of the modules that run an instance's image once (image_requirements, engine_check),
# documented once in the doc fragment specdec.serve.probes.image_probe.
IMAGE_PROBE_ARGS = dict(
    instance=dict(type='str', required=True),
    image=dict(type='str', required=True),
    image_id=dict(type='str', default=''),
    docker_bin=dict(type='path', default='/usr/bin/docker'),
    python=dict(type='str', default='python3'),
)


def normalize(name):
    """PEP 503 normalized distribution name: `Arctic_Inference` -> `arctic-inference`."""
    return re.sub(r'[-_.]+', '-', name).lower()


def parse_requirement(text):
    """'arctic-inference==0.1.0' -> (display name, normalized name, '0.1.0'); a bare name -> version None.
    Extras (`name[vllm]`) are accepted and ignored: the check is on the distribution."""
    if not isinstance(text, str):
        raise RequirementError('a requirement must be a string, got %r' % (text,))
    match = _REQ_RE.match(text)
    if not match:
        raise RequirementError("%r is not a requirement this check reads: give 'name' or 'name==version'" % (text,))
    return match.group(1), normalize(match.group(1)), match.group(2)


def probe_name(instance, pid):
    """The probe container's name (so that a probe past its time can be removed)."""
    safe = re.sub(r'[^A-Za-z0-9_.-]', '-', instance or 'x')[:64]
    return 'specdec-requirements-%s-%d' % (safe, pid)


def probe_argv(docker_bin, image, names, python='python3', name=None):
    """`docker run` of the image's Python with PROBE: no network, no GPU, nothing pulled, removed after."""
    argv = [docker_bin, 'run', '--rm', '--pull=never', '--network=none', '--env', 'NVIDIA_VISIBLE_DEVICES=void']
    if name:
        argv += ['--name', name]
    return argv + ['--entrypoint', python, image, '-c', PROBE] + list(names)


def parse_probe(stdout):
    """PROBE's output -> {normalized name: (name, version) or None}; ValueError when it is not that."""
    lines = [line for line in (stdout or '').splitlines() if line.strip()]
    if not lines:
        raise ValueError('no output')
    try:
        data = json.loads(lines[-1])
    except ValueError:
        raise ValueError('not JSON: %r' % lines[-1][:200])
    if not isinstance(data, dict):
        raise ValueError('not a JSON object: %r' % lines[-1][:200])
    out: "dict[str, tuple[str, str] | None]" = {}
    for key, value in data.items():
        if value is None:
            out[key] = None
        elif isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
            out[key] = (value[0], value[1])
        else:
            raise ValueError('unexpected entry %r: %r' % (key, value))
    return out


def _release(version):
    match = _RELEASE_RE.match(version.strip().lower())
    if not match:
        return None, version.strip().lower()
    parts = [int(p) for p in match.group(1).split('.')]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts), match.group(2)


def version_matches(required, installed):
    """PEP 440 `==` without wildcards: equal releases (zero-padded, 0.1 == 0.1.0) and equal rest."""
    return _release(required) == _release(installed)


def check(requirements, found):
    """Problems of the installed distributions (found: parse_probe's result) against the requirements:
    a list of {requirement, package, required, installed, problem: 'missing' | 'version'}."""
    problems = []
    for text in requirements:
        name, key, version = parse_requirement(text)
        have = found.get(key)
        if have is None:
            problems.append({'requirement': text, 'package': name, 'required': version, 'installed': None,
                             'problem': 'missing'})
        elif version is not None and not version_matches(version, have[1]):
            problems.append({'requirement': text, 'package': name, 'required': version, 'installed': have[1],
                             'problem': 'version'})
    return problems


def describe(problem):
    if problem['problem'] == 'missing':
        return '%s is not installed (required: %s)' % (problem['package'], problem['requirement'])
    return '%s %s is installed, but %s is required' % (
        problem['package'], problem['installed'], problem['requirement'])


def image_label(image, image_ref):
    """'tag (sha256:0123456789ab)' when the check ran the image by ID, else the tag."""
    if image_ref and image_ref != image:
        short = image_ref[:19] if image_ref.startswith('sha256:') else image_ref
        return '%s (%s)' % (image, short)
    return image


def failure_message(instance, image, image_ref, problems):
    """The refusal: the instance, the image, each missing or other-version package and what is required."""
    wanted = ' '.join("'%s'" % p['requirement'] for p in problems)
    return ("instance '%s': image %s lacks what its spec requires: %s. Use an image that has %s (for example "
            "one built FROM it with `pip install %s`) or another speculative method for the instance."
            % (instance, image_label(image, image_ref), '; '.join(describe(p) for p in problems),
               'it' if len(problems) == 1 else 'them', wanted))
