# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's tune loop: ansible-rulebook running the collection's rulebook specdec.serve.retune
as a service of its own user on the monitoring host (docs/tune_loop.md), decided on the controller.

* :func:`tune_loop_files` is where its parts go on the monitoring host and its listener's URL (the
  settings :func:`plugin_utils._monitoring.check` returns carry it as ``tune_loop_files``), and
  ``tune_loop_problems`` the refusals of its settings that check() adds to the role's.
* :func:`tune_loop` is what it needs of the inventory: the hosts it connects to, the inventory laid
  over the copied one, their known hosts, Java's home (:func:`java_home`) and the address its key is
  accepted from; :func:`tune_loop_unit` is its unit's command line and environment.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os

from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting, _retune as retune
from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import MonitoringError, hostport, check
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import PORT_WORDS, host_address, is_port, refusal

# The tune loop on the monitoring host (docs/tune_loop.md): ansible-rulebook runs the collection's rulebook
# specdec.serve.retune as a systemd service of its own user, from a venv, with the collection installed from
# its archive; Alertmanager posts to its listener. Its token (monitoring_tune_loop_token, else one generated on the
# host at the first run): in a file only the service's user can read (0400), and the file Alertmanager reads (0640
# root:prometheus), nowhere else. The vault password the copied inventory needs, when
# monitoring_tune_loop_vault_password_file gives one: a file only the service's user can read (0400) too.
# Least privilege: everything root executes (the venv, the collection, the archive, their directory) is root's
# and read-only to the service user; it writes only its .ssh, .ansible, reports and the guards' state.
TUNE_LOOP_UNIT = 'specdec-tune-loop.service'
TUNE_LOOP_ETC = '/etc/specdec/tune-loop'
TUNE_LOOP_TOKEN_FILE = '/etc/prometheus/tune-loop.token'
TUNE_LOOP_DATA_PATH = '/alerts'
# where the re-tune play keeps its guards' state (the default of retune_state_file)
RETUNE_STATE_DIR = os.path.dirname(retune.STATE_FILE)
CONNECTION_VARS = ('ansible_host', 'ansible_port', 'ansible_ssh_private_key_file', 'ansible_ssh_common_args')


def tune_loop_problems(s, token_set):
    if not s['tune_loop']:
        return []
    out = []
    for key, what in (('tune_loop_inventory', 'the inventory (a file or directory on the controller) the re-tune '
                       'plays run against, copied to the monitoring host'),
                      ('tune_loop_ssh_key', 'the private key (on the controller) the tune loop connects to the '
                       'engine hosts and gateways with'),
                      ('tune_loop_collection', 'this collection\'s archive on the controller (ansible-galaxy '
                       'collection build or download), installed on the monitoring host')):
        if not s[key]:
            out.append(refusal('monitoring_' + key, s[key], 'must be set with monitoring_tune_loop: %s' % what))
        elif not os.path.exists(s[key]):
            out.append(refusal('monitoring_' + key, s[key], 'does not exist on the controller'))
    if s['tune_loop_collection'] and os.path.exists(s['tune_loop_collection']) and \
            not os.path.isfile(s['tune_loop_collection']):
        out.append(refusal('monitoring_tune_loop_collection', s['tune_loop_collection'],
                           'must be a file (the .tar.gz of ansible-galaxy collection build)'))
    vault = s.get('tune_loop_vault_password_file')
    if vault and not os.path.isfile(vault):
        out.append(refusal('monitoring_tune_loop_vault_password_file', vault, 'is not a file on the controller'))
    if s['tune_loop_wheelhouse'] and not os.path.isdir(s['tune_loop_wheelhouse']):
        out.append(refusal('monitoring_tune_loop_wheelhouse', s['tune_loop_wheelhouse'],
                           'is not a directory on the controller'))
    for key in ('tune_loop_dir',):
        for context in ('unit', 'command'):
            msg = quoting.problem(s[key], context)
            if msg:
                out.append(refusal('monitoring_' + key, s[key], msg))
                break
    return out


