# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role settings, checked and typed on the controller before a role touches a host.

Every role of the collection starts with the ``specdec.serve.settings`` action, which runs
:func:`check_settings` over the role's variables. It does two things Ansible's own argument-spec
check does not:

* it *returns* the values converted the way the argument spec converts them (``"false"`` from
  ``-e`` becomes ``False``, ``"8000,8001"`` becomes ``[8000, 8001]``), and the role's tasks and
  templates read those typed values, never the raw variables: a string is never tested for
  truth and a list is never iterated as a string;
* it applies the collection's policy per variable (:data:`POLICY`): ranges and upper bounds of
  numbers, names that become file or unit names, absolute host paths without ``..``, URLs that must
  be https unless the role's ``*_allow_http`` opt-in is set, and no control character (newline,
  NUL, ...) in any string that can reach a unit, environment, rules, apt source or pin file.

Every message names the variable, the bad value (hidden for ``no_log`` variables) and what is
allowed, in the one wording of plugin_utils/_vocabulary.py (:func:`vocabulary.refusal`). The names, types,
defaults and choices of the settings are their roles' argument specs' (plugin_utils/_role_spec.py); what
the spec cannot say is :data:`POLICY`, the one table of the collection's bounds and patterns: other modules
that take a setting call :func:`check_role` or :func:`check_value` instead of checking a range again.
Secrets (``no_log`` options) are checked but never returned: tasks keep reading the
variable itself, which must already be of its type (no conversion, so no second copy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import ipaddress
import os
import posixpath
import re

from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
    check_type_list,
    check_type_str,
)
from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.module_utils import platforms
from ansible_collections.specdec.serve.plugins.plugin_utils import _redaction as redaction
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _sweep_workloads as _sweep_workloads
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    DURATION_WORDS,
    GROUP_RE,
    NAME_RE,
    NAME_WORDS,
    PORT_MAX,
    PORT_MIN,
    REPO_ID_RE,
    refusal,
    seconds,
    show,
)


