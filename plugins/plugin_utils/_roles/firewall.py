# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewall role's settings policy and planner: what its argument spec cannot say (ranges, patterns, paths, the
checks that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py);
the defaults that the inventory decides (INVENTORY_DEFAULTS, filled in by the settings action before those checks);
and the plan the tasks apply (``plan``) and the judgement of the loaded chain (``loaded``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
from typing import Any

from ansible.module_utils.common.validation import check_type_list
from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    cidr,
    ContextRule,
    PlanRefusal,
    each,
    exempt_iface,
    host_path,
    iface,
    is_number,
    name,
    port,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    refusal,
)


SSH_PORT = 22
HOST_PORT_KEYS = ('name', 'port', 'sources')


def not_ssh(v, ansible_port):
    """A firewall_host_ports port that is not SSH's: 22, or the host's ansible_port."""
    if not is_number(v):
        return None
    try:
        connection = int(ansible_port) if ansible_port not in (None, '') else None
    except (TypeError, ValueError):
        connection = None
    if v == SSH_PORT or v == connection:
        return ('is the SSH port (%s): the host-input allow-list never filters SSH; leave it out of firewall_host_ports'
                % ('22' if v == SSH_PORT else 'ansible_port'))
    return None


def host_source(v):
    """A source of a host port: an address or CIDR as firewall_allowed_cidrs takes them, never every address."""
    msg = cidr(v)
    if msg and msg.startswith('opens the engine ports'):
        return ('allows every address; name the sources, or leave the port out of firewall_host_ports to leave it '
                'to the host\'s own rules')
    return msg


def host_ports(entries):
    """The refusals of places in firewall_host_ports (each ``[i].key: value what is allowed``): an entry that is
    not a mapping of name, port and sources, a missing name or port, sources that are not a list, a name or a
    port given twice. The values of the keys are checked by the dotted POLICY entries."""
    out: list = []
    names: dict = {}
    ports: dict = {}
    for index, entry in enumerate(entries or []):
        where = '[%d]' % index
        if not isinstance(entry, dict):
            out.append(refusal(where, entry, 'must be a mapping of name, port and sources'))
            continue
        extra = sorted(str(k) for k in entry if k not in HOST_PORT_KEYS)
        if extra:
            out.append(refusal(where, entry, 'has the keys %s; an entry has name, port and sources' % ', '.join(extra)))
        for key in ('name', 'port'):
            if entry.get(key) in (None, ''):
                out.append(refusal('%s.%s' % (where, key), entry.get(key), 'is required'))
        sources = entry.get('sources')
        if sources is not None and not isinstance(sources, list):
            out.append(refusal(where + '.sources', sources, 'must be a list of addresses or CIDRs (empty: the host '
                                                            'itself only)'))
        for key, seen in (('name', names), ('port', ports)):
            value = entry.get(key)
            if isinstance(value, (string_types, int)) and value not in (None, ''):
                if value in seen:
                    out.append(refusal('%s.%s' % (where, key), value, 'is the %s of [%d] too; give each %s once'
                                       % (key, seen[value], key)))
                seen.setdefault(value, index)
    return out or None


def link_entries(entries):
    """The refusals of places in firewall_links: an entry that is not a mapping of interface and sources, a
    missing interface, sources that are not a list, an interface given twice."""
    out: list = []
    seen: dict = {}
    for index, entry in enumerate(entries or []):
        where = '[%d]' % index
        if not isinstance(entry, dict):
            out.append(refusal(where, entry, 'must be a mapping of interface and sources'))
            continue
        extra = sorted(str(k) for k in entry if k not in ('interface', 'sources'))
        if extra:
            out.append(refusal(where, entry, 'has the keys %s; an entry has interface and sources' % ', '.join(extra)))
        interface = entry.get('interface')
        if interface in (None, ''):
            out.append(refusal(where + '.interface', interface, 'is required'))
        elif isinstance(interface, string_types):
            if interface in seen:
                out.append(refusal(where + '.interface', interface, 'is the interface of [%d] too; give each once'
                                   % seen[interface]))
            seen.setdefault(interface, index)
        sources = entry.get('sources')
        if sources is not None and not isinstance(sources, list):
            out.append(refusal(where + '.sources', sources, "must be a list of the peers' addresses"))
    return out or None


