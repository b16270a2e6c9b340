#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: image_requirements
short_description: Check that an engine image holds the Python packages an instance's spec requires
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Runs the image's Python once on the host (C(docker run --rm --pull=never --network=none
    --entrypoint python3 IMAGE -c ...)) to read the installed distributions with C(importlib.metadata),
    and fails when a package of O(requirements) is not installed or is installed at another version.
  - O(requirements) is what the C(specdec.serve.spec_config) filter returns as C(image_requirements),
    for example C(arctic-inference==0.1.0) for the Arctic speculator with suffix decoding, which the
    C(vllm/vllm-openai) images do not carry.
  - The failure names the instance, the image (tag and ID), each missing or other-version package and
    the requirement.
  - Changes nothing on the host (the probe container is removed when it exits); it always returns
    C(changed=false). With no requirements it runs nothing.
  - Uses the Python standard library only.
options:
  requirements:
    description:
      - Python distributions the image must hold, each C(name) or C(name==version) (PEP 440 C(==) without
        wildcards; C(name[extra]) is read as C(name)).
    type: list
    elements: str
    required: true
  timeout:
    description:
      - Seconds the probe may run.
    type: int
    default: 120
extends_documentation_fragment:
  - specdec.serve.probes.image_probe
  - ansible.builtin.action_common_attributes
  - specdec.serve.attributes.read_only
attributes:
  check_mode:
    details:
      - The probe only reads, so check mode runs it too. An image that is not on the host yet (a run
        would load or pull it first) is not checked in check mode, with a warning; outside check mode
        that is a failure.
notes:
  - The probe container gets no network, no GPU (C(NVIDIA_VISIBLE_DEVICES=void)) and no mounts, and the
    image is never pulled.
  - The C(inference_server) role runs this check after the images are on the host and before it writes
    any file or unit, so a refused instance leaves the running engine as it was.
seealso:
  - module: specdec.serve.engine_health
'''

EXAMPLES = r'''
- name: Check the image has the ArcticInference plugin the instance needs
  specdec.serve.image_requirements:
    instance: gpt-oss-120b-arctic
    image: registry.example.com/vllm-arctic:0.10.1
    requirements: ["arctic-inference==0.1.0"]

- name: Check every instance the spec_config filter rendered
  specdec.serve.image_requirements:
    instance: "{{ item.name }}"
    image: "{{ item.image }}"
    requirements: "{{ item.spec.image_requirements }}"
  loop: "{{ rendered | selectattr('spec.image_requirements') | list }}"
'''

RETURN = r'''
checked:
  description: Whether the probe ran (false without requirements, or in check mode for an image not on the host yet).
  returned: always
  type: bool
  sample: true
image_ref:
  description: The image reference the probe ran (O(image_id) when given).
  returned: always
  type: str
  sample: sha256:5b0c8e3f0d2a...
installed:
  description: Each required distribution as installed in the image (its name and version), or null when absent.
  returned: always
  type: dict
  sample: {"arctic-inference": {"name": "arctic_inference", "version": "0.1.0"}}
problems:
  description: The requirements the image does not meet.
  returned: always
  type: list
  elements: dict
  contains:
    requirement:
      description: The requirement as given.
      type: str
    package:
      description: The distribution name.
      type: str
    required:
      description: The required version (null for a bare name).
      type: str
    installed:
      description: The installed version (null when not installed).
      type: str
    problem:
      description: C(missing) or C(version).
      type: str
  sample: [{"requirement": "arctic-inference==0.1.2", "package": "arctic-inference", "required": "0.1.2",
            "installed": null, "problem": "missing"}]
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.specdec.serve.plugins.module_utils.image_requirements import (
    IMAGE_PROBE_ARGS,
    RequirementError,
    check,
    failure_message,
    image_label,
    parse_probe,
    parse_requirement,
    probe_argv,
    probe_name,
)


def _tail(text, lines=10):
    return '\n'.join((text or '').strip().splitlines()[-lines:])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            IMAGE_PROBE_ARGS,
            requirements=dict(type='list', elements='str', required=True),
            timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    ref = p['image_id'] or p['image']
    result = dict(changed=False, checked=False, image_ref=ref, installed={}, problems=[])
    try:
        keys = [parse_requirement(r)[1] for r in p['requirements']]
    except RequirementError as exc:
        module.fail_json(msg="instance '%s': requirements: %s" % (p['instance'], exc), **result)
    if not keys:
        module.exit_json(**result)
    if p['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second (got %d)' % p['timeout'], **result)
    label = image_label(p['image'], ref)

    rc, _out, _err = module.run_command([p['docker_bin'], 'image', 'inspect', '--format', '{{.Id}}', ref])
    if rc != 0:
        if module.check_mode:
            module.warn("instance '%s': image %s is not on the host yet (a run loads or pulls it first), so its "
                        'requirements (%s) are checked by that run' % (p['instance'], label,
                                                                       ', '.join(p['requirements'])))
            module.exit_json(**result)
        module.fail_json(msg="instance '%s': image %s is not on the host, so the Python packages its spec requires "
                             '(%s) cannot be checked' % (p['instance'], label, ', '.join(p['requirements'])),
                         **result)

    name = probe_name(p['instance'], os.getpid())
    argv = ['timeout', '--kill-after=10', str(p['timeout'])] + probe_argv(
        p['docker_bin'], ref, keys, p['python'], name)
    rc, out, err = module.run_command(argv)
    if rc in (124, 137):
        # the docker client was stopped; the container may still run
        module.run_command([p['docker_bin'], 'rm', '--force', name])
    if rc != 0:
        why = 'did not finish within %ds' % p['timeout'] if rc in (124, 137) else 'exited with %d' % rc
        module.fail_json(msg="instance '%s': cannot read the Python packages of image %s: `%s -c ...` in it %s: %s"
                             % (p['instance'], label, p['python'], why, _tail(err or out) or 'no output'),
                         **result)
    try:
        found = parse_probe(out)
    except ValueError as exc:
        module.fail_json(msg="instance '%s': cannot read the Python packages of image %s: the probe's output is %s"
                             % (p['instance'], label, exc), **result)
    result['checked'] = True
    result['installed'] = dict((key, None if found.get(key) is None
                                else {'name': found[key][0], 'version': found[key][1]})
                               for key in keys)
    result['problems'] = check(p['requirements'], found)
    if result['problems']:
        module.fail_json(msg=failure_message(p['instance'], p['image'], ref, result['problems']), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
