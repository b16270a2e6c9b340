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
    container options and the environment, so an unchanged instance is not checked again. The probe's
    limits (O(memory), O(pids_limit)) are not part of the digest (they decide whether the check can run,
    not what the engine answers).
  - "The probe never loads a model, whatever path the command takes. TensorRT-LLM: every launcher of the
    serve module (each callable named C(launch_*) or C(_launch_*): C(launch_server), C(launch_grpc_server)
    of C(--grpc), C(launch_mm_encoder_server), C(launch_visual_gen_server), the disaggregated worker's, and
    one a new release adds) is replaced by a stop; the two that are handed the LLM arguments build
    C(TorchLlmArgs) from them first. vLLM: the probe stops after C(EngineArgs.create_engine_config), which
    every path of C(vllm serve) calls first (one API server, several, headless, C(--grpc)). A backstop
    stops any other path unjudged: constructing an LLM, engine, engine client, executor, MPI session or
    server class of the engine (or a subclass), C(torch.cuda.set_device), or starting a child process that
    would run without these stops."
  - "The probe runs with limits: O(memory) for C(--memory) and C(--memory-swap) (no swap), O(pids_limit),
    and C(--oom-score-adj=1000), so that on a host short of memory the kernel's OOM killer takes the probe,
    never a serving engine (on a DGX Spark the engine holds most of the unified memory the probe's imports
    come from)."
  - "It keeps the instance's GPU request: both engines need a visible NVIDIA GPU to parse (C(trtllm-serve)
    counts the devices and refuses none, and TensorRT-LLM's libraries link the driver; vLLM detects its
    platform by NVML and cannot build its configuration without a device). The parse opens no CUDA context
    and allocates no GPU memory by the engines' code: vLLM asks NVML only; C(trtllm-serve) asks the driver
    for the device count (and for the device's properties when the YAML sets C(dtype)); what would create a
    context (an LLM class, C(torch.cuda.set_device)) is a stop."
  - "Where the check cannot run safely it does not judge and does not fail: when docker on the host cannot
    enforce the limits (C(docker info) reports no memory, swap or pids limit), when docker refuses them
    (C(docker run) exits 125 naming one), when the probe is killed before it answers (exit 137 within
    O(timeout): the OOM killer at O(memory), or a host short of memory), or when the probe stopped on a
    path where the configuration is not judged, the task warns and returns RV(verdict=not judged), the
    controller's engine tables (checked before) having judged the configuration. Nothing is cached then."
  - The module runs only C(docker image inspect), C(docker info), the probe's C(docker run) and C(docker rm)
    of the probe container; it never stops, restarts or signals a serving engine or its unit.
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
      - When it differs from O(engine_version) (a release without a table of its own, served with the instance key
        C(judged_in_image_only)), the task warns that this check is the only exact one.
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
  memory:
    description:
      - "Memory limit of the probe container: C(docker run --memory) and C(--memory-swap) both, so it cannot
        swap. A whole number with C(b), C(k), C(m) or C(g) (docker's units)."
      - "Why 8g: the probe imports the engine (C(import tensorrt_llm) brings torch, TensorRT, the
        TensorRT-LLM libraries and their CUDA libraries, several GiB of shared objects mapped; C(import
        vllm) brings torch, transformers and vLLM's kernels) and reads the model's configuration files,
        not its weights. That is an estimated 2 to 4 GiB resident plus the page cache of the libraries,
        which the kernel charges to the container; 8g leaves twice that. A probe that needs more is
        killed by the OOM killer, which the task reports as not judged, never as a failure."
    type: str
    default: 8g
  pids_limit:
    description:
      - "C(docker run --pids-limit) of the probe: its processes and threads together."
      - "Why 4096: the imports start thread pools sized by the host's cores (OpenMP, OpenBLAS, tokenizers;
        a Grace host has 72 cores a socket), a few hundred threads; the limit leaves room for them and
        stops a runaway spawn of workers (a launcher that would start one process per GPU with their
        threads) long before it weighs on the host."
    type: int
    default: 4096
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
verdict:
  description:
    - "C(accepted) (now or before, RV(cached)), C(refused) (the task fails), C(not judged) (the check could
      not run safely or stopped on a path where it does not judge: a warning says why, the task does not
      fail), or empty when the engine was not asked (O(probe=false), an image not on the host yet in check
      mode, or an error)."
  returned: always
  type: str
  sample: accepted
