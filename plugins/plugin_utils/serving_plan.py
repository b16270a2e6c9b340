# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deployment plan of inference_server: every instance checked and rendered on the controller.

One entry per instance with everything the role's tasks write or run (unit and container names,
config directory, GPU flags, docker options, health settings) and the spec_config rendering. Every
check of the keys the role owns lives here: names (and the directory built from them, contained in
the config root for every state, ``absent`` included), states, images, ports, GPUs, docker options
that would bypass the firewall, volumes, the API key, and control characters anywhere. Errors name
the instance, the key, the bad value and what is allowed; all of them are reported at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import posixpath
import re

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import host_probe, role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils.settings import (
    IMAGE_RE,
    POLICY,
    as_bool,
    control_characters,
    docker_args_check,
)
from ansible_collections.specdec.serve.plugins.plugin_utils.spec_config import (
    DEFAULT_PORT,
    SpecConfigError,
    render,
)
from ansible_collections.specdec.serve.plugins.plugin_utils.vocabulary import (
    CONTAINER_CONFIG,
    CONTAINER_MODELS_DIR,
    CONTAINER_TIKTOKEN_DIR,
    NAME_WORDS,
    PORT_MAX,
    PORT_MIN,
    is_name,
    refusal,
    show,
)

STATES = ('started', 'absent')
MAX_GPU_INDEX = 63
# docker run options that publish ports the firewall does not derive from the instances, or that put the
# container in another one's network (whose ports the role does not publish). What would give an engine the
# host (privileged, capabilities, host namespaces, mounts, devices) is refused by the settings' own rule
# (settings.docker_args_check), which the plan applies as well.
_BYPASS_OPTIONS = {
    '--network': "another container's network takes the engine's ports around the role's published port",
    '--net': "another container's network takes the engine's ports around the role's published port",
    '--publish': 'the role publishes the instance port itself; other published ports would not be filtered',
    '-p': 'the role publishes the instance port itself; other published ports would not be filtered',
    '--publish-all': 'publishes every exposed port, none of them filtered',
    '-P': 'publishes every exposed port, none of them filtered',
}


class PlanError(ValueError):
    """Refused instances, one line each."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(PlanError, self).__init__('\n'.join(self.errors))


def _setting(settings, key):
    """inference_server_<key> from the typed settings, else the role's default (its argument spec)."""
    return settings[key] if key in settings else role_spec.default('inference_server_' + key)


def bypass_option(words):
    """The first docker option of a list that bypasses the firewall, with the reason, or None."""
    words = list(words or [])
    for index, word in enumerate(words):
        if not isinstance(word, string_types):
            continue
        option, has_value, value = word.partition('=')
        if option in ('--network', '--net'):
            value = value if has_value else (words[index + 1] if index + 1 < len(words) else '')
            if not value.startswith('container:'):
                continue
        if option in _BYPASS_OPTIONS or (option.startswith('-p') and not option.startswith('--') and len(option) > 2):
            return word, _BYPASS_OPTIONS.get(option, _BYPASS_OPTIONS['-p'])
    return None


def contained_dir(root, name):
    """<root>/<name>, or None when the joined path leaves root (names like '..', '', 'a/../..')."""
    path = posixpath.normpath(posixpath.join(root, name))
    return path if posixpath.dirname(path) == posixpath.normpath(root) and name not in ('', '.', '..') else None


def _int_in(value, low, high):
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, float) and value != number:
        return None
    return number if low <= number <= high else None


def _gpu_args(gpus, request):
    if gpus == 'cdi':
        gpus, request = 'all', 'cdi'
    if gpus == 'none':
        return gpus, []
    if request == 'cdi':
        if gpus == 'all':
            return gpus, ['--device', 'nvidia.com/gpu=all']
        return gpus, ['--device=nvidia.com/gpu=%d' % g for g in gpus]
    if gpus == 'all':
        return gpus, ['--gpus', 'all']
    return gpus, ['--gpus', '"device=%s"' % ','.join(str(g) for g in gpus)]


