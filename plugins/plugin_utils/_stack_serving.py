# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One instance served across a stack: the command of each node's engine container, from the instance's
spec_config rendering and the stack's link (plugin_utils/_stack.py).

TensorRT-LLM (MPI): the head runs ``mpirun`` over the stack's hostfile, which starts one rank per GPU by
SSH to each worker's ``sshd``; every rank runs ``trtllm-llmapi-launch``, which runs ``trtllm-serve`` on rank 0
and ``tensorrt_llm.llmapi.mgmn_worker_node`` on the others (NVIDIA's two-Spark recipe, and
``examples/llm-api/llm_mgmn_trtllm_serve.sh`` upstream). The workers' ``sshd`` listens on the link address
only, takes the stack's own key only and has a pinned host key; the head's SSH pins the workers' host keys
(``StrictHostKeyChecking=yes``). Nothing is fetched or installed at start.

vLLM (Ray): each worker runs ``ray start --address HEAD:PORT --block``; the head starts the Ray head and then
``vllm serve ... --distributed-executor-backend ray`` in the same container.

Both take the link interface for NCCL, Gloo, UCX and OpenMPI's TCP transports, so the ranks talk over the
link and not the management network. Errors name the instance, the key and what is allowed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.specdec.serve.plugins.plugin_utils._quoting import quote
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_versions import SpecConfigError
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import CONTAINER_HOSTFILE, CONTAINER_STACK_DIR

# Paths inside the engine containers: the stack's directory (stack_trust_dir) is mounted there read-only.
STACK_DIR = CONTAINER_STACK_DIR
HOSTFILE = CONTAINER_HOSTFILE
# the key each member makes (stack_trust): the head's SSH client key, a worker's sshd host key
KEY_FILES = {'head': 'id_ed25519', 'worker': 'ssh_host_ed25519_key'}
CLIENT_KEY = STACK_DIR + '/' + KEY_FILES['head']
KNOWN_HOSTS = STACK_DIR + '/known_hosts'
AUTHORIZED_KEYS = STACK_DIR + '/authorized_keys'
HOST_KEY = STACK_DIR + '/' + KEY_FILES['worker']
DEFAULT_SSH_PORT = 2233
DEFAULT_RAY_PORT = 6379
# Ray's other listeners, which it otherwise opens on every address at ports it picks at start (the raylet's node
# and object managers, its agents, its metrics) or in a range of 8,000 (its workers, the driver among them): Ray has
# no authentication, so each node's are pinned next to the GCS port, and the firewall lets only the stack's peers
# reach them (firewall.stack_ports). The head's Ray client server, where ray[client] is installed, takes Ray's own
# 10001: `ray start` refuses --ray-client-server-port without ray[client], so it is guarded, not pinned.
RAY_PORT_OPTIONS = ('node-manager-port', 'object-manager-port', 'runtime-env-agent-port', 'metrics-export-port',
                    'dashboard-agent-grpc-port', 'dashboard-agent-listen-port')
RAY_CLIENT_SERVER_PORT = 10001
RAY_WORKER_PORTS_OFFSET = 11  # the workers' ports start at DEFAULT_RAY_PORT + 11 (6390)
# OpenMPI's listeners, which it opens on every address (IPv4 and IPv6) whatever *_if_include says: mpirun's and each
# orted's out-of-band channel at a port it picks, each rank's TCP BTL from port 1024 up. They are pinned (above
# Ray's, up to 6525 for 64 GPUs a node) and the firewall lets only the stack's peers reach them.
MPI_OOB_PORTS = (6600, 6603)
MPI_BTL_PORT_MIN = 6610


# An OpenSSH ed25519 public key line: type, base64 key, optional comment (dropped: the collection writes its own).
_PUBKEY_RE = re.compile(r'^(ssh-ed25519) ([A-Za-z0-9+/]+={0,2})(?: [^\r\n\x00]*)?\n?\Z')


class TrustError(ValueError):
    """A public key that is not one line of an ed25519 key, or a stack without its keys."""


def public_key(text, what):
    """``ssh-ed25519 BASE64`` of an OpenSSH public key line; TrustError naming ``what`` otherwise."""
    match = _PUBKEY_RE.match(text or '') if isinstance(text, str) else None
    if not match:
        raise TrustError('%s is not one line of an ed25519 OpenSSH public key' % what)
    return '%s %s' % match.groups()