'''

import json
import os
import re
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.specdec.serve.plugins.module_utils.engine_check import (
    DEFAULT_MEMORY,
    DEFAULT_PIDS_LIMIT,
    MEMORY_RE,
    OOM_SCORE_ADJ,
    cache_name,
    digest,
    image_label,
    probe_argv,
    probe_name,
    read_verdict,
    refusal,
)
from ansible_collections.specdec.serve.plugins.module_utils.image_requirements import IMAGE_PROBE_ARGS
from ansible_collections.specdec.serve.plugins.module_utils.platforms import host_platform, platform_refusal, same_platform

TITLES = {'trtllm': 'TensorRT-LLM', 'vllm': 'vLLM'}


# docker's own error (exit 125) about a limit it cannot apply
LIMIT_REFUSAL = re.compile(r'memory|swap|pids|oom|cgroup', re.IGNORECASE)


def _tail(text, lines=12):
    return '\n'.join((text or '').strip().splitlines()[-lines:])


def not_judged(module, result, why):
    """The fallback where the engine cannot judge the configuration safely: a warning, no failure, no cache
    entry; the controller's engine tables judged the configuration before this task."""
    module.warn("instance '%s': %s. The engine did not judge this configuration; the controller's engine "
                'tables did, before this task, and the deploy goes on with their verdict. Nothing ran against '
                'a serving engine or its unit.' % (module.params['instance'], why))
    result.update(checked=False, verdict='not judged')
    module.exit_json(msg="instance '%s': not judged by the engine (%s)" % (module.params['instance'], why), **result)


def limits_supported(module):
    """Whether docker on this host enforces a memory limit, a swap limit and a pids limit; (ok, why not)."""
    rc, out, err = module.run_command([module.params['docker_bin'], 'info', '--format',
                                       '{{.MemoryLimit}} {{.SwapLimit}} {{.PidsLimit}}'])
    words = out.split()
    if rc != 0 or len(words) != 3:
        return False, 'docker info does not say whether it enforces the limits (%s)' % (_tail(err or out, 2) or 'exit %d' % rc)
    missing = [what for what, word in zip(('a memory limit', 'a swap limit', 'a pids limit'), words) if word != 'true']
    if missing:
        return False, 'docker on this host cannot enforce %s (docker info), so the probe would run unbounded' % ' or '.join(missing)
    return True, None


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
            memory=dict(type='str', default=DEFAULT_MEMORY),
            pids_limit=dict(type='int', default=DEFAULT_PIDS_LIMIT),
            probe=dict(type='bool', default=True),
        ),
        required_by={'config': 'config_path'},
        supports_check_mode=True,
    )
    p = module.params
    title = '%s %s' % (TITLES[p['engine']], p['engine_version']) if p['engine_version'] else TITLES[p['engine']]
    env = dict((k, str(v)) for k, v in p['env'].items())
    config_digest = digest(p['engine'], p['command'], p['config'], p['run_args'], env)
    result = dict(changed=False, cached=False, checked=False, digest=config_digest, image_ref=p['image_id'] or p['image'],
                  verdict='')
    if p['table_version'] and p['engine_version'] and p['table_version'] != p['engine_version']:
        table = '%s %s' % (TITLES[p['engine']], p['table_version'])
        module.warn("instance '%s': %s has no engine table of its own (judged_in_image_only: the controller rendered "
                    "it with %s's table and skipped its key checks); this check in the image is its only exact one"
                    % (p['instance'], title, table))
    if p['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second (got %d)' % p['timeout'], **result)
    if not MEMORY_RE.match(p['memory']):
        module.fail_json(msg='memory must be a docker memory size such as 8g or 8192m (got %r)' % p['memory'], **result)
    if p['pids_limit'] < 1:
        module.fail_json(msg='pids_limit must be at least 1 (got %d)' % p['pids_limit'], **result)

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
        result.update(cached=True, checked=True, verdict='accepted')
        module.exit_json(msg="instance '%s': %s in image %s accepted this configuration before (cache hit: %s)"
                             % (p['instance'], title, image_label(p['image'], image_id), os.path.basename(cache)),
                         **result)

    supported, why = limits_supported(module)
    if not supported:
        not_judged(module, result, why)
    label = image_label(p['image'], image_id)
    workdir = tempfile.mkdtemp(prefix='specdec-engine-check-')
    name = probe_name(p['instance'], os.getpid())
    try:
        mount = None
        if p['config']:
            host_path = os.path.join(workdir, 'config')
            with open(host_path, 'w') as handle:
                handle.write(p['config'])
            os.chmod(workdir, 0o755)
            os.chmod(host_path, 0o644)
            mount = (host_path, p['config_path'])
        argv = ['timeout', '--kill-after=10', str(p['timeout'])] + probe_argv(
            p['docker_bin'], image_id, p['engine'], p['run_args'], env, name=name, config_mount=mount,
            python=p['python'], memory=p['memory'], pids_limit=p['pids_limit'])
        started = time.monotonic()
        rc, out, err = module.run_command(argv, data=json.dumps({'command': p['command']}), binary_data=True)
        elapsed = time.monotonic() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    problem = None
    try:
        verdict = read_verdict(out)
    except ValueError as exc:
        verdict, problem = None, exc
    if verdict is None:
        if rc in (124, 137):  # the probe container only (its own name), never an engine's
            module.run_command([p['docker_bin'], 'rm', '--force', name])
        if rc == 124 or rc == 137 and elapsed >= p['timeout']:
            module.fail_json(msg="instance '%s': %s in image %s did not finish checking the configuration within %ds"
                                 % (p['instance'], title, label, p['timeout']), **result)
        if rc == 137:
            not_judged(module, result, 'the engine check was killed (exit 137) after %ds, before %s answered: the '
                                       "kernel's OOM killer at the check's memory limit of %s, or a host short of "
                                       'memory (the check runs with --oom-score-adj=%d, so that it is killed, never a '
                                       'serving engine); raise inference_server_engine_check_memory if the host has '
                                       'the memory' % (elapsed, title, p['memory'], OOM_SCORE_ADJ))
        if rc == 125 and LIMIT_REFUSAL.search(err or ''):
            not_judged(module, result, 'docker refused the engine check\'s limits (--memory=%s, --pids-limit=%d): %s'
                                       % (p['memory'], p['pids_limit'], _tail(err, 3)))
        module.fail_json(msg="instance '%s': cannot ask %s in image %s to check the configuration (%s; exit %d): %s"
                             % (p['instance'], title, label, problem, rc, _tail(err or out) or 'no output'), **result)
    if verdict['ok'] is None and not verdict['judged']:
        not_judged(module, result, '%s in image %s %s' % (title, label, verdict['error']))
    if verdict['ok'] is None:
        module.fail_json(msg="instance '%s': image %s cannot check a %s configuration: %s"
                             % (p['instance'], label, TITLES[p['engine']], verdict['error']), **result)
    if not verdict['ok']:
        result['verdict'] = 'refused'
        module.fail_json(msg=refusal(p['instance'], title, p['image'], image_id, verdict['error']), **result)
    result['verdict'] = 'accepted'
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