def _gpus(value):
    """'all', 'none', 'cdi' or a list of GPU indices (a comma string from -e too); None when bad."""
    if isinstance(value, string_types):
        if value in ('all', 'none', 'cdi'):
            return value
        value = [v.strip() for v in value.split(',')] if re.match(r'^[0-9, ]+\Z', value) else None
    if not isinstance(value, (list, tuple)) or not value:
        return None
    out = [_int_in(v, 0, MAX_GPU_INDEX) for v in value]
    return None if None in out else out


def build_plan(instances, settings):
    """Check and render every instance; return the plan, or raise PlanError listing every refusal.

    ``settings`` are inference_server's typed settings (the ``specdec.serve.settings`` result): the
    defaults of the per-instance keys and the config root.
    """
    errors = []
    where = 'inference_server_instances'
    if not isinstance(instances, list):
        raise PlanError(['%s: must be a list of instances (mappings), got %s' % (where, show(instances))])
    root = _setting(settings, 'config_dir')
    plan: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    ports: dict[Any, Any] = {}
    gpu_owner: dict[Any, Any] = {}
    for index, inst in enumerate(instances):
        label = '%s[%d]' % (where, index)
        if not isinstance(inst, dict):
            errors.append('%s: must be a mapping of instance keys, got %s' % (label, show(inst)))
            continue
        name = inst.get('name')
        if not isinstance(name, str) or not is_name(name) or '..' in name:
            errors.append(refusal(label + '.name', name, 'must be %s, without .. (it names the unit, the container and '
                                  '%s/<name>)' % (NAME_WORDS, root)))
            continue
        label = '%s[%s]' % (where, name)
        if name in names:
            errors.append('%s.name: used twice (entries %d and %d); names must be unique' % (label, names[name], index))
            continue
        names[name] = index
        directory = contained_dir(root, name)
        if directory is None:
            errors.append('%s.name: %s leaves %s' % (label, show(name), root))
            continue
        found = control_characters(inst)
        if found:
            errors.append('%s: a control character (newline, NUL, ...) in %s; it would reach the unit or '
                          'environment file' % (label, found))
            continue
        state = inst.get('state') or 'started'
        if state not in STATES:
            errors.append('%s.state: %s is not one of %s' % (label, show(state), ', '.join(STATES)))
            continue
        entry = {'name': name, 'index': index, 'state': state, 'image': inst.get('image'),
                 'unit': 'specdec-%s.service' % name, 'container': 'specdec-%s' % name, 'dir': directory,
                 'spec': None, 'port': None, 'gpus': None, 'gpu_args': [], 'volumes': [], 'docker_args': [],
                 'health_timeout': None, 'health_generate': False, 'restart_sec': None, 'docker_argv': [],
                 'container_command': [], 'check_run_args': [], 'container_tiktoken': CONTAINER_TIKTOKEN_DIR,
                 'container_models': CONTAINER_MODELS_DIR}
        if state == 'absent':
            plan.append(entry)
            continue
        bad = _check_owned(label, inst, settings, entry)
        if bad:
            errors.extend(bad)
            continue
        try:
            spec = render(inst, models_dir=CONTAINER_MODELS_DIR, config_path=CONTAINER_CONFIG)
        except SpecConfigError as exc:
            errors.append('%s: %s' % (where, exc))
            continue
        if inst.get('api_key') and spec['engine'] != 'vllm':
            errors.append('%s.api_key: for engine vllm only (trtllm-serve has no API key option)' % label)
            continue
        entry['spec'], entry['port'] = spec, spec['port']
        entry['docker_argv'] = docker_argv(entry, settings)
        entry['container_command'] = container_command(spec)
        entry['check_run_args'] = check_run_args(entry, settings)
        if entry['port'] in ports:
            errors.append('%s.port: %s is also the port of %s; ports must be unique on a host'
                          % (label, entry['port'], ports[entry['port']]))
            continue
        ports[entry['port']] = name
        for gpu in entry['gpus'] if isinstance(entry['gpus'], list) else []:
            if gpu in gpu_owner:
                errors.append('%s.gpus: GPU %d is also given to %s; GPU lists must not overlap'
                              % (label, gpu, gpu_owner[gpu]))
                break
            gpu_owner[gpu] = name
        plan.append(entry)
    if errors:
        raise PlanError(errors)
    return plan