def tune_loop_files(s):
    """Where the tune loop's parts go on the monitoring host, its listener's URL, and what does not apply
    (``unused``, removed by the role). ``writable``: the only directories of its user; everything else is root's."""
    d = s['tune_loop_dir'].rstrip('/') or '/'
    enabled = bool(s['tune_loop'])
    vault = bool(s.get('tune_loop_vault_password_file'))
    return {
        'enabled': enabled, 'unit': TUNE_LOOP_UNIT, 'user': s['tune_loop_user'], 'dir': d,
        'venv': d + '/venv', 'wheels': d + '/wheels', 'collections': d + '/collections',
        'archive': d + '/specdec-serve.tar.gz', 'inventory': d + '/inventory', 'reports': d + '/reports',
        'ssh_dir': d + '/.ssh', 'ssh_key': d + '/.ssh/id_tune_loop', 'known_hosts': d + '/.ssh/known_hosts',
        'ansible_dir': d + '/.ansible',
        'writable': [d + '/.ssh', d + '/.ansible', d + '/reports', RETUNE_STATE_DIR],
        'etc': TUNE_LOOP_ETC, 'vars_file': TUNE_LOOP_ETC + '/vars.yml', 'requirements': TUNE_LOOP_ETC + '/requirements.txt',
        # readable by the service's user only (0400, its own), written by root
        'token_store': TUNE_LOOP_ETC + '/token', 'vault_store': TUNE_LOOP_ETC + '/vault-password' if vault else '',
        'state_dir': RETUNE_STATE_DIR, 'token_file': TUNE_LOOP_TOKEN_FILE if enabled else None,
        'url': 'http://%s%s' % (hostport(s['tune_loop_listen'], s['tune_loop_port']), TUNE_LOOP_DATA_PATH),
        'unused': ([] if enabled else [TUNE_LOOP_TOKEN_FILE]) + ([] if enabled and vault else [TUNE_LOOP_ETC + '/vault-password']),
        # copy's source: a directory's contents (trailing slash), or the one file
        'inventory_src': (s['tune_loop_inventory'].rstrip('/') + '/') if os.path.isdir(s['tune_loop_inventory'] or '')
        else s['tune_loop_inventory'],
        # the rulebook gives the plays retune_report_dir as their report directories (extra vars: the fleet
        # playbooks' own default of fleet_report_dir is a vars file's, above the inventory); the token is read
        # from its own file, never written here
        'rulebook_vars': {'retune_listen_address': s['tune_loop_listen'], 'retune_listen_port': s['tune_loop_port'],
                          'retune_listen_data_path': TUNE_LOOP_DATA_PATH, 'retune_report_dir': d + '/reports',
                          'retune_listen_token_file': TUNE_LOOP_ETC + '/token'},
    }


def _known_host(address, port, facts):
    name = address if int(port) == 22 else '[%s]:%d' % (address, int(port))
    lines = []
    for kind in ('ed25519', 'ecdsa', 'rsa'):
        key = facts.get('ssh_host_key_%s_public' % kind)
        keytype = facts.get('ssh_host_key_%s_public_keytype' % kind)
        if key and keytype:
            lines.append('%s %s %s' % (name, keytype, key))
    return lines


def java_home(package_files):
    """The Java runtime's home, from the files of its package (dpkg-query -L): the directory above the one
    holding its ``java`` program under /usr/lib/jvm. Raises MonitoringError when there is none."""
    for line in package_files or []:
        path = str(line).strip()
        if path.startswith('/usr/lib/jvm/') and path.endswith('/bin/java'):
            return path[:-len('/bin/java')]
    raise MonitoringError(['monitoring_tune_loop_java_package: its package installs no /usr/lib/jvm/*/bin/java '
                           '(ansible-rulebook needs a Java 17 runtime)'])


