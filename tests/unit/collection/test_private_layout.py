"""The collection's internals are private by name and small enough to read.

What a user or more than one role calls is the collection's API (filters, lookups, modules, the action plugins);
plugin_utils holds the rest, so every module there carries a leading underscore, as community.docker marks its
internals: nothing in it is bound by the collection's version. Each role's settings policy lives in
plugin_utils/_roles/<role>.py, beside the role's own decisions; the settings engine (plugin_utils/_settings.py) only
applies those policies, and stays small enough to read whole.
"""

from __future__ import annotations

import os

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as settings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLUGIN_UTILS = os.path.join(ROOT, 'plugins', 'plugin_utils')
# data, not code: the engines' tables, read by path (plugin_utils/_spec_tables.py, the lab's emulator)
DATA_DIRS = ('engine_tables',)
MAX_LINES = 600
ENGINE_MAX_LINES = 400


def _python_files():
    for folder, dirs, files in os.walk(PLUGIN_UTILS):
        dirs[:] = [d for d in dirs if d not in DATA_DIRS and d != '__pycache__']
        for name in files:
            if name.endswith('.py'):
                yield os.path.relpath(os.path.join(folder, name), PLUGIN_UTILS)


def test_every_plugin_utils_module_is_private_by_name():
    public = [path for path in _python_files()
              if not any(part.startswith('_') for part in path.split(os.sep))]
    assert list(_python_files()), 'no module found under %s' % PLUGIN_UTILS
    assert public == [], 'plugin_utils modules without a leading underscore (or in a folder without one): %s' % public


def test_no_plugin_utils_module_is_over_600_lines():
    sizes = dict((path, sum(1 for _ in open(os.path.join(PLUGIN_UTILS, path), encoding='utf-8')))
                 for path in _python_files())
    over = dict((path, n) for path, n in sizes.items() if n > MAX_LINES)
    assert over == {}, 'split these along what they decide: %s' % over


def test_the_settings_engine_is_under_400_lines():
    with open(os.path.join(PLUGIN_UTILS, '_settings.py'), encoding='utf-8') as handle:
        lines = sum(1 for _ in handle)
    assert lines < ENGINE_MAX_LINES, '_settings.py has %d lines; role policy belongs in _roles/<role>.py' % lines


def test_each_role_has_one_policy_module_and_it_holds_only_that_roles_settings():
    modules = dict((module.__name__.rsplit('.', 1)[-1], module) for module in settings.ROLE_POLICIES)
    assert sorted(modules) == sorted(role_spec.roles())
    files = sorted(name[:-3] for name in os.listdir(os.path.join(PLUGIN_UTILS, '_roles'))
                   if name.endswith('.py') and name != '__init__.py')
    assert files == sorted(modules), 'a policy module that the settings engine does not gather'
    for role, module in modules.items():
        options = role_spec.load_options(role)
        foreign = [key for key in module.POLICY if key.split('.')[0] not in options]
        assert foreign == [], '%s policy names settings that are not its own: %s' % (role, foreign)


def test_the_gathered_policy_loses_no_entry_and_has_one_owner_for_each():
    total = sum(len(module.POLICY) for module in settings.ROLE_POLICIES)
    assert len(settings.POLICY) == total, 'a setting with a policy in two roles'
    assert 'inference_server_instances.speculative.max_draft_len' in settings.POLICY


def test_controller_paths_are_the_settings_checked_as_controller_paths():
    # every controller path a user writes is normalised once; the list is derived, not kept by hand
    assert 'draft_sweep_report_dir' in settings.CONTROLLER_PATHS
    assert 'model_cache_peer_tls_ca' in settings.CONTROLLER_PATHS
    assert 'inference_server_config_dir' not in settings.CONTROLLER_PATHS  # a host path
    assert len(settings.CONTROLLER_PATHS) == 14
