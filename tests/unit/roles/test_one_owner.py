# -*- coding: utf-8 -*-
"""One owner for every setting.

* A role setting's name, type, default and choices are written once, in the role's
  meta/argument_specs.yml (a default that is a template the spec cannot hold, in meta/default_templates.yml
  beside it, for a setting whose spec gives none): defaults/main.yml is generated from them
  (scripts/role_defaults.py), an option shared by several entry points is one YAML node (an alias), Python
  reads defaults through plugin_utils/_role_spec.py and never holds a copy, and a fallback in a task, vars
  file, template or playbook asks the spec (filter specdec.serve.setting_default) instead of spelling the
  value again.
* Bounds and patterns the spec cannot say are written once, in the role's policy (plugin_utils/_roles/<role>.py's
  POLICY, which the settings engine gathers): no other module compares a setting against one of its bounds.
* The shared vocabularies (the plain-name pattern, the container paths) are written once, in
  plugin_utils/_vocabulary.py.
* An engine instance's keys take their defaults from the instance planner, never from a fallback in YAML (roles'
  files and extensions included); a host path or a port that two settings name is written once, the follower's
  default reading the owner's.

Each check below reads the source as text or as a syntax tree; none imports the code it judges except
the gathered POLICY (plugin_utils/_settings.py), for the bounds.
"""

from __future__ import annotations

import ast
import glob
import importlib.util
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, 'roles', '*', 'meta', 'argument_specs.yml')))
POLICY_OWNERS = tuple(sorted(os.path.relpath(p, ROOT) for p in glob.glob(
    os.path.join(ROOT, 'plugins', 'plugin_utils', '_roles', '*.py'))))
VOCABULARY = 'plugins/plugin_utils/_vocabulary.py'



def _load(path):
    with open(os.path.join(ROOT, path)) as handle:
        return handle.read()


def _specs(role):
    return yaml.safe_load(_load('roles/%s/meta/argument_specs.yml' % role))['argument_specs']


def _options(role):
    out = {}
    for entry in _specs(role).values():
        for name, option in (entry.get('options') or {}).items():
            out.setdefault(name, option or {})
    return out


OPTIONS = dict((role, _options(role)) for role in ROLES)
ALL = dict((name, (role, option)) for role, opts in OPTIONS.items() for name, option in opts.items())
# An option by its name without the role prefix too (gateway_port -> port), as Python modules key them.
SHORT = {}
for _role, _opts in OPTIONS.items():
    for _name in _opts:
        SHORT.setdefault(_name[len(_role) + 1:], []).append(_name)


def _named(key):
    """The options a dict key or string names: its full name, or its name without the role prefix."""
    if not isinstance(key, str):
        return []
    return [key] if key in ALL else SHORT.get(key, [])


def _same(a, b):
    return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                             and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


# --------------------------------------------------------------------------- (a) the spec owns the default