def tune_loop(settings, hostvars, groups, java_files=None, monitoring_host=None):
    """What the tune loop needs of the inventory, decided on the controller: ``hosts``, those it connects to
    (every host of the inventory but the monitoring group's); ``inventory``, an inventory file laid over the
    copied one that connects to each of them as the monitoring host reaches it (``monitoring_address``, else
    ``ansible_host``; port ``monitoring_ssh_port``, else 22) with the tune loop's key and known hosts, and gives
    them and the controller monitoring_tune_loop_vars; ``known_hosts``, their
    SSH host keys (from their facts, gathered over the controller's own connection), and ``missing``, the
    hosts with none yet; with `java_files` (the Java package's files), ``java_home``; with `monitoring_host` (the
    host the loop runs on), ``key_from``: its address as the other hosts see it (``monitoring_address``, else
    ``ansible_host``), the only source their authorized_keys accept the loop's key from (an IP address).
    `hostvars`: {host: {variable: value}}, facts under ``ansible_facts``."""
    s = check(settings)
    files = s['tune_loop_files']
    # every host the plays may reach (the rollout's preflight reads every engine host, the drains every gateway),
    # less the monitoring hosts: the engine plays never run there, and this one is the controller
    monitors = set((groups or {}).get(s['server_group']) or [])
    hosts = [h for h in (groups or {}).get('all') or [] if h not in monitors]
    common = dict(s['tune_loop_vars'] or {})
    ssh_args = '-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes' % files['known_hosts']
    inventory_hosts = {}
    known, missing = [], []
    for host in hosts:
        hv = hostvars.get(host) or {}
        address = host_address(hostvars, host)
        port = hv.get('monitoring_ssh_port') or 22
        if not is_port(port):
            raise MonitoringError([refusal('monitoring_ssh_port', port, 'of %s must be %s' % (host, PORT_WORDS))])
        conn = {'ansible_host': address, 'ansible_port': int(port), 'ansible_ssh_private_key_file': files['ssh_key'],
                'ansible_ssh_common_args': ssh_args}
        inventory_hosts[host] = dict(common, **conn)
        lines = _known_host(address, port, hv.get('ansible_facts') or {})
        if lines:
            known.extend(lines)
        else:
            missing.append(host)
    out = {'hosts': hosts, 'missing': missing, 'known_hosts': ''.join(line + '\n' for line in known),
           'inventory': {'all': {'vars': common, 'hosts': inventory_hosts}}}
    if java_files is not None:
        out['java_home'] = java_home(java_files)
    if monitoring_host is not None:
        key_from = host_address(hostvars, monitoring_host)
        try:
            key_from = str(ipaddress.ip_address(key_from))
        except ValueError:
            raise MonitoringError([refusal('monitoring_address', key_from, 'of %s must be an IP address: the hosts accept the '
                                           "tune loop's key from that address only" % monitoring_host)])
        out['key_from'] = key_from
    # in check mode on a host without Java yet there are no files to read its home from
    out['unit'] = tune_loop_unit(files, out.get('java_home', ''))
    return out


def tune_loop_unit(files, home):
    """The tune loop unit's ExecStart= and Environment= values, each word through the one quoting rule (unit). The
    vault password, where there is one, is a file only the service's user reads (ANSIBLE_VAULT_PASSWORD_FILE)."""
    env = [('HOME', files['dir']), ('JAVA_HOME', home),
           ('PATH', files['venv'] + '/bin:/usr/sbin:/usr/bin:/sbin:/bin'),
           ('ANSIBLE_COLLECTIONS_PATH', files['collections']), ('ANSIBLE_NOCOLOR', '1'),
           ('ANSIBLE_LOCAL_TEMP', files['ansible_dir'] + '/tmp')]
    if files.get('vault_store'):
        env.append(('ANSIBLE_VAULT_PASSWORD_FILE', files['vault_store']))
    argv = [files['venv'] + '/bin/ansible-rulebook', '--rulebook', 'specdec.serve.retune', '-i', files['inventory'],
            '--vars', files['vars_file']]
    return {'exec': ' '.join(quoting.quote(w, 'unit') for w in argv),
            'environment': [quoting.quote('%s=%s' % kv, 'unit') for kv in env]}
