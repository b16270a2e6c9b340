#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: engine_check
short_description: Ask the engine in an image whether it accepts an instance's configuration
version_added: "0.1.0"
author: specdec.serve maintainers (@specdec-serve)
description:
  - Runs a throw-away container of the image an instance is about to run, with the instance's mounts and
    GPU request, in which the engine's own code parses the instance's command line and configuration
    and stops just before it would load a model. A configuration the engine refuses fails the task with
    the engine's own message.
  - "TensorRT-LLM: C(trtllm-serve)'s click command parses the command line and merges the YAML as it does
    when it serves, and C(TorchLlmArgs) is built from the result. vLLM: the C(vllm) command parses and
    validates C(vllm serve)'s arguments and C(EngineArgs.create_engine_config) builds the engine
    configuration, C(SpeculativeConfig) included."
  - First, the image's platform (C(docker image inspect), its C(Os)/C(Architecture)) must be the host's,
    C(linux/amd64) on x86_64 and C(linux/arm64) on aarch64 (a DGX Spark, a GB200 host). An image
    built for another fails the task naming the image, its platform and the host's, in check mode too,
    before any verdict is read from the cache; such an image would otherwise fail only when its engine
    starts, after the running one was stopped.
  - A verdict is cached on the host by image ID and a digest of the command, the configuration, the
    container options and the environment, so an unchanged instance is not checked again.
  - Uses the Python standard library only.