def key_file(layout):
    """The file name of the key a member makes, by its role in the stack (KEY_FILES)."""
    return KEY_FILES[layout['role']]


def trust_files(layout, public_keys, port=DEFAULT_SSH_PORT, missing_ok=False):
    """The SSH trust of a stack on one member, from its stack_link layout (members head first, the peers' link
    addresses) and the public keys the members made themselves, ``public_keys`` {member: key line}: the head's
    is its client key, a worker's its sshd host key. No private key leaves the member that made it.

    The head gets ``known_hosts`` (each worker's host key pinned at ``[link address]:port``); a worker gets
    ``authorized_keys`` (the head's key, accepted only from the head's link address, with ``restrict``: no
    terminal, no forwarding). A member whose key is unknown fails, naming it (``missing_ok``: {} instead, for
    check mode before the keys exist). Returns {file name: content}."""
    group = layout['group']
    address = dict((p['host'], p['address']) for p in layout['peers'])
    needed = layout['members'][1:] if layout['role'] == 'head' else [layout['head']]
    keys = {}
    for member in needed:
        text = public_keys.get(member)
        if text in (None, ''):
            if missing_ok:
                return {}
            raise TrustError("the public key of %s (stack '%s') is unknown: run the play on every member of the "
                             "stack together (e.g. -l %s)" % (member, group, group))
        keys[member] = public_key(text, "the public key of %s (stack '%s')" % (member, group))
    if layout['role'] == 'head':
        return {'known_hosts': ''.join('[%s]:%d %s\n' % (address[w], port, keys[w]) for w in needed)}
    return {'authorized_keys': 'from="%s",restrict %s specdec-stack-%s-head\n'
            % (address[layout['head']], keys[layout['head']], group)}


def _fail(spec, text):
    raise SpecConfigError("instance '%s': %s" % (spec['name'], text))


def world_size(spec, instance, nodes, gpus_per_node):
    """tensor_parallel_size x pipeline_parallel_size, which must be the stack's GPUs."""
    tp = instance.get('tensor_parallel_size') or 1
    pp = instance.get('pipeline_parallel_size') or 1
    gpus = len(nodes) * gpus_per_node
    if tp * pp != gpus:
        _fail(spec, 'tensor_parallel_size %d x pipeline_parallel_size %d is %d GPU%s, but its stack has %d nodes x %d '
                    'GPU%s = %d; set them so their product is %d (e.g. tensor_parallel_size: %d)'
              % (tp, pp, tp * pp, '' if tp * pp == 1 else 's', len(nodes), gpus_per_node,
                 '' if gpus_per_node == 1 else 's', gpus, gpus, gpus))
    return gpus


def mpi_ports(gpus_per_node=1):
    """The ports OpenMPI listens on, on a node of a stack: [its out-of-band ports (mpirun's or orted's)] and [its
    ranks' TCP BTL ports] (one a rank, one a GPU, and four spare)."""
    low, high = MPI_OOB_PORTS
    return list(range(low, high + 1)), list(range(MPI_BTL_PORT_MIN, MPI_BTL_PORT_MIN + 4 + int(gpus_per_node)))


def link_env(interface, address, engine, gpus_per_node=1):
    """The environment every node's engine gets: its collectives and transports on the link, and OpenMPI's
    listeners at the ports mpi_ports pins."""
    env = {'NCCL_SOCKET_IFNAME': interface, 'GLOO_SOCKET_IFNAME': interface}
    if engine == 'trtllm':
        oob, btl = mpi_ports(gpus_per_node)
        oob_range = '%d-%d' % (oob[0], oob[-1])
        env.update({'UCX_NET_DEVICES': interface, 'OMPI_MCA_btl_tcp_if_include': interface,
                    'OMPI_MCA_oob_tcp_if_include': interface,
                    'OMPI_MCA_oob_tcp_dynamic_ipv4_ports': oob_range, 'OMPI_MCA_oob_tcp_dynamic_ipv6_ports': oob_range,
                    'OMPI_MCA_btl_tcp_port_min_v4': str(btl[0]), 'OMPI_MCA_btl_tcp_port_range_v4': str(len(btl)),
                    'OMPI_MCA_btl_tcp_port_min_v6': str(btl[0]), 'OMPI_MCA_btl_tcp_port_range_v6': str(len(btl))})
    else:
        env['VLLM_HOST_IP'] = address
    return env