class SettingsError(ValueError):
    """One or more settings a role refuses; the message lists each with its variable."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(SettingsError, self).__init__('\n'.join(self.errors))


_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
PACKAGE_RE = re.compile(r'^[a-z0-9][a-z0-9+.-]{0,127}\Z')
APT_VERSION_RE = re.compile(r'^[0-9][A-Za-z0-9.+~:-]{0,63}\Z')
USER_RE = re.compile(r'^[a-z_][a-z0-9_-]{0,31}\$?\Z')
ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]{0,127}\Z')
IFACE_RE = re.compile(r'^[A-Za-z0-9_.:@-]{1,15}\Z')
EXEMPT_RE = re.compile(r'^[A-Za-z0-9_.:@-]{1,15}[+]?\Z')
IMAGE_RE = re.compile(r'^[a-z0-9][a-z0-9._/:@-]{0,254}\Z')
HOST_PORT_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9.-]{0,252}(:[0-9]{1,5})?\Z')
FINGERPRINT_RE = re.compile(r'^[0-9A-F]{40}\Z')
SHA256_RE = re.compile(r'^[0-9a-f]{64}\Z')
REF_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_./-]{0,127}\Z')
# Wildcards in an exemption that match uplinks as well as Docker's bridges.
_BROAD_EXEMPT = re.compile(r'^(e|en|eth|em|wl|wlan|ww|ib|bond|team|vlan|p|lo)?[+]\Z')

BOOL_WORDS = 'true/false (also yes/no, on/off, 1/0)'


# --------------------------------------------------------------------------- policy checks
# Each check takes the typed value and returns None, or a text saying what is allowed.

class Rule(object):
    """A policy rule: called with a value, it returns None or what is wrong with it; ``bounds`` is the
    (low, high) of a range rule, None for any other; ``hides``: its refusal shows no value (the value it
    refuses holds a secret, as an instance's extra_args with --api-key does)."""

    def __init__(self, check, bounds=None, name=None, hides=False):
        self.check = check
        self.bounds = bounds
        self.__name__ = name or check.__name__
        self.hides = hides

    def __call__(self, value):
        return self.check(value)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class ContextRule(Rule):
    """A rule that also reads another setting (``needs``; its value as given, else its default): called
    as ``rule(value, other)``."""

    def __init__(self, check, needs, name=None):
        super(ContextRule, self).__init__(check, None, name)
        self.needs = needs

    def __call__(self, value, other=None):
        return self.check(value, other)


def _apply(rule, value, values):
    """A rule's verdict on a value; a ContextRule gets the setting it needs from values, else its default."""
    needs = getattr(rule, 'needs', None)
    if not needs:
        return rule(value)
    if needs in values:
        other = values[needs]
    else:
        other = None if needs in CONNECTION_VARS else role_spec.default(needs)
    return rule(value, other)


# Variables of Ansible's (not a role's) that a ContextRule may read: None when the play does not set them.
CONNECTION_VARS = ('ansible_port',)


def context_needs(options):
    """The settings of other roles that the rules of these options read (ContextRule.needs): the settings
    action passes them beside the role's own variables."""
    needs = set()
    for name in options:
        rules = POLICY.get(name)
        inside = [r for dummy, found in nested_rules(name) for r in found]  # the rules of keys inside its value
        for rule in (rules if isinstance(rules, list) else []) + inside:
            if getattr(rule, 'needs', None) and rule.needs not in options:
                needs.add(rule.needs)
    return sorted(needs)


def rng(low, high):
    def check(v):
        if v is None:
            return None
        if not _is_number(v):  # a key inside a list or dict setting, which the spec does not convert
            return 'must be a number from %s to %s' % (low, high)
        return None if low <= v <= high else 'must be from %s to %s' % (low, high)
    return Rule(check, (low, high))


def _port(v):
    if v is None:
        return None
    return None if _is_number(v) and PORT_MIN <= v <= PORT_MAX else 'must be a port number from %d to %d' % (PORT_MIN, PORT_MAX)


port = Rule(_port, (PORT_MIN, PORT_MAX), 'port')


def each(check):
    def run(values):
        for v in values or []:
            msg = check(v)
            if msg:
                return '%s: %s' % (show(v), msg)
        return None
    return Rule(run, getattr(check, 'bounds', None))


def non_empty(v):
    return None if v else 'must not be empty'


def _pattern(regex, what):
    def check(v):
        if v in (None, ''):
            return None
        return None if isinstance(v, string_types) and regex.match(v) else 'must be %s' % what
    return check


name = _pattern(NAME_RE, NAME_WORDS)
group = _pattern(GROUP_RE, 'an inventory group name (letters, digits and _ . -)')
url_path = _pattern(re.compile(r'^/[A-Za-z0-9_./-]*\Z'), 'a URL path starting with /')
http_url = _pattern(re.compile(r'^https?://[^\s]+\Z'), 'an http(s) URL')
package = _pattern(PACKAGE_RE, 'a Debian package name')
apt_version = _pattern(APT_VERSION_RE, 'a Debian package version such as 1.17.8-1 (a digit, then letters, digits and . + ~ : -)')
user = _pattern(USER_RE, 'a user name')
iface = _pattern(IFACE_RE, 'an interface name (at most 15 characters)')
image = _pattern(IMAGE_RE, 'an image reference (e.g. nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6)')
host_port = _pattern(HOST_PORT_RE, 'a host name or host:port')
ref = _pattern(REF_RE, 'a git revision, branch or tag')
fingerprint = _pattern(FINGERPRINT_RE, 'an OpenPGP fingerprint of 40 upper-case hex digits')


def duration(v):
    """A Prometheus duration (one unit) above 0."""
    if v in (None, ''):
        return None
    try:
        if seconds(v) > 0:
            return None
    except ValueError:
        pass
    return 'must be ' + DURATION_WORDS


def exempt_iface(v):
    if not isinstance(v, string_types) or not EXEMPT_RE.match(v):
        return 'must be an interface name; a trailing + matches a prefix, as in br-+'
    if _BROAD_EXEMPT.match(v):
        return ('matches uplinks as well as Docker bridges, which would exempt the network from the allow-list; '
                'name the bridges (docker0, br-+) or the interfaces exactly')
    return None


# Interfaces that link no hosts: loopback, Docker's bridges, veth pairs, libvirt's bridges.
NOT_A_LINK = re.compile(r'^(lo|docker0|docker_gwbridge|br-.*|veth.*|virbr.*)\Z')


def link_iface(v):
    """An interface that links hosts: never loopback or a bridge or virtual interface (NOT_A_LINK)."""
    if isinstance(v, string_types) and NOT_A_LINK.match(v):
        return ('is loopback or a bridge or virtual interface (lo, docker0, docker_gwbridge, br-*, veth*, virbr*), '
                'which links no hosts; name the port of the link itself (e.g. enp1s0f0np0)')
    return None


def not_root(v):
    """A system user a role creates and runs a service as: never root (the role would set root's home and
    shell, and the service would run with every power over the host)."""
    if v == 'root':
        return ("is the host's superuser: the role would give root its home and a nologin shell, and run the service "
                'with every power over the host; name a system user of its own (e.g. specdec-tune), which the role creates')
    return None


def no_dotdot_name(v):
    if v in (None, ''):
        return None
    if not isinstance(v, string_types) or not NAME_RE.match(v) or v in ('.', '..') or '..' in v:
        return 'must be %s, without ..' % NAME_WORDS
    return None


def host_path(v):
    """An absolute host path, normalised: no relative part, no '..' or '.', no '//'."""
    if v in (None, ''):
        return None
    if not v.startswith('/'):
        return 'must be an absolute path'
    parts = v.split('/')[1:]
    if v != '/' and (v.endswith('/') or any(p in ('', '.', '..') for p in parts)):
        return "must be a normalised absolute path (no '..', '.', '//' or trailing /)"
    return None


def device_path(v):
    """A device node path under /dev, normalised (a stack's RDMA devices)."""
    bad = host_path(v)
    if bad or v in (None, ''):
        return bad
    return None if v.startswith('/dev/') else 'must be a device path under /dev (e.g. /dev/infiniband)'


def no_climb(v):
    """A path or path-like name (a model, a runtime, a repo-relative file) without a '..' part, which would
    climb out of the directory it is read under."""
    if v in (None, ''):
        return None
    if not isinstance(v, string_types):
        return 'must be a string'
    return "must not contain a '..' part" if '..' in v.replace('\\', '/').split('/') else None


def local_path(v):
    """A controller path (reports, archives, a wheelhouse): relative to the current directory or absolute, as a
    user writes it (``..`` and ``~`` included); :func:`controller_path` normalises it before any use."""
    if v in (None, ''):
        return None
    if not isinstance(v, string_types):
        return 'must be a path'
    return None


def controller_path(v, absolute=False):
    """A controller path as it is used and shown: ``~`` and ``$VARS`` expanded as Ansible's type path does, then
    normalised (``a/../b`` is ``b``); made absolute against the current directory with ``absolute``."""
    if not v:
        return v
    path = os.path.expanduser(os.path.expandvars(v))
    return os.path.abspath(path) if absolute else posixpath.normpath(path)


def per_architecture(check):
    """A path for every architecture, or a mapping of architecture (x86_64/amd64, aarch64/arm64) to path
    (module_utils/platforms.py), each path checked by ``check``."""
    def run(v):
        if v is not None and not isinstance(v, (string_types, dict)):
            return 'must be a path, or a mapping of architecture to path'
        if not isinstance(v, dict):
            return check(v)
        problem = platforms.per_architecture_problem(v)
        if problem:
            return problem
        for key in sorted(v, key=str):
            msg = check(v[key])
            if msg:
                return '%s: %s %s' % (key, show(v[key]), msg)
        return None
    return run


# Settings that name one artifact per architecture (a wheel is built for one; an image archive holds an image
# of one platform): a path for every host, or a mapping of architecture to path that for_architecture()
# resolves with each host's facts, on the controller, before the role reads it.
PER_ARCHITECTURE = ('inference_server_image_archive', 'model_cache_wheelhouse')


def for_architecture(typed, machine):
    """The typed settings with each PER_ARCHITECTURE setting the host's path: a mapping's entry for ``machine``
    (ansible_facts.architecture), a plain path as given; ~ and $VARS expanded. Raises SettingsError naming the
    setting and the host's architecture."""
    out, errors = dict(typed), []
    for var in PER_ARCHITECTURE:
        if var not in out:
            continue
        try:
            path = platforms.for_host(out[var], machine, var)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        out[var] = controller_path(path)
    if errors:
        raise SettingsError(errors)
    return out


def both_or_neither(other):
    """A setting given with ``other`` or not at all (a certificate and its key)."""
    def check(v, given):
        if bool(v) != bool(given):
            state, other_state = ('set', 'empty') if v else ('empty', 'set')
            return 'is %s while %s is %s: give both or neither' % (state, other, other_state)
        return None
    return check


def needs_set(other):
    """A setting that means something only with ``other`` set."""
    def check(v, given):
        return 'is set while %s is empty: set both, or neither' % other if v and not given else None
    return check


# Options whose strings may span lines: data that only reaches a JSON report on the controller (a
# rollout's per-host outcome carries the engine's error text), and the gateway's certificate and key
# (PEM is lines by design; the role writes them whole to their own file, never into a line of another).
MULTILINE_OK = ('fleet_view_status', 'gateway_tls_certificate', 'gateway_tls_key')

# Controller paths: a relative one is resolved against the directory ansible-playbook runs in (never
# the playbook's or the collection's), once, here.
CONTROLLER_PATHS = ('draft_sweep_report_dir', 'fleet_view_report_dir', 'model_cache_lock_dir',
                    'model_cache_peer_tls_cert', 'model_cache_peer_tls_key', 'model_cache_peer_tls_ca',
                    'monitoring_web_tls_cert', 'monitoring_web_tls_key', 'fleet_view_prometheus_ca',
                    'monitoring_tune_loop_inventory', 'monitoring_tune_loop_ssh_key', 'monitoring_tune_loop_collection',
                    'monitoring_tune_loop_wheelhouse', 'monitoring_tune_loop_vault_password_file')


_MAPPED = ipaddress.IPv6Network('::ffff:0:0/96')


def _address_problem(text, address):
    """What is wrong with an IPv6 form the host's tools read otherwise: an IPv4-mapped address (write the IPv4
    one) or a zone (ip6tables-restore and docker refuse fe80::1%eth0); None for any other."""
    if isinstance(text, string_types) and '%' in text:
        return 'has an IPv6 zone (%...), which ip6tables-restore and docker refuse; write the address without it'
    if address.version == 6 and address.ipv4_mapped is not None:
        return 'is an IPv4-mapped IPv6 address; write the IPv4 address (%s) instead' % address.ipv4_mapped
    return None


def plain_ip_form(v):
    """An address or host name; when it is an IP address, neither IPv4-mapped nor with a zone."""
    if not isinstance(v, string_types) or v == '':
        return None
    try:
        return _address_problem(v, ipaddress.ip_address(v))
    except ValueError:
        return _address_problem(v, None) if '%' in v else None


def cidr(v):
    if isinstance(v, string_types) and '%' in v:
        return _address_problem(v, None)
    try:
        net = ipaddress.ip_network(v, strict=True)
    except ValueError as exc:
        if isinstance(v, string_types):
            try:
                ipaddress.ip_network(v, strict=False)
                return 'has host bits set (%s); write the network address' % exc
            except ValueError:
                pass
        return 'must be an IPv4/IPv6 address or CIDR (e.g. 10.20.0.0/16, 2001:db8::/48, 192.0.2.7)'
    if net.prefixlen == 0:
        return ('opens the engine ports to every address; set firewall_open_engine_ports: true instead '
                'if that is really meant')
    if isinstance(net, ipaddress.IPv6Network) and (net.subnet_of(_MAPPED) or _MAPPED.subnet_of(net)):
        return ('is IPv4-mapped IPv6 (::ffff:0:0/96), which IPv6 rules never match for IPv4 clients; write the IPv4 '
                'network instead')
    return None


def ip_or_empty(v):
    if v in (None, ''):
        return None
    try:
        ip = ipaddress.ip_address(v)
    except ValueError:
        return 'must be an IP address of the host (or empty)'
    return _address_problem(v, ip)


def bind_address(v):
    """One IP address of the host a listener binds; never the wildcard (0.0.0.0, ::), which listens on
    every interface. Empty passes (a role that allows it says what empty means)."""
    if v in (None, ''):
        return None
    try:
        ip = ipaddress.ip_address(v)
    except ValueError:
        return 'must be an IP address of the host'
    if ip.is_unspecified:
        return 'listens on every interface; name the one address its clients use (e.g. 127.0.0.1, or the host\'s inventory address)'
    return _address_problem(v, ip)


def env_names(v):
    bad = [k for k in (v or {}) if not isinstance(k, string_types) or not ENV_NAME_RE.match(k)]
    return ('has names that are not environment variable names: %s' % ', '.join(show(k) for k in bad)) if bad else None


def string_values(v):
    """A mapping whose values are strings (a secret environment: any other type would be written as its
    Python form); the names of the bad ones are said, never their values."""
    bad = [k for k, x in (v or {}).items() if not isinstance(x, string_types)]
    return ('has values that are not strings: %s (write each as a string, quoted in YAML)'
            % ', '.join('%s (a %s)' % (show(k), type(v[k]).__name__) for k in bad)) if bad else None


def secret_string(v):
    """A secret given inside another setting (an instance's api_key): a string, as given."""
    return None if v in (None, '') or isinstance(v, string_types) else 'must be a string, not a %s' % type(v).__name__


# --------------------------------------------------------------------------- secrets only in secret fields
# A secret is given in a no_log setting (the instance's api_key, inference_server_secret_env, model_cache_hf_token),
# which the role writes only to a 0600 file and never shows. An engine's command line (extra_args, docker_args) is in
# the world-readable unit file and the play's output, and the public environment (inference_server_env, an
# instance's env) is shown in the play's output too: a name there that says it holds a secret is refused, without its value.

# Words of a flag's or a variable's name (split at - and _) that say it holds a secret.
SECRET_WORDS = ('secret', 'password', 'passwd', 'apikey')
# TOKEN says so at the end of a name that counts no tokens (not --max-prompt-adapter-token, ..._MS_PER_TOKEN).
_COUNTING = ('max', 'min', 'num', 'per')
# A name ending so is the place of a secret (HF_TOKEN_PATH, --api-key-file), not the secret.
_PLACES = ('file', 'path', 'dir')


def _name_words(name):
    return [w for w in re.split(r'[-_]+', name.lower()) if w] if isinstance(name, string_types) else []


def secret_shaped(name):
    """Whether a flag (``--hf-token``) or an environment variable (``NGC_API_KEY``) is named as a secret: a word
    of its name (split at - and _) is SECRET, PASSWORD, PASSWD or APIKEY, or API then KEY, or the name ends in
    TOKEN and counts no tokens (MAX, MIN, NUM, PER); never a name ending in FILE, PATH or DIR. Words only:
    ``--tokenizer``, ``--max-num-batched-tokens``, ``TIKTOKEN_ENCODINGS_BASE`` are no secrets."""
    words = _name_words(name)
    if not words or words[-1] in _PLACES:
        return False
    if any(w in SECRET_WORDS for w in words) or any(a == 'api' and b == 'key' for a, b in zip(words, words[1:])):
        return True
    return words[-1] == 'token' and not any(w in _COUNTING for w in words)


def _secret_home(name, engine_key):
    """The no_log setting a secret named so belongs in. ``engine_key``: the name the engine's own API key has
    there (--api-key on vLLM's command line, VLLM_API_KEY in its environment)."""
    words = _name_words(name)
    if name == engine_key:
        return "the instance's api_key (no_log; the role writes it as VLLM_API_KEY to the 0600 engine.env)"
    if words and words[-1] == 'token' and ('hf' in words or 'hub' in words or 'hugging' in words):
        return ('model_cache_hf_token (the engines run offline, HF_HUB_OFFLINE=1, on what model_cache downloads), or '
                'inference_server_secret_env as HF_TOKEN (no_log, written only to the 0600 engine.env)')
    return 'inference_server_secret_env (no_log, written only to the 0600 engine.env)'


def _flag(word):
    """The option of a command-line word (--api-key of --api-key=x), or None for a word that is no option."""
    return word.partition('=')[0] if isinstance(word, string_types) and word.startswith('-') else None


def _secret_flags(words):
    """The secret-shaped options of a list of command-line words, as given (--api-key, --hf_token)."""
    return [f for f in (_flag(w) for w in (words if isinstance(words, list) else [])) if secret_shaped(f)]


def secret_args(words):
    """An instance's extra_args: no secret-shaped option (--api-key, --hf-token, --password, ...), as
    ``--flag=value`` or ``--flag value``; the refusal names the option and the no_log setting to use instead."""
    flags = _secret_flags(words)
    if not flags:
        return None
    return ('has %s, a secret on the engine command line, which is in the world-readable unit file and the '
            "play's output; give it in %s" % (flags[0], _secret_home(flags[0].lstrip('-').replace('_', '-'), 'api-key')))


def secret_env_names(env):
    """A public environment (inference_server_env, an instance's env): no secret-shaped name (HF_TOKEN,
    HUGGING_FACE_HUB_TOKEN, NGC_API_KEY, ...*PASSWORD*, ...*SECRET*...); the refusal names each and where it belongs,
    never its value."""
    bad = sorted(k for k in env if secret_shaped(k)) if isinstance(env, dict) else []
    if not bad:
        return None
    return ("has %s, named as %s; this environment is no secret, the play shows it in its output: give %s"
            % (', '.join(bad), 'secrets' if len(bad) > 1 else 'a secret',
               '; '.join('%s in %s' % (k, _secret_home(k, 'VLLM_API_KEY')) for k in bad)))


def _masked_assignment(text):
    """NAME=value with the value hidden when NAME is named as a secret (docker's -e HF_TOKEN=...)."""
    name, sep, _value = text.partition('=')
    return '%s=%s' % (name, redaction.HIDDEN) if sep and secret_shaped(name) else text


def masked(value):
    """A value as a refusal may show it: in a list of words, each value of a secret-shaped option (--api-key=x,
    --hf-token x) and of a secret-named assignment (-e HF_TOKEN=x, --env=HF_TOKEN=x) hidden; in a mapping, the
    value of each secret-shaped key (an instance's api_key, an env's HF_TOKEN) hidden; recursively."""
    if isinstance(value, dict):
        return dict((k, redaction.HIDDEN if secret_shaped(k) and v not in (None, '') else masked(v))
                    for k, v in value.items())
    if not isinstance(value, list):
        return value
    out, hide_next = [], False
    for word in value:
        flag = _flag(word)
        if not isinstance(word, string_types):
            out.append(masked(word))
        elif hide_next and flag is None:
            out.append(redaction.HIDDEN)
        elif flag is not None and secret_shaped(flag):
            out.append('%s=%s' % (flag, redaction.HIDDEN) if '=' in word else word)
        elif flag is not None and '=' in word:
            out.append('%s=%s' % (flag, _masked_assignment(word.partition('=')[2])))
        else:
            out.append(_masked_assignment(word))
        hide_next = flag is not None and secret_shaped(flag) and '=' not in word
    return out


def api_keys(keys):
    """gateway_api_keys: a list of keys, each a string or a {name, key} mapping whose key is a string."""
    if not isinstance(keys, list):
        return 'must be a list of keys, each a string or a {name, key} mapping'
    for index, item in enumerate(keys):
        key = item.get('key') if isinstance(item, dict) else item
        if not isinstance(key, string_types):
            return ('item %d (value hidden) is a %s; each key must be a string or a {name, key} mapping whose key is a '
                    'string' % (index, type(key).__name__))
    return None


# bcrypt hashes the first 72 bytes of a password and refuses longer ones
BCRYPT_MAX = 72


def web_users(v):
    """monitoring_web_users: user name -> password; the names are said, never the passwords."""
    if not isinstance(v, dict):
        return 'must be a mapping of user name to password'
    bad_names = [k for k in v if not isinstance(k, string_types) or not NAME_RE.match(k)]
    if bad_names:
        return 'has user names that are not %s: %s' % (NAME_WORDS, ', '.join(show(k) for k in bad_names))
    bad = [k for k, x in sorted(v.items()) if not isinstance(x, string_types) or not x
           or len(x.encode('utf-8')) > BCRYPT_MAX]
    return ('has passwords (values hidden) that are not strings of 1 to %d bytes: %s'
            % (BCRYPT_MAX, ', '.join(bad))) if bad else None


def sha256_values(v):
    bad = [k for k, h in (v or {}).items() if not isinstance(h, string_types) or not SHA256_RE.match(h)]
    return ('has entries whose value is not a lowercase sha256: %s' % ', '.join(bad)) if bad else None


def name_keys(v):
    bad = [k for k in (v or {}) if no_dotdot_name(k)]
    return ('has keys that are not file names: %s' % ', '.join(show(k) for k in bad)) if bad else None


def repo_id(v):
    """A Hugging Face repo id org/name: it becomes <root>/org/name on the host, so no '..'."""
    if not isinstance(v, string_types) or not REPO_ID_RE.match(v) or '..' in v:
        return 'must be a Hugging Face repo id org/name (letters, digits, _ . -; no ..)'
    return None


MODEL_ENTRY_KEYS = ('repo_id', 'revision', 'allow_patterns', 'ignore_patterns', 'verify', 'refresh')


def _patterns(v):
    return None if v is None or (isinstance(v, list) and all(isinstance(p, string_types) and p for p in v)) \
        else 'must be a list of glob patterns (strings)'


def model_entry(v):
    """An entry of model_cache_models: a repo id, or a mapping with repo_id and the keys the hf_snapshot module
    takes (revision, allow_patterns, ignore_patterns, verify, refresh), each as that module accepts it."""
    if not isinstance(v, dict):
        return repo_id(v)
    if 'repo_id' not in v:
        return 'a mapping needs repo_id'
    unknown = sorted(str(k) for k in v if k not in MODEL_ENTRY_KEYS)
    if unknown:
        return 'has unknown keys %s (allowed: %s)' % (', '.join(unknown), ', '.join(MODEL_ENTRY_KEYS))
    verify = role_spec.choices('model_cache_verify')
    checks = [('repo_id', repo_id), ('revision', ref), ('allow_patterns', _patterns), ('ignore_patterns', _patterns),
              ('verify', lambda x: None if x in verify else 'is not one of %s' % ', '.join(verify)),
              ('refresh', lambda x: None if as_bool(x) is not None else 'must be a boolean: ' + BOOL_WORDS)]
    for key, check in checks:
        if key in v and (key == 'repo_id' or v[key] is not None):
            msg = check(v[key])
            if msg:
                return '%s %s %s' % (key, show(v[key]), msg)
    return None


def int_values(low, high):
    """A mapping whose values are integers from low to high."""
    def check(v):
        bad = [k for k, x in (v or {}).items() if not (isinstance(x, int) and not isinstance(x, bool) and low <= x <= high)]
        return ('has values that are not integers from %s to %s: %s' % (low, high, ', '.join(show(k) for k in bad))) if bad else None
    return Rule(check, (low, high), 'int_values')


def schedule_values(rule):
    """A draft-length schedule {batch size: draft length}: every length within the rule's range."""
    def check(v):
        bad = [k for k, x in (v or {}).items() if rule(x)] if isinstance(v, dict) else None
        if bad:
            return 'has draft lengths that are not from %s to %s, at batch sizes %s' % (rule.bounds + (', '.join(show(k) for k in bad),))
        return None
    return Rule(check, rule.bounds, 'schedule_values')


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


# Host paths an engine container must not mount (or a path above them): the host's root, its
# configuration and secrets, the kernel's interfaces, the boot files, Docker's socket and state. No role
# makes a directory of its own at or inside one either (own_dir).
HOST_ROOT_PATHS = ('/etc', '/root', '/proc', '/sys', '/boot', '/dev', '/var/lib/docker', '/var/run/docker.sock',
                   '/run/docker.sock', '/run/containerd', '/var/run/containerd')
# The host's programs and libraries, which its packages own.
PROGRAM_TREES = ('/usr', '/bin', '/sbin', '/lib', '/lib64')
# Directories every service shares: a role's own directory may be inside one, never one of them.
SHARED_DIRS = ('/', '/run', '/var/run', '/var', '/var/lib', '/home', '/opt', '/srv', '/tmp')


def _in_tree(path, trees):
    """The first of ``trees`` that ``path`` (normalised) is or is inside, or None."""
    return next((t for t in trees if path == t or path.startswith(t + '/')), None)


def own_dir(var, config=False):
    """The directory ``var`` names, which its role makes its own on the host (creates, then sets its owner and
    mode, fills): never one every service shares (SHARED_DIRS), nor a system tree (HOST_ROOT_PATHS, PROGRAM_TREES)
    or a directory inside one; with ``config``, a directory of its own inside /etc is fine (a role's
    configuration). Checked after host_path (an absolute, normalised path); the refusal gives the setting's
    default as the example."""
    trees = HOST_ROOT_PATHS + PROGRAM_TREES
    inside = tuple(t for t in trees if not (config and t == '/etc'))

    def check(v):
        if not isinstance(v, string_types) or not v.startswith('/'):
            return None  # host_path's to refuse
        path = posixpath.normpath(v)
        if path in SHARED_DIRS:
            why = 'is a directory every service of the host shares'
        elif path in trees:
            why = 'is a system directory of the host'
        elif _in_tree(path, inside):
            why = 'is inside %s, a system directory of the host' % _in_tree(path, inside)
        else:
            return None
        return ('%s, whose owner and mode the role would take over; use a directory of its own, such as %s: not %s, '
                'nor at or inside %s%s' % (why, role_spec.default(var), ', '.join(SHARED_DIRS),
                                           ', '.join(t for t in inside if not t.endswith('.sock')),
                                           ', nor /etc itself' if config else ''))
    return Rule(check, name='own_dir')


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
                    "the play's output; give it in %s" % (name, redaction.HIDDEN, _secret_home(name, 'VLLM_API_KEY')))
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


