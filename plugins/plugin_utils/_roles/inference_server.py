# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inference_server role's settings policy (what its argument spec cannot say: ranges, patterns, paths, the checks
that read another setting, one entry per setting, applied by the settings engine, plugin_utils/_settings.py) and its
planner: every instance checked and rendered on the controller (:func:`plan`, the ``plan`` entry)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import ipaddress
import posixpath
import re

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    as_bool,
    ContextRule,
    device_path,
    DRAFT_LEN,
    each,
    env_names,
    group,
    HEALTH_TIMEOUT,
    host_path,
    host_port,
    HOST_ROOT_PATHS,
    int_values,
    ip_or_empty,
    local_path,
    name_keys,
    no_climb,
    no_dotdot_name,
    pattern,
    per_architecture,
    PlanRefusal,
    port,
    RESTART_SEC,
    rng,
    Rule,
    schedule_values,
    secret_string,
    string_values,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._redaction import (
    secret_args,
    secret_env_names,
    secret_home,
    secret_shaped,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    show,
)


# Device nodes an engine may be given besides the role's own GPU request.
GPU_DEVICES = re.compile(r'^(/dev/nvidia[a-z0-9-]*|/dev/dri(/[a-zA-Z0-9]+)?|nvidia\.com/gpu=[A-Za-z0-9,]+)(:.*)?\Z')


ALLOW_HOST_PATHS = 'inference_server_allow_host_paths'
_HOST_OPTIONS = {
    '--privileged': 'a privileged container is root on the host',
    '--cap-add': 'added capabilities give the container powers over the host',
    '--volumes-from': "takes another container's mounts, which this check does not see",
    '--device-cgroup-rule': 'opens device nodes of the host to the container',
}


# option: the values that share the host's namespace or lift the container's confinement
_HOST_MODES = {'--pid': ('host',), '--network': ('host',), '--net': ('host',), '--userns': ('host',),
               '--uts': ('host',), '--cgroupns': ('host',),
               '--security-opt': ('apparmor=unconfined', 'apparmor:unconfined', 'seccomp=unconfined', 'seccomp:unconfined',
                                  'label=disable', 'label:disable', 'systempaths=unconfined')}


def _sensitive(path):
    """Why a host path must not be mounted into an engine, or None: the root, or a path at, under or above
    one of HOST_ROOT_PATHS."""
    norm = posixpath.normpath(path)
    if '..' in path.split('/'):
        return "climbs with '..'"
    if norm == '/':
        return "is the host's root"
    for root in HOST_ROOT_PATHS:
        if norm == root or norm.startswith(root + '/') or root.startswith(norm + '/'):
            if root == '/dev' and (GPU_DEVICES.match(norm) or norm == '/dev/shm' or norm.startswith('/dev/shm/')):
                continue
            return 'gives the container the host\'s %s' % root
    return None


def _host_source(path, allowed, what):
    """The refusal of one host path an engine would get (a mount source, a device), or None."""
    if not path.startswith('/') or path in (allowed or []):
        return None  # a named volume, or a path inference_server_allow_host_paths names exactly
    why = _sensitive(path)
    return ('%s %s %s; refused unless %s names it exactly' % (what, show(path), why, ALLOW_HOST_PATHS)) if why else None


def _mount_source(spec):
    """The source of a --mount spec (type=bind,source=/x,target=/y)."""
    for part in spec.split(','):
        key, sep, val = part.partition('=')
        if sep and key.strip() in ('source', 'src'):
            return val.strip()
    return ''


def _volume(v, allowed):
    if not isinstance(v, string_types):
        return None
    return _host_source(v.split(':')[0], allowed, 'mounts')


def volumes_check(values, allowed):
    """An instance's volumes: no host root path (HOST_ROOT_PATHS) unless allowed by its exact path."""
    if not isinstance(values, (list, tuple)):
        return None if values in (None, '') else 'must be a list of host:container[:options] strings'
    for v in values:
        msg = _volume(v, allowed)
        if msg:
            return msg
    return None


