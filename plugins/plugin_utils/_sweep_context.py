# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Context length as an axis of a draft-length sweep: where speculation stops paying as the prompt grows.

A sweep with ``draft_sweep_input_lengths`` measures each workload of synthetic prompts once per input length
(``NAME-inLENGTH``, plugin_utils/_sweep_workloads.py). :func:`by_input_length` reads the selection's groups
(plugin_utils/_bench_select.py: one row per workload, concurrency and draft length, with its median, speed-up
against the baseline and the engine's acceptance length) and gives, per workload and concurrency, one row per
length: the baseline's median, the best speculative candidate that passed the checks, its speed-up and
acceptance length, and whether speculation paid (a speed-up above 1). ``stopped_paying_beyond`` names the
longest length up to which every length paid, where a longer one did not; ``never_paid`` says speculation
paid at no length.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any


class ContextError(ValueError):
    """A selection or axis the per-length view cannot read."""


def _best(rows):
    """The speculative row with the highest speed-up among those that passed the checks, or None."""
    ok = [r for r in rows if r.get('draft_len') and r.get('status') == 'ok' and r.get('speedup') is not None]
    return max(ok, key=lambda r: (r['speedup'], -r['draft_len'])) if ok else None


def by_input_length(selection, axis):
    """{"workloads": {NAME: {"concurrency": {C: {"lengths": [row], "stopped_paying_beyond": L or None,
    "never_paid": bool}}}}}; empty without an axis. ``selection``: the sweep's selection (its ``groups``);
    ``axis``: the plan's ``{measured name: {"workload": NAME, "input_len": L}}``."""
    if not axis:
        return {'workloads': {}}
    if not isinstance(axis, dict) or not isinstance(selection, dict):
        raise ContextError('the per-length view needs the selection and the axis as mappings')
    groups = selection.get('groups') or []
    if not isinstance(groups, list):
        raise ContextError('the selection has no list of groups')
    out: dict[str, Any] = {}
    # one workload in all: the selection is that workload's own, and its groups carry no name
    sole = next(iter(axis)) if len(axis) == 1 else 'default'
    for measured, entry in sorted(axis.items(), key=lambda kv: (kv[1]['workload'], kv[1]['input_len'])):
        mine = [g for g in groups if isinstance(g, dict) and (g.get('workload') or sole) == measured]
        for conc in sorted(set(g['concurrency'] for g in mine)):
            rows = [g for g in mine if g['concurrency'] == conc]
            base = next((g for g in rows if g.get('draft_len') == 0), None)
            best = _best(rows)
            level = out.setdefault(entry['workload'], {}).setdefault(conc, {'lengths': []})
            level['lengths'].append({
                'input_len': entry['input_len'], 'workload': measured,
                'baseline_median': base.get('median') if base else None,
                'baseline_status': base.get('status') if base else 'missing',
                'draft_len': best['draft_len'] if best else None,
                'median': best['median'] if best else None,
                'speedup': best['speedup'] if best else None,
                'acceptance_length': best.get('acceptance_length') if best else None,
                'paid': bool(best and best['speedup'] > 1.0),
            })
    for levels in out.values():
        for level in levels.values():
            lengths = level['lengths']
            judged = [r for r in lengths if r['baseline_median'] is not None]
            level['never_paid'] = bool(judged) and not any(r['paid'] for r in judged)
            level['stopped_paying_beyond'] = None
            for i, row in enumerate(judged):
                if not row['paid']:
                    level['stopped_paying_beyond'] = judged[i - 1]['input_len'] if i and all(
                        r['paid'] for r in judged[:i]) else None
                    break
    return {'workloads': dict((name, {'concurrency': levels}) for name, levels in sorted(out.items()))}
