# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet view's report, built on the controller (the fleet_report action plugin):

- the instances of one host's ``fleet_view_host`` fact, each with its health and last sweep (the
  role's collect step, through its planner, plugin_utils/_roles/fleet_view.py);
- one view per host from its ``fleet_view_host`` fact;
- one row per host and instance, with the last sweep's winner;
- the live columns from Prometheus (plugin_utils/_monitoring_live.py) and the gateways' view
  (plugin_utils/_gateway.py) when they are asked for;
- the table's columns and heading, and the JSON as it is written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.specdec.serve.plugins.module_utils.hf_manifest import atomic_write
from ansible_collections.specdec.serve.plugins.plugin_utils._gateway import gateway_rows, gateway_section
from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring_live import live_view
from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_records import measured_on_drift

BASE_COLUMNS = (
    ('host', 'HOST'), ('instance', 'INSTANCE'), ('image', 'IMAGE'), ('engine', 'ENGINE'), ('model', 'MODEL'),
    ('speculative', 'SPEC'), ('draft_len', 'DRAFT'), ('health', 'HEALTH'), ('sweep', 'LAST SWEEP'),
    ('sweep_acceptance_length', 'ACCEPT (ENGINE)'), ('sweep_acceptance_estimate', 'ACCEPT (CLIENT EST.)'),
    ('tuned_on', 'TUNED ON'), ('verified_at', 'VERIFIED'),
)
LIVE_COLUMNS = (('live_acceptance_length', 'ACCEPT (LIVE)'), ('live_tokens_per_s', 'TOK/S (LIVE)'),
                ('live_vs_sweep', 'LIVE VS SWEEP'))


def _text(value):
    """As Jinja's ``~`` writes a value (the table and the JSON read the same as before)."""
    return 'None' if value is None else str(value)


def collected_instances(instances, health, sweeps, heals=None):
    """The ``instances`` of a host's ``fleet_view_host`` fact: each instance of the specdec_serving local
    fact with its health (``health``: the engine_health results, one per instance, in order), its
    entry of the specdec_sweep local fact (``sweeps``: instance name -> entry) and of the specdec_heal local fact
    (``heals``: instance name -> the heal's record, plugin_utils/_heal.py ``record``)."""
    out = []
    for index, inst in enumerate(instances or []):
        probe = health[index] if health and index < len(health) else {}
        probe = probe if isinstance(probe, dict) else {}
        sweep = (sweeps or {}).get(inst.get('name'))
        sweep = sweep if isinstance(sweep, dict) else {}
        heal = (heals or {}).get(inst.get('name'))
        ready = probe.get('stage') == 'ready'
        container = probe.get('container_state')
        out.append(dict(inst, **{
            'health': 'ready' if ready and not probe.get('failed', False) else 'down',
            'health_stage': probe.get('stage'),
            'health_error': None if ready else probe.get('msg'),
            'health_log': probe.get('log_lines', []),
            'started_at': container.get('StartedAt') if isinstance(container, dict) else None,
            'engine_version_live': probe.get('engine_version'),
            'last_sweep': sweep.get('last_sweep'),
            'sweep_applied': sweep.get('applied'),
            'heal': heal if isinstance(heal, dict) else None,
        }))
    return out


def host_views(hosts, status, records):
    """{host: status, checked, collected_at, instances} for every host shown.

    ``records``: host -> its ``fleet_view_host`` fact, or None for a host that was not collected
    (unreachable, failed before the collect step, or outside the play)."""
    views = {}
    for host in hosts:
        rec = records.get(host)
        views[host] = {
            'status': (status or {}).get(host),
            'checked': rec is not None,
            'collected_at': rec.get('collected_at') if rec is not None else None,
            'instances': list(rec.get('instances') or []) if rec is not None else [],
        }
    return views


def _sweep_cell(sweep, winner):
    if 'draft_len' not in winner:
        return None
    speedup = winner.get('speedup')
    check = sweep.get('served_check') if isinstance(sweep.get('served_check'), dict) else {}
    # a sweep over several load levels that proved what it served: that (a kept schedule, or one length)
    if check.get('keep') and check.get('mode') == 'schedule':
        what = 'schedule from draft %s' % _text(check.get('served_draft_len'))
    else:
        what = 'draft %s' % _text(check.get('served_draft_len', winner['draft_len']))
    return '%s%s (%s)' % (what, ', x%.2f' % float(speedup) if speedup is not None else '', _text(sweep.get('run_id')))


