# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's architecture as the host names it and as packages and images name it.

A host says ``x86_64`` or ``aarch64`` (``uname -m``, Ansible's ``ansible_facts.architecture``); Debian's
packages and apt sources say ``amd64`` or ``arm64``, and so do OCI image platforms (Go's GOARCH), as
``linux/amd64`` or ``linux/arm64`` (an arm64 image may add the variant ``v8``). A DGX Spark and every
GB200 host are aarch64; HGX B200 hosts are x86_64.

Read by the docker_host role (Docker's apt source, through the ``debian_arch`` filter) and the
engine_check module (an image must have the host's platform before its engine is restarted).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# uname -m -> Debian's and Go's name of the architecture
ARCH_NAMES = {'x86_64': 'amd64', 'aarch64': 'arm64'}
# the variant an image may name that changes nothing for these architectures
DEFAULT_VARIANTS = {'arm64': ('', 'v8'), 'amd64': ('', 'v1')}


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
