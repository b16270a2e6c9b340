# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback plugin specdec.serve.preload: import the collection's controller-side Python once per run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Import the collection's controller-side plugins once per run, not once per task
version_added: 0.1.0
description:
  - ansible-core runs each task of each host in a worker process, a fork of C(ansible-playbook), and
    imports a collection's action, filter and lookup plugins where the task first needs them, compiling
    their source again in every worker (a collection's Python has no bytecode cache). On a
    two-core machine that cost this collection's C(settings) action about 0.12 CPU-seconds and a task
    using one of its filters about 0.04, for every task and host.
  - This callback imports them, and the code they share under C(plugins/plugin_utils), in the main process
    when the playbook starts, so every worker inherits them. It changes nothing a play does or prints.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = specdec.serve.preload)), as the collection's own
    C(ansible.cfg) and its molecule scenarios do. The figures are in C(docs/PERFORMANCE.md).
requirements:
  - enable in configuration
notes:
  - A plugin that fails to import is left to the task that uses it, which reports the error as it would
    without this callback; the callback names it at verbosity 3.
"""

import importlib
import os

from ansible.plugins.callback import CallbackBase

# The plugin types a worker imports on the controller (modules and module_utils run on the hosts), and the
# code they import.
_PRELOADED = ('action', 'filter', 'lookup', 'plugin_utils')
_PACKAGE = 'ansible_collections.specdec.serve.plugins'


def controller_modules(plugins_dir):
    """The dotted names of the Python modules under ``plugins_dir`` that a worker imports, sorted."""
    names = []
    for kind in _PRELOADED:
        top = os.path.join(plugins_dir, kind)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(('.', '__')))
            rel = os.path.relpath(dirpath, plugins_dir).replace(os.sep, '.')
            for filename in sorted(filenames):
                if not filename.endswith('.py'):
                    continue
                stem = filename[:-3]
                names.append('%s.%s' % (_PACKAGE, rel) if stem == '__init__' else '%s.%s.%s' % (_PACKAGE, rel, stem))
    return sorted(set(names))


def preload(plugins_dir):
    """Import every module of controller_modules(plugins_dir): (imported, {name: error})."""
    imported, failed = 0, {}
    for name in controller_modules(plugins_dir):
        try:
            importlib.import_module(name)
            imported += 1
        except Exception as exc:  # left to the task that needs the plugin, which reports it
            failed[name] = '%s: %s' % (type(exc).__name__, exc)
    return imported, failed


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'specdec.serve.preload'
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        imported, failed = preload(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self._display.vvv('specdec.serve.preload: %d modules imported' % imported)
        for name, error in sorted(failed.items()):
            self._display.vvv('specdec.serve.preload: %s left to its task (%s)' % (name, error))