def _generator():
    path = os.path.join(ROOT, 'scripts', 'role_defaults.py')
    assert os.path.exists(path), 'scripts/role_defaults.py generates defaults/main.yml from the spec'
    spec = importlib.util.spec_from_file_location('role_defaults', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('role', ROLES)
def test_a_the_defaults_file_is_generated_from_the_argument_spec(role):
    want = _generator().render(role, os.path.join(ROOT, 'roles'))
    have = _load('roles/%s/defaults/main.yml' % role)
    assert have == want, ('roles/%s/defaults/main.yml is not what meta/argument_specs.yml gives: '
                          'python3 scripts/role_defaults.py write' % role)


def _option_nodes(node):
    """(entry point, option name, option node) of a composed argument_specs document."""
    def get(mapping, key):
        for k, v in mapping.value:
            if k.value == key:
                return v
        return None
    specs = get(node, 'argument_specs')
    for entry_key, entry in specs.value:
        options = get(entry, 'options')
        for key, value in (options.value if options is not None else []):
            yield entry_key.value, key.value, value


@pytest.mark.parametrize('role', ROLES)
def test_a_a_default_template_is_the_only_default_of_its_setting(role):
    path = os.path.join(ROOT, 'roles', role, 'meta', 'default_templates.yml')
    templates = yaml.safe_load(_load(os.path.relpath(path, ROOT))) if os.path.exists(path) else {}
    for name, template in (templates or {}).items():
        assert name in OPTIONS[role] and 'default' not in OPTIONS[role][name], name
        assert (isinstance(template, str) and '{{' in template) or list(template) == ['follows'], name


@pytest.mark.parametrize('role', ROLES)
def test_a_an_option_of_several_entry_points_is_written_once(role):
    """drain, ready, collect, ... repeat an option of main by a YAML alias, never by a copy."""
    nodes = {}
    for dummy, name, value in _option_nodes(yaml.compose(_load('roles/%s/meta/argument_specs.yml' % role))):
        nodes.setdefault(name, set()).add(id(value))
    assert sorted(name for name, ids in nodes.items() if len(ids) > 1) == []


# --------------------------------------------------------------------------- (b) no default in Python

def _python_files(modules=False):
    """plugins/ and extensions/ Python, less the modules and module_utils when not asked: they run on the managed host,
    cannot import the controller's spec loader, and their own DOCUMENTATION must spell a default."""
    out = []
    # the event source of the tune loop (extensions/eda) runs on the controller's side too, and reads settings
    found = glob.glob(os.path.join(ROOT, 'plugins', '**', '*.py'), recursive=True) + \
        glob.glob(os.path.join(ROOT, 'extensions', '**', '*.py'), recursive=True)
    for path in sorted(found):
        rel = os.path.relpath(path, ROOT)
        if not modules and (rel.startswith('plugins/modules/') or rel.startswith('plugins/module_utils/')):
            continue
        out.append(rel)
    return out


def _constant(node):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _path_defaults():
    """Every absolute path a spec gives as a default: the setting owns it."""
    return dict((option['default'], name) for name, (dummy, option) in ALL.items()
                if isinstance(option.get('default'), str) and option['default'].startswith('/'))


# An empty value ([], {}, '', None) says "nothing given", whatever the key: not a copy of a default.
_EMPTY_VALUES = ([], {}, '', None)


def default_copies(path):
    """Where a Python file writes a setting's default again: a dict entry or dict() keyword naming the
    setting with its default, a .get(setting, default), a sequence equal to its choices, or a string that
    is a spec's default path."""
    tree = ast.parse(_load(path))
    docs = _docstrings(tree)
    paths = _path_defaults()
    found = []

    def copy_of(key, value_node, how):
        is_const, value = _constant(value_node)
        if not is_const or value in _EMPTY_VALUES and not isinstance(value, bool):
            return
        for name in _named(key):
            option = ALL[name][1]
            # by the name without its prefix, a bare 0, 1, true or false says too little to be a copy
            if name != key and any(_same(value, v) for v in (0, 1, True, False)):
                continue
            if 'default' in option and _same(value, option['default']):
                found.append('%s:%d %s %s=%r' % (path, value_node.lineno, how, key, value))

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant):
                    copy_of(k.value, v, 'dict entry')
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == 'dict':
                for kw in node.keywords:
                    copy_of(kw.arg, kw.value, 'dict()')
            if isinstance(func, ast.Attribute) and func.attr in ('get', 'setdefault', 'pop') and len(node.args) == 2 \
                    and isinstance(node.args[0], ast.Constant):
                copy_of(node.args[0].value, node.args[1], '.%s()' % func.attr)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1:
            is_const, value = _constant(node)
            if is_const and all(isinstance(v, str) for v in value):
                for name, (dummy, option) in ALL.items():
                    if option.get('choices') and sorted(option['choices']) == sorted(value):
                        found.append('%s:%d the choices of %s' % (path, node.lineno, name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in paths \
                and id(node) not in docs:
            found.append('%s:%d %r, the default of %s' % (path, node.lineno, node.value, paths[node.value]))
    return found


@pytest.mark.parametrize('path', _python_files())
def test_b_python_holds_no_copy_of_a_setting_default(path):
    assert default_copies(path) == []


# --------------------------------------------------------------------------- (c) no literal fallback in YAML

_LITERAL = r"""('[^']*'|"[^"]*"|-?[0-9][0-9.]*%?|true|false|True|False|none|None|null|\[[^\]]*\]|\{[^}]*\})"""
_EMPTY = ("''", '""', '[]', '{}', 'none', 'None', 'null')


def _yaml_files():
    out = [os.path.join(ROOT, 'site.yml')]
    for pattern in ('roles/*/tasks/**/*', 'roles/*/vars/**/*', 'roles/*/handlers/**/*', 'roles/*/templates/**/*',
                    'roles/*/defaults/**/*', 'roles/*/files/**/*', 'playbooks/**/*.yml', 'extensions/**/*.yml',
                    'extensions/**/*.j2'):
        out.extend(p for p in glob.glob(os.path.join(ROOT, pattern), recursive=True) if os.path.isfile(p))
    return sorted(os.path.relpath(p, ROOT) for p in out)


# the keys of an engine instance (inference_server_instances' suboptions): their defaults are the instance planner's
# (plugin_utils/_spec_config.py, _serving_plan.py), never a fallback in YAML (`instance.port | default(8000)`)
INSTANCE_KEYS = sorted(OPTIONS['inference_server']['inference_server_instances'].get('options') or {}, key=len,
                       reverse=True)


def literal_fallbacks(path, text=None):
    """`<setting> | default(<literal>)`: the literal is a second default. An empty fallback ('', [], {},
    none) says "nothing given" for another role's variable and carries no value of its own. The same for an instance
    key read from an instance (`.port`, `['engine']`)."""
    names = sorted(ALL, key=len, reverse=True)
    patterns = [re.compile(r"\b(%s)\b['\"]?\]?\s*\|\s*(?:default|d)\(\s*%s\s*[,)]" % ('|'.join(names), _LITERAL)),
                re.compile(r"(?:\.|\[['\"])(%s)\b['\"]?\]?\s*\|\s*(?:default|d)\(\s*%s\s*[,)]"
                           % ('|'.join(INSTANCE_KEYS), _LITERAL))]
    text = _load(path) if text is None else text
    found = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            if match.group(2).replace(' ', '') in _EMPTY:
                continue
            found.append('%s:%d %s' % (path, text.count('\n', 0, match.start()) + 1, match.group(0)))
    return sorted(set(found))


def test_c_the_scan_finds_an_instance_key_spelled_again():
    assert INSTANCE_KEYS and 'port' in INSTANCE_KEYS and 'engine' in INSTANCE_KEYS
    text = "{{ _instance.port | default(8000) }} {{ inst['engine'] | default('trtllm') }} {{ x.port | default(none) }}"
    found = literal_fallbacks('x.yml', text)
    assert [f.split(' ', 1)[1] for f in found] == [".port | default(8000)", "['engine'] | default('trtllm')"]


@pytest.mark.parametrize('path', _yaml_files())
def test_c_no_task_vars_template_or_playbook_spells_a_setting_default(path):
    assert literal_fallbacks(path) == []


# --------------------------------------------------------------------------- (d) bounds only in POLICY

def _bounds():
    from ansible_collections.specdec.serve.plugins.plugin_utils._settings import POLICY
    out = {}
    for name, rules in POLICY.items():
        for rule in rules if isinstance(rules, list) else []:
            if getattr(rule, 'bounds', None):
                out[name] = rule.bounds
    return out


def _numbers(node):
    """The numeric literals of an expression (a negated one included), not inside a call's arguments."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return [node.value]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return [-v for v in _numbers(node.operand)]
    return []


def _strings(node):
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _keys(node):
    """The strings an expression reads a mapping with: m['x'], m.get('x', ...)."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            out.append(n.slice.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == 'get' and n.args \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.append(n.args[0].value)
    return out


def _walk_scope(scope):
    """The nodes of a function, or of a module less its functions."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def bound_copies(path, bounds):
    """Where a module other than the policy owner writes a bound of a setting again:

    * a comparison of a setting (read from a mapping by its name, directly, through a loop variable over
      such names, or through a variable assigned from such a read) with a number that is one of its bounds;
    * a tuple or list that pairs a setting's name with a bound, or a dict entry mapping its name to them.
    """
    tree = ast.parse(_load(path))
    found = []

    def settings_of(strings):
        return [n for s in strings for n in _named(s) if n in bounds]

    def report(node, names, numbers):
        for name in names:
            low, high = bounds[name]
            hit = [v for v in numbers if v in (low, high)]
            if hit:
                found.append('%s:%d %s compared with %s (POLICY: %s to %s)' % (path, node.lineno, name, hit[0], low, high))
                return

    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in scopes:
        aliases = {}
        for node in _walk_scope(scope):
            if isinstance(node, ast.For):
                named = settings_of(_strings(node.iter))
                for t in ast.walk(node.target):
                    if isinstance(t, ast.Name):
                        aliases.setdefault(t.id, []).extend(named)
            elif isinstance(node, ast.Assign):
                named = settings_of(_keys(node.value))
                for target in node.targets:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Name):
                            aliases.setdefault(t.id, []).extend(named)
        for node in _walk_scope(scope):
            if isinstance(node, ast.Compare):
                numbers = [v for o in [node.left] + list(node.comparators) for v in _numbers(o)]
                if not numbers:
                    continue
                names = settings_of(_keys(node))
                for n in ast.walk(node):
                    if isinstance(n, ast.Name):
                        names.extend(aliases.get(n.id, []))
                report(node, names, numbers)
            elif isinstance(node, (ast.Tuple, ast.List)):
                numbers = [v for e in node.elts for v in _numbers(e)]
                strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if numbers and strings:
                    report(node, settings_of(strings), numbers)
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and isinstance(v, (ast.Tuple, ast.List)):
                        report(v, settings_of([k.value]), [x for e in v.elts for x in _numbers(e)])
    return sorted(set(found))


def test_d_the_policy_owners_are_the_roles_policies():
    assert 'plugins/plugin_utils/_roles/inference_server.py' in POLICY_OWNERS
    assert len(POLICY_OWNERS) == len(ROLES) + 1  # and the package's empty __init__.py


@pytest.mark.parametrize('path', [p for p in _python_files() if p not in POLICY_OWNERS])
def test_d_no_module_but_the_policy_owner_checks_a_bound_again(path):
    assert bound_copies(path, _bounds()) == []


# --------------------------------------------------------------------------- (e) one vocabulary

# The plain-name character classes: [A-Za-z0-9][A-Za-z0-9_.-] and the same with the class reordered.
_NAME_CLASS = re.compile(r'\[A-Za-z0-9\]\[A-Za-z0-9(_\.-|\._-|_\.\\-|\.\\_-)\]|\[A-Za-z0-9_\.-\]')
CONTAINER_PATHS = ('/models', '/tiktoken', '/etc/specdec/engine.yaml')


def vocabulary_copies(path):
    tree = ast.parse(_load(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        if _NAME_CLASS.search(node.value):
            found.append('%s:%d the plain-name pattern %r' % (path, node.lineno, node.value))
        if node.value in CONTAINER_PATHS:
            found.append('%s:%d the container path %r' % (path, node.lineno, node.value))
    return found


# Copies the vocabulary cannot avoid, each kept equal to it by a test of its own: the tune loop's event source runs in
# ansible-rulebook's process, which loads it as a file and has none of the collection's modules
# (tests/unit/extensions/test_eda_alertmanager.py compares its pattern with the vocabulary's).
KEPT_EQUAL = ('extensions/eda/plugins/event_source/alertmanager.py',)


@pytest.mark.parametrize('path', [p for p in _python_files(modules=True) if p not in (VOCABULARY,) + KEPT_EQUAL])
def test_e_only_the_vocabulary_spells_the_name_pattern_and_the_container_paths(path):
    assert vocabulary_copies(path) == []


def test_e_the_vocabulary_is_there():
    text = _load(VOCABULARY)
    assert _NAME_CLASS.search(text) and all(repr(p) in text for p in CONTAINER_PATHS)


# --------------------------------------------------------------------------- (f) a value two settings share

def _with_templates():
    from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
    return dict((name, option) for role in ROLES for name, option in role_spec.load_options(role).items())


ALL_WITH_TEMPLATES = _with_templates()

# Settings of two roles that name the same thing on a host (a path, a port) each with the value spelled in its own
# spec drift apart the day one is changed: the follower's default reads the owner's (meta/default_templates.yml:
# monitoring_exporter_fact_file follows draft_sweep_fact_file, monitoring_gateway_metrics_port gateway_stats_port,
# inference_server_models_dir and _tiktoken_dir the model cache's directories). Still spelled twice, to be joined the
# same way: none (this list only shrinks).
TO_JOIN: dict = {}
# the same value by design, for different things: the base directory under which two roles install their own tools
DIFFERENT_THINGS = {
    '/usr/local/lib/specdec': ('monitoring_exporter_dir', 'monitoring_tools_dir'),
}


def shared_values(options):
    """{value: settings} of the literal defaults that are a host path or a port, given by more than one setting."""
    found: dict = {}
    for name, option in options.items():
        value = option.get('default')
        path = isinstance(value, str) and value.startswith('/') and '{{' not in value
        port = name.endswith('_port') and isinstance(value, int) and not isinstance(value, bool)
        if path or port:
            found.setdefault(value, []).append(name)
    return dict((value, tuple(sorted(names))) for value, names in found.items() if len(names) > 1)


def test_f_a_path_or_a_port_two_settings_share_is_written_once():
    shared = shared_values(ALL_WITH_TEMPLATES)
    new = dict((v, n) for v, n in shared.items() if TO_JOIN.get(v) != n and DIFFERENT_THINGS.get(v) != n)
    assert new == {}, 'give the follower a default that reads the owner (meta/default_templates.yml): %s' % new
    assert sorted(set(TO_JOIN) - set(shared)) == [], 'joined: remove from TO_JOIN'


def test_f_the_scan_finds_a_shared_value():
    options = {'a_root': {'default': '/srv/x'}, 'b_dir': {'default': '/srv/x'}, 'a_port': {'default': 9000},
               'b_port': {'default': 9000}, 'c_port': {'default': "{{ 'a_port' | specdec.serve.setting_default }}"},
               'a_count': {'default': 9000}}
    assert shared_values(options) == {'/srv/x': ('a_root', 'b_dir'), 9000: ('a_port', 'b_port')}
