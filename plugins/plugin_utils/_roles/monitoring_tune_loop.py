# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring_tune_loop role's settings policy (what its argument spec cannot say: paths, ports, the user, one entry
per setting, applied by the settings engine, plugin_utils/_settings.py) and its planner (over plugin_utils/_tune_loop.py):
:func:`main`, the settings checked together, where the loop's parts go and, with the loop on, its connections (the hosts
it reaches, the inventory laid over the copied one, their known hosts and those still missing); :func:`connections`,
the same once the hosts' SSH keys were read, with the Java runtime's home from its files (``reported``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    PlanRefusal,
    bind_address,
    http_url,
    local_path,
    host_path,
    name_keys,
    non_empty,
    not_root,
    own_dir,
    package,
    port,
    secret_string,
    user,
)


POLICY: dict[str, Any] = {
    'monitoring_tune_loop_listen': [non_empty, bind_address],
    'monitoring_tune_loop_port': [port],
    'monitoring_tune_loop_token': [secret_string],
    'monitoring_tune_loop_inventory': [local_path],
    'monitoring_tune_loop_ssh_key': [local_path],
    'monitoring_tune_loop_collection': [local_path],
    'monitoring_tune_loop_wheelhouse': [local_path],
    'monitoring_tune_loop_vault_password_file': [local_path],
    'monitoring_tune_loop_pip_index_url': [http_url],
    'monitoring_tune_loop_requirements': [non_empty],
    'monitoring_tune_loop_dir': [host_path, own_dir('monitoring_tune_loop_dir')],
    'monitoring_tune_loop_user': [user, not_root],
    'monitoring_tune_loop_vars': [name_keys],
    'monitoring_tune_loop_java_package': [package],
}

# what the planner reads of other roles' variables: the token (a secret the settings action does not return) and the
# monitoring hosts' group (the loop connects to every other host)
PLAN_VARS = ('monitoring_tune_loop_token', 'monitoring_server_group')
# the host variables and facts it reads of the hosts it connects to (their addresses, SSH ports and host keys)
HOST_READ = ('monitoring_address', 'ansible_host', 'monitoring_ssh_port')
FACTS_READ = tuple('ssh_host_key_%s_public%s' % (kind, tail) for kind in ('ed25519', 'ecdsa', 'rsa')
                   for tail in ('', '_keytype'))


def _inventory(ctx):
    """Only the host variables and facts the plan reads, as plain data (hostvars template a value when it is read)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import plain_hostvars
    return plain_hostvars(ctx.get('hostvars') or {}, (ctx.get('groups') or {}).get('all') or [], HOST_READ, FACTS_READ)


def _plan(settings, ctx, java=False):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    from ansible_collections.specdec.serve.plugins.plugin_utils import _tune_loop as tune_loop
    found = ctx.get('vars') or {}
    try:
        cfg = tune_loop.check(settings, found.get('monitoring_tune_loop_token'))
        groups, server_group = dict(ctx.get('groups') or {}), role_spec.value_of('monitoring_server_group', found)
        loop = None
        if cfg['enabled']:
            loop = tune_loop.tune_loop(cfg, _inventory(ctx), groups, server_group, ctx.get('reported') if java else None,
                                       ctx.get('host'))
        return {'cfg': cfg, 'loop': loop, 'hosts': tune_loop.reached(groups, server_group)}
    except tune_loop.TuneLoopError as exc:
        raise PlanRefusal(exc.errors)
    except (TypeError, ValueError, AttributeError) as exc:
        raise PlanRefusal(['monitoring_tune_loop: %s' % exc])


def main(settings, warn=None, ctx=None):
    """``cfg``, the settings checked together (``files``: where the loop's parts go; ``token_set``; ``packages``);
    ``hosts``, those it connects to (on) or connected to (off: they stop accepting its key); and ``loop``, its
    connections with the loop on (else None), the hosts whose SSH keys are still ``missing`` among them. PlanRefusal
    names each setting."""
    return _plan(settings, ctx or {})


def connections(settings, warn=None, ctx=None):
    """As :func:`main`, once the hosts' SSH keys were read, with the Java runtime's home from its files
    (``ctx['reported']``: dpkg-query -L's lines, or None where the package is not there yet) and the unit's command
    line."""
    return _plan(settings, ctx or {}, java=True)


# the planners the settings action calls, by the role's entry point
PLANNERS = {'main': main, 'connections': connections}
