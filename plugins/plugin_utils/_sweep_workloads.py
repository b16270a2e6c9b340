# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workloads of a draft-length sweep: checked, typed and filled in on the controller.

A workload is a named set of serve_bench settings (``draft_sweep_workloads``); the sweep measures
every candidate on every workload and picks per workload, or one length for all by a rule
(:func:`bench_select.select_workloads`). Without workloads the sweep has one, ``default``, made of
the flat ``draft_sweep_*`` settings, so a sweep without workloads measures what it always did.

:func:`normalize` is the one owner of a workload's keys, types and ranges: the settings check calls
it through :func:`check` (so bad input fails before a host is touched, naming the variable, the
entry, the key, the value and what is allowed), and the ``sweep_workloads`` filter through
:func:`resolve`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from typing import Any

from ansible.module_utils.common.validation import (
    check_type_bool, check_type_float, check_type_int)
from ansible.module_utils.six import string_types

from ansible_collections.specdec.serve.plugins.plugin_utils import _vocabulary as vocabulary
from ansible_collections.specdec.serve.plugins.module_utils.bench_workload import (
    PROMPT_SETS, WorkloadError, check_length_spec)

VAR = "draft_sweep_workloads"
RULE_RE = re.compile(r'^(worst_case|mean|workload:%s)\Z' % vocabulary.NAME_PATTERN)
RULES_TEXT = "worst_case, mean or workload:NAME (NAME one of the workloads)"

# key: (kind, default, bounds or choices); kind is one of str, int, float, bool, list, length
KEYS: dict[str, tuple[str, Any, Any]] = {
    "name": ("str", None, None),
    "prompt_set": ("choice", None, sorted(PROMPT_SETS)),
    "prompts": ("list", None, None),
    "dataset": ("str", None, None),
    "dataset_format": ("choice", "auto", ["auto", "jsonl", "sharegpt"]),
    "dataset_num": ("int", None, (1, 1000000)),
    "input_len": ("length", None, None),
    "output_len": ("length", None, None),
    "max_tokens": ("int", None, (1, 1048576)),
    "temperature": ("float", None, (0.0, 2.0)),
    "top_p": ("float", None, (0.0, 1.0)),
    "ignore_eos": ("bool", None, None),
    "request_rate": ("float", None, (0.0, 100000.0)),
    "arrival": ("choice", "poisson", ["poisson", "constant"]),
    "seed": ("int", 0, (0, 2 ** 31 - 1)),
    "prefix_cache": ("bool", False, None),
}
# filled in from the flat draft_sweep_* settings when a workload does not set them
INHERITED = ("prompt_set", "max_tokens", "temperature", "ignore_eos")


class WorkloadsError(ValueError):
    """Workloads the sweep refuses; ``errors`` lists each."""

    def __init__(self, errors):
        self.errors = list(errors)
        super(WorkloadsError, self).__init__("; ".join(self.errors))


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _typed(key, value):
    """The value of one key, typed, or raise ValueError with what is allowed."""
    kind, dummy, allowed = KEYS[key]
    if kind in ("str", "choice"):
        if not isinstance(value, string_types):
            raise ValueError("must be a string")
        if kind == "choice" and value not in allowed:
            raise ValueError("must be one of %s" % ", ".join(allowed))
        return value
    if kind == "bool":
        try:
            return check_type_bool(value)
        except TypeError:
            raise ValueError("must be a boolean")
    if kind in ("int", "float"):
        if isinstance(value, bool):
            raise ValueError("must be a number")
        try:
            typed = check_type_int(value) if kind == "int" else check_type_float(value)
        except TypeError:
            raise ValueError("must be a%s" % (("n integer" if kind == "int" else " number")))
        low, high = allowed
        excl_low = key in ("top_p", "request_rate")
        if typed > high or typed < low or (excl_low and typed <= low):
            raise ValueError("must be %s %s to %s" % ("above" if excl_low else "from", low, high))
        return typed
    if kind == "list":
        if not isinstance(value, list) or not value or \
                not all(isinstance(v, string_types) and v for v in value):
            raise ValueError("must be a non-empty list of non-empty strings")
        return list(value)
    if kind == "length":
        try:
            return check_length_spec(value, key)
        except WorkloadError as exc:
            raise ValueError(str(exc))
    raise ValueError("unknown kind")  # not reached


