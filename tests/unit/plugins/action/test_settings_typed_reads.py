# -*- coding: utf-8 -*-
"""Tasks, templates and vars of every role read a role setting only through its typed value
(_<role>_settings, from specdec.serve.settings), never the raw variable: a string is then never
tested for truth ('-e x=false'), nor a list iterated as a string.

The exceptions read a secret-bearing input as given (the typed settings hold no secret)."""

from __future__ import annotations

import glob
import os

import jinja2
import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils._role_spec import load_options

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..')
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml')))
# Raw reads that carry a secret the typed settings leave out (an instance's api_key).
RAW_ALLOWED = {'inference_server_instances', 'inference_server_run_instances', 'draft_sweep_instances'}
BARE_KEYS = ('when', 'changed_when', 'failed_when', 'until', 'that')
ENV = jinja2.Environment()


def names_in(source):
    """Every variable name the Jinja in a text reads."""
    found = set()
    try:
        for _, kind, value in ENV.lex(source):
            if kind == 'name':
                found.add(value)
    except jinja2.TemplateSyntaxError:
        pytest.fail('not valid Jinja: %r' % source[:200])
    return found


def bare_expressions(node):
    """The values of when/that/... (expressions without braces) anywhere in a YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in BARE_KEYS:
                for expr in value if isinstance(value, list) else [value]:
                    if isinstance(expr, str):
                        yield expr
            else:
                for found in bare_expressions(value):
                    yield found
    elif isinstance(node, list):
        for item in node:
            for found in bare_expressions(item):
                yield found


def reads(path):
    with open(path) as handle:
        text = handle.read()
    found = names_in(text)
    if path.endswith('.yml'):
        for expr in bare_expressions(yaml.safe_load(text)):
            found |= names_in('{{ %s }}' % expr)
    return found


@pytest.mark.parametrize('role', ROLES)
def test_a_role_reads_its_settings_only_typed(role):
    settings = set(k for k, v in load_options(role).items() if not (v or {}).get('no_log')) - RAW_ALLOWED
    files = [f for d in ('tasks', 'templates', 'handlers', 'vars')
             for f in glob.glob(os.path.join(ROOT, 'roles', role, d, '**', '*'), recursive=True) if os.path.isfile(f)]
    assert files
    raw = dict((os.path.relpath(f, ROOT), sorted(reads(f) & settings)) for f in files)
    assert dict((f, n) for f, n in raw.items() if n) == {}