def hostfile(nodes, gpus_per_node):
    """OpenMPI's hostfile: one line per node, its link address and its slots (GPUs)."""
    return ''.join('%s slots=%d\n' % (n['address'], gpus_per_node) for n in nodes)


def ssh_args(port):
    """The SSH options mpirun's launcher uses to reach the workers (OpenMPI's plm_rsh_args)."""
    return ('-p %d -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o BatchMode=yes '
            '-o PasswordAuthentication=no' % (port, CLIENT_KEY, KNOWN_HOSTS))


def sshd_command(address, port):
    """A worker's sshd: the link address only, the stack's key only, its own pinned host key, in the foreground."""
    return ['/usr/sbin/sshd', '-D', '-e', '-p', str(port), '-o', 'ListenAddress=%s' % address,
            '-o', 'HostKey=%s' % HOST_KEY, '-o', 'AuthorizedKeysFile=%s' % AUTHORIZED_KEYS,
            '-o', 'PasswordAuthentication=no', '-o', 'KbdInteractiveAuthentication=no',
            '-o', 'PermitRootLogin=prohibit-password', '-o', 'PidFile=none']


def ray_ports(gpus_per_node=1, base=DEFAULT_RAY_PORT):
    """The ports a node's ``ray start`` pins (besides the head's GCS port ``base``): ({option: port}, [the workers'
    ports]). A worker process takes one port (vLLM's one per GPU, the driver, Ray's own): eight and two per GPU."""
    ports = dict((option, base + 1 + i) for i, option in enumerate(RAY_PORT_OPTIONS))
    first = base + RAY_WORKER_PORTS_OFFSET
    return ports, list(range(first, first + 8 + 2 * int(gpus_per_node)))


def ray_start(address, gpus_per_node=1, base=DEFAULT_RAY_PORT):
    """The words of a node's ``ray start`` up to its role's own (``--head --port`` or ``--address``): its link
    address, no usage report, and its pinned ports (ray_ports)."""
    ports, workers = ray_ports(gpus_per_node, base)
    return (['ray', 'start', '--node-ip-address=%s' % address, '--disable-usage-stats']
            + ['--%s=%d' % (option, port) for option, port in ports.items()]
            + ['--worker-port-list=%s' % ','.join(str(p) for p in workers)])


def render_stack(spec, instance, nodes, interface, gpus_per_node=1, ssh_port=DEFAULT_SSH_PORT,
                 ray_port=DEFAULT_RAY_PORT):
    """Each node's engine command for one instance across a stack.

    ``spec``: spec_config.render()'s result for the instance; ``instance``: the instance as given (its
    tensor_parallel_size and pipeline_parallel_size); ``nodes``: [{host, address}], the head first (the
    the stack_link layout's members with their link addresses); ``interface``: the link interface.
    Returns {world_size, hostfile, ssh_port, ray_port, nodes: [{host, rank, role, address, command, env}]}.
    """
    if len(nodes) < 2:
        _fail(spec, 'a stack needs at least two nodes, got %d' % len(nodes))
    world = world_size(spec, instance, nodes, gpus_per_node)
    head = nodes[0]
    out = []
    for rank, node in enumerate(nodes):
        env = link_env(interface, node['address'], spec['engine'], gpus_per_node)
        role = 'head' if rank == 0 else 'worker'
        if spec['engine'] == 'trtllm':
            if role == 'head':
                exported = sorted(set(env) | set(spec['env']))
                command = ['mpirun', '--allow-run-as-root', '-np', str(world), '--hostfile', HOSTFILE,
                           '--mca', 'plm_rsh_args', ssh_args(ssh_port)]
                for name in exported:
                    command += ['-x', name]
                command += ['trtllm-llmapi-launch'] + spec['command']
            else:
                command = sshd_command(node['address'], ssh_port)
        else:
            ray = ray_start(node['address'], gpus_per_node, ray_port)
            if role == 'head':
                if any(w.split('=')[0] == '--distributed-executor-backend' for w in spec['command']):
                    _fail(spec, 'extra_args must not set --distributed-executor-backend: a stack runs vLLM on Ray')
                serve = spec['command'] + ['--distributed-executor-backend', 'ray']
                script = '%s && exec %s' % (
                    ' '.join(quote(w, 'command') for w in ray + ['--head', '--port=%d' % ray_port]),
                    ' '.join(quote(w, 'command') for w in serve))
                command = ['sh', '-c', script]
            else:
                command = ray + ['--address=%s:%d' % (head['address'], ray_port), '--block']
        out.append({'host': node['host'], 'rank': rank, 'role': role, 'address': node['address'],
                    'command': command, 'env': env})
    return {'world_size': world, 'hostfile': hostfile(nodes, gpus_per_node) if spec['engine'] == 'trtllm' else '',
            'ssh_port': ssh_port if spec['engine'] == 'trtllm' else None,
            'ray_port': ray_port if spec['engine'] == 'vllm' else None, 'nodes': out}


