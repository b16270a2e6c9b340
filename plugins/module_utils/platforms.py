# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's architecture as the host names it and as packages and images name it.

A host says ``x86_64`` or ``aarch64`` (``uname -m``, Ansible's ``ansible_facts.architecture``); Debian's
packages and apt sources say ``amd64`` or ``arm64``, and so do OCI image platforms (Go's GOARCH), as
``linux/amd64`` or ``linux/arm64`` (an arm64 image may add the variant ``v8``). A DGX Spark and every
GB200 host are aarch64; HGX B200 hosts are x86_64.

Read by the docker_host role (Docker's apt source, through the ``debian_arch`` filter), the
engine_check module (an image must have the host's platform before its engine is restarted), and the
settings that name one artifact per architecture (``model_cache_wheelhouse``,
``inference_server_image_archive``: a path, or a mapping of architecture to path; :func:`for_host`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# uname -m -> Debian's and Go's name of the architecture
ARCH_NAMES = {'x86_64': 'amd64', 'aarch64': 'arm64'}
# the variant an image may name that changes nothing for these architectures
DEFAULT_VARIANTS = {'arm64': ('', 'v8'), 'amd64': ('', 'v1')}


# Debian's name -> the host's (a per-architecture setting may be keyed by either)
MACHINES = dict((debian, machine) for machine, debian in ARCH_NAMES.items())


def machine_name(name):
    """The host's name of an architecture given by either name (``arm64`` -> ``aarch64``), or None."""
    name = str(name)
    return name if name in ARCH_NAMES else MACHINES.get(name)


def per_architecture_problem(value):
    """What is wrong with a per-architecture mapping (keys: an architecture by either name, once; values:
    non-empty strings), or None. A value that is not a mapping is for every architecture."""
    if not isinstance(value, dict):
        return None
    if not value:
        return 'names no architecture: give a path, or map %s to paths' % ' and '.join(sorted(ARCH_NAMES))
    unknown = sorted(str(k) for k in value if machine_name(k) is None)
    if unknown:
        return 'has keys that are not architectures: %s (allowed: %s)' % (
            ', '.join(unknown), ', '.join(sorted(list(ARCH_NAMES) + list(MACHINES))))
    seen = {}  # type: dict
    for key in sorted(value, key=str):
        machine = machine_name(key)
        if machine in seen:
            return 'names %s twice (%s and %s)' % (machine, seen[machine], key)
        seen[machine] = key
    empty = sorted(str(k) for k, v in value.items() if not isinstance(v, str) or not v)
    if empty:
        return 'has an empty or non-string path for %s' % ', '.join(empty)
    return None


def for_host(value, machine, name):
    """A per-architecture setting's value for a host: the value itself when it is not a mapping, else
    its entry for the host's architecture (``ansible_facts.architecture``) by either name. Raises
    ValueError naming the setting, the host's architecture and the architectures it has."""
    if not isinstance(value, dict):
        return value
    problem = per_architecture_problem(value)
    if problem:
        raise ValueError('%s: %s' % (name, problem))
    if not machine:
        raise ValueError("%s: names one path per architecture and the host's architecture is not known: gather "
                         'its facts (ansible_facts.architecture) first' % name)
    wanted = machine_name(machine)
    if wanted is None:
        raise ValueError("%s: names one path per architecture, and this host's architecture, %s, is none it can name "
                         '(%s). Nothing was changed' % (name, machine, ', '.join(sorted(ARCH_NAMES))))
    for key, path in value.items():
        if machine_name(key) == wanted:
            return path
    raise ValueError("%s: has no entry for this host's architecture, %s (%s); it names %s. Nothing was changed. "
                     "Add this architecture's, e.g. %s: {%s: <path>, ...}" % (
                         name, wanted, debian_arch(wanted), ', '.join(sorted(str(k) for k in value)), name, wanted))


def debian_arch(machine):
    """Debian's name of a host's architecture (``x86_64`` -> ``amd64``); another name passes unchanged."""
    return ARCH_NAMES.get(str(machine), str(machine))


def host_platform(machine, system='linux'):
    """The image platform that runs on a host: ``linux/amd64`` for x86_64, ``linux/arm64`` for aarch64."""
    return '%s/%s' % (str(system).lower(), debian_arch(machine))


def same_platform(image, host):
    """Whether an image's platform (``os/arch[/variant]``, as docker image inspect gives it) runs on a
    host's (:func:`host_platform`); the default variant of the architecture is the architecture."""
    parts = str(image).strip().strip('/').split('/')
    want = str(host).split('/')
    if len(parts) < 2 or parts[:2] != want[:2]:
        return False
    variant = parts[2] if len(parts) > 2 else ''
    return variant in DEFAULT_VARIANTS.get(parts[1], ('',))


def platform_refusal(instance, image_label, image, host, machine):
    """Why an instance's image cannot run on this host: the image, its platform and the host's."""
    built = image or 'an unknown platform'
    return ("instance '%s': image %s is built for %s, and this host is %s (%s): its engine would not start here. "
            'Nothing was changed; the running engine keeps serving. Use an image built for %s (a multi-platform '
            'tag, or the tag published for this architecture)' % (instance, image_label, built, host, machine, host))
