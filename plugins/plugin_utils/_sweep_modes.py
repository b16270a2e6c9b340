# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engines' own adaptive modes as candidates of a draft-length sweep (``draft_sweep_engine_modes``).

An engine that tunes speculation itself is measured, not trusted: after the fixed lengths are measured and the
winner selected, each mode the instance's release offers is served like a candidate (through inference_server,
with the engine's check of its configuration in its image on), gated on output equivalence against the same
baseline, measured on every workload at every load level, and kept only when it wins by the rule a schedule is
kept by (plugin_utils/_sweep_schedule.py, ``beats_fixed``: within noise of the best fixed length at every level
and, over the levels, rated above the best single length).

* :func:`offered`: per requested mode, whether the instance's release offers it (its table has the field),
  at which draft length (the largest swept: the engine chooses below it) and with which speculative options.
* :func:`mode_instance`: the instance served for a mode.
* :func:`failed_outcome`, :func:`gate_outcome`, :func:`measured_outcome`: what became of a mode; a
  configuration the engine's check refused is ``refused`` with the engine's message, and the sweep goes on.
* :func:`chosen`: the mode served in place of the fixed lengths' plan, or None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

# every mode: the engine that offers it, its SpeculativeConfig field in each spelling a release used (newest
# first: vLLM's first weeks of the feature spelled it adaptive_verification), and how the report names it
MODES = {
    'adaptive_verification': {
        'engine': 'vllm', 'fields': ('enable_adaptive_verification', 'adaptive_verification'),
        'title': "vLLM's adaptive verification",
        'how': 'the engine profiles its step costs at start-up and verifies, per step, as many of the draft '
               'tokens as pay',
    },
}

# what each engine tunes by itself where it is not a mode here
OWN_SCHEDULE = {
    'trtllm': "TensorRT-LLM's own dynamic draft length is its draft_len_schedule, which the sweep measures as "
              "the schedule its load levels make (draft_sweep_apply_schedule)",
}

# each status, and how the report says it (a measured mode either won or lost)
OUTCOMES = {'not_offered': 'not offered', 'refused': 'refused by the engine', 'failed': 'failed to serve',
            'rejected': 'rejected by the output-equivalence gate', 'measured': 'lost'}

MESSAGE_LENGTH = 1200


class ModeError(ValueError):
    """A mode entry or outcome the decisions cannot read."""


def _entry(entry):
    if not isinstance(entry, dict) or entry.get('mode') not in MODES:
        raise ModeError('a mode must be an entry of the plan (one of %s), got %r' % (', '.join(sorted(MODES)), entry))
    return entry


def offered(modes, engine, version, fields, draft_lens):
    """Each requested mode, in order: ``{mode, title, offered, draft_len, options, reason}``.

    ``engine`` and ``version`` are the instance's as rendered, ``fields`` the field names of its release's
    SpeculativeConfig (its engine table), ``draft_lens`` the swept lengths. A mode another engine offers, or one
    the release lacks, is not offered: it is reported, never served."""
    out = []
    for name in modes:
        if name not in MODES:
            raise ModeError('draft_sweep_engine_modes: %r is not a mode (allowed: %s)' % (name, ', '.join(sorted(MODES))))
        mode = MODES[name]
        entry = {'mode': name, 'title': mode['title'], 'offered': False, 'draft_len': None, 'options': {}}
        field = next((f for f in mode['fields'] if f in fields), None)
        if engine != mode['engine']:
            entry['reason'] = '%s is a vLLM mode; this instance is served by %s%s' % (
                mode['title'], engine, ('. ' + OWN_SCHEDULE[engine]) if engine in OWN_SCHEDULE else '')
        elif field is None:
            entry['reason'] = '%s %s has no %s (its SpeculativeConfig has no %s)' % (
                engine, version, mode['title'], ' or '.join(mode['fields']))
        else:
            top = max(int(d) for d in draft_lens)
            entry.update(offered=True, draft_len=top, options={field: True},
                         reason='%s: %s, up to draft length %d (the largest swept)' % (mode['title'], mode['how'], top))
        out.append(entry)
    return out


