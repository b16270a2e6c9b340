"""Counts the renders of serving instances in a real ansible-playbook run (tests only, never on a host).

With this directory on PYTHONPATH and SPECDEC_RENDER_LOG set to a file, every call of plugin_utils/_spec_config.py's
``render`` in the controller's processes appends one JSON line to that file: the instance's name and a digest of its definition, the
ansible-playbook run (its pid), and the host, task and play of the Ansible worker that rendered it (read from the worker's TaskExecutor on the call stack), or
of the strategy when the controller's main process rendered it. Appends are single small writes, so forked workers
do not interleave them."""

import functools
import hashlib
import json
import os
import sys
import time

# the ansible-playbook run this process belongs to: its forked workers keep the pid of the process that started it
_RUN = os.getpid()

_TARGET = 'ansible_collections.specdec.serve.plugins.plugin_utils._spec_config'


def _where():
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get('self')
        host, task = getattr(owner, '_host', None), getattr(owner, '_task', None)
        if host is not None and task is not None and hasattr(task, 'get_name'):
            play, parent = None, task
            while parent is not None and play is None:
                play, parent = getattr(parent, '_play', None), getattr(parent, '_parent', None)
            return {'host': getattr(host, 'name', str(host)), 'task': task.get_name(),
                    'play': play.get_name() if play is not None else None}
        frame = frame.f_back
    return {'host': None, 'task': None, 'play': None}


def _wrap(module):
    original = module.render

    @functools.wraps(original)
    def render(instance, *args, **kwargs):
        digest = hashlib.sha256(json.dumps(instance, sort_keys=True, default=str).encode('utf-8')).hexdigest()[:16]
        line = dict(_where(), instance=instance.get('name') if isinstance(instance, dict) else None, digest=digest,
                    run=_RUN, pid=os.getpid(), time=time.time())
        with open(os.environ['SPECDEC_RENDER_LOG'], 'a', encoding='utf-8') as handle:
            handle.write(json.dumps(line) + '\n')
        return original(instance, *args, **kwargs)

    module.render = render


class _Finder(object):
    """Wraps render once _spec_config is executed, before any module imports the name from it."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            _wrap(module)
        loader.exec_module = exec_module
        if hasattr(loader, 'load_module'):
            load = loader.load_module

            def load_module(fullname):
                module = load(fullname)
                if not getattr(module.render, '__wrapped__', None):
                    _wrap(module)
                return module
            loader.load_module = load_module
        return spec


class _MetaPath(list):
    """sys.meta_path that keeps the counting finder first: ansible-core inserts its collection finder at 0."""

    def insert(self, index, item):
        if index == 0 and self and isinstance(self[0], _Finder) and not isinstance(item, _Finder):
            index = 1
        list.insert(self, index, item)


if os.environ.get('SPECDEC_RENDER_LOG'):
    sys.meta_path = _MetaPath(sys.meta_path)
    sys.meta_path.insert(0, _Finder())
