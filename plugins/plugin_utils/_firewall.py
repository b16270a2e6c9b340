# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewall role's defaults that the inventory decides (stdlib and the spec reader only).

* :func:`host_ports`: the default of ``firewall_host_ports``, the host listeners of this collection that
  run on a host, each with the sources that need it (the host-input allow-list, chain SPECDEC-INPUT):

  - an engine host of ``monitoring_engine_group``: the exporter (``monitoring_exporter_port``) from the
    hosts of ``monitoring_server_group``;
  - a gateway (a host of ``monitoring_gateway_group``): HAProxy's stats/metrics (``gateway_stats_port``)
    from the hosts of ``monitoring_server_group``;
  - a gateway (a host of the ``gateways`` group) whose front door listens beyond loopback
    (``gateway_bind_address``): the OpenAI endpoint's ``gateway_port`` from ``firewall_allowed_cidrs`` (the client
    networks; on a gateway, whose default is the gateways' own addresses, the inventory sets them);
  - a monitoring host whose Prometheus or Alertmanager listens beyond loopback
    (``monitoring_prometheus_listen``, ``monitoring_alertmanager_listen``): its port from
    ``firewall_allowed_cidrs``; with the tune loop on (``monitoring_tune_loop``) and listening beyond loopback
    (``monitoring_tune_loop_listen``), its ``monitoring_tune_loop_port`` from the hosts of
    ``monitoring_server_group`` (the Alertmanagers; the host's own reaches it over loopback);
  - the peer seed (``model_cache_peer_seed``, with ``model_cache_source: peer``): the peer server's port
    (``model_cache_peer_port``) from every host of the inventory that copies from it (in peer mode, with this host
    as its seed: plugin_utils/_model_cache.py ``peers_of``), whether or not it is in the play.

  Every rule is built from the inventory (groups and host variables), never from the play's hosts: a run
  limited with ``-l`` writes what a full run writes.

  A monitoring host's address is the one the monitoring role scrapes from (``monitoring_address``, else
  ``ansible_host``); a peer's is its default IPv4 and IPv6 address as the facts give them (the model cache
  reaches the seed at its own), else ``ansible_host``. Loopback addresses are left out: loopback is always
  allowed. Another role's setting is read from the host's variables (inventory, extra vars), else from the
  argument spec of the role that owns it.

* :func:`gateway_addresses`: the default of ``firewall_allowed_cidrs``, each gateway's ``gateway_address``,
  else its ``ansible_host``, else its name.

* :func:`probe_argv`, :func:`loaded_drift`: the role's one read-only probe (plugin_utils/_host_probe.py) with
  the host-input chain the kernel holds (``iptables -S``) listed first, and what differs between that chain
  and its rules file, and whether INPUT jumps to it exactly once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.specdec.serve.plugins.plugin_utils import _model_cache as model_cache, _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _serving_plan as serving_plan, _stack as stack
from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import as_bool
from ansible_collections.specdec.serve.plugins.plugin_utils._spec_config import DEFAULT_PORT as DEFAULT_ENGINE_PORT
from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import host_address, is_port

# the host variables the defaults read (every other one is left alone)
READ = ('ansible_host', 'gateway_address', 'monitoring_address', 'monitoring_engine_group', 'monitoring_server_group',
        'monitoring_gateway_group', 'monitoring_exporter_port', 'monitoring_prometheus_listen',
        'monitoring_prometheus_port', 'monitoring_alertmanager_listen', 'monitoring_alertmanager_port',
        'gateway_stats_port', 'gateway_port', 'gateway_bind_address', 'monitoring_tune_loop',
        'monitoring_tune_loop_listen', 'monitoring_tune_loop_port', 'model_cache_source', 'model_cache_peer_seed', 'model_cache_peer_port',
        'stack_link_group', 'stack_link_interface', 'stack_link_address', 'stack_link_head', 'stack_trust_ssh_port',
        'inference_server_instances')
GATEWAYS = 'gateways'


class FirewallError(ValueError):
    """The inventory gives no usable address or port for a default; the message says what to set."""