def docker_args_check(words, allowed):
    """docker run words that would give an engine the host: privileged, capabilities, the host's namespaces,
    confinement off, mounts of HOST_ROOT_PATHS, devices other than the GPUs; and a secret-named variable given
    its value (-e HF_TOKEN=...), which belongs in a no_log setting."""
    if not isinstance(words, (list, tuple)):
        return None if words in (None, '') else 'must be a list of docker run words (strings)'
    words = [w for w in words if isinstance(w, string_types)]
    for index, word in enumerate(words):
        option, has_value, value = word.partition('=')
        if not has_value and index + 1 < len(words):
            value = words[index + 1]
        if option in ('-v',) or (option.startswith('-v') and not option.startswith('--') and len(option) > 2):
            value = word[2:] if len(option) > 2 else value
            option = '--volume'
        if option == '-e' or (option.startswith('-e') and not option.startswith('--') and len(option) > 2):
            value = word[2:] if len(option) > 2 else value
            option = '--env'
        if option == '--env' and '=' in value and secret_shaped(value.partition('=')[0]):
            name = value.partition('=')[0]
            return ('--env %s=%s: a secret on the docker command line, which is in the world-readable unit file and '
                    "the play's output; give it in %s" % (name, redaction.HIDDEN, secret_home(name, 'VLLM_API_KEY')))
        if option == '--privileged' and (not has_value or value.lower() != 'false'):
            return '%s: %s' % (show(word), _HOST_OPTIONS[option])
        if option in _HOST_OPTIONS and option != '--privileged':
            return '%s: %s' % (show(word), _HOST_OPTIONS[option])
        if option in _HOST_MODES and value.strip().lower() in _HOST_MODES[option]:
            # host networking also takes the engine's ports around the firewall
            around = ' and bypasses the DOCKER-USER allow-list' if option in ('--network', '--net') else ''
            return "%s %s: it lifts the container's separation from the host%s" % (option, show(value), around)
        if option == '--volume':
            msg = _volume(value, allowed)
        elif option == '--mount':
            msg = _host_source(_mount_source(value), allowed, 'mounts')
        elif option == '--device':
            host = value.split(':')[0]
            msg = None if GPU_DEVICES.match(value) or host in (allowed or []) else (
                'device %s is not a GPU (the role asks for the GPUs itself); refused unless %s names it exactly'
                % (show(host), ALLOW_HOST_PATHS))
        else:
            msg = None
        if msg:
            return msg
    return None


def models_mount(path, allowed):
    """A host directory the role mounts into every engine (models, tiktoken)."""
    return _host_source(path, allowed, 'mounts') if isinstance(path, string_types) and path else None


def publish_ipv6(v, firewall_ipv6):
    """The engines' publish address: IPv6 (or empty, which is [::] too) only while the firewall writes its
    IPv6 rules, else the engine port is open over IPv6 around the allow-list."""
    if v is None or as_bool(firewall_ipv6, True):
        return None
    try:
        ipv6 = v == '' or ipaddress.ip_address(v).version == 6
    except ValueError:
        return None
    if ipv6:
        return ('publishes the engine ports on IPv6 while firewall_ipv6 is false, so no IPv6 rule would filter '
                'them; publish on an IPv4 address (0.0.0.0) or set firewall_ipv6: true')
    return None