def normalize(workloads, defaults=None):
    """(typed workloads with every key, [errors]); ``defaults`` fills the INHERITED keys."""
    defaults = defaults or {}
    errors, out, names = [], [], []
    if not isinstance(workloads, list):
        return [], ["%s: %s must be a list of workloads" % (VAR, _show(workloads))]
    for i, entry in enumerate(workloads):
        where = "%s[%d]" % (VAR, i)
        if not isinstance(entry, dict):
            errors.append("%s: %s must be a mapping with at least a name" % (where, _show(entry)))
            continue
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            errors.append("%s: unknown key(s) %s; allowed: %s" % (where, ", ".join(map(str, unknown)),
                                                                  ", ".join(sorted(KEYS))))
            continue
        name = entry.get("name")
        if not vocabulary.is_name(name):
            errors.append("%s.name: %s must be %s" % (where, _show(name), vocabulary.NAME_WORDS))
            continue
        where = "%s[%d] (%s)" % (VAR, i, name)
        if name in names:
            errors.append("%s.name: %s is used by another workload" % (where, _show(name)))
            continue
        names.append(name)
        w = {}
        bad = False
        for key in KEYS:
            value = entry.get(key)
            if value is None:
                w[key] = defaults.get(key) if key in INHERITED else KEYS[key][1]
                continue
            try:
                w[key] = _typed(key, value)
            except ValueError as exc:
                errors.append("%s.%s: %s %s" % (where, key, _show(value), exc))
                bad = True
        sources = [k for k in ("prompts", "dataset", "input_len") if entry.get(k) is not None]
        if len(sources) > 1:
            errors.append("%s: %s are exclusive: the prompts come from one of them"
                          % (where, " and ".join(sources)))
            bad = True
        if entry.get("dataset_num") is not None and entry.get("dataset") is None:
            errors.append("%s.dataset_num: is only for a dataset" % where)
            bad = True
        if not bad:
            out.append(w)
    return out, errors


def check(workloads):
    """The settings check's policy: None, or the refusals in one text."""
    dummy, errors = normalize(workloads)
    return "; ".join(e[len(VAR):] if e.startswith(VAR) else e for e in errors) or None


def check_rule(rule):
    if rule in (None, ""):
        return None
    if not isinstance(rule, string_types) or not RULE_RE.match(rule):
        return "must be %s" % RULES_TEXT
    return None


LENGTHS_VAR = "draft_sweep_input_lengths"


def length_name(name, length):
    """The name of workload ``name`` measured at ``length`` input tokens."""
    return "%s-in%d" % (name, length)


def expand_lengths(workloads, lengths):
    """(workloads, axis, kept): each workload whose prompts are synthetic (no ``prompts``, ``dataset`` or
    ``input_len`` of its own) measured once per input length, as ``NAME-inLENGTH`` with a fixed ``input_len``;
    ``axis`` maps each of those names to ``{"workload": NAME, "input_len": LENGTH}``; ``kept`` names the
    workloads measured as they are (their prompts are their own)."""
    if not lengths:
        return list(workloads), {}, []
    out, axis, kept = [], {}, []
    for w in workloads:
        if any(w.get(k) is not None for k in ("prompts", "dataset", "input_len")):
            out.append(w)
            kept.append(w["name"])
            continue
        for length in sorted(set(lengths)):
            name = length_name(w["name"], length)
            out.append(dict(w, name=name, input_len=check_length_spec({"mean": length}, "input_len")))
            axis[name] = {"workload": w["name"], "input_len": length}
    return out, axis, kept


def resolve(workloads, defaults, rule="worst_case", lengths=None):
    """{"workloads": [typed workload], "rule": rule, "axis": {name: {workload, input_len}}, "kept": [name]};
    no workloads: one named ``default`` made of ``defaults``; with ``lengths`` (draft_sweep_input_lengths),
    each workload of synthetic prompts once per length (:func:`expand_lengths`). Raises WorkloadsError."""
    if not workloads:
        workloads = [{"name": "default"}]
    out, errors = normalize(workloads, defaults)
    out, axis, kept = expand_lengths(out, lengths or [])
    if lengths and not axis and not errors:
        errors.append("%s: %s measures no workload at several lengths: every workload has prompts of its own "
                      "(prompts, dataset or input_len); give one without them" % (LENGTHS_VAR, _show(lengths)))
    names = [w["name"] for w in out]
    clash = sorted(set(n for n in names if names.count(n) > 1))
    if clash:
        errors.append("%s: %s: the workload names %s clash with a workload measured at an input length; "
                      "rename it" % (LENGTHS_VAR, _show(lengths), ", ".join(clash)))
    msg = check_rule(rule)
    if msg:
        errors.append("draft_sweep_workload_rule: %s %s" % (_show(rule), msg))
    elif rule.startswith("workload:") and rule[len("workload:"):] not in names:
        base = rule[len("workload:"):]
        measured = [n for n, a in axis.items() if a["workload"] == base]
        errors.append("draft_sweep_workload_rule: %s names no workload; the workloads are %s%s"
                      % (_show(rule), ", ".join(names),
                         " (%s is measured as %s)" % (base, ", ".join(measured)) if measured else ""))
    if errors:
        raise WorkloadsError(errors)
    return {"workloads": out, "rule": rule, "axis": axis, "kept": kept}