def plain_hostvars(hostvars, hosts):
    """{host: {variable: value}} of the variables READ (and the facts' default addresses) of `hosts`, as
    plain data (Ansible's hostvars template a value when it is read)."""
    defaults = ('default_ipv4', 'default_ipv6')
    out = vocabulary.plain_hostvars(hostvars, hosts, READ, defaults)
    for plain in out.values():
        facts = plain.pop('ansible_facts')
        plain['_addresses'] = [str((facts.get(key) or {}).get('address')) for key in defaults
                               if (facts.get(key) or {}).get('address')]
    return out


def _setting(hv, name):
    """A host's value of another role's setting: its host variable, else its spec's default. A default that is a
    template is the inventory's to decide, by the function that owns it (model_cache_peer_seed's:
    model_cache.peer_seed); one read here is refused, naming the setting."""
    if name in hv and hv[name] is not None:
        return hv[name]
    value = role_spec.default(name)
    if isinstance(value, str) and '{{' in value:
        raise FirewallError('firewall_host_ports: the default of %s (%s) cannot be read here; set %s'
                            % (name, value, name))
    return value


def _port(hv, name, host):
    value = _setting(hv, name)
    try:
        port = int(value)
    except (TypeError, ValueError):
        port = None
    if not is_port(port) or isinstance(value, bool):
        raise FirewallError('firewall_host_ports: its default needs %s of %s, which is %r (not a port number); '
                            'set %s or firewall_host_ports' % (name, host, value, name))
    return port


def _ip(text):
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        return None


def _loopback(text):
    ip = _ip(text)
    return ip is not None and ip.is_loopback


def _sources(addresses, what):
    """The addresses as sources, loopback left out (always allowed); one that is not an IP address refused."""
    out = []
    for host, address, keys in addresses:
        ip = _ip(address)
        if ip is None:
            raise FirewallError('firewall_host_ports: its default allows %s from %s, whose address (%s) is %r, not an IP '
                                'address; set %s of %s to its IP address, or give firewall_host_ports'
                                % (what, host, ', else '.join(keys), address, keys[0], host))
        if not ip.is_loopback and str(ip) not in out:
            out.append(str(ip))
    return out


def host_ports(hostvars, groups, host, allowed_cidrs=(), instances=None):
    """The default of firewall_host_ports on `host` (see the module's documentation).

    `hostvars`: {host: {variable: value}} (plain_hostvars) of every host of the inventory; `groups`: the
    inventory's groups; `allowed_cidrs`: firewall_allowed_cidrs;
    `instances`: the host's inference_server_instances as the play sees them (its vars files too), else its
    host variable."""
    me = hostvars.get(host) or {}
    groups = groups or {}

    def members(setting):
        return list(groups.get(_setting(me, setting)) or [])

    monitoring = members('monitoring_server_group')
    scrapers = [(h, host_address(hostvars, h),
                 ('monitoring_address', 'ansible_host')) for h in monitoring]
    out = []
    if host in members('monitoring_engine_group'):
        out.append({'name': 'exporter', 'port': _port(me, 'monitoring_exporter_port', host),
                    'sources': _sources(scrapers, 'the exporter')})
    if host in members('monitoring_gateway_group'):
        out.append({'name': 'gateway-stats', 'port': _port(me, 'gateway_stats_port', host),
                    'sources': _sources(scrapers, "HAProxy's stats")})
    if host in (groups.get(GATEWAYS) or []) and not _loopback(_setting(me, 'gateway_bind_address')):
        out.append({'name': 'gateway', 'port': _port(me, 'gateway_port', host), 'sources': list(allowed_cidrs or [])})
    if host in monitoring:
        for daemon in ('prometheus', 'alertmanager'):
            if not _loopback(_setting(me, 'monitoring_%s_listen' % daemon)):
                out.append({'name': daemon, 'port': _port(me, 'monitoring_%s_port' % daemon, host),
                            'sources': list(allowed_cidrs or [])})
        if as_bool(_setting(me, 'monitoring_tune_loop'), False) and not _loopback(_setting(me, 'monitoring_tune_loop_listen')):
            out.append({'name': 'tune-loop', 'port': _port(me, 'monitoring_tune_loop_port', host),
                        'sources': _sources(scrapers, "the tune loop's webhook")})
    # a seed: in peer mode, its own seed, or the seed some host of the inventory names
    copying = model_cache.peers_of(hostvars, groups, host)
    if model_cache.source_of(hostvars, host) == 'peer' and (copying or model_cache.peer_seed(hostvars, groups, host) == host):
        peers: list = []
        for peer in copying:
            hv = hostvars.get(peer) or {}
            found = hv.get('_addresses') or [host_address(hostvars, peer, ('ansible_host',))]
            peers.extend((peer, a, ('ansible_host',)) for a in found)
        out.append({'name': 'model-cache-peer', 'port': _port(me, 'model_cache_peer_port', host),
                    'sources': _sources(peers, "the model cache's peer server")})
    out.extend(stack_ports(hostvars, groups, host, allowed_cidrs, instances))
    return out


