# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The value checks of the collection's settings policy: each takes a typed value and returns None, or a text
saying what is allowed (a :class:`Rule` also carries its range). The roles' policies (plugin_utils/_roles/)
compose them per setting; the settings engine (plugin_utils/_settings.py) applies them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os
import posixpath
import re

from ansible.module_utils.common.validation import check_type_bool
from ansible.module_utils.six import string_types
from ansible_collections.specdec.serve.plugins.module_utils import platforms

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    DURATION_WORDS,
    GROUP_RE,
    NAME_RE,
    NAME_WORDS,
    PORT_MAX,
    PORT_MIN,
    seconds,
    show,
)


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


class PlanRefusal(ValueError):
    """What a role's planner (plugin_utils/_roles/<role>.py, PLANNERS) refuses once the settings are checked one by
    one; ``errors`` lists each, naming its variable."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(PlanRefusal, self).__init__('; '.join(self.errors))


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


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class ContextRule(Rule):
    """A rule that also reads another setting (``needs``; its value as given, else its default): called
    as ``rule(value, other)``."""

    def __init__(self, check, needs, name=None):
        super(ContextRule, self).__init__(check, None, name)
        self.needs = needs

    def __call__(self, value, other=None):
        return self.check(value, other)


def rng(low, high):
    def check(v):
        if v is None:
            return None
        if not is_number(v):  # a key inside a list or dict setting, which the spec does not convert
            return 'must be a number from %s to %s' % (low, high)
        return None if low <= v <= high else 'must be from %s to %s' % (low, high)
    return Rule(check, (low, high))


def _port(v):
    if v is None:
        return None
    return None if is_number(v) and PORT_MIN <= v <= PORT_MAX else 'must be a port number from %d to %d' % (PORT_MIN, PORT_MAX)


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


def pattern(regex, what):
    def check(v):
        if v in (None, ''):
            return None
        return None if isinstance(v, string_types) and regex.match(v) else 'must be %s' % what
    return check


name = pattern(NAME_RE, NAME_WORDS)
group = pattern(GROUP_RE, 'an inventory group name (letters, digits and _ . -)')
url_path = pattern(re.compile(r'^/[A-Za-z0-9_./-]*\Z'), 'a URL path starting with /')
http_url = pattern(re.compile(r'^https?://[^\s]+\Z'), 'an http(s) URL')
package = pattern(PACKAGE_RE, 'a Debian package name')
apt_version = pattern(APT_VERSION_RE, 'a Debian package version such as 1.17.8-1 (a digit, then letters, digits and . + ~ : -)')
user = pattern(USER_RE, 'a user name')
iface = pattern(IFACE_RE, 'an interface name (at most 15 characters)')
image = pattern(IMAGE_RE, 'an image reference (e.g. nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6)')
host_port = pattern(HOST_PORT_RE, 'a host name or host:port')
ref = pattern(REF_RE, 'a git revision, branch or tag')
fingerprint = pattern(FINGERPRINT_RE, 'an OpenPGP fingerprint of 40 upper-case hex digits')


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


def sha256_values(v):
    bad = [k for k, h in (v or {}).items() if not isinstance(h, string_types) or not SHA256_RE.match(h)]
    return ('has entries whose value is not a lowercase sha256: %s' % ', '.join(bad)) if bad else None


def name_keys(v):
    bad = [k for k in (v or {}) if no_dotdot_name(k)]
    return ('has keys that are not file names: %s' % ', '.join(show(k) for k in bad)) if bad else None


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


# Ranges shared by a role setting and the instance key of the same meaning.
DRAFT_LEN = rng(1, 64)
HEALTH_TIMEOUT = rng(1, 86400)
RESTART_SEC = rng(1, 3600)


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


def as_bool(value, default=None):
    """A boolean as Ansible's argument spec reads one ('yes', 'false', 1, ...), else ``default``."""
    try:
        return check_type_bool(value)
    except TypeError:
        return default


_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


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