def docker_argv(entry, settings):
    """The `docker run` words of an instance up to the image (the unit's ExecStart)."""
    address = _setting(settings, 'publish_address') or ''
    argv = [_setting(settings, 'docker_bin'), 'run', '--rm', '--name', entry['container'],
            '--pull=never', '--ipc=host']
    argv += ['--ulimit=%s=%s' % (k, v) for k, v in (_setting(settings, 'ulimits') or {}).items()]
    argv += ['--env-file', entry['dir'] + '/engine.env',
             '--label', 'specdec.instance=' + entry['name'],
             '--label', 'specdec.image=' + entry['image'],
             '--volume', '%s:%s:ro' % (_setting(settings, 'models_dir'), CONTAINER_MODELS_DIR),
             '--volume', '%s:%s:ro' % (_setting(settings, 'tiktoken_dir'), CONTAINER_TIKTOKEN_DIR)]
    if entry['spec']['engine'] == 'trtllm':
        argv += ['--volume', '%s/engine.yaml:%s:ro' % (entry['dir'], CONTAINER_CONFIG)]
    argv += ['--publish', '%s%d:%d' % (address + ':' if address else '', entry['port'], entry['port'])]
    argv += entry['gpu_args']
    argv += ['--volume=' + v for v in entry['volumes']]
    if entry['spec']['engine'] == 'vllm':
        argv += ['--entrypoint', entry['spec']['command'][0]]
    return argv + entry['docker_args']


def check_run_args(entry, settings):
    """The unit's `docker run` options that the engine's own configuration check keeps (the engine_check
    module): its mounts, GPU request, ulimits and IPC, and for vLLM its entrypoint; not its name, port,
    environment file (secrets), labels or free docker_args."""
    argv = ['--ipc=host'] + ['--ulimit=%s=%s' % (k, v) for k, v in (_setting(settings, 'ulimits') or {}).items()]
    argv += ['--volume', '%s:%s:ro' % (_setting(settings, 'models_dir'), CONTAINER_MODELS_DIR),
             '--volume', '%s:%s:ro' % (_setting(settings, 'tiktoken_dir'), CONTAINER_TIKTOKEN_DIR)]
    argv += entry['gpu_args']
    return argv + ['--volume=' + v for v in entry['volumes']]


def container_command(spec):
    """The words after the image in `docker run`.

    NGC TensorRT-LLM images run the command they are given (their entrypoint script execs it), so
    the whole `trtllm-serve ...` line follows the image. vllm/vllm-openai images (and vLLM's CPU
    image) set ENTRYPOINT ["vllm", "serve"] and append the command to it: `vllm serve` after the
    image would run `vllm serve vllm serve ...`, which vLLM refuses (unrecognized arguments). The
    unit names the entrypoint itself (`--entrypoint vllm`, see docker_argv) and passes `serve ...`,
    which is right whatever entrypoint the image declares.
    """
    return spec['command'][1:] if spec['engine'] == 'vllm' else spec['command']