def preflight(instance, nodes, views, play_hosts, max_skew):
    """What keeps a stack's instance from changing: the problems found in every member's view, one line each,
    naming the node and the check ([] when the stack may change).

    ``nodes``: the stack's members, head first ([{host, address}]); ``views``: {host: {image_id, models
    {path: digest}, time (seconds since the epoch, float), link (the link check's problems), nccl {library: sha256},
    the NCCL libraries its engine mounts from the host}}, each member's own view; ``play_hosts``: the play's hosts;
    ``max_skew``: the seconds the members' clocks may differ by.
    Every member must have the model files, the same (names and sizes) as the head's.
    A member outside the play, or without a view, is a problem: a stack changes as one."""
    hosts = [n['host'] for n in nodes]
    head = hosts[0]
    problems = []
    missing = [h for h in hosts if h not in play_hosts or not isinstance(views.get(h), dict)]
    if missing:
        return ["instance '%s': %s of its stack %s not in this play; a stack changes as one (run the play on "
                "every member, e.g. -l GROUP)" % (instance, ', '.join(missing), 'is' if len(missing) == 1 else 'are')]
    for host in hosts:
        for problem in views[host].get('link') or []:
            problems.append("instance '%s': node %s: the link is not ready: %s" % (instance, host, problem))
    want = views[head].get('image_id') or ''
    for host in hosts:
        have = views[host].get('image_id') or ''
        if not have:
            problems.append("instance '%s': node %s: its image is not on the host" % (instance, host))
        elif have != want and want:
            problems.append("instance '%s': node %s runs image %s, the head %s runs %s; every node of a stack runs "
                            'the same image' % (instance, host, have, head, want))
    for path, digest in sorted((views[head].get('models') or {}).items()):
        if digest == 'absent':
            problems.append("instance '%s': node %s: %s is not on the host; every node of a stack loads the model "
                            'from its own disk (model_cache)' % (instance, head, path))
            continue
        for host in hosts[1:]:
            theirs = (views[host].get('models') or {}).get(path)
            if theirs != digest:
                problems.append("instance '%s': node %s: the model files of %s differ from the head's (%s, %s: %s)"
                                % (instance, host, path, theirs or 'absent', head, digest))
    # the NCCL each member's engine loads: the image's own is the image's (its ID, compared above, is its content's
    # digest); a library mounted in from the host is compared by its checksum, one version string being able to name
    # two builds
    theirs_by_host = dict((h, views[h].get('nccl') or {}) for h in hosts)
    for host in hosts[1:]:
        for path in sorted(set(theirs_by_host[head]) | set(theirs_by_host[host])):
            mine, want = theirs_by_host[host].get(path), theirs_by_host[head].get(path)
            if mine != want:
                problems.append("instance '%s': node %s: the NCCL library %s its engine mounts from the host differs "
                                "from the head's (%s: %s, %s: %s); every node of a stack loads the same NCCL build"
                                % (instance, host, path, host, _sha(mine), head, _sha(want)))
    times = [float(views[h].get('time') or 0) for h in hosts]
    if max(times) - min(times) > max_skew:
        problems.append("instance '%s': the clocks of the stack's nodes differ by %.1f s (%s), more than %s s; "
                        'synchronise them (NTP) before the stack changes'
                        % (instance, max(times) - min(times),
                           ', '.join('%s %.1f' % (h, t) for h, t in zip(hosts, times)), max_skew))
    return problems


