# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring_tune_loop role: ansible-rulebook running the collection's rulebook specdec.serve.retune as a
service of its own user on the monitoring host (docs/tune_loop.md), decided on the controller.

* :func:`check` types and checks the role's settings (keys without the ``monitoring_tune_loop_`` prefix; the role's
  switch, ``monitoring_tune_loop``, is ``enabled``) and adds ``files``, where its parts go on the monitoring host
  (:func:`tune_loop_files`), and ``token_set``; :func:`webhook` is what the monitoring role's Alertmanager posts to.
* :func:`tune_loop` is what it needs of the inventory: the hosts it connects to, the inventory laid
  over the copied one, their known hosts, Java's home (:func:`java_home`) and the address its key is
  accepted from; :func:`tune_loop_unit` is its unit's command line and environment.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os

from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting, _retune as retune, _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import hostport
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import SettingsError, check_role
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import PORT_WORDS, host_address, is_port, refusal

ROLE = 'monitoring_tune_loop'

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
# the Debian packages it runs on besides the Java runtime (monitoring_tune_loop_java_package)
PACKAGES = ('python3-venv',)


class TuneLoopError(ValueError):
    def __init__(self, errors):
        self.errors = list(errors)
        super(TuneLoopError, self).__init__('\n'.join(self.errors))


def check(settings, token=None):
    """The role's settings: the spec's defaults overlaid with `settings` (short names, see the module's docs), typed
    and checked by their policy and together; ``files`` (:func:`tune_loop_files`), ``token_set`` (whether
    monitoring_tune_loop_token, a secret the settings action does not return and `token` gives, is set: never the
    token) and ``packages`` (what the host installs). Raises TuneLoopError, one line per variable."""
    s = role_spec.defaults(ROLE)
    given = dict((k, v) for k, v in (settings or {}).items() if v is not None)
    raw = given.pop('token', None)
    told = given.pop('token_set', None)
    s.update(given)
    errors = []
    try:
        token_set = _token_set(raw if token is None else token, told)
    except SettingsError as exc:
        errors.extend(exc.errors)
    try:
        s.update(check_role(ROLE, given))
    except SettingsError as exc:
        errors.extend(exc.errors)
    if not errors:
        errors = problems(s)
    if errors:
        raise TuneLoopError(errors)
    s['token_set'] = token_set
    s['files'] = tune_loop_files(s)
    s['packages'] = [s['java_package']] + [p for p in PACKAGES if p != s['java_package']]
    return s


def _token_set(token, told):
    """Whether the tune loop's token is set: `token` (the secret itself, checked) when given, else what a
    checked settings mapping says (`told`, its ``token_set``); never the token."""
    if token is not None:
        if not isinstance(token, str):
            raise SettingsError(['monitoring_tune_loop_token: (value hidden) must be a string'])
        if token and (len(token) < 16 or any(c.isspace() or not c.isprintable() for c in token)):
            raise SettingsError(['monitoring_tune_loop_token: (value hidden) must be at least 16 printable '
                                 'characters without whitespace (it travels in an Authorization header)'])
        return bool(token)
    return bool(told)


def problems(s):
    """The refusals of the checked settings (short names) that read more than one setting or the controller's files."""
    out: list = []
    if not s['enabled']:
        return out
    for key, what in (('inventory', 'the inventory (a file or directory on the controller) the re-tune '
                       'plays run against, copied to the monitoring host'),
                      ('ssh_key', 'the private key (on the controller) the tune loop connects to the '
                       'engine hosts and gateways with'),
                      ('collection', 'this collection\'s archive on the controller (ansible-galaxy '
                       'collection build or download), installed on the monitoring host')):
        if not s[key]:
            out.append(refusal('monitoring_tune_loop_' + key, s[key], 'must be set with monitoring_tune_loop: %s' % what))
        elif not os.path.exists(s[key]):
            out.append(refusal('monitoring_tune_loop_' + key, s[key], 'does not exist on the controller'))
    if s['collection'] and os.path.exists(s['collection']) and not os.path.isfile(s['collection']):
        out.append(refusal('monitoring_tune_loop_collection', s['collection'],
                           'must be a file (the .tar.gz of ansible-galaxy collection build)'))
    vault = s.get('vault_password_file')
    if vault and not os.path.isfile(vault):
        out.append(refusal('monitoring_tune_loop_vault_password_file', vault, 'is not a file on the controller'))
    if s['wheelhouse'] and not os.path.isdir(s['wheelhouse']):
        out.append(refusal('monitoring_tune_loop_wheelhouse', s['wheelhouse'], 'is not a directory on the controller'))
    for context in ('unit', 'command'):
        msg = quoting.problem(s['dir'], context)
        if msg:
            out.append(refusal('monitoring_tune_loop_dir', s['dir'], msg))
            break
    return out


