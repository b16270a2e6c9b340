# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet playbooks derive from a host's inventory: the instances to serve (with a sweep's
applied winner kept), their rendering, and what model_cache fetches for them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.specdec.serve.plugins.plugin_utils.spec_config import DEFAULT_MODELS_DIR, render


def _applied_speculative(local_facts, name):
    sweeps = (local_facts or {}).get('specdec_sweep') or {}
    applied = (sweeps.get(name) or {}).get('applied') if isinstance(sweeps, dict) else None
    return (applied or {}).get('speculative') if isinstance(applied, dict) else None


def fleet_plan(instances, local_facts=None, keep_sweep_winners=True):
    """{serving, rendered, cache, instances} for one host.

    serving: the instances whose state is not absent, each with the speculative settings a draft-length
    sweep applied on this host (ansible_local.specdec_sweep[name].applied.speculative) while the
    inventory still names the same method and draft model, unless keep_sweep_winners is false;
    rendered: spec_config of each (a bad key raises here); cache: per serving instance, the model and
    draft model model_cache fetches (paths stay paths); instances: serving plus those to remove.
    """
    keep = check_type_bool(keep_sweep_winners)
    serving, removed = [], []
    for inst in instances or []:
        if not isinstance(inst, dict):
            serving.append(inst)  # refused, with its index, by spec_config below
            continue
        if (inst.get('state') or 'started') == 'absent':
            removed.append(inst)
            continue
        applied = _applied_speculative(local_facts, inst.get('name')) if keep else None
        if applied:
            declared = render(inst)['speculative']
            if (applied.get('method', 'none') == declared['method']
                    and applied.get('draft_model') == declared['draft_model']):
                inst = dict(copy.deepcopy(inst), speculative=applied)
        serving.append(inst)
    rendered = [render(inst) for inst in serving]
    prefix = DEFAULT_MODELS_DIR + '/'
    cache = [{'model': r['model_path'][len(prefix):] if r['model_path'].startswith(prefix) else r['model_path'],
              'speculative': {'draft_model': r['speculative'].get('draft_model') or ''}} for r in rendered]
    return {'serving': serving, 'rendered': rendered, 'cache': cache, 'instances': serving + removed}
