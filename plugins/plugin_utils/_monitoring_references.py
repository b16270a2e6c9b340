# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which engine metrics and labels the monitoring's queries read, and which of them an engine serves.

:func:`query_expressions`, :func:`metric_references`, :func:`exposition_labels` and :func:`unserved`
say which engine metrics and labels the rules (plugin_utils/_monitoring_rules.py) and the dashboard
read, and which of them an engine's ``/metrics`` lacks (molecule real_engine checks vLLM's).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

import re

from ansible_collections.specdec.serve.plugins.module_utils.bench_spec import parse_prometheus


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r'\{([^{}]*)\}')
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_CLAUSE = re.compile(r'\b(by|on|group_left|group_right)\s*\(([^()]*)\)')
_LABEL_VALUES = re.compile(r'\blabel_values\s*\(')


def query_expressions(rules_doc=None, dashboard=None):
    """[(where, PromQL)] of every query in a rules file (a mapping, as :func:`rules` returns) and a
    Grafana dashboard (its JSON as a mapping): each recording rule and alert, each panel target's
    ``expr`` and each templating variable's query."""
    out = []
    for group in (rules_doc or {}).get('groups') or []:
        for rule in group.get('rules') or []:
            out.append(('rule %s' % (rule.get('record') or rule.get('alert')), rule['expr']))
    for panel in (dashboard or {}).get('panels') or []:
        for target in panel.get('targets') or []:
            if target.get('expr'):
                out.append(('panel %s' % panel.get('title'), target['expr']))
    for var in ((dashboard or {}).get('templating') or {}).get('list') or []:
        query = var.get('query')
        query = query.get('query') if isinstance(query, dict) else query
        if query:
            out.append(('variable %s' % var.get('name'), query))
    return out


def _closing(text, start):
    """Index of the parenthesis that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == '(':
            depth += 1
        elif text[i] == ')':
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _opening(text, end):
    """Index of the parenthesis that opens the one closing at ``end``."""
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == ')':
            depth += 1
        elif text[i] == '(':
            depth -= 1
            if depth == 0:
                return i
    return 0


def _labels(text):
    return [w.strip() for w in text.split(',') if w.strip()]


def metric_references(expressions, prefix):
    """The metric names starting with ``prefix`` that PromQL ``expressions`` read, and the label names
    each reading needs, as ``{"names": {name: [labels]}, "patterns": {regex: [labels]}}``.

    ``expressions`` is a list of strings or of (where, expr). A selector's name is taken as written
    (a counter read as ``<name>_total`` is that sample name); ``{__name__=~"..."}`` selectors whose
    regex starts with ``prefix`` are ``patterns``. A reading needs the labels its own matchers name,
    those of every ``by (...)`` aggregation around it, those of the ``on (...)``, ``group_left (...)``
    and ``group_right (...)`` clauses of its expression (both sides of a match need them), and the
    label a ``label_values(selector, label)`` asks for. ``without`` and ``ignoring`` need nothing.
    """
    names: dict[str, Any] = {}
    patterns: dict[str, Any] = {}
    for item in expressions:
        expr = item[1] if isinstance(item, (list, tuple)) else item
        # the same length with every string blanked, so positions agree and no name is read from one
        bare = _STRING.sub(lambda m: '"' + ' ' * (len(m.group(0)) - 2) + '"', expr)
        spans = []  # (start, end, labels) of by-aggregations
        for m in _CLAUSE.finditer(bare):
            if m.group(1) != 'by':
                continue
            rest = bare[m.end():].lstrip()
            if rest.startswith('('):
                start = m.end() + (len(bare) - m.end() - len(rest))
                spans.append((start, _closing(bare, start), _labels(m.group(2))))
            else:
                before = bare[:m.start()].rstrip()
                if before.endswith(')'):
                    end = len(before) - 1
                    spans.append((_opening(bare, end), end, _labels(m.group(2))))
        common = [label for m in _CLAUSE.finditer(bare) if m.group(1) != 'by' for label in _labels(m.group(2))]
        for m in _LABEL_VALUES.finditer(bare):
            start = m.end() - 1
            inner = bare[start + 1:_closing(bare, start)]
            if ',' in inner:
                common.append(inner.rsplit(',', 1)[1].strip())

        def need(pos, matchers, common, spans):
            out = set(common) | set(matchers)
            for start, end, labels in spans:
                if start <= pos <= end:
                    out.update(labels)
            return out

        for m in _MATCHERS.finditer(expr):
            found = _MATCHER.findall(m.group(1))
            regex = [v for k, op, v in found if k == '__name__' and op == '=~' and v.startswith(prefix)]
            if regex:
                others = [k for k, op, v in found if k != '__name__']
                patterns.setdefault(regex[0], set()).update(need(m.start(), others, common, spans))
        name_re = re.compile(r'(?<![A-Za-z0-9_:])(%s[A-Za-z_][A-Za-z0-9_:]*)' % re.escape(prefix))
        for m in name_re.finditer(bare):
            matchers = []
            after = bare[m.end():]
            if after.startswith('{'):
                matchers = [k for k, op, v in _MATCHER.findall(expr[m.end():m.end() + after.index('}') + 1])]
            names.setdefault(m.group(1), set()).update(need(m.start(), matchers, common, spans))
    return {'names': dict((k, sorted(v)) for k, v in sorted(names.items())),
            'patterns': dict((k, sorted(v)) for k, v in sorted(patterns.items()))}


def exposition_labels(text):
    """{sample name: [label names]} of a Prometheus text exposition (``/metrics``), over all its
    samples; comments are skipped."""
    out: dict[str, Any] = {}
    for name, labels, dummy in parse_prometheus(text):
        out.setdefault(name, set()).update(labels)
    return dict((k, sorted(v)) for k, v in sorted(out.items()))


def unserved(references, served, provided=()):
    """What ``references`` (:func:`metric_references`) read that ``served`` (:func:`exposition_labels`)
    lacks, one sentence each; labels in ``provided`` (those the scrape adds: the target's labels,
    ``job``, ``instance``) are not asked of the engine."""
    problems = []
    for name, labels in sorted(references.get('names', {}).items()):
        if name not in served:
            problems.append('%s is not served' % name)
            continue
        missing = sorted(set(labels) - set(provided) - set(served[name]))
        if missing:
            problems.append('%s is served without label(s) %s' % (name, ', '.join(missing)))
    for regex, labels in sorted(references.get('patterns', {}).items()):
        matched = [n for n in served if re.match('(?:%s)\\Z' % regex, n)]
        if not matched:
            problems.append('no served name matches %s' % regex)
            continue
        wanted = set(labels) - set(provided)
        if not any(wanted <= set(served[n]) for n in matched):
            problems.append('no name matching %s is served with label(s) %s' % (regex, ', '.join(sorted(wanted))))
    return problems
