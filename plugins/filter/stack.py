# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""stack_preflight (what keeps a stack's instance from changing) and stack_restart (whether a host restarts an
instance, a stack as one; both plugins/plugin_utils/_stack_serving.py) filters, thin wrappers.

The documentation of each filter is in the YAML file of the same name next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any

from ansible.errors import AnsibleFilterError

# The implementation is imported inside the filters, not here (docs/ARCHITECTURE.md, "Filter files").


def stack_preflight(entry, hostvars, play_hosts, max_skew=10):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    stack: Any = entry.get('stack') if hasattr(entry, 'get') else None
    if not hasattr(stack, 'get'):
        raise AnsibleFilterError('stack_preflight: expects an entry of the serving plan served across a stack, got %r'
                                 % (entry,))
    views = {}
    for node in stack['nodes']:
        hv = hostvars[node['host']] if node['host'] in hostvars else {}
        view: Any = hv['_inference_server_stack_view'] if '_inference_server_stack_view' in hv else None
        if not hasattr(view, 'get'):
            continue
        probes = [r for r in view.get('probes') or []
                  if hasattr(r, 'get') and (r.get('_inference_server_instance') or {}).get('name') == entry['name']]
        if not probes:
            continue
        clock, models = stack_serving.probe_view(probes[0].get('stdout_lines'))
        views[node['host']] = {'image_id': (view.get('image_ids') or {}).get(entry['image']), 'time': clock,
                               'models': models, 'link': stack_serving.link_view(dict(view.get('link') or {}))}
    return stack_serving.preflight(entry['name'], stack['nodes'], views, list(play_hosts or []), float(max_skew))


def stack_restart(entry, hostvars, wanted, fact='_inference_server_restart_wanted'):
    from ansible_collections.specdec.serve.plugins.plugin_utils import _stack_serving as stack_serving
    if not hasattr(entry, 'get') or 'name' not in entry:
        raise AnsibleFilterError('stack_restart: expects an entry of the serving plan, got %r' % (entry,))
    stack: Any = entry.get('stack')
    wishes = {}
    for node in (stack or {}).get('nodes') or []:
        hv = hostvars[node['host']] if node['host'] in hostvars else {}
        wishes[node['host']] = hv[fact] if fact in hv else False
    return stack_serving.stack_restart(entry, wanted, wishes)


class FilterModule(object):
    def filters(self):
        return {'stack_preflight': stack_preflight, 'stack_restart': stack_restart}