POLICY: dict[str, Any] = {
    'firewall_engine_ports': [each(port)],
    'firewall_allowed_cidrs': [each(cidr)],
    'firewall_host_ports': [host_ports],
    'firewall_host_ports.name': [name],
    'firewall_host_ports.port': [port, ContextRule(not_ssh, 'ansible_port')],
    'firewall_host_ports.sources': [each(host_source)],
    'firewall_links': [link_entries],
    'firewall_links.interface': [iface],
    'firewall_links.sources': [each(host_source)],
    'firewall_iptables': [host_path],
    'firewall_ip6tables': [host_path],
    'firewall_interfaces': [each(iface)],
    'firewall_exempt_interfaces': [each(exempt_iface)],
    'firewall_rules_dir': [host_path],
    'firewall_unit_name': [name],
    'firewall_iptables_restore': [host_path],
    'firewall_ip6tables_restore': [host_path],
}


def _firewall():
    # imported when used: the settings engine imports this module, and _firewall (through _serving_plan) the engine
    from ansible_collections.specdec.serve.plugins.plugin_utils import _firewall as firewall
    return firewall


def _published(instances):
    from ansible_collections.specdec.serve.plugins.plugin_utils._serving_plan import published_ports
    return published_ports(instances or [])


# --- the defaults the inventory decides, filled in by the settings action before the checks above (a setting given
# in the inventory or with -e is taken as given); they read the inventory, never the play's hosts ---

def _hosts(groups):
    hosts: set = set()
    for members in (groups or {}).values():
        hosts.update(members or [])
    return sorted(hosts)


def _instances(ctx):
    """The host's inference_server_instances as the play sees them (its vars files too); None when unset (the
    defaults then read its host variable)."""
    instances = (ctx.get('vars') or {}).get('inference_server_instances')
    return list(instances) if isinstance(instances, (list, tuple)) else None


def _inventory(ctx):
    """The inventory's host variables as plain data, and its groups: read once per task (ctx is the task's), however
    many defaults need them (reading hostvars templates every host's values)."""
    if '_firewall_inventory' not in ctx:
        ctx['_firewall_inventory'] = (_firewall().plain_hostvars(ctx.get('hostvars') or {}, _hosts(ctx.get('groups'))),
                                      dict(ctx.get('groups') or {}))
    return ctx['_firewall_inventory']


def _refused(exc):
    return PlanRefusal([str(exc)])


def default_engine_ports(values, ctx):
    """firewall_engine_ports: every port the host's instances publish."""
    return _published(_instances(ctx))


def default_allowed_cidrs(values, ctx):
    """firewall_allowed_cidrs: the address of each gateway (none without a gateways group)."""
    hostvars, groups = _inventory(ctx)
    return _firewall().gateway_addresses(hostvars, groups)


def default_host_ports(values, ctx):
    """firewall_host_ports: the collection's listeners on the host, each from the hosts that need it."""
    hostvars, groups = _inventory(ctx)
    try:
        # as the settings check will read it (a string is a comma-separated list)
        allowed = check_type_list(values.get('firewall_allowed_cidrs') or [])
    except TypeError:
        allowed = []  # refused by that check, naming firewall_allowed_cidrs
    firewall = _firewall()
    try:
        return firewall.host_ports(hostvars, groups, str(ctx.get('host')), allowed, _instances(ctx))
    except firewall.FirewallError as exc:
        raise _refused(exc)


def default_links(values, ctx):
    """firewall_links: a stack member's link, open to its peers only."""
    hostvars, groups = _inventory(ctx)
    firewall = _firewall()
    try:
        return firewall.links(hostvars, groups, str(ctx.get('host')))
    except firewall.FirewallError as exc:
        raise _refused(exc)


# in this order (firewall_host_ports reads firewall_allowed_cidrs as given or defaulted)
INVENTORY_DEFAULTS = (('firewall_engine_ports', default_engine_ports),
                      ('firewall_allowed_cidrs', default_allowed_cidrs),
                      ('firewall_host_ports', default_host_ports),
                      ('firewall_links', default_links))
# what the defaults and the planner read besides the inventory
INVENTORY_VARS = ('inference_server_instances',)


# --- the planner: what the role writes and probes, and the rules of each address family ---