# Ranges shared by a role setting and the instance key of the same meaning.
# --------------------------------------------------------------------------- the host-input allow-list

SSH_PORT = 22
HOST_PORT_KEYS = ('name', 'port', 'sources')


def not_ssh(v, ansible_port):
    """A firewall_host_ports port that is not SSH's: 22, or the host's ansible_port."""
    if not _is_number(v):
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


DRAFT_LEN = rng(1, 64)
HEALTH_TIMEOUT = rng(1, 86400)
RESTART_SEC = rng(1, 3600)

# Per variable: the checks of the collection's policy, beyond the argument spec's type and choices.
# Every int and float option of every role has a range here, the keys inside a list or dict setting
# too (a unit test keeps it so). A value of 'url' names the opt-in variable that allows http:// for it.
# A dotted name is a key inside a setting's value (inference_server_instances.port: the port of each
# instance); NESTED_AS lets a setting of the same shape share them.
POLICY: dict[str, Any] = {
    # container_toolkit
    'container_toolkit_repo_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_repo_key_url': {'url': 'container_toolkit_allow_http'},
    'container_toolkit_keyring': [host_path],
    'container_toolkit_repo_key_fingerprints': [non_empty, each(fingerprint)],
    'container_toolkit_preferences_file': [host_path],
    'container_toolkit_version': [apt_version],
    'container_toolkit_packages': [non_empty, each(package)],
    'container_toolkit_daemon_json_fragment': [no_dotdot_name],
    'container_toolkit_runtime_name': [name],
    'container_toolkit_runtime_path': [no_climb],
    'container_toolkit_smoke_test_image': [image],
    'container_toolkit_runtime_test_image': [image],
    # docker_host
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
    # draft_sweep
    'draft_sweep_instance': [name],
    'draft_sweep_draft_lens': [non_empty, each(DRAFT_LEN)],
    'draft_sweep_concurrency': [non_empty, each(rng(1, 4096))],
    'draft_sweep_repetitions': [rng(1, 100)],
    'draft_sweep_requests_per_worker': [rng(1, 100000)],
    'draft_sweep_warmup_requests_per_worker': [rng(0, 10000)],
    'draft_sweep_max_tokens': [rng(1, 1048576)],
    'draft_sweep_temperature': [rng(0.0, 2.0)],
    'draft_sweep_request_timeout': [rng(1, 86400)],
    'draft_sweep_min_runs': [rng(1, 100)],
    'draft_sweep_max_rel_mad': [rng(0.0, 1.0)],
    'draft_sweep_mad_k': [rng(0.0, 100.0)],
    'draft_sweep_rel_tol': [rng(0.0, 1.0)],
    'draft_sweep_equivalence_min_prefix': [rng(1, 1048576)],
    'draft_sweep_equivalence_prompts': [rng(1, 8)],
    'draft_sweep_equivalence_max_tokens': [rng(1, 65536)],
    'draft_sweep_workloads': [_sweep_workloads.check],
    'draft_sweep_workload_rule': [_sweep_workloads.check_rule],
    'draft_sweep_report_dir': [local_path],
    'draft_sweep_run_id': [no_dotdot_name],
    'draft_sweep_state_dir': [host_path],
    'draft_sweep_fact_file': [host_path],
    # rollout
    'rollout_canary': [rng(1, 100000)],
    'rollout_batch': [_pattern(re.compile(r'^([1-9][0-9]{0,5}|([1-9][0-9]?|100)%)\Z'),
                               'a host count or a percentage from 1% to 100%')],
    'rollout_min_free_gb': [rng(0.0, 1000000.0)],
    'rollout_gpu_count': [rng(0, 1024)],
    'rollout_min_driver_version': [_pattern(re.compile(r'^[0-9]+(\.[0-9]+){0,3}\Z'), 'a driver version such as 580.65.06')],
    'rollout_run_id': [no_dotdot_name],
    'rollout_adopt_from': [host_port],
    'rollout_adopt_instances': [each(name)],
    # firewall
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
    # stack_link (an address's checks name the member and need the whole stack: plugin_utils/_stack.py)
    'stack_link_group': [group],
    'stack_link_interface': [iface, link_iface],
    'stack_link_head': [_pattern(re.compile(r'^[A-Za-z0-9_.:-]+\Z'), 'an inventory host name (a member of the stack)')],
    'stack_link_mtu': [rng(1280, 9216)],
    'stack_link_verify_wait': [rng(0, 600)],
    # stack_trust
    'stack_trust_dir': [host_path, own_dir('stack_trust_dir', config=True)],
    'stack_trust_ssh_port': [port],
    # fleet_view
    'fleet_view_health_timeout': [rng(1, 3600)],
    'fleet_view_log_lines': [rng(0, 10000)],
    'fleet_view_report_dir': [local_path],
    'fleet_view_report_name': [no_dotdot_name],
    'fleet_view_live_margin': [rng(0, 0.99)],
    'fleet_view_prometheus_url': [http_url],
    'fleet_view_prometheus_user': [name, ContextRule(needs_set('fleet_view_prometheus_password'),
                                                     'fleet_view_prometheus_password')],
    'fleet_view_prometheus_ca': [local_path],
    # gateway (its plan, plugin_utils/_gateway.py, checks its settings here too: check_role)
    # raw in the argument spec: a secret is checked as given, never converted
    'gateway_api_keys': [api_keys],
    'gateway_drain_instances': [each(name)],
    'gateway_port': [port],
    'gateway_bind_address': [non_empty, ip_or_empty],
    'gateway_stats_port': [port],
    'gateway_stats_address': [non_empty, bind_address],
    'gateway_timeout_connect_s': [rng(1, 3600)],
    'gateway_timeout_client_s': [rng(1, 86400)],
    'gateway_timeout_server_s': [rng(1, 86400)],
    'gateway_timeout_queue_s': [rng(1, 3600)],
    'gateway_timeout_http_request_s': [rng(1, 3600)],
    'gateway_check_interval_ms': [rng(100, 600000)],
    'gateway_check_fall': [rng(1, 100)],
    'gateway_check_rise': [rng(1, 100)],
    'gateway_request_buffer_kb': [rng(16, 4096)],
    'gateway_maxconn': [rng(1, 1000000)],
    'gateway_drain_timeout': [rng(0, 86400)],
    'gateway_up_timeout': [rng(1, 3600)],
    'gateway_config_dir': [host_path],
    'gateway_socket': [host_path],
    # monitoring (plugins/plugin_utils/_monitoring.py check() checks its settings here too, then relates them)
    'monitoring_server_group': [group],
    'monitoring_engine_group': [group],
    'monitoring_gateway_group': [group],
    'monitoring_gateway_metrics_path': [url_path],
    'monitoring_gateway_metrics_port': [port],
    'monitoring_exporter_port': [port],
    'monitoring_exporter_poll_interval': [rng(0.05, 60)],
    'monitoring_exporter_listen': [bind_address],
    'monitoring_prometheus_listen': [non_empty, bind_address],
    'monitoring_alertmanager_listen': [non_empty, bind_address],
    'monitoring_prometheus_retention': [duration],
    'monitoring_exporter_dir': [host_path],
    'monitoring_exporter_config_file': [host_path],
    'monitoring_exporter_fact_file': [host_path],
    'monitoring_dashboard_dir': [host_path],
    'monitoring_tools_dir': [host_path],
    'monitoring_web_users': [web_users],
    'monitoring_web_client_user': [name],
    'monitoring_web_tls_cert': [local_path, ContextRule(both_or_neither('monitoring_web_tls_key'), 'monitoring_web_tls_key')],
    'monitoring_web_tls_key': [local_path, ContextRule(both_or_neither('monitoring_web_tls_cert'), 'monitoring_web_tls_cert')],
    'monitoring_packages': [non_empty, each(package)],
    'monitoring_prometheus_port': [port],
    'monitoring_alertmanager_port': [port],
    'monitoring_acceptance_margin': [rng(0, 0.99)],
    'monitoring_acceptance_min_steps_per_s': [rng(0, 1000000000)],
    'monitoring_kv_cache_threshold': [rng(0.01, 1)],
    'monitoring_queue_threshold': [rng(0, 1000000000)],
    'monitoring_scrape_interval': [duration],
    'monitoring_evaluation_interval': [duration],
    'monitoring_acceptance_window': [duration],
    'monitoring_acceptance_for': [duration],
    'monitoring_engine_down_for': [duration],
    'monitoring_kv_cache_for': [duration],
    'monitoring_queue_for': [duration],
    'monitoring_alertmanager_webhooks': [each(http_url)],
    'monitoring_alertmanager_group_wait': [duration],
    'monitoring_alertmanager_group_interval': [duration],
    'monitoring_alertmanager_repeat_interval': [duration],
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
    # inference_server
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
    'inference_server_engine_check_memory': [_pattern(re.compile(r'^[1-9][0-9]*[bkmgBKMG]?\Z'),
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
    # model_cache
    'model_cache_root': [host_path],
    'model_cache_tiktoken_dir': [host_path],
    'model_cache_default_revision': [ref],
    'model_cache_models': [each(model_entry)],
    'model_cache_hub_endpoint': {'url': 'model_cache_allow_http'},
    'model_cache_mirror_endpoint': {'url': 'model_cache_allow_http'},
    'model_cache_peer_port': [port],
    'model_cache_lock_dir': [local_path],
    'model_cache_peer_tls_cert': [local_path, ContextRule(both_or_neither('model_cache_peer_tls_key'), 'model_cache_peer_tls_key')],
    'model_cache_peer_tls_key': [local_path, ContextRule(both_or_neither('model_cache_peer_tls_cert'), 'model_cache_peer_tls_cert')],
    'model_cache_peer_tls_ca': [local_path, ContextRule(needs_set('model_cache_peer_tls_cert'), 'model_cache_peer_tls_cert')],
    'model_cache_peer_address': [plain_ip_form],
    'model_cache_tiktoken_base_url': {'url': 'model_cache_allow_http'},
    'model_cache_tiktoken_encodings': [name_keys, sha256_values],
    'model_cache_venv': [host_path],
    'model_cache_pip_index_url': {'url': 'model_cache_allow_http'},
    'model_cache_reserve_gb': [rng(0.0, 1000000.0)],
    'model_cache_max_workers': [rng(1, 64)],
    'model_cache_download_timeout': [rng(1, 604800)],
    'model_cache_poll_interval': [rng(1, 3600)],
    'model_cache_wheelhouse': [per_architecture(local_path)],
    'model_cache_instances.model': [no_climb],
    'model_cache_instances.speculative.draft_model': [no_climb],
}


# Settings whose value has the shape of another's: the dotted POLICY keys of the other apply to it.
# the lists of instances other roles take (the same dicts as inference_server_instances: a sweep's instances, the
# instances the exporter reads), checked by the same rules
NESTED_AS = {'inference_server_run_instances': 'inference_server_instances',
             'draft_sweep_instances': 'inference_server_instances',
             'monitoring_exporter_instances': 'inference_server_instances'}


def nested_rules(var):
    """[(key path, rules)] of the dotted POLICY entries of a setting's value (or those of NESTED_AS's)."""
    prefix = NESTED_AS.get(var, var) + '.'
    return [(tuple(k[len(prefix):].split('.')), r) for k, r in sorted(POLICY.items()) if k.startswith(prefix)]


def _at(value, path, label):
    """[(label, value)] of the values at a key path; a list on the way is each of its items."""
    if not path:
        return [(label, value)]
    if isinstance(value, list):
        found = []
        for index, item in enumerate(value):
            found.extend(_at(item, path, '%s[%d]' % (label, index)))
        return found
    if isinstance(value, dict) and value.get(path[0]) is not None:
        return _at(value[path[0]], path[1:], '%s.%s' % (label, path[0]))
    return []


def _secret_at(option, path):
    """Whether a key path inside a setting is a no_log suboption of its spec."""
    for key in path:
        option = ((option or {}).get('options') or {}).get(key)
        if option is None:
            return False
        if option.get('no_log'):
            return True
    return False


def _choice_rules(option):
    """[(key path, [rule])] of the suboptions of a spec with choices (an instance's state, engine, sampler)."""
    found = []
    for key, sub in sorted(((option or {}).get('options') or {}).items()):
        allowed = tuple((sub or {}).get('choices') or ())
        if allowed:
            found.append(((key,), [lambda x, allowed=allowed: None if x in allowed else 'is not one of %s'
                                   % ', '.join(map(str, allowed))]))
    return found


def _nested_policy(var, value, label, option=None, values=None):
    """The refusals of the keys inside a setting's value (dotted POLICY entries, and the choices of its
    suboptions, which the host-side module or filter would refuse later), each naming its place."""
    errors, values = [], values or {}
    for path, rules in _choice_rules(option) + nested_rules(var):
        secret = bool((option or {}).get('no_log')) or _secret_at(option, path)
        for where, item in _at(value, path, label):
            for rule in rules:
                msg = _apply(rule, item, values)
                if msg:
                    errors.append(refusal(where, masked(item), msg, secret or getattr(rule, 'hides', False)))
                    break
    return errors


def url(allow_flag, allowed):
    """An http(s) URL; http:// only with the role's opt-in variable set."""
    def check(v):
        if v in (None, ''):
            return None
        if not isinstance(v, string_types) or not re.match(r'^(https?://[^\s/?#]+|file:///)', v):
            return 'must be an https:// (or file:///) URL'
        if v.startswith('http://') and not allowed:
            return 'is http://, which is refused (set %s: true to allow it, e.g. for a lab mirror)' % allow_flag
        return None
    return check


# --------------------------------------------------------------------------- types

def _convert(value, option):
    """The value converted as Ansible's argument spec converts it (raises TypeError/ValueError)."""
    kind = option.get('type', 'str')
    if value is None:
        return None
    if kind == 'bool':
        if isinstance(value, bool):
            return value
        if isinstance(value, string_types) or isinstance(value, (int, float)):
            try:
                return check_type_bool(value)
            except TypeError:
                pass
        raise TypeError('must be a boolean: %s' % BOOL_WORDS)
    if kind == 'int':
        if isinstance(value, bool):
            raise TypeError('must be an integer')
        try:
            return check_type_int(value)
        except TypeError:
            raise TypeError('must be an integer')
    if kind == 'float':
        if isinstance(value, bool):
            raise TypeError('must be a number')
        try:
            return check_type_float(value)
        except TypeError:
            raise TypeError('must be a number')
    if kind in ('str', 'path'):
        if isinstance(value, (list, dict, bool)):
            raise TypeError('must be a string')
        return check_type_str(value, allow_conversion=True)
    if kind == 'list':
        if isinstance(value, dict):
            raise TypeError('must be a list')
        items = check_type_list(value)
        elements = option.get('elements')
        if elements:
            out = []
            for item in items:
                try:
                    out.append(_convert(item, {'type': elements}))
                except (TypeError, ValueError) as exc:
                    raise TypeError('item %s %s' % (show(masked(item)), exc))
            return out
        return items
    if kind == 'dict':
        try:
            return check_type_dict(value)
        except TypeError:
            raise TypeError('must be a mapping')
    return value  # raw


def control_characters(value, path=''):
    """The first place in a nested value where a string has a control character, or None."""
    if isinstance(value, string_types):
        return path or '(value)' if _CONTROL.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = control_characters(key, '%s key %r' % (path, key)) or control_characters(item, '%s[%r]' % (path, key))
            if found:
                return found.strip()
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = control_characters(item, '%s[%d]' % (path, index))
            if found:
                return found
    return None


def check_settings(options, values):
    """Check every option of a role's argument spec against the values given.

    ``options`` is the ``options`` mapping of an argument-spec entry point; ``values`` the variables
    (templated) by name; an option without a value is skipped (the argument spec's own check says
    whether it is required). Returns the typed values of every non-secret option; raises
    SettingsError listing every refusal.
    """
    errors, typed = [], {}
    for var in sorted(options):
        if var not in values:
            continue
        option = options[var] or {}
        error, value = _check_one(var, option, values[var], values)
        if error:
            errors.extend(error if isinstance(error, list) else [error])
        elif not option.get('no_log'):
            typed[var] = without_secrets(value, option)
    if errors:
        raise SettingsError(errors)
    return typed


def _check_one(var, option, raw, values, label=None):
    """(refusal, None) or (None, the typed value) of one setting; ``label`` names it in the refusal (a list
    of refusals when keys inside the value are refused)."""
    label = label or var
    secret = bool(option.get('no_log'))
    try:
        value = _convert(raw, option)
    except (TypeError, ValueError) as exc:
        return refusal(label, masked(raw), str(exc), secret), None
    if secret and value is not None and type(value) is not type(raw):
        return ('%s: (value hidden) must already be a %s (a secret is not converted)'
                % (label, option.get('type', 'str'))), None
    choices = option.get('choices')
    if choices and value is not None:
        bad = [v for v in (value if isinstance(value, list) else [value]) if v not in choices]
        if bad:
            return refusal(label, bad[0], 'is not one of %s' % ', '.join(map(str, choices)), secret), None
    where = None if var in MULTILINE_OK else control_characters(value)
    if where:
        return refusal(label, masked(raw), 'has a control character (newline, NUL, ...)%s; it would reach a file on the host '
                       'as more than one line' % ('' if where == '(value)' else ' in ' + where), secret), None
    msg = _policy(var, value, values)
    if isinstance(msg, list):  # refusals of places inside the value ('[1].port: ...'), each after the variable's name
        return [label + m for m in msg] + _nested_policy(var, value, label, option, values), None
    if msg:
        return ('%s: %s' % (label, msg) if isinstance(value, (list, dict)) else refusal(label, masked(raw), msg, secret)), None
    nested = _nested_policy(var, value, label, option, values)
    if nested:
        return nested, None
    if var in CONTROLLER_PATHS and value:
        value = controller_path(value, absolute=True)
    return None, value


def check_role(role, values, prefixed=False):
    """A role's settings checked as the settings action checks them: typed (converted), against the
    spec's choices and POLICY; for the modules that take settings by their short name (``port`` for
    ``gateway_port``). ``values`` holds short names (full ones with ``prefixed``); a name that is not a
    setting of the role is left out. Returns the typed values under the names given; raises SettingsError.
    """
    options = role_spec.load_options(role)
    full = dict((name if prefixed else '%s_%s' % (role, name), name) for name in values)
    given = dict((f, values[n]) for f, n in full.items() if f in options)
    typed = check_settings(dict((f, options[f]) for f in given), given)
    return dict((full[f], v) for f, v in typed.items())


def check_value(var, value, label=None):
    """One setting's value typed and checked (spec type and choices, POLICY); ``label`` names it in the
    refusal when the caller knows it by another name (a filter's argument). Raises SettingsError."""
    error, typed = _check_one(var, role_spec.option(var), value, {var: value}, label)
    if error:
        raise SettingsError(error if isinstance(error, list) else [error])
    return typed


def without_secrets(value, option):
    """The value less the keys of its no_log suboptions (an instance's api_key), never returned."""
    secret_keys = [k for k, sub in (option.get('options') or {}).items() if (sub or {}).get('no_log')]
    if not secret_keys:
        return value

    def strip(item):
        return dict((k, v) for k, v in item.items() if k not in secret_keys) if isinstance(item, dict) else item
    return [strip(v) for v in value] if isinstance(value, list) else strip(value)


def _policy(var, value, values):
    rules = POLICY.get(var)
    if not rules:
        return None
    if isinstance(rules, dict):
        check = url(rules['url'], as_bool(values.get(rules['url'], False), False))
        rules = [each(check)] if isinstance(value, list) else [check]
    for rule in rules:
        msg = _apply(rule, value, values)
        if msg:
            return msg
    return None


def as_bool(value, default=None):
    """A boolean as Ansible's argument spec reads one ('yes', 'false', 1, ...), else ``default``."""
    try:
        return check_type_bool(value)
    except TypeError:
        return default


def typed_settings(prefix, typed):
    """The typed values keyed without the role prefix: firewall_ipv6 -> ipv6."""
    return dict((k[len(prefix) + 1:] if k.startswith(prefix + '_') else k, v) for k, v in typed.items())
