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

import copy
import hashlib
import json
import posixpath
import re

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import _host_probe as host_probe, _role_spec as role_spec, _stack_serving as stack_serving
from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction
from ansible_collections.specdec.serve.plugins.plugin_utils._quoting import QuotingError, quote
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import control_characters, IMAGE_RE, as_bool
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import POLICY
from ansible_collections.specdec.serve.plugins.plugin_utils._roles.inference_server import docker_args_check
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import (
    DEFAULT_PORT,
    SpecConfigError,
    render,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    CONTAINER_CONFIG,
    CONTAINER_HOSTFILE,
    CONTAINER_STACK_DIR,
    GROUP_RE,
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
# how long a stack's node waits for the nodes it needs before its start fails (within the unit's TimeoutStartSec)
WAIT_S = 240
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


def node_gpus(inst):
    """The GPUs of each node of the stack an instance is served across (its ``gpus_per_node``, default 1), or None
    when that is not an integer from 1 to MAX_GPU_INDEX + 1."""
    given = inst.get('gpus_per_node')
    return _int_in(1 if given in (None, '') else given, 1, MAX_GPU_INDEX + 1)


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


def instance_digest(inst):
    """The sha256 of an instance's definition without its secret keys (an API key never changes its render); None for
    one that is no JSON document (keys of mixed types), which is then always rendered."""
    try:
        text = json.dumps(redaction.without_secret_keys(inst), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def published_renders(published):
    """Digest -> render of each serving instance of a published fleet plan (the rollout role's fact ``rollout_plan``:
    ``serving`` and ``rendered`` in the same order); {} for anything else."""
    serving = published.get('serving') if isinstance(published, dict) else None
    rendered = published.get('rendered') if isinstance(published, dict) else None
    if not isinstance(serving, list) or not isinstance(rendered, list) or len(serving) != len(rendered):
        return {}
    out = dict((instance_digest(inst), spec) for inst, spec in zip(serving, rendered)
               if isinstance(inst, dict) and isinstance(spec, dict))
    out.pop(None, None)
    return out


def build_plan(instances, settings, stack=None, published=None):
    """Check and render every instance; return the plan, or raise PlanError listing every refusal.

    ``settings`` are inference_server's typed settings (the ``specdec.serve.settings`` result): the
    defaults of the per-instance keys and the config root. ``stack``: the host's stack, for instances served
    across one (``stack: GROUP``): {layout: stack_link_layout or None, trust_dir, ssh_port} (stack_entry).
    ``published``: the fleet plan the play published (fact ``rollout_plan``): an instance it rendered is not
    rendered again (one render of each instance per host and play).
    """
    renders = published_renders(published)
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
                 'container_command': [], 'check_command': [], 'check_run_args': [], 'stack': None, 'stack_summary': None, 'env': {},
                 'health_url': '', 'unit_exec': {},
                 'container_tiktoken': CONTAINER_TIKTOKEN_DIR, 'container_models': CONTAINER_MODELS_DIR}
        if state == 'absent':
            plan.append(entry)
            continue
        bad = _check_owned(label, inst, settings, entry)
        if bad:
            errors.extend(bad)
            continue
        try:
            known = renders.get(instance_digest(inst)) if renders else None
            spec = copy.deepcopy(known) if known else render(
                inst, models_dir=CONTAINER_MODELS_DIR, config_path=CONTAINER_CONFIG)
        except SpecConfigError as exc:
            errors.append('%s: %s' % (where, exc))
            continue
        if inst.get('api_key') and spec['engine'] != 'vllm':
            errors.append('%s.api_key: for engine vllm only (trtllm-serve has no API key option)' % label)
            continue
        entry['spec'], entry['port'] = spec, spec['port']
        entry['check_command'] = container_command(spec)
        entry['env'] = public_env(spec, settings)
        entry['check_run_args'] = check_run_args(entry, settings)
        if inst.get('stack') not in (None, ''):
            try:
                entry['stack'] = stack_entry(label, inst, spec, stack or {}, settings)
            except (PlanError, SpecConfigError) as exc:
                errors.append('%s: %s' % (label, exc) if isinstance(exc, SpecConfigError) else str(exc))
                continue
        entry['docker_argv'] = docker_argv(entry, settings)
        entry['container_command'] = (stack_command(entry['stack'], spec) if entry['stack']
                                      else container_command(spec))
        entry['health_url'] = health_url(entry)
        try:
            entry['unit_exec'] = unit_exec(entry)
        except QuotingError as exc:
            errors.append('%s: %s' % (label, exc))
            continue
        if entry['stack']:
            entry['env'].update(entry['stack']['env'])
            entry['stack_summary'] = dict((k, entry['stack'][k]) for k in ('group', 'role', 'rank', 'world_size', 'head'))
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


def public_env(spec, settings):
    """The engine's environment without its secrets: what the role adds (the tiktoken encodings' mount, the
    hub offline), the role's inference_server_env, then the instance's spec env. Also the engine check's."""
    env = {'TIKTOKEN_ENCODINGS_BASE': CONTAINER_TIKTOKEN_DIR, 'HF_HUB_OFFLINE': '1'}
    env.update(_setting(settings, 'env') or {})
    env.update(spec.get('env') or {})
    return env


def stack_entry(label, inst, spec, context, settings=None):
    """What serving ``inst`` across the host's stack adds to its plan entry: this node's rank, role and command
    (stack_serving.render_stack), the stack's nodes, what the node waits for before it starts, and the link's
    environment. ``context``: {layout: stack_link_layout (None when the host is in no stack), trust_dir,
    ssh_port}. PlanError when the instance's stack is not the host's, or the layout is not one."""
    group = inst.get('stack')
    layout = context.get('layout')
    if not isinstance(group, string_types) or not GROUP_RE.match(group):
        raise PlanError([refusal(label + '.stack', group, 'must be the inventory group of a stack (stack_link_group)')])
    if not isinstance(layout, dict) or not layout.get('group'):
        raise PlanError(["%s.stack: %s, but this host is in no stack (stack_link_group is not set for it); a stack's "
                         "members set stack_link_group, stack_link_interface and stack_link_address" % (label, show(group))])
    if layout['group'] != group:
        raise PlanError(['%s.stack: %s is not the stack of this host, %s (stack_link_group)'
                         % (label, show(group), show(layout['group']))])
    per_node = node_gpus(inst)
    if per_node is None:
        raise PlanError([refusal(label + '.gpus_per_node', inst.get('gpus_per_node'),
                                 'must be an integer from 1 to %d (the GPUs of each node of the stack)' % (MAX_GPU_INDEX + 1))])
    address = dict((p['host'], p['address']) for p in layout.get('peers') or [])
    address[layout['members'][layout['rank']]] = layout['ip']
    nodes = [{'host': member, 'address': address[member]} for member in layout['members']]
    ssh_port = int(context.get('ssh_port') or stack_serving.DEFAULT_SSH_PORT)
    # every rank gets the engine's environment (mpirun -x): the tiktoken encodings on the second node too
    exported = dict(spec, env=public_env(spec, settings or {}))
    rendered = stack_serving.render_stack(exported, inst, nodes, layout['interface'], per_node, ssh_port=ssh_port)
    node = rendered['nodes'][layout['rank']]
    head = nodes[0]
    if spec['engine'] == 'trtllm':
        # the head's mpirun reaches every worker's sshd; a worker waits for nothing
        waits = [[n['address'], ssh_port] for n in nodes[1:]] if node['role'] == 'head' else []
    else:
        # a Ray worker joins the head's Ray; the head waits for nothing (vLLM waits for the stack's GPUs)
        waits = [] if node['role'] == 'head' else [[head['address'], rendered['ray_port']]]
    return {'group': group, 'role': node['role'], 'rank': node['rank'], 'world_size': rendered['world_size'],
            'head': head['host'], 'nodes': nodes, 'address': node['address'], 'interface': layout['interface'],
            'command': node['command'], 'env': node['env'], 'hostfile': rendered['hostfile'] if node['role'] == 'head'
            else '', 'ssh_port': rendered['ssh_port'], 'ray_port': rendered['ray_port'], 'waits': waits,
            # the stack restarts in order: the nodes others wait for first, then the ones that wait for them (a
            # node that restarted beside them could find the old ones still answering, and lose them at once)
            'restarts_after_peers': bool(waits),
            'wait_argv': ['/bin/bash', '-c', wait_script(waits, WAIT_S)] if waits else [],
            'probe_argv': stack_serving.probe_argv(model_dirs(spec, settings or {}),
                                                   stack_serving.mounted_host_paths(inst.get('volumes'))),
            'trust_dir': context.get('trust_dir') or '', 'gpus_per_node': per_node}


def unit_line(words, indent=None):
    """Words as one command line of a systemd unit, each written by the one quoting rule (``_quoting``, context
    ``unit``); with ``indent``, an option (a word starting with ``-``) continues the line on a new one, indented."""
    out = []
    for index, word in enumerate(words):
        if index:
            out.append(' \\\n' + ' ' * indent if indent is not None and str(word).startswith('-') else ' ')
        out.append(quote(word, 'unit'))
    return ''.join(out)


def unit_exec(entry):
    """The command lines of the instance's engine unit, quoted (engine.service.j2 writes them as they are): the
    docker run before the image (``docker``), the container's command after it (``command``), and a stack node's
    wait for the nodes it needs (``wait``, empty when it waits for none). QuotingError on a word no unit can hold."""
    stack = entry.get('stack') or {}
    return {'docker': unit_line(entry['docker_argv'], 4), 'command': unit_line(entry['container_command'], 6),
            'wait': unit_line(stack.get('wait_argv') or [])}


def health_url(entry):
    """Where the health gate (and the fleet view) asks whether the instance serves: the engine's port on the
    host, or for a stack's worker, its head's port on the link (a worker serves through its head, which serves
    only once every rank joined; the gate also watches the worker's own unit and container)."""
    stack = entry.get('stack')
    if stack and stack['role'] != 'head':
        address = stack['nodes'][0]['address']
        return 'http://%s:%d' % ('[%s]' % address if ':' in address else address, entry['port'])
    return 'http://127.0.0.1:%d' % entry['port']


def model_dirs(spec, settings):
    """The host directories of an instance's model and draft model (under inference_server_models_dir)."""
    root = _setting(settings, 'models_dir')
    out = []
    for path in (spec.get('model_path'), (spec.get('speculative') or {}).get('draft_model_path')):
        if isinstance(path, string_types) and path.startswith(CONTAINER_MODELS_DIR + '/'):
            out.append(root + path[len(CONTAINER_MODELS_DIR):])
    return out


def stack_command(stack, spec):
    """The words after the image of a stack node's container: its command (for vLLM, without the entrypoint,
    which docker_argv names)."""
    return stack['command'][1:] if spec['engine'] == 'vllm' else stack['command']


def wait_script(waits, timeout):
    """A bash line that waits (up to ``timeout`` seconds) until every [address, port] of ``waits`` accepts a
    TCP connection: what a stack node needs before it starts (the head's mpirun, the workers' sshd)."""
    targets = ' '.join('%s/%d' % (address, port) for address, port in waits)
    return ('for t in %s; do n=0; until (exec 3<>/dev/tcp/$t) 2>/dev/null; do n=$((n+2)); '
            'if [ $n -gt %d ]; then echo "stack node $t not answering after %d s" >&2; exit 1; fi; sleep 2; done; done'
            % (targets, timeout, timeout))


def docker_argv(entry, settings):
    """The `docker run` words of an instance up to the image (the unit's ExecStart).

    A node of a stack runs on the host's network (its ranks, collectives and sshd use the link directly, as
    NVIDIA's recipes run them): nothing is published; the firewall guards its ports in the host's input
    rules. It mounts the stack's trust directory, the head its hostfile, and the RDMA devices."""
    address = _setting(settings, 'publish_address') or ''
    stack = entry.get('stack')
    argv = [_setting(settings, 'docker_bin'), 'run', '--rm', '--name', entry['container'],
            '--pull=never', '--ipc=host']
    if stack:
        argv += ['--network=host']
    argv += ['--ulimit=%s=%s' % (k, v) for k, v in (_setting(settings, 'ulimits') or {}).items()]
    argv += ['--env-file', entry['dir'] + '/engine.env',
             '--label', 'specdec.instance=' + entry['name'],
             '--label', 'specdec.image=' + entry['image'],
             '--volume', '%s:%s:ro' % (_setting(settings, 'models_dir'), CONTAINER_MODELS_DIR),
             '--volume', '%s:%s:ro' % (_setting(settings, 'tiktoken_dir'), CONTAINER_TIKTOKEN_DIR)]
    if entry['spec']['engine'] == 'trtllm':
        argv += ['--volume', '%s/engine.yaml:%s:ro' % (entry['dir'], CONTAINER_CONFIG)]
    if stack:
        argv += ['--volume', '%s:%s:ro' % (stack['trust_dir'], CONTAINER_STACK_DIR)]
        if stack['hostfile']:
            argv += ['--volume', '%s/hostfile:%s:ro' % (entry['dir'], CONTAINER_HOSTFILE)]
        argv += ['--device=' + d for d in _setting(settings, 'stack_devices') or []]
    else:
        argv += ['--publish', '%s%d:%d' % (address + ':' if address else '', entry['port'], entry['port'])]
    argv += entry['gpu_args']
    argv += ['--volume=' + v for v in entry['volumes']]
    if entry['spec']['engine'] == 'vllm':
        argv += ['--entrypoint', (stack['command'] if stack else entry['spec']['command'])[0]]
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
    """The host ports the instances publish (state not absent), for the firewall: sorted, unique. A stack's
    node publishes nothing (it runs on the host's network; firewall_host_ports guards its ports)."""
    ports = set()
    for inst in instances or []:
        if (isinstance(inst, dict) and (inst.get('state') or 'started') != 'absent'
                and inst.get('stack') in (None, '')):
            port = _int_in(inst.get('port', DEFAULT_PORT), PORT_MIN, PORT_MAX)
            if port is not None:
                ports.add(port)
    return sorted(ports)


def parse_probe(lines):
    """The plan probe's output (plugin_utils/_host_probe.py): ({unit: (active, enabled)},
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