options:
  engine:
    description:
      - The engine the image serves.
    type: str
    required: true
    choices: [trtllm, vllm]
  engine_version:
    description:
      - The engine version the instance was rendered for, for the messages.
    type: str
    default: ""
  probe:
    description:
      - Ask the engine. V(false) checks the image's platform only (an image that cannot answer the probe).
    type: bool
    default: true
  table_version:
    description:
      - The version of the generated engine table the controller checked the configuration against.
      - When it differs from O(engine_version), the task warns that this check is the only exact one.
    type: str
    default: ""
  command:
    description:
      - The words after the image in the unit's C(docker run) (TensorRT-LLM C(trtllm-serve MODEL ...));
        for vLLM the words after the C(vllm) entrypoint (C(serve MODEL ...)).
    type: list
    elements: str
    required: true
  config:
    description:
      - The content of the engine's configuration file (TensorRT-LLM's C(--extra_llm_api_options) YAML),
        mounted read-only at O(config_path) in the probe.
    type: str
    default: ""
  config_path:
    description:
      - Where the configuration file is in the container. Required with O(config).
    type: str
    default: ""
  run_args:
    description:
      - C(docker run) options of the unit that the probe keeps (mounts, GPU request, ulimits, IPC).
    type: list
    elements: str
    default: []
  env:
    description:
      - Environment of the probe (the instance's, without its secrets).
    type: dict
    default: {}
  cache_dir:
    description:
      - Where verdicts are kept (one small JSON file each).
    type: path
    default: /var/lib/specdec/engine-checks
  timeout:
    description:
      - Seconds the probe may run (an engine's imports take tens of seconds).
    type: int
    default: 600
extends_documentation_fragment:
  - specdec.serve.probes.image_probe
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - The probe only reads, so check mode runs it too, without recording the verdict. An image that is
        not on the host yet is not checked in check mode, with a warning.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The probe container gets no network, and the image is never pulled. Its environment holds no secret
    (tokens and API keys are not needed to judge a configuration).
  - The C(inference_server) role runs this check after the images are on the host and before it writes
    any file or unit, so a refused configuration leaves the running engine serving.
seealso:
  - module: specdec.serve.image_requirements
  - module: specdec.serve.engine_health
'''

EXAMPLES = r'''
- name: Ask vLLM in the image whether it accepts the instance
  specdec.serve.engine_check:
    instance: tiny-llama
    engine: vllm
    image: specdec-lab/vllm-cpu:0.32.0
    command: [serve, /models/tiny-llama, --port, "8000", --speculative-config, '{"method": "ngram", "num_speculative_tokens": 2}']
    run_args: [--volume, /srv/models:/models:ro]
'''

RETURN = r'''
cached:
  description: Whether the verdict came from the host's cache (the probe did not run).
  returned: always
  type: bool
  sample: false
checked:
  description: Whether a verdict was reached (false in check mode for an image not on the host yet).
  returned: always
  type: bool
  sample: true
digest:
  description: The digest of what the verdict depends on besides the image.
  returned: always
  type: str
  sample: 3f1c...
image_ref:
  description: The image ID the probe ran (or would run).
  returned: always
  type: str
  sample: sha256:5b0c8e3f0d2a...
platform:
  description: The image's platform, C(os/architecture), as docker records it.
  returned: when the image is on the host
  type: str
  sample: linux/arm64
host_platform:
  description: The platform an image must have to run on this host.
  returned: when the image is on the host
  type: str
  sample: linux/arm64
'''

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.specdec.serve.plugins.module_utils.engine_check import (
    cache_name,
    digest,
    image_label,
    parse_verdict,
    probe_argv,
    probe_name,
    refusal,
)
from ansible_collections.specdec.serve.plugins.module_utils.image_requirements import IMAGE_PROBE_ARGS
from ansible_collections.specdec.serve.plugins.module_utils.platforms import host_platform, platform_refusal, same_platform

TITLES = {'trtllm': 'TensorRT-LLM', 'vllm': 'vLLM'}


def _tail(text, lines=12):
    return '\n'.join((text or '').strip().splitlines()[-lines:])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            IMAGE_PROBE_ARGS,
            engine=dict(type='str', required=True, choices=['trtllm', 'vllm']),
            engine_version=dict(type='str', default=''),
            table_version=dict(type='str', default=''),
            command=dict(type='list', elements='str', required=True),
            config=dict(type='str', default=''),
            config_path=dict(type='str', default=''),
            run_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            cache_dir=dict(type='path', default='/var/lib/specdec/engine-checks'),
            timeout=dict(type='int', default=600),
            probe=dict(type='bool', default=True),
        ),
        required_by={'config': 'config_path'},
        supports_check_mode=True,
    )
    p = module.params
    title = '%s %s' % (TITLES[p['engine']], p['engine_version']) if p['engine_version'] else TITLES[p['engine']]
    env = dict((k, str(v)) for k, v in p['env'].items())
    config_digest = digest(p['engine'], p['command'], p['config'], p['run_args'], env)
    result = dict(changed=False, cached=False, checked=False, digest=config_digest, image_ref=p['image_id'] or p['image'])
    if p['table_version'] and p['engine_version'] and p['table_version'] != p['engine_version']:
        table = '%s %s' % (TITLES[p['engine']], p['table_version'])
        module.warn("instance '%s': %s has no engine table of its own (the controller checked it against %s's); "
                    'this check in the image is its only exact one' % (p['instance'], title, table))
    if p['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second (got %d)' % p['timeout'], **result)

    rc, out, _err = module.run_command([p['docker_bin'], 'image', 'inspect', '--format', '{{.Id}} {{.Os}}/{{.Architecture}}',
                                        result['image_ref']])
    if rc != 0:
        label = image_label(p['image'], p['image_id'])
        if module.check_mode:
            module.warn("instance '%s': image %s is not on the host yet, so the run that loads or pulls it checks "
                        'its configuration' % (p['instance'], label))
            module.exit_json(**result)
        module.fail_json(msg="instance '%s': image %s is not on the host, so %s cannot check the configuration"
                             % (p['instance'], label, title), **result)
    image_id, _sep, platform = out.strip().partition(' ')
    result['image_ref'] = image_id
    # an image of another platform would fail only when its engine starts, after the old one stopped
    machine = os.uname()[4]
    result['platform'], result['host_platform'] = platform, host_platform(machine)
    if not same_platform(platform, result['host_platform']):
        module.fail_json(msg=platform_refusal(p['instance'], image_label(p['image'], image_id), platform,
                                              result['host_platform'], machine), **result)
    if not p['probe']:
        module.exit_json(msg="instance '%s': image %s is built for this host's platform (%s); the engine was not asked"
                             % (p['instance'], image_label(p['image'], image_id), platform), **result)
    cache = os.path.join(p['cache_dir'], cache_name(image_id, config_digest))
    if os.path.exists(cache):
        result.update(cached=True, checked=True)
        module.exit_json(msg="instance '%s': %s in image %s accepted this configuration before (cache hit: %s)"
                             % (p['instance'], title, image_label(p['image'], image_id), os.path.basename(cache)),
                         **result)

    workdir = tempfile.mkdtemp(prefix='specdec-engine-check-')
    try:
        mount = None
        if p['config']:
            host_path = os.path.join(workdir, 'config')
            with open(host_path, 'w') as handle:
                handle.write(p['config'])
            os.chmod(workdir, 0o755)
            os.chmod(host_path, 0o644)
            mount = (host_path, p['config_path'])
        name = probe_name(p['instance'], os.getpid())
        argv = ['timeout', '--kill-after=10', str(p['timeout'])] + probe_argv(
            p['docker_bin'], image_id, p['engine'], p['run_args'], env, name=name, config_mount=mount,
            python=p['python'])
        rc, out, err = module.run_command(argv, data=json.dumps({'command': p['command']}), binary_data=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if rc in (124, 137):
        module.run_command([p['docker_bin'], 'rm', '--force', name])
        module.fail_json(msg="instance '%s': %s in image %s did not finish checking the configuration within %ds"
                             % (p['instance'], title, image_label(p['image'], image_id), p['timeout']), **result)
    try:
        ok, error = parse_verdict(out)
    except ValueError as exc:
        module.fail_json(msg="instance '%s': cannot ask %s in image %s to check the configuration (%s; exit %d): %s"
                             % (p['instance'], title, image_label(p['image'], image_id), exc, rc,
                                _tail(err or out) or 'no output'), **result)
    if ok is None:
        module.fail_json(msg="instance '%s': image %s cannot check a %s configuration: %s"
                             % (p['instance'], image_label(p['image'], image_id), TITLES[p['engine']], error), **result)
    if not ok:
        module.fail_json(msg=refusal(p['instance'], title, p['image'], image_id, error), **result)
    result['checked'] = True
    if not module.check_mode:
        if not os.path.isdir(p['cache_dir']):
            os.makedirs(p['cache_dir'], 0o755)
        with open(cache, 'w') as handle:
            json.dump({'instance': p['instance'], 'image': p['image'], 'image_id': image_id, 'engine': p['engine'],
                       'engine_version': p['engine_version'], 'digest': config_digest}, handle, sort_keys=True)
    result['changed'] = True
    module.exit_json(msg="instance '%s': %s in image %s accepts this configuration"
                         % (p['instance'], title, image_label(p['image'], image_id)), **result)


if __name__ == '__main__':
    main()
