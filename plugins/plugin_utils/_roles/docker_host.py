# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker_host role's settings policy: what its argument spec cannot say (ranges, patterns, paths, the checks
that read another setting), one entry per setting, applied by the settings engine (plugin_utils/_settings.py); and
its planner: the host's apt architecture (:func:`main`) and daemon.json's merge, judged from what the host has
(:func:`own_fragments` for the role's own fragments, :func:`given_fragments` for the entry point daemon_json's;
the settings action calls them with daemon_json_state's result as ``reported``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    each,
    fingerprint,
    host_path,
    host_port,
    name,
    name_keys,
    non_empty,
    package,
    user,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    show,
)


_BYPASS = {
    'iptables': ('false', 'iptables: false stops dockerd from creating the DOCKER-USER chain, so the '
                          "firewall role's rules never see published ports"),
    'firewall-backend': ('nftables', 'firewall-backend: nftables has no DOCKER-USER iptables chain: the '
                                     "firewall role's rules would not filter published ports"),
}


def _plain_tcp(options):
    """A daemon 'hosts' entry on tcp:// without TLS verification: root on the host for anyone who reaches the port."""
    hosts = options.get('hosts') if isinstance(options, dict) else None
    hosts = [hosts] if isinstance(hosts, string_types) else hosts
    plain = [h for h in hosts or [] if isinstance(h, string_types) and h.strip().lower().startswith('tcp://')]
    if plain and str(options.get('tlsverify', '')).lower() != 'true':
        return ('hosts: %s is the Docker API on TCP without TLS client verification (root on the host for anyone '
                'who reaches it); use unix:// or set tlsverify: true with tlscacert, tlscert and tlskey' % show(plain[0]))
    return None


def no_firewall_bypass(options):
    """Daemon options that would let published ports bypass DOCKER-USER, or open the API on plain TCP."""
    for key, (bad, why) in _BYPASS.items():
        if isinstance(options, dict) and key in options and str(options[key]).lower() == bad:
            return why
    return _plain_tcp(options)


def no_firewall_bypass_fragments(fragments):
    for frag, options in (fragments or {}).items():
        if options is not None and not isinstance(options, dict):
            return 'fragment %s must be a mapping of daemon.json keys (or null to remove it)' % frag
        msg = no_firewall_bypass(options)
        if msg:
            return 'fragment %s: %s' % (frag, msg)
    return None


POLICY: dict[str, Any] = {
    'docker_host_distribution_packages': [each(package)],
    'docker_host_docker_repo_url': {'url': 'docker_host_allow_http'},
    'docker_host_docker_repo_key_url': {'url': 'docker_host_allow_http'},
    'docker_host_docker_repo_key_fingerprints': [non_empty, each(fingerprint)],
    'docker_host_docker_repo_keyring': [host_path],
    'docker_host_docker_packages': [each(package)],
    'docker_host_users': [each(user)],
    'docker_host_daemon_json_path': [host_path],
    'docker_host_daemon_json_dir': [host_path],
    'docker_host_log_driver': [name],
    'docker_host_registry_mirrors': {'url': 'docker_host_allow_http'},
    'docker_host_insecure_registries': [each(host_port)],
    'docker_host_daemon_options': [no_firewall_bypass],
    'docker_host_daemon_json_fragments': [name_keys, no_firewall_bypass_fragments],
}


def main(settings, warn=None, ctx=None):
    """``apt_architecture``: the host's architecture as Debian names it (Docker's apt source), None before facts."""
    from ansible_collections.specdec.serve.plugins.module_utils.platforms import debian_arch
    machine = ((ctx or {}).get('facts') or {}).get('architecture')
    return {'apt_architecture': debian_arch(machine) if machine else None}


def own(settings):
    """docker_host's own fragments, from its settings (None removes a fragment file): logging, registries and the
    daemon options."""
    registries = {}
    if settings['registry_mirrors']:
        registries['registry-mirrors'] = settings['registry_mirrors']
    if settings['insecure_registries']:
        registries['insecure-registries'] = settings['insecure_registries']
    return {
        '10-docker_host-logging': ({'log-driver': settings['log_driver'], 'log-opts': settings['log_opts']}
                                   if settings['log_driver'] else None),
        '20-docker_host-registries': registries or None,
        '90-docker_host-options': settings['daemon_options'] or None,
    }


def _merge(settings, ctx, fragments):
    """daemon.json's merge (plugin_utils/_daemon_json.py, ``plan``) of the fragments on the host
    (``ctx['reported']``: daemon_json_state's result) with ``fragments``, plus ``write`` and ``remove``, the names
    of the fragment files to write and to remove."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._daemon_json import plan
    state = (ctx or {}).get('reported')
    if not isinstance(state, dict) or 'fragments' not in state:
        raise PlanRefusal(["daemon.json's state (reported) must be the result of specdec.serve.daemon_json_state, "
                           'got %s' % type(state).__name__])
    out = plan(state, fragments, (ctx or {}).get('host') or 'the host', settings['daemon_json_dir'],
               settings['daemon_json_path'])
    out['write'] = sorted(k for k, v in fragments.items() if v is not None)
    out['remove'] = sorted(k for k, v in fragments.items() if v is None)
    return out


def own_fragments(settings, warn=None, ctx=None):
    """daemon.json's merge with docker_host's own fragments (:func:`own`)."""
    return _merge(settings, ctx, own(settings))


def given_fragments(settings, warn=None, ctx=None):
    """daemon.json's merge with the fragments given to the entry point daemon_json (docker_host_daemon_json_fragments)."""
    return _merge(settings, ctx, dict(settings['daemon_json_fragments'] or {}))


# the planners the settings action calls, by entry
PLANNERS = {'main': main, 'own_fragments': own_fragments, 'given_fragments': given_fragments}