def mode_instance(candidate, entry):
    """The instance served for a mode: ``candidate`` (the instance at the mode's draft length, as a fixed length's
    is defined) with the mode's speculative options over the declared ones."""
    entry = _entry(entry)
    if not entry.get('offered'):
        raise ModeError('%s is not offered here and is not served: %s' % (entry['mode'], entry.get('reason')))
    if not isinstance(candidate, dict) or not isinstance(candidate.get('speculative'), dict):
        raise ModeError('the candidate instance must have speculative settings, got %r' % (candidate,))
    spec = copy.deepcopy(candidate['speculative'])
    spec['options'] = dict(spec.get('options') or {}, **entry['options'])
    return dict(candidate, speculative=spec)


def _outcome(entry, status, reason, **more):
    out = {'mode': entry['mode'], 'title': entry['title'], 'draft_len': entry.get('draft_len'),
           'options': dict(entry.get('options') or {}), 'status': status, 'kept': False, 'reason': reason}
    out.update(more)
    out['outcome'] = 'won' if out['kept'] else OUTCOMES[status]
    return out


def not_offered(entry):
    """The outcome of a mode the release does not offer."""
    entry = _entry(entry)
    return _outcome(entry, 'not_offered', 'not offered: %s' % entry.get('reason'))


def _messages(failure):
    """The failed task's messages: its own, or each failed loop item's."""
    items = [r for r in failure.get('results') or [] if isinstance(r, dict) and r.get('failed')]
    texts = [str(r.get('msg') or '') for r in items if r.get('msg')] or [str(failure.get('msg') or 'failed')]
    text = '; '.join(texts)
    return text if len(text) <= MESSAGE_LENGTH else text[:MESSAGE_LENGTH - 3] + '...'


def failed_outcome(entry, failure, action):
    """The outcome of a mode whose serving failed: ``refused`` when the engine's check of the configuration in its
    image (``action`` the failed task's, specdec.serve.engine_check) refused it, before anything restarted, with the
    engine's message; otherwise ``failed``, with the failed task's message."""
    entry = _entry(entry)
    if not isinstance(failure, dict):
        raise ModeError('the failed result must be a mapping, got %r' % (failure,))
    message = _messages(failure)
    if str(action or '').rsplit('.', maxsplit=1)[-1] == 'engine_check':
        return _outcome(entry, 'refused', 'refused by the engine: %s' % message, message=message)
    return _outcome(entry, 'failed', 'failed to serve: %s' % message, message=message)


def gate_outcome(entry, verdict):
    """None when the output-equivalence gate's ``verdict`` lets the mode be measured; otherwise its ``rejected``
    outcome."""
    entry = _entry(entry)
    if not isinstance(verdict, dict):
        raise ModeError('the gate verdict must be a mapping, got %r' % (verdict,))
    if verdict.get('eligible'):
        return None
    return _outcome(entry, 'rejected', 'rejected by the output-equivalence gate (%s): %s'
                    % (verdict.get('verdict'), verdict.get('reason')), gate=verdict)


def measured_outcome(entry, result, served):
    """The outcome of a measured mode: ``kept`` only if it is within noise of the best fixed length at every level
    and, over the levels, rated above the best single length (``beats_fixed``), from the selection ``result`` and
    the mode's measurements ``served`` (serve_bench results)."""
    from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import rounded
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import beats_fixed, rate_served
    entry = _entry(entry)
    rated = rate_served(result, served)
    keep, why = beats_fixed(rated, entry['title'])
    return _outcome(entry, 'measured', ('won: ' if keep else 'lost: ') + why, kept=keep,
                    levels=rated['levels'], range={'served': rounded(rated['served_range']),
                                                   'best_single': rounded(rated['best_range']),
                                                   'best_single_draft_len': rated['best_single']})


def chosen(outcomes):
    """The kept mode with the highest rating over the levels, or None."""
    kept = [o for o in outcomes or [] if isinstance(o, dict) and o.get('kept')]
    return max(kept, key=lambda o: ((o.get('range') or {}).get('served') or 0)) if kept else None