POLICY: dict[str, Any] = {
    'inference_server_models_dir': [host_path, ContextRule(models_mount, ALLOW_HOST_PATHS)],
    'inference_server_tiktoken_dir': [host_path, ContextRule(models_mount, ALLOW_HOST_PATHS)],
    'inference_server_allow_host_paths': [each(host_path)],
    'inference_server_docker_args': [ContextRule(docker_args_check, ALLOW_HOST_PATHS)],
    'inference_server_config_dir': [host_path],
    'inference_server_docker_bin': [host_path],
    'inference_server_publish_address': [ip_or_empty, ContextRule(publish_ipv6, 'firewall_ipv6')],
    'inference_server_env': [env_names, secret_env_names],
    'inference_server_secret_env': [env_names, string_values],
    'inference_server_stack_devices': [each(device_path)],
    'inference_server_stack_max_clock_skew': [rng(0, 3600)],
    'inference_server_ulimits': [name_keys, int_values(-1, 2 ** 63 - 1)],  # docker reads them as int64, -1 unlimited
    'inference_server_image_archive_dir': [host_path],
    'inference_server_image_archive': [per_architecture(local_path)],
    'inference_server_registry': [host_port],
    'inference_server_health_timeout': [HEALTH_TIMEOUT],
    'inference_server_image_timeout': [rng(1, 604800)],
    'inference_server_poll_interval': [rng(1, 3600)],
    'inference_server_log_lines': [rng(0, 10000)],
    'inference_server_restart_sec': [RESTART_SEC],
    'inference_server_restart_max_delay_sec': [rng(1, 86400)],
    'inference_server_start_limit_burst': [rng(1, 1000)],
    'inference_server_start_limit_interval_sec': [rng(0, 604800)],
    'inference_server_stop_timeout': [rng(1, 3600)],
    'inference_server_engine_check_timeout': [rng(1, 86400)],
    'inference_server_engine_check_memory': [pattern(re.compile(r'^[1-9][0-9]*[bkmgBKMG]?\Z'),
                                                     'a docker memory size: a whole number with b, k, m or g (8g, 12288m)')],
    'inference_server_engine_check_pids_limit': [rng(64, 4194304)],  # 4194304: the kernel's most pids (PID_MAX_LIMIT)
    'inference_server_firewall_unit': [no_dotdot_name],
    # the keys of each instance (inference_server_run_instances shares them, NESTED_AS)
    'inference_server_instances.model': [no_climb],
    'inference_server_instances.speculative.draft_model': [no_climb],
    'inference_server_instances.api_key': [secret_string],
    # secrets only in secret fields: none on the command line or in the public environment
    'inference_server_instances.extra_args': [Rule(secret_args, hides=True)],
    'inference_server_instances.env': [Rule(secret_env_names, hides=True)],
    'inference_server_instances.volumes': [ContextRule(volumes_check, ALLOW_HOST_PATHS)],
    'inference_server_instances.docker_args': [ContextRule(docker_args_check, ALLOW_HOST_PATHS)],
    'inference_server_instances.port': [port],
    'inference_server_instances.max_batch_size': [rng(1, 65536)],
    'inference_server_instances.max_num_tokens': [rng(1, 16777216)],
    'inference_server_instances.max_seq_len': [rng(1, 16777216)],
    'inference_server_instances.tensor_parallel_size': [rng(1, 1024)],
    'inference_server_instances.pipeline_parallel_size': [rng(1, 1024)],
    'inference_server_instances.stack': [group],
    'inference_server_instances.gpus_per_node': [rng(1, 64)],
    'inference_server_instances.expert_parallel_size': [rng(1, 1024)],
    'inference_server_instances.gpu_memory_fraction': [rng(0.0, 1.0)],
    'inference_server_instances.health_timeout': [HEALTH_TIMEOUT],
    'inference_server_instances.restart_sec': [RESTART_SEC],
    'inference_server_instances.speculative.max_draft_len': [DRAFT_LEN],
    'inference_server_instances.speculative.ngram_size': [rng(1, 64)],
    # 0 is a band without speculation (TensorRT-LLM's draft_len_schedule, vLLM's num_speculative_tokens_per_batch_size:
    # both take it), where the sweep's baseline won that load level
    'inference_server_instances.speculative.draft_len_schedule': [schedule_values(rng(0, 64))],
}


