# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's soak (docs/fleet.md): the canary held under load before the next batch starts.

A stack that passes its health gate can still wedge minutes into sustained load (DGX Spark users report two-Spark
stacks dying 15 to 25 minutes in), which no gate at start sees. So on the canary, every changed instance is loaded
for ``rollout_soak_seconds`` (an instance served alone) or ``rollout_soak_seconds_stack`` (across a stack) while it
serves its live traffic through the front door, and inference_server keeps the previous files until the soak
passes. The load is ``serve_bench`` rounds from the gating node (the instance's host, a stack's head), each bounded
by the request timeout; a round whose share of failed requests is above ``rollout_soak_max_error_rate``, or that
generated no token, fails the soak, and the canary is rolled back to its previous files.

- :func:`plan`: before the deploy, whether the canary keeps its previous files (``keep``); after it, the soak's
  ``targets`` (each changed instance this node gates, with its URL and seconds).
- :func:`verdict`: a target's rounds judged.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any


def seconds_of(instance, settings):
    """The soak of one instance: ``soak_seconds_stack`` across a stack, else ``soak_seconds``."""
    stacked = bool(instance.get('stack')) if isinstance(instance, dict) else False
    return int(settings['soak_seconds_stack'] if stacked else settings['soak_seconds'])


def plan(settings, canary, changed, instances=None, stacked=None):
    """``keep``: whether inference_server keeps the previous files of the changed instances (the canary soaks one of
    them); ``targets``: [{name, url, seconds, concurrency, requests, max_failed, timeout}] for each changed instance
    this node gates (served alone, or this node is its stack's head), with a soak above 0 s: a round is ``requests``
    requests at ``concurrency``, and more than ``max_failed`` failed ones fail it (the bound,
    ``soak_max_error_rate``, as a count). ``instances``: the rollout's instances (before the deploy) or the host's
    served instances (fleet_view_host.instances after it: ``port``, ``stack.role``); before the deploy, without
    ``instances``, ``stacked`` names the changed instances served across a stack."""
    out: dict[str, Any] = {'keep': False, 'targets': []}
    if not canary:
        return out
    changed = set(changed or [])
    if instances is None:
        # before the deploy: the changed instances' names, and those served across a stack
        instances = [{'name': n, 'stack': n in set(stacked or [])} for n in sorted(changed)]
    concurrency = int(settings['soak_concurrency'])
    requests = 4 * concurrency
    for inst in instances or []:
        if not isinstance(inst, dict) or inst.get('name') not in changed:
            continue
        seconds = seconds_of(inst, settings)
        if seconds <= 0:
            continue
        out['keep'] = True
        stack = inst.get('stack') if isinstance(inst.get('stack'), dict) else None
        if inst.get('port') and (stack is None or stack.get('role') == 'head'):
            out['targets'].append({
                'name': inst['name'], 'url': 'http://127.0.0.1:%s' % inst['port'], 'seconds': seconds,
                'stack': (stack or {}).get('group'), 'concurrency': concurrency, 'requests': requests,
                'max_failed': int(requests * float(settings['soak_max_error_rate'])),
                'timeout': int(settings['soak_request_timeout'])})
    return out


def verdict(target, last, attempts, elapsed):
    """A target's soak judged from its last serve_bench round (the loop stops at the first round over the bound, else
    once the soak's seconds passed): {name, passed, rounds, elapsed_s, requests, failed, output_tokens, reason}. A
    round over the bound (more than ``max_failed`` failed requests), one that generated no token or one that could
    not run fails it, as does a soak cut short of its seconds."""
    run = None
    if isinstance(last, dict) and isinstance(last.get('runs'), list) and last['runs'] and isinstance(last['runs'][0], dict):
        run = last['runs'][0]
    out: dict[str, Any] = {'name': target['name'], 'rounds': int(attempts or 1), 'elapsed_s': round(float(elapsed), 1),
                           'requests': int((run or {}).get('requests') or 0),
                           'failed': int((run or {}).get('failed') or 0),
                           'output_tokens': int((run or {}).get('output_tokens') or 0)}
    where = 'soak of %s (%s s under load, round %d)' % (target['name'], out['elapsed_s'], out['rounds'])
    if run is None:
        msg = last.get('msg') if isinstance(last, dict) else None
        return dict(out, passed=False, reason='%s: the round did not run (%s)' % (where, msg or 'no result'))
    samples = (run.get('errors') or {}).get('samples') or []
    first = ': %s' % (samples[0].get('message') if isinstance(samples[0], dict) else samples[0]) if samples else ''
    if out['failed'] > target['max_failed'] or out['output_tokens'] == 0:
        return dict(out, passed=False, reason='%s: %d of %d requests failed (at most %d allowed) and %d tokens came '
                    'out%s' % (where, out['failed'], out['requests'], target['max_failed'], out['output_tokens'], first))
    if out['elapsed_s'] < target['seconds']:
        return dict(out, passed=False, reason='%s: ended before its %d s' % (where, target['seconds']))
    return dict(out, passed=True, reason='%s passed: the last round %d of %d requests failed, %d tokens' % (
        where, out['failed'], out['requests'], out['output_tokens']))