def _sha(digest):
    return 'sha256 %s' % digest[:16] if digest else 'absent'


def link_view(result):
    """The problems of a link_check result: what differs from the plan, and each peer that did not answer."""
    result = result if isinstance(result, dict) else {}
    out = list(result.get('problems') or [])
    for peer in result.get('peers') or []:
        if isinstance(peer, dict) and not peer.get('ok'):
            out.append('peer %s does not answer at the full MTU (%s)' % (peer.get('address'), peer.get('summary') or ''))
    return out


# What each member reports for the preflight: its clock, then per model directory ``PATH DIGEST``, the digest of
# its files' names and sizes (``absent`` when it lacks the directory); after ``--``, per host path the instance mounts
# into its engine (its volumes), ``nccl LIBRARY SHA256`` for every NCCL library there (a file named libnccl*.so*, the
# path itself or within three levels of it, a link read as its target). Read-only.
PROBE_SCRIPT = ('date +%s.%N; nccl=; for d in "$@"; do if [ "$d" = -- ]; then nccl=1; '
                'elif [ -n "$nccl" ]; then find -H "$d" -maxdepth 3 -name \'libnccl*.so*\' \\( -type f -o -type l \\) '
                '-exec sha256sum {} + 2>/dev/null | while read -r sum path; do printf \'nccl %s %s\\n\' "$path" "$sum"; done; '
                'elif [ -d "$d" ]; then printf \'%s %s\\n\' "$d" '
                '"$(cd "$d" && find . -type f -printf \'%P %s\\n\' | LC_ALL=C sort | sha256sum | cut -c1-64)"; '
                'else printf \'%s absent\\n\' "$d"; fi; done')
NCCL_LINE = 'nccl '


def probe_argv(model_dirs, mounts=()):
    """The argv of a member's preflight probe (PROBE_SCRIPT) for its model directories on the host and the host paths
    its engine mounts (where an NCCL library it would load may be)."""
    mounts = list(mounts)
    return ['sh', '-c', PROBE_SCRIPT, 'sh'] + list(model_dirs) + (['--'] + mounts if mounts else [])


def mounted_host_paths(volumes):
    """The host paths of an instance's volumes (``host:container[:options]``; a named volume is no host path)."""
    out = []
    for volume in volumes or []:
        source = str(volume).split(':', 1)[0]
        if source.startswith('/') and source not in out:
            out.append(source)
    return out


def probe_view(stdout_lines):
    """(time, {path: digest}) from a probe's output (its model directories)."""
    lines = list(stdout_lines or [])
    try:
        clock = float(lines[0]) if lines else 0.0
    except ValueError:
        clock = 0.0
    return clock, model_view([line for line in lines[1:] if not line.startswith(NCCL_LINE)])


def nccl_view(stdout_lines):
    """{library path on the host: sha256} from a probe's output: the NCCL libraries its engine's mounts hold."""
    out = {}
    for line in list(stdout_lines or [])[1:]:
        if line.startswith(NCCL_LINE):
            path, space, digest = line[len(NCCL_LINE):].strip().rpartition(' ')
            if path and space:
                out[path] = digest
    return out


def model_view(lines):
    """{path: digest} from the lines ``PATH DIGEST`` a member prints for its model directories (DIGEST
    ``absent`` for a directory it lacks)."""
    out = {}
    for line in lines or []:
        path, space, digest = line.strip().rpartition(' ')
        if path and space:
            out[path] = digest
    return out


def stack_restart(entry, own, wanted):
    """Whether this host restarts the instance ``entry`` (an entry of the serving plan): for an instance of its
    own, when it wants to (``own``); for one served across a stack, when any member wants to (a stack restarts as
    one). ``wanted``: {host: bool}, each member's own wish (a member without one counts as not wanting to)."""
    stack = entry.get('stack')
    if not stack:
        return bool(own)
    return any(bool(wanted.get(node['host'])) for node in stack['nodes'])