def stack_ports(hostvars, groups, host, allowed_cidrs=(), instances=None):
    """The ports of the instances ``host`` serves across its stack (``stack:``), whose engines run on the host's
    network, so DOCKER-USER does not see them: on the head, the serving port from ``allowed_cidrs`` (and vLLM's Ray
    port from the workers' link addresses); on a worker of TensorRT-LLM, its sshd from the head's link address; on
    every member, OpenMPI's ports (TensorRT-LLM, pinned by the engine's environment) or Ray's other ports (vLLM,
    pinned by its ``ray start``) from its peers' link addresses."""
    me = hostvars.get(host) or {}
    group = me.get('stack_link_group')
    given = me.get('inference_server_instances') if instances is None else instances
    instances = [i for i in given or []
                 if isinstance(i, dict) and i.get('stack') and (i.get('state') or 'started') != 'absent']
    if not group or not instances:
        return []
    try:
        hosts = stack.members(groups or {}, group)
        head = stack.head_of(group, hosts, me.get('stack_link_head'))
        address = dict((h, str(stack.link_address(h, (hostvars.get(h) or {}).get('stack_link_address')).ip))
                       for h in hosts)
    except stack.StackError as exc:
        raise FirewallError('firewall_host_ports: %s' % exc)
    workers = [address[h] for h in hosts if h != head]
    peers = [address[h] for h in hosts if h != host]
    out = []
    for inst in instances:
        name = str(inst.get('name'))
        engine = inst.get('engine') or 'trtllm'
        if host == head:
            port = inst.get('port') if inst.get('port') not in (None, '') else DEFAULT_ENGINE_PORT
            if not is_port(port):
                raise FirewallError('firewall_host_ports: the port of instance %s on %s is %r, not a port number'
                                    % (name, host, port))
            out.append({'name': 'engine-' + name, 'port': port, 'sources': list(allowed_cidrs or [])})
            if engine == 'vllm':
                out.append({'name': 'ray-' + name, 'port': stack_serving.DEFAULT_RAY_PORT, 'sources': workers})
        elif engine == 'trtllm':
            out.append({'name': 'stack-ssh-' + name, 'port': _port(me, 'stack_trust_ssh_port', host),
                        'sources': [address[head]]})
        per_node = serving_plan.node_gpus(inst)
        if per_node is None:
            raise FirewallError('firewall_host_ports: the gpus_per_node of instance %s on %s is %r, not a number '
                                'of GPUs from 1 to %d' % (name, host, inst.get('gpus_per_node'),
                                                          serving_plan.MAX_GPU_INDEX + 1))
        if engine == 'trtllm':
            # OpenMPI's listeners on every member, pinned by the engine's environment (stack_serving.mpi_ports)
            oob, btl = stack_serving.mpi_ports(per_node)
            out.extend({'name': 'mpi-%s-oob-%d' % (name, port), 'port': port, 'sources': peers} for port in oob)
            out.extend({'name': 'mpi-%s-btl-%d' % (name, port), 'port': port, 'sources': peers} for port in btl)
        else:
            # Ray's other listeners on every member, pinned by its `ray start` (stack_serving.ray_ports): its peers only
            ports, worker_ports = stack_serving.ray_ports(per_node)
            if host == head:  # Ray's client server, where ray[client] is installed (not pinned: Ray's own port)
                ports['ray-client-server-port'] = stack_serving.RAY_CLIENT_SERVER_PORT
            out.extend({'name': 'ray-%s-%s' % (name, option[:-len('-port')]), 'port': port, 'sources': peers}
                       for option, port in ports.items())
            out.extend({'name': 'ray-%s-worker-%d' % (name, port), 'port': port, 'sources': peers}
                       for port in worker_ports)
    return out


