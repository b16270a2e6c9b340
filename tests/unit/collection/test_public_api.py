"""The public filters are the collection's API: what a user calls, or what more than one role or playbook folder calls.

A filter that a single role (or the playbooks alone) calls is that role's decision and belongs to its planner
(plugin_utils/_roles/<role>.py, through the settings action) or its private modules, not to the API that the
collection's version binds. TO_MOVE lists the filters that are still single-caller: it may only shrink (a test fails
on a new single-caller filter, on a listed one that is gone or has more callers, and on any growth of the count)."""

from __future__ import annotations

import glob
import importlib
import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
# what a user calls, documented as such (docs/spec_config.md, roles/fleet_view/README.md), whoever else calls it
USER_API = frozenset(['spec_config', 'monitoring_live_view'])
# single-caller filters still to move behind their role's planner: this list only shrinks
TO_MOVE: frozenset = frozenset()
# the count of public filters, which only goes down (at most 15)
MAX_FILTERS = 9


def filters():
    """Filter name -> its file, from each filter file's FilterModule."""
    out = {}
    for path in sorted(glob.glob(os.path.join(REPO, 'plugins', 'filter', '*.py'))):
        module = importlib.import_module('ansible_collections.specdec.serve.plugins.filter.'
                                         + os.path.basename(path)[:-3])
        out.update((name, os.path.basename(path)) for name in module.FilterModule().filters())
    return out


def callers(name):
    """The role folders (roles/<role>) and top folders (playbooks, extensions) whose tasks, vars, defaults,
    templates, handlers or files call the filter by its FQCN."""
    pattern = re.compile(r'specdec\.serve\.%s\b' % re.escape(name))
    found = set()
    paths = (glob.glob(os.path.join(REPO, 'roles', '*', '**', '*'), recursive=True)
             + glob.glob(os.path.join(REPO, 'playbooks', '**', '*'), recursive=True)
             + glob.glob(os.path.join(REPO, 'extensions', '**', '*'), recursive=True))
    for path in paths:
        relative = os.path.relpath(path, REPO)
        if not os.path.isfile(path) or '/meta/' in relative or relative.endswith('.md'):
            continue
        with open(path, encoding='utf-8', errors='replace') as handle:
            if pattern.search(handle.read()):
                parts = relative.split(os.sep)
                found.add('/'.join(parts[:2]) if parts[0] == 'roles' else parts[0])
    return found


def test_the_scan_finds_filters_and_their_callers():
    names = filters()
    assert 'spec_config' in names and 'quote_for' in names
    assert callers('quote_for') >= {'roles/firewall', 'roles/monitoring'}
    assert callers('packages_missing') >= {'roles/monitoring', 'roles/monitoring_tune_loop'}


def test_the_public_filters_only_get_fewer():
    assert len(filters()) <= MAX_FILTERS, 'public filters: %d; lower MAX_FILTERS only' % len(filters())


def test_no_new_filter_is_called_by_one_role_only_and_the_list_to_move_only_shrinks():
    single = dict((name, sorted(callers(name))) for name in filters()
                  if name not in USER_API and len(callers(name)) <= 1)
    new = sorted(set(single) - TO_MOVE)
    assert new == [], ('filters called by one role or none, not the API: give them to the role planner '
                       '(plugin_utils/_roles/<role>.py): %s' % dict((n, single[n]) for n in new))
    moved = sorted(TO_MOVE - set(single))
    assert moved == [], 'no longer a single-caller filter (or gone): remove from TO_MOVE: %s' % moved