def tune_loop_files(s):
    """Where the tune loop's parts go on the monitoring host, its listener's URL, and what does not apply
    (``unused``, removed by the role). ``writable``: the only directories of its user; everything else is root's."""
    d = s['dir'].rstrip('/') or '/'
    enabled = bool(s['enabled'])
    vault = bool(s.get('vault_password_file'))
    return {
        'enabled': enabled, 'unit': TUNE_LOOP_UNIT, 'user': s['user'], 'dir': d,
        'venv': d + '/venv', 'wheels': d + '/wheels', 'collections': d + '/collections',
        'archive': d + '/specdec-serve.tar.gz', 'inventory': d + '/inventory', 'reports': d + '/reports',
        'ssh_dir': d + '/.ssh', 'ssh_key': d + '/.ssh/id_tune_loop', 'known_hosts': d + '/.ssh/known_hosts',
        'ansible_dir': d + '/.ansible',
        'writable': [d + '/.ssh', d + '/.ansible', d + '/reports', RETUNE_STATE_DIR],
        'etc': TUNE_LOOP_ETC, 'vars_file': TUNE_LOOP_ETC + '/vars.yml', 'requirements': TUNE_LOOP_ETC + '/requirements.txt',
        # readable by the service's user only (0400, its own), written by root
        'token_store': TUNE_LOOP_ETC + '/token', 'vault_store': TUNE_LOOP_ETC + '/vault-password' if vault else '',
        'state_dir': RETUNE_STATE_DIR, 'token_file': TUNE_LOOP_TOKEN_FILE if enabled else None,
        'url': _url(s),
        'unused': ([] if enabled else [TUNE_LOOP_TOKEN_FILE]) + ([] if enabled and vault else [TUNE_LOOP_ETC + '/vault-password']),
        # copy's source: a directory's contents (trailing slash), or the one file
        'inventory_src': (s['inventory'].rstrip('/') + '/') if os.path.isdir(s['inventory'] or '') else s['inventory'],
        # the rulebook gives the plays retune_report_dir as their report directories (extra vars: the fleet
        # playbooks' own default of fleet_report_dir is a vars file's, above the inventory); the token is read
        # from its own file, never written here
        'rulebook_vars': {'retune_listen_address': s['listen'], 'retune_listen_port': s['port'],
                          'retune_listen_data_path': TUNE_LOOP_DATA_PATH, 'retune_report_dir': d + '/reports',
                          'retune_listen_token_file': TUNE_LOOP_ETC + '/token'},
    }


def webhook(settings):
    """Where Alertmanager posts every alert (``url``) and the file it reads the bearer token from (``token_file``),
    from the role's settings as typed (short names, as the settings action returns them to the monitoring role, which
    reads them); None with the loop off."""
    s = dict(role_spec.defaults(ROLE, ('enabled', 'listen', 'port')), **dict(
        (k, v) for k, v in (settings or {}).items() if v is not None))
    return {'url': _url(s), 'token_file': TUNE_LOOP_TOKEN_FILE} if s['enabled'] else None


def _url(s):
    return 'http://%s%s' % (hostport(s['listen'], s['port']), TUNE_LOOP_DATA_PATH)


def reached(groups, server_group):
    """The hosts the tune loop connects to: every host the plays may reach (the rollout's preflight reads every engine
    host, the drains every gateway), less the monitoring hosts (`server_group`'s): the engine plays never run there,
    and the loop's own is the controller."""
    monitors = set((groups or {}).get(server_group) or [])
    return [h for h in (groups or {}).get('all') or [] if h not in monitors]


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
    holding its ``java`` program under /usr/lib/jvm. Raises TuneLoopError when there is none."""
    for line in package_files or []:
        path = str(line).strip()
        if path.startswith('/usr/lib/jvm/') and path.endswith('/bin/java'):
            return path[:-len('/bin/java')]
    raise TuneLoopError(['monitoring_tune_loop_java_package: its package installs no /usr/lib/jvm/*/bin/java '
                         '(ansible-rulebook needs a Java 17 runtime)'])


def tune_loop(s, hostvars, groups, server_group, java_files=None, monitoring_host=None):
    """What the tune loop needs of the inventory, decided on the controller: ``hosts``, those it connects to
    (every host of the inventory but the monitoring group's); ``inventory``, an inventory file laid over the
    copied one that connects to each of them as the monitoring host reaches it (``monitoring_address``, else
    ``ansible_host``; port ``monitoring_ssh_port``, else 22) with the tune loop's key and known hosts, and gives
    them and the controller monitoring_tune_loop_vars; ``known_hosts``, their
    SSH host keys (from their facts, gathered over the controller's own connection), and ``missing``, the
    hosts with none yet; with `java_files` (the Java package's files), ``java_home``; with `monitoring_host` (the
    host the loop runs on), ``key_from``: its address as the other hosts see it (``monitoring_address``, else
    ``ansible_host``), the only source their authorized_keys accept the loop's key from (an IP address).
    `s`: the settings :func:`check` returned; `hostvars`: {host: {variable: value}}, facts under ``ansible_facts``;
    `server_group`: the monitoring role's monitoring_server_group."""
    files = s['files']
    hosts = reached(groups, server_group)
    common = dict(s['vars'] or {})
    ssh_args = '-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes' % files['known_hosts']
    inventory_hosts = {}
    known, missing = [], []
    for host in hosts:
        hv = hostvars.get(host) or {}
        address = host_address(hostvars, host)
        port = hv.get('monitoring_ssh_port') or 22
        if not is_port(port):
            raise TuneLoopError([refusal('monitoring_ssh_port', port, 'of %s must be %s' % (host, PORT_WORDS))])
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
            raise TuneLoopError([refusal('monitoring_address', key_from, 'of %s must be an IP address: the hosts accept the '
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