def _tuned_on(drift):
    """Whether what serves is what the last sweep measured (``drift``: sweep_records.measured_on_drift): 'as serving',
    'changed: <keys>', or None when the sweep recorded nothing (no sweep, or one older than the record)."""
    if drift is None:
        return None
    return 'as serving' if not drift else 'changed: %s' % ', '.join(drift)


def _heals_cell(heal):
    """HEALS: the restarts within the heal's window and the last heal, e.g. '2 in 1h (last 2026-12-06T01:02:03Z:
    left drained)'; None for an instance no heal touched."""
    if not isinstance(heal, dict):
        return None
    last = heal.get('last_heal') if isinstance(heal.get('last_heal'), dict) else {}
    window = heal.get('window_s')
    span = '%gh' % (window / 3600.0) if window and window % 3600 == 0 else '%gs' % (window or 0)
    return '%s in %s%s%s' % (_text(heal.get('restarts')), span,
                             ' (last %s: %s)' % (_text(last.get('at')), _text(last.get('outcome'))) if last else '',
                             ', DRAINED' if heal.get('drained') else '')


def rows(hosts, views):
    """One row per host and instance; a host without instances is one row that says why."""
    out = []
    for host in hosts:
        view = views[host]
        base = {'host': host, 'status': (view['status'] or {}).get('status')}
        if not view['checked']:
            out.append(dict(base, health='not checked'))
        elif not view['instances']:
            out.append(dict(base, health='nothing deployed'))
        for inst in view['instances']:
            sweep = inst.get('last_sweep') or {}
            winner = sweep.get('winner') or {}
            live = inst.get('engine_version_live')
            version = _text(inst.get('engine_version'))
            if live is not None and live != inst.get('engine_version'):
                version += ' (serving %s)' % _text(live)
            method = inst.get('speculative_method')
            drift = measured_on_drift(sweep.get('measured_on'), inst)
            out.append(dict(base, **{
                'instance': inst.get('name'),
                'image': inst.get('image'),
                'engine': '%s %s' % (_text(inst.get('engine')), version),
                'model': inst.get('model'),
                'speculative': method,
                'draft_len': inst.get('max_draft_len') if method not in ('none', '', None) else None,
                'health': inst.get('health'),
                # an instance served across a stack: its stack, this node's role and rank (the JSON only)
                'stack': inst.get('stack') if isinstance(inst.get('stack'), dict) else None,
                'sweep': _sweep_cell(sweep, winner),
                'sweep_acceptance_length': winner.get('acceptance_length'),
                'sweep_acceptance_estimate': winner.get('acceptance_length_estimate'),
                # what the sweep measured against what serves now, and when it last measured
                'tuned_on': _tuned_on(drift),
                'tuned_drift': drift,
                'verified_at': sweep.get('finished_at'),
                # the heal's restarts within its window and its last heal (a wedged engine restarted, or drained)
                'heals': _heals_cell(inst.get('heal')),
                'heal': inst.get('heal'),
            }))
    return out


def build_report(title, generated_at, hosts, status, records, live=None, live_margin=0.2, gateways=None):
    """The report written as JSON: title, generated_at, hosts, rows and, with gateways, gateways.

    ``live``: the Prometheus responses to monitoring.LIVE_QUERIES, or None for no live columns.
    ``gateways``: the gateway_server query results of every gateway, or None without gateways."""
    views = host_views(hosts, status, records)
    report = {'title': title, 'generated_at': generated_at, 'hosts': views, 'rows': rows(hosts, views)}
    if live is not None:
        report['rows'] = live_view(report['rows'], live, live_margin)
    if gateways:
        report['rows'] = gateway_rows(report['rows'], gateways)
        report['gateways'] = gateway_section(gateways)
    return report


def columns(live, gateways, status, heals=False):
    """The table's [key, header] pairs: the live, gateway, heal and status columns only when they have data."""
    out = [list(c) for c in BASE_COLUMNS]
    if live:
        out += [list(c) for c in LIVE_COLUMNS]
    if gateways:
        out.append(['gateway', 'GATEWAY'])
    if heals:
        out.append(['heals', 'HEALS'])
    if status:
        out.append(['status', 'STATUS'])
    return out


def report_json(report):
    """The file's text, as ``to_nice_json`` writes it (sorted keys, four spaces)."""
    return json.dumps(report, indent=4, sort_keys=True, separators=(',', ': ')) + '\n'


def write_report(path, text, mode=0o644):
    """Write the report whole or not at all (the model cache's atomic write): a reader never sees half a file.
    Returns whether it changed."""
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except (IOError, OSError):
        pass
    atomic_write(path, text, mode)
    return True