def links(hostvars, groups, host):
    """The default of firewall_links on `host`: when the inventory puts it in a stack (``stack_link_group``), the
    stack's link interface with its peers' link addresses, the only sources the link accepts. A stack the
    inventory describes wrongly fails as the stack_link role would (plugin_utils/_stack.py), naming the variable."""
    me = hostvars.get(host) or {}
    group = me.get('stack_link_group')
    if not group:
        return []
    settings = {'group': group, 'interface': me.get('stack_link_interface'), 'address': me.get('stack_link_address')}
    try:
        hosts = stack.members(groups or {}, group)
        dummy, dummy, peers = stack.membership(host, settings, groups or {},
                                               dict((h, (hostvars.get(h) or {}).get('stack_link_address'))
                                                    for h in hosts))
    except stack.StackError as exc:
        raise FirewallError('firewall_links: %s' % exc)
    return [{'interface': str(settings['interface']), 'sources': [p['address'] for p in peers]}]


def gateway_addresses(hostvars, groups):
    """The default of firewall_allowed_cidrs: the address of each host of the gateways group."""
    return [host_address(hostvars, g, ('gateway_address', 'ansible_host'))
            for g in (groups or {}).get(GATEWAYS) or []]


# Listed before the host probe's own lines (which its parser reads; it skips these): per family,
# `family N`, then the chain and INPUT as iptables -S prints them (nothing where the tool or the chain is missing).
LISTING = r"""while [ "$1" = family ]; do
  echo "family $2"; "$3" -w -S "$4" 2>/dev/null; "$3" -w -S INPUT 2>/dev/null; shift 4
done
"""


def probe_argv(argv, tools, chain):
    """The host probe's argv (``sh -c SCRIPT host-probe ARG ...``, from host_probe.argv) listing, first, `chain`
    and INPUT with each of `tools` ({family: iptables executable})."""
    argv = list(argv or [])
    if argv[:2] != ['sh', '-c'] or len(argv) < 4:
        raise FirewallError('firewall probe: expects the argv of the host probe (sh -c SCRIPT ...), got %r' % (argv[:4],))
    args = []
    for family, tool in sorted((str(k), v) for k, v in (tools or {}).items()):
        if not isinstance(tool, str) or not tool.startswith('/'):
            raise FirewallError('firewall probe: %r is not an absolute path of an executable' % (tool,))
        args += ['family', family, tool, chain]
    return ['sh', '-c', LISTING + argv[2], argv[3]] + args + argv[4:]


def loaded_drift(listing, expected, chain):
    """What differs between the loaded chains and their files: `listing` is, per family, a line ``family 4``
    (or 6) followed by ``iptables -S <chain>`` and ``iptables -S INPUT``; `expected` is {family: the rules
    file's text}. Returns one phrase per family that differs (empty: nothing to reload)."""
    seen: dict = {}
    family = None
    for line in (listing or '').splitlines():
        if line.startswith('family '):
            family = line.split()[1]
            seen[family] = []
        elif family is not None:
            seen[family].append(line.strip())
    out = []
    for fam, text in sorted((str(k), v) for k, v in (expected or {}).items()):
        want = ['-N ' + chain] + [line.strip() for line in text.splitlines() if line.startswith('-A %s ' % chain)]
        lines = seen.get(fam, [])
        have = [line for line in lines if line == '-N ' + chain or line.startswith('-A %s ' % chain)]
        jumps = sum(1 for line in lines if line == '-A INPUT -j %s' % chain)
        if have != want:
            out.append('IPv%s: the loaded %s is not its rules file' % (fam, chain))
        if jumps != 1:
            out.append('IPv%s: INPUT jumps to %s %d times' % (fam, chain, jumps))
    return out
