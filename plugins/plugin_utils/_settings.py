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
the spec cannot say is :data:`POLICY`, the one table of the collection's bounds and patterns, gathered from each role's own policy
(plugin_utils/_roles/<role>.py) over the value checks of plugin_utils/_checks.py: other modules
that take a setting call :func:`check_role` or :func:`check_value` instead of checking a range again.
Secrets (``no_log`` options) are checked but never returned: tasks keep reading the
variable itself, which must already be of its type (no conversion, so no second copy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any


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
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import (
    container_toolkit,
    docker_host,
    draft_sweep,
    firewall,
    fleet_view,
    gateway,
    heal,
    inference_server,
    model_cache,
    monitoring,
    monitoring_exporter,
    monitoring_tune_loop,
    retune,
    rollout,
    stack_link,
    stack_trust,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import (
    as_bool,
    BOOL_WORDS,
    control_characters,
    controller_path,
    each,
    local_path,
    url,
)
from ansible_collections.specdec.serve.plugins.plugin_utils._redaction import masked, without_secrets
from ansible_collections.specdec.serve.plugins.plugin_utils._vocabulary import (
    refusal,
    show,
)


class SettingsError(ValueError):
    """One or more settings a role refuses; the message lists each with its variable."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(SettingsError, self).__init__('\n'.join(self.errors))


# Options whose strings may span lines: data that only reaches a JSON report on the controller (a
# rollout's per-host outcome carries the engine's error text), and the gateway's certificate and key
# (PEM is lines by design; the role writes them whole to their own file, never into a line of another).
MULTILINE_OK = ('fleet_view_status', 'gateway_tls_certificate', 'gateway_tls_key')


# The policy of every role (plugin_utils/_roles/<role>.py, each beside its role's planner): per setting, the checks
# beyond the argument spec's type and choices. Every int and float option of every role has a range there, the keys
# inside a list or dict setting too (a unit test keeps it so). A value of 'url' names the opt-in variable that allows
# http:// for it. A dotted name is a key inside a setting's value (inference_server_instances.port: the port of each
# instance); NESTED_AS lets a setting of the same shape share them.
ROLE_POLICIES = (container_toolkit, docker_host, draft_sweep, firewall, fleet_view, gateway, heal, inference_server,
                 model_cache, monitoring, monitoring_exporter, monitoring_tune_loop, retune, rollout, stack_link,
                 stack_trust)
POLICY: dict[str, Any] = dict((var, rules) for module in ROLE_POLICIES
                              for var, rules in module.POLICY.items())

# Controller paths (the settings a policy checks with local_path): a relative one is resolved against the directory
# ansible-playbook runs in (never the playbook's or the collection's), once, here.
CONTROLLER_PATHS = tuple(sorted(var for var, rules in POLICY.items() if isinstance(rules, list) and local_path in rules))


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
    full = dict((name if prefixed else role_spec.full_name(role, name), name) for name in values)
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


def typed_settings(role, typed):
    """The typed values keyed without the role prefix: firewall_ipv6 -> ipv6 (the role's switch, a setting named as
    the role, is ``enabled``: plugin_utils/_role_spec.py short_name)."""
    return dict((role_spec.short_name(role, k), v) for k, v in typed.items())