INPUT_CHAIN = 'SPECDEC-INPUT'


def _by_family(values, family):
    """The addresses and networks of one family, in canonical CIDR form, order kept (the settings checks refused
    any other entry)."""
    out = []
    for value in values or []:
        try:
            net = ipaddress.ip_network(value, strict=False)
        except (TypeError, ValueError):
            continue
        if net.version == family and net.with_prefixlen not in out:
            out.append(net.with_prefixlen)
    return out


def plan(settings, warn=None, ctx=None):
    """The firewall's plan on this host: the files and unit it keeps, its probe, and the rules of each family
    ('4', '6': the allowed networks, the host ports and the links, each with its sources of that family). Refuses
    an interface the host lacks and a port the host's instances publish that firewall_engine_ports leaves out."""
    ctx = ctx or {}
    host = ctx.get('host')
    errors = []
    interfaces = (ctx.get('facts') or {}).get('interfaces') or []
    unknown = [i for i in settings['interfaces'] or [] if i not in interfaces]
    if unknown:
        errors.append('firewall_interfaces: %s not an interface of %s (it has %s).'
                      % (json.dumps(unknown), host, ', '.join(sorted(interfaces))))
    engine_ports = settings['engine_ports'] or []
    unfiltered = [p for p in _published(_instances(ctx)) if p not in engine_ports]
    if unfiltered:
        errors.append('firewall_engine_ports=%s leaves %s unfiltered, which inference_server_instances publish on %s; '
                      'add them (or leave firewall_engine_ports unset: it defaults to every published port).'
                      % (json.dumps(engine_ports), json.dumps(unfiltered), host))
    if errors:
        raise PlanRefusal(errors)
    families = [4, 6] if settings['ipv6'] else [4]
    rules_dir = settings['rules_dir']
    unit = settings['unit_name'] + '.service'
    files = {'docker_user': dict((str(f), '%s/docker-user.v%d' % (rules_dir, f)) for f in (4, 6)),
             'host_input': dict((str(f), '%s/host-input.v%d' % (rules_dir, f)) for f in (4, 6)),
             'unit': '/etc/systemd/system/' + unit}
    tools = dict((str(f), settings['iptables' if f == 4 else 'ip6tables']) for f in families)
    execs = [settings['iptables_restore'], settings['iptables']]
    if settings['ipv6']:
        execs += [settings['ip6tables_restore'], settings['ip6tables']]
    kept = sorted(files['docker_user'].values()) + sorted(files['host_input'].values()) + [files['unit']]
    from ansible_collections.specdec.serve.plugins.plugin_utils import _host_probe as host_probe
    firewall = _firewall()
    try:
        probe = firewall.probe_argv(host_probe.argv(units=[unit], execs=execs, dirs=[rules_dir], files=kept),
                                    tools, INPUT_CHAIN)
    except (host_probe.ProbeError, firewall.FirewallError) as exc:
        raise PlanRefusal([str(exc)])
    rules = {}
    for family in (4, 6):
        rules[str(family)] = {
            'allowed_cidrs': _by_family(settings['allowed_cidrs'], family),
            'host_ports': [dict(entry, sources=_by_family(entry.get('sources'), family))
                           for entry in settings['host_ports'] or []],
            'links': [dict(entry, sources=_by_family(entry.get('sources'), family))
                      for entry in settings['links'] or []]}
    return {'chain': INPUT_CHAIN, 'unit': unit, 'files': files, 'execs': execs, 'tools': tools,
            'probe_argv': probe, 'rules': rules}


def loaded(settings, warn=None, ctx=None):
    """What differs between the host-input chains the kernel holds and their rules files (empty: nothing to
    reload). Reported: ``listing``, the probe's output, and ``expected``, {family: the rules file's text}."""
    reported = (ctx or {}).get('reported') or {}
    expected = reported.get('expected')
    if not isinstance(expected, dict):
        raise PlanRefusal(['firewall (loaded): expected must map a family (4, 6) to its rules file, got %s'
                           % type(expected).__name__])
    return _firewall().loaded_drift(reported.get('listing') or '', expected, INPUT_CHAIN)


PLANNERS = {'main': plan, 'loaded': loaded}
PLAN_VARS = {'main': INVENTORY_VARS, 'loaded': ()}
