# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet view's live columns: what Prometheus answers to the queries of ``LIVE_QUERIES`` (the monitoring
role's recording rules), set beside the last sweep's figures of each instance (:func:`live_view`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils._settings import check_value


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


LIVE_QUERIES = {
    'acceptance': 'specdec:acceptance_length:rate',
    'tokens': 'specdec:generated_tokens:rate',
    'expected': 'specdec:acceptance_length:expected',
}


def _vector(result):
    """{(host, engine_instance): float} of a Prometheus instant-query response (or its data.result)."""
    if isinstance(result, dict):
        if result.get('status') not in (None, 'success'):
            raise ValueError('Prometheus answered %r' % (result.get('error') or result.get('status'),))
        result = (result.get('data') or {}).get('result', [])
    out = {}
    for sample in result or []:
        metric = sample.get('metric') or {}
        try:
            value = float(sample['value'][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if math.isnan(value):  # no traffic in the window
            continue
        out[(metric.get('host'), metric.get('engine_instance'))] = value
    return out


def live_view(rows, responses, margin=None):
    """Fleet view rows with the live figures from Prometheus beside the last sweep's.

    `responses`: {'acceptance', 'tokens', 'expected'} -> the Prometheus responses to LIVE_QUERIES.
    Adds ``live_acceptance_length``, ``live_tokens_per_s`` and ``live_vs_sweep``: ``agrees`` when the
    live acceptance length is within `margin` (relative) of the sweep's, ``below sweep`` or ``above
    sweep`` when not, ``no traffic`` when the engine decoded nothing in the rules' window, ``no sweep``
    without a sweep figure. The sweep's figure is the one the alert rules use (the exporter's
    expectation), else the row's engine figure, else its client-side estimate. `margin` is the fleet_view
    role's fleet_view_live_margin (its default when None), checked as that setting is."""
    if not isinstance(rows, list):
        raise ValueError('rows must be a list of fleet view rows')
    margin = role_spec.default('fleet_view_live_margin') if margin is None else check_value(
        'fleet_view_live_margin', margin, label='margin')
    live = dict((k, _vector((responses or {}).get(k))) for k in LIVE_QUERIES)
    out = []
    for row in rows:
        row = dict(row)
        key = (row.get('host'), row.get('instance'))
        if row.get('instance') is None:
            out.append(row)
            continue
        acc, tok = live['acceptance'].get(key), live['tokens'].get(key)
        expected = live['expected'].get(key)
        for fallback in ('sweep_acceptance_length', 'sweep_acceptance_estimate'):
            if expected is None and _num(row.get(fallback)):
                expected = float(row[fallback])
        if acc is None:
            verdict = 'no traffic'
        elif expected is None:
            verdict = 'no sweep'
        elif acc < expected * (1 - margin):
            verdict = 'below sweep'
        elif acc > expected * (1 + margin):
            verdict = 'above sweep'
        else:
            verdict = 'agrees'
        row.update({'live_acceptance_length': None if acc is None else round(acc, 3),
                    'live_tokens_per_s': None if tok is None else round(tok, 1),
                    'live_expected_acceptance_length': expected, 'live_vs_sweep': verdict})
        out.append(row)
    return out