def plan(settings, warn=None, ctx=None):
    """The role's plan (plugin_utils/_serving_plan.py, ``build_plan``): every instance this run serves or removes,
    checked and rendered on the controller before any task touches the host, or every refusal at once. The
    instances are ``inference_server_run_instances`` where given (a rollout's or a sweep's), else
    ``inference_server_instances``, as the host has them (API keys included: they are checked, never planned). An
    instance the play's published fleet plan rendered (the rollout role's fact ``rollout_plan``) is taken from it,
    not rendered again. A member of a stack (``stack_link_group``) serves with ``stack:`` across it: the stack's
    layout is stack_link's (the fact ``stack_link_layout``), its trust directory and sshd port stack_trust's (the
    host's values, else that role's defaults)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import PlanError, build_plan
    found = (ctx or {}).get('vars') or {}
    given = found.get('inference_server_run_instances')
    if given is None:
        given = found.get('inference_server_instances')
    given = [] if given is None else given
    stack = {'layout': found.get('stack_link_layout') if found.get('stack_link_group') else None}
    for key, var in (('trust_dir', 'stack_trust_dir'), ('ssh_port', 'stack_trust_ssh_port')):
        stack[key] = found[var] if found.get(var) is not None else role_spec.default(var)
    try:
        entries = build_plan(given, settings, stack, found.get('rollout_plan'))
    except PlanError as exc:
        raise PlanRefusal(['inference_server_instances: %s' % e if not e.startswith('inference_server_') else e
                           for e in exc.errors])
    for entry in entries:
        for text in (entry['spec'] or {}).get('warnings', []):
            if warn:
                warn(text)
    return entries


def _instance(reported, what):
    entry = reported.get('instance')
    if not isinstance(entry, dict) or 'name' not in entry:
        raise PlanRefusal(['%s: reported.instance must be an entry of the plan, got %s' % (what, show(entry))])
    return entry


def stack_preflight(settings, warn=None, ctx=None):
    """What keeps a stack's instance from changing (plugin_utils/_stack_serving.py, ``preflight``): ``problems``,
    over the views its members shared (each member's fact ``_inference_server_stack_view``: its image IDs, its probe
    of its clock, model files and the NCCL libraries its engine mounts from the host, its link check).
    ``ctx['reported']``: ``instance`` (an entry of the plan served across a stack) and ``hosts`` (the play's: a member
    outside it is refused, the stack restarts as one)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    ctx = ctx or {}
    reported = ctx.get('reported') or {}
    entry = _instance(reported, 'stack_preflight')
    stack = entry.get('stack')
    if not isinstance(stack, dict):
        raise PlanRefusal(['stack_preflight: %s is not served across a stack' % entry['name']])
    hostvars = ctx.get('hostvars') or {}
    views = {}
    for node in stack['nodes']:
        found = hostvars[node['host']] if node['host'] in hostvars else {}
        view = found['_inference_server_stack_view'] if '_inference_server_stack_view' in found else None
        if not isinstance(view, dict):
            continue
        probes = [r for r in view.get('probes') or []
                  if isinstance(r, dict) and (r.get('_inference_server_instance') or {}).get('name') == entry['name']]
        if not probes:
            continue
        lines = probes[0].get('stdout_lines')
        clock, models = stack_serving.probe_view(lines)
        views[node['host']] = {'image_id': (view.get('image_ids') or {}).get(entry['image']), 'time': clock,
                               'models': models, 'nccl': stack_serving.nccl_view(lines),
                               'link': stack_serving.link_view(dict(view.get('link') or {}))}
    return {'problems': stack_serving.preflight(entry['name'], stack['nodes'], views, list(reported.get('hosts') or []),
                                                float(settings['stack_max_clock_skew']))}


def stack_restart(settings, warn=None, ctx=None):
    """Whether this host restarts an instance (plugin_utils/_stack_serving.py, ``stack_restart``): ``restart``. A
    stack restarts as one: when any member wants to (its fact ``_inference_server_restart_wanted``: its files
    changed or its engine is down), every member does. ``ctx['reported']``: ``instance`` (an entry of the plan) and
    ``wanted`` (this host's wish)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    ctx = ctx or {}
    reported = ctx.get('reported') or {}
    entry = _instance(reported, 'stack_restart')
    hostvars = ctx.get('hostvars') or {}
    wishes = {}
    for node in (entry.get('stack') or {}).get('nodes') or []:
        found = hostvars[node['host']] if node['host'] in hostvars else {}
        wishes[node['host']] = found['_inference_server_restart_wanted'] if '_inference_server_restart_wanted' in found \
            else False
    return {'restart': bool(stack_serving.stack_restart(entry, as_bool(reported.get('wanted')), wishes))}


def failure(settings, warn=None, ctx=None):
    """The report of an engine that did not become healthy, with what the rollback did (plugin_utils/
    _inference_server.py, ``failure_message``): ``message``. ``ctx['reported']``: ``failure`` (the failed health
    gate's result), ``unit``, ``can_roll_back`` and ``previous_health`` (the previous engine's health gate, where it
    was put back)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import failure_message
    reported = (ctx or {}).get('reported') or {}
    return {'message': failure_message(reported.get('failure'), reported.get('unit'), as_bool(settings['rollback']),
                                       as_bool(reported.get('can_roll_back')),
                                       previous_health=reported.get('previous_health') or {})}