def _check_owned(label, inst, settings, entry):
    """Check the keys this role owns and fill them into entry; return the refusals."""
    errors = []
    image = inst.get('image')
    if not isinstance(image, string_types) or not IMAGE_RE.match(image):
        errors.append('%s.image: %s must be an image reference such as nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6 '
                      '(required unless state is absent)' % (label, show(image)))
    raw_gpus = inst.get('gpus') if inst.get('gpus') not in (None, '') else _setting(settings, 'gpus')
    gpus = _gpus(raw_gpus)
    request = inst.get('gpu_request') or _setting(settings, 'gpu_request')
    if gpus is None:
        errors.append('%s.gpus: %s must be all, none, cdi or a list of GPU indices 0 to %d'
                      % (label, show(raw_gpus), MAX_GPU_INDEX))
    elif request not in role_spec.choices('inference_server_gpu_request'):
        errors.append(refusal(label + '.gpu_request', request,
                              'is not one of %s' % ', '.join(role_spec.choices('inference_server_gpu_request'))))
    else:
        entry['gpus'], entry['gpu_args'] = _gpu_args(gpus, request)
    for key in ('volumes', 'docker_args'):
        value = inst.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, string_types) and v for v in value):
            errors.append('%s.%s: %s must be a list of strings' % (label, key, show(value)))
            continue
        entry[key] = value
    for volume in entry['volumes']:
        if ':' not in volume or volume.startswith(':'):
            errors.append('%s.volumes: %s must be host:container[:options]' % (label, show(volume)))
    entry['docker_args'] = list(_setting(settings, 'docker_args') or []) + entry['docker_args']
    found = bypass_option(entry['docker_args'])
    if found:
        errors.append('%s.docker_args: %s is refused: %s' % (label, show(found[0]), found[1]))
    host_root = docker_args_check(entry['docker_args'], _setting(settings, 'allow_host_paths'))
    if host_root:
        errors.append('%s.docker_args: %s' % (label, host_root))
    for key in ('health_timeout', 'restart_sec'):  # the ranges of the role's defaults of the same names
        low, high = POLICY['inference_server_' + key][0].bounds
        value = inst.get(key) if inst.get(key) not in (None, '') else _setting(settings, key)
        number = _int_in(value, low, high)
        if number is None:
            errors.append('%s.%s: %s must be an integer from %d to %d' % (label, key, show(value), low, high))
        entry[key] = number
    generate = as_bool(inst.get('health_generate', False))
    if generate is None:
        errors.append('%s.health_generate: %s must be true or false' % (label, show(inst.get('health_generate'))))
    entry['health_generate'] = bool(generate)
    api_key = inst.get('api_key')
    if api_key not in (None, '') and not isinstance(api_key, string_types):
        errors.append('%s.api_key: (value hidden) must be a string' % label)
    return errors


def published_ports(instances):
    """The host ports the instances publish (state not absent), for the firewall: sorted, unique."""
    ports = set()
    for inst in instances or []:
        if isinstance(inst, dict) and (inst.get('state') or 'started') != 'absent':
            port = _int_in(inst.get('port', DEFAULT_PORT), PORT_MIN, PORT_MAX)
            if port is not None:
                ports.add(port)
    return sorted(ports)


def parse_probe(lines):
    """The plan probe's output (plugin_utils/host_probe.py): ({unit: (active, enabled)},
    {path: 'mode:owner:group sha1' | 'dir -' | '- -'})."""
    found = host_probe.parse(lines)
    units = dict((unit, tuple(state.split(' '))) for unit, state in found['unit'].items())
    return units, found['file']


def plan_changes(probe_lines, plan, expected, host_expected=None, to_fetch=(), fetch='load', always_pull=False):
    """What a run of inference_server would change on a host: [{instance, reasons}].

    ``expected`` is, per plan entry, {path: 'mode:owner:group sha1'} of the files the role writes;
    ``host_expected`` {path: [want, reason]} for files shared by every instance (the facts script);
    ``to_fetch`` the images a run would load or pull (``fetch``); ``always_pull`` a pull on every run.
    A path the probe did not report counts as absent.
    """
    units, files = parse_probe(probe_lines)
    host_reasons = [reason for path, (want, reason) in sorted((host_expected or {}).items())
                    if files.get(path, '- -') != want]
    if always_pull:
        host_reasons.append('image pull always')
    changes = []
    for entry, want_files in zip(plan, expected):
        reasons = []
        if entry['state'] == 'absent':
            if (files.get(entry['dir'], '- -') != '- -'
                    or files.get('/etc/systemd/system/' + entry['unit'], '- -') != '- -'):
                reasons.append('to remove')
        else:
            if entry['image'] in to_fetch:
                reasons.append('image %s to %s' % (entry['image'], fetch))
            for path, want in (want_files or {}).items():
                have = files.get(path, '- -')
                if have != want:
                    reasons.append(posixpath.basename(path) + (' absent' if have == '- -' else ' differs'))
            active, enabled = units.get(entry['unit'], ('none', 'none'))
            if active != 'active':
                reasons.append('unit ' + active)
            if enabled != 'enabled':
                reasons.append('unit not enabled')
            reasons.extend(host_reasons)
        if reasons:
            changes.append({'instance': entry['name'], 'reasons': reasons})
    return changes