def expected_files(settings, warn=None, ctx=None):
    """The files a run writes for an instance (plugin_utils/_inference_server.py, ``expected_files``):
    ``files``, ``{path: 'mode:owner:group sha1'}``, as the ``changes`` entry point compares them with the host's.
    ``ctx['reported']``: ``instance`` (an entry of the plan), ``stat`` (the modes, as stat prints them) and, for an
    instance that is not removed, the texts ``env`` and ``unit`` (and ``facts``, where the role records them)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._inference_server import expected_files as expected
    reported = (ctx or {}).get('reported') or {}
    entry = _instance(reported, 'expected_files')
    if entry.get('state') == 'absent':
        return {'files': {}}
    if not isinstance(reported.get('stat'), dict) or reported.get('env') is None or reported.get('unit') is None:
        raise PlanRefusal(['expected_files: stat (a mapping), env and unit (the texts of the files) are required'])
    return {'files': expected(entry, reported['stat'], reported['env'], reported['unit'], facts=reported.get('facts'))}


def _fetch(settings, reported):
    """The images a run fetches, from the image IDs the host reported (``host_ids``, {image: ID, '' where it has
    none}, in the plan's order) and the archive's (``archive``, {tag: ID} that loading it gives): with an archive,
    those to load from it (plugin_utils/_image_archive.py), else those the host lacks, to pull."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError, images_to_load
    host_ids = reported.get('host_ids') or {}
    archive = reported.get('archive') or {}
    if not isinstance(host_ids, dict) or not isinstance(archive, dict):
        raise PlanRefusal(['inference_server (images): host_ids and archive must map an image to its ID, got %s and %s'
                           % (show(host_ids), show(archive))])
    missing = [image for image, found in host_ids.items() if not found]
    if not settings['image_archive']:
        return missing, missing
    try:
        return missing, images_to_load(list(host_ids), host_ids, archive)
    except ImageArchiveError as exc:
        raise PlanRefusal([str(exc)])


def images(settings, warn=None, ctx=None):
    """Which images this run fetches, judged from the image IDs the host reported (:func:`_fetch`): ``missing``
    (those the host lacks) and ``to_fetch`` (to load from the archive, or pull). Refuses, naming each, an image
    neither on the host nor in the archive."""
    reported = (ctx or {}).get('reported') or {}
    missing, to_fetch = _fetch(settings, reported)
    archive = reported.get('archive') or {}
    absent = [image for image in missing if settings['image_archive'] and image not in archive]
    if absent:
        raise PlanRefusal(['%s: image(s) %s neither on the host nor in inference_server_image_archive=%s (it holds %s).'
                           % ((ctx or {}).get('host'), ', '.join(absent), settings['image_archive'],
                              ', '.join(archive) or 'no tagged image')])
    return {'missing': missing, 'to_fetch': to_fetch}


def changes(settings, warn=None, ctx=None):
    """What a run would change on this host (plugin_utils/_serving_plan.py, ``plan_changes``): ``changes``,
    ``[{instance, reasons}]``. ``ctx['reported']``: ``probe`` (the read-only probe's lines), ``plan`` (the role's
    plan), ``expected`` (per plan entry, :func:`expected_files`'s ``files``), ``host_expected`` (the files every
    instance shares), ``host_ids`` and ``archive`` (the images' IDs on the host and in the archive: what a run would
    load from the archive, or pull, :func:`_fetch`)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import plan_changes
    reported = (ctx or {}).get('reported') or {}
    archive = len(settings['image_archive'] or '') > 0
    return {'changes': plan_changes(reported.get('probe') or [], reported.get('plan') or [],
                                    reported.get('expected') or [], host_expected=reported.get('host_expected') or {},
                                    to_fetch=_fetch(settings, reported)[1], fetch='load' if archive else 'pull',
                                    always_pull=not archive and settings['image_pull'] == 'always')}


# the planners the settings action calls, by the task's entry (validate.yml, which every entry point of the role
# imports, plans after the settings check and the stack's layout)
PLANNERS = {'plan': plan, 'stack_preflight': stack_preflight, 'stack_restart': stack_restart, 'failure': failure,
            'expected_files': expected_files, 'images': images, 'changes': changes}
# the variables the plan is made from (the settings action templates them for the planner; the other entries read
# what the task reports, and the inventory)
PLAN_VARS = {'plan': ('inference_server_instances', 'inference_server_run_instances', 'stack_link_group',
                      'stack_link_layout', 'stack_trust_dir', 'stack_trust_ssh_port', 'rollout_plan')}
