# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's Prometheus rules and what they promise, decided from its checked settings
(:func:`plugin_utils._monitoring.check`).

* :func:`rules` are the recording rules (acceptance length and rate, per-position acceptance,
  generated tokens/s, queueing, KV cache use, per host and instance) and the alerts, each with its
  severity (``SEVERITY``) and its annotations (:func:`annotations`).
* :func:`alert_bound` is the time the rules promise from an acceptance drop to the *speculation
  stopped paying* alert firing (and to its resolution).
* :func:`wedged_bound` is the time they promise from an engine's last token, with requests in flight, to the
  *engine wedged* alert firing.
* :func:`alert_tests` is a ``promtool test rules`` file that covers every alert with the configured
  durations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring import check


BY = 'sum by (host, engine_instance) '


def _g(x):
    return ('%.4f' % x).rstrip('0').rstrip('.')


def annotations(alert, s):
    """Annotations of an alert (no $value in them, so promtool tests can state them exactly)."""
    who = '{{ $labels.host }}/{{ $labels.engine_instance }}'
    texts = {
        'SpeculationStoppedPaying': (
            'Speculation stopped paying on %s' % who,
            'Live acceptance length over %s is below %s of what the last applied draft-length sweep measured '
            'for this instance, for %s: the draft length the sweep chose no longer fits the traffic. Re-run '
            'the sweep (playbooks/sweep.yml) or look at what changed in the workload or the engine.'
            % (s['acceptance_window'], _g(1 - s['acceptance_margin']), s['acceptance_for'])),
        'SpecdecEngineDown': (
            'Engine %s is down' % who,
            'Its metrics endpoint (through the exporter, or scraped directly) has not answered for %s.'
            % s['engine_down_for']),
        'SpecdecEngineWedged': (
            'Engine %s is wedged' % who,
            'It has held requests in flight without generating a token for %s while it still answers: streams '
            'hang and /health says nothing. Only a full restart recovers it (every rank of a stack, workers then '
            'the head).' % s['engine_wedged_for']),
        'SpecdecEngineNotReady': (
            'Engine %s is not ready' % who,
            'Its /health has not answered 200 for %s.' % s['engine_down_for']),
        'SpecdecExporterDown': (
            'specdec-exporter on {{ $labels.host }} is down',
            'Prometheus has not scraped the exporter for %s: the engines of this host are not monitored.'
            % s['engine_down_for']),
        'SpecdecKVCacheNearFull': (
            'KV cache of %s is nearly full' % who,
            'KV cache use has been above %s for %s; requests will queue or be preempted.'
            % (_g(s['kv_cache_threshold']), s['kv_cache_for'])),
        'SpecdecRequestsQueueing': (
            'Requests queue on %s' % who,
            'More than %s requests have been waiting for %s: the engine is at its batch limit.'
            % (_g(s['queue_threshold']), s['queue_for'])),
    }
    summary, description = texts[alert]
    return {'summary': summary, 'description': description}


SEVERITY = {'SpeculationStoppedPaying': 'warning', 'SpecdecEngineDown': 'critical', 'SpecdecEngineWedged': 'critical',
            'SpecdecEngineNotReady': 'critical',
            'SpecdecExporterDown': 'warning', 'SpecdecKVCacheNearFull': 'warning', 'SpecdecRequestsQueueing': 'warning'}


def rules(settings):
    """The rules file (a mapping): group specdec-recording, then group specdec-alerts."""
    s = check(settings)
    w = s['acceptance_window']

    def rate(metric):
        return '%s(rate(%s[%s]))' % (BY, metric, w)

    rec = [
        # acceptance length: tokens per generation step (TensorRT-LLM, from avgNumDecodedTokensPerIter,
        # present even when specDecodingStats is null); 1 + accepted per draft (vLLM)
        ('specdec:acceptance_length:rate',
         '%s / %s' % (rate('specdec_engine_decoded_tokens_total'), rate('specdec_engine_generation_steps_total'))),
        ('specdec:acceptance_length:rate',
         '1 + %s / %s' % (rate('vllm:spec_decode_num_accepted_tokens_total'), rate('vllm:spec_decode_num_drafts_total'))),
        ('specdec:decoding_steps:rate', rate('specdec_engine_generation_steps_total')),
        ('specdec:decoding_steps:rate', rate('vllm:spec_decode_num_drafts_total')),
        ('specdec:acceptance_rate:rate',
         '%s / %s' % (rate('specdec_engine_accepted_draft_tokens_total'), rate('specdec_engine_draft_tokens_total'))),
        ('specdec:acceptance_rate:rate',
         '%s / %s' % (rate('vllm:spec_decode_num_accepted_tokens_total'), rate('vllm:spec_decode_num_draft_tokens_total'))),
        ('specdec:acceptance_rate_per_position:rate',
         'sum by (host, engine_instance, position) (rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[%s])) '
         '/ on (host, engine_instance) group_left() %s' % (w, rate('vllm:spec_decode_num_drafts_total'))),
        ('specdec:generated_tokens:rate', rate('specdec_engine_generated_tokens_total')),
        ('specdec:generated_tokens:rate', rate('vllm:generation_tokens_total')),
        ('specdec:queued_requests', BY + '(specdec_engine_queued_requests)'),
        ('specdec:queued_requests', BY + '(vllm:num_requests_waiting)'),
        ('specdec:running_requests', BY + '(specdec_engine_active_requests)'),
        ('specdec:running_requests', BY + '(vllm:num_requests_running)'),
        ('specdec:kv_cache_usage:ratio', 'max by (host, engine_instance) (specdec_engine_kv_cache_usage_ratio)'),
        ('specdec:kv_cache_usage:ratio',
         'max by (host, engine_instance) ({__name__=~"vllm:(kv|gpu)_cache_usage_perc"})'),
        ('specdec:acceptance_length:expected',
         'max by (host, engine_instance) (specdec_sweep_expected_acceptance_length)'),
    ]
    margin = 1 - s['acceptance_margin']
    alerts = [
        ('SpeculationStoppedPaying',
         'specdec:acceptance_length:rate < on (host, engine_instance) (specdec:acceptance_length:expected * %s) '
         'and on (host, engine_instance) specdec:decoding_steps:rate > %s' % (_g(margin), _g(s['acceptance_min_steps_per_s'])),
         s['acceptance_for']),
        ('SpecdecEngineDown',
         'min by (host, engine_instance) (specdec_engine_up{engine="trtllm"} == 0 or up{job="specdec-vllm"} == 0)',
         s['engine_down_for']),
        # progress, not liveness: no token generated over the whole window while requests are in flight (running
        # or queued), or while the exporter's one-token probe gets nothing within its deadline (TensorRT-LLM's
        # iteration stats of a wedged engine are as empty as an idle one's)
        ('SpecdecEngineWedged',
         'specdec:generated_tokens:rate == 0 and on (host, engine_instance) '
         '((specdec:running_requests + on (host, engine_instance) specdec:queued_requests) > 0 '
         'or on (host, engine_instance) max by (host, engine_instance) (specdec_engine_progress == 0))',
         s['engine_wedged_for']),
        ('SpecdecEngineNotReady', 'min by (host, engine_instance) (specdec_engine_ready == 0)', s['engine_down_for']),
        ('SpecdecExporterDown', 'min by (host) (up{job="specdec-exporter"} == 0)', s['engine_down_for']),
        ('SpecdecKVCacheNearFull', 'specdec:kv_cache_usage:ratio > %s' % _g(s['kv_cache_threshold']), s['kv_cache_for']),
        ('SpecdecRequestsQueueing', 'specdec:queued_requests > %s' % _g(s['queue_threshold']), s['queue_for']),
    ]
    return {'groups': [
        {'name': 'specdec-recording', 'interval': s['evaluation_interval'],
         'rules': [{'record': name, 'expr': expr} for name, expr in rec]},
        {'name': 'specdec-alerts', 'interval': s['evaluation_interval'],
         'rules': [{'alert': name, 'expr': expr, 'for': dur, 'labels': {'severity': SEVERITY[name]},
                    'annotations': annotations(name, s)} for name, expr, dur in alerts]},
    ]}


def alert_bound(settings):
    """Seconds the rules promise, at most, from an acceptance drop on the engine to the
    SpeculationStoppedPaying alert firing in Alertmanager (``fire_s``) and from the recovery to its
    resolution (``resolve_s``), with the terms they add up from.

    The exporter reads the iteration (poll), Prometheus scrapes it (scrape), the rate window fills with
    the new acceptance (window), the recording and the alert rule see it (evaluation, twice: the groups
    are evaluated independently), the condition holds for ``for``, and Prometheus sends the alert to
    Alertmanager at that evaluation. Resolution needs no ``for``."""
    s = check(settings)
    terms = {'poll': float(s['exporter_poll_interval']), 'scrape': s['scrape_interval_s'], 'window': s['acceptance_window_s'],
             'evaluation': 2 * s['evaluation_interval_s'], 'for': s['acceptance_for_s']}
    fire = sum(terms.values())
    return {'fire_s': fire, 'resolve_s': fire - terms['for'], 'terms': terms}


def wedged_bound(settings):
    """Seconds the rules promise, at most, from an engine's wedge under load to SpecdecEngineWedged firing in
    Alertmanager (``fire_s``), with its terms: the exporter's poll, the scrape, the longer of the rate window
    emptying of the last token and the first probe to miss its deadline (``window_or_probe``: the probe is what
    shows a wedged TensorRT-LLM engine, whose iteration stats stop, and an idle wedged one; the judgement just
    after the wedge may still count the tokens made before it, so the failing probe can start two intervals
    after the wedge), two evaluations and ``for``."""
    s = check(settings)
    probe = 2 * float(s['exporter_probe_interval']) + float(s['exporter_probe_deadline']) \
        if float(s['exporter_probe_interval']) > 0 else 0.0
    terms = {'poll': float(s['exporter_poll_interval']), 'scrape': s['scrape_interval_s'],
             'window_or_probe': max(s['acceptance_window_s'], probe), 'evaluation': 2 * s['evaluation_interval_s'],
             'for': s['engine_wedged_for_s']}
    return {'fire_s': sum(terms.values()), 'terms': terms}


# --------------------------------------------------------------------------- promtool tests

def _values(per_step, steps, start=0.0):
    out, value = [], start
    for inc in per_step[:steps]:
        out.append(value)
        value += inc
    return out


def _series(name, labels, values):
    lab = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
    return {'series': '%s{%s}' % (name, lab),
            'values': ' '.join(_g(v) if isinstance(v, float) else str(v) for v in values)}


def _expanded(alert, labels, s):
    ann = annotations(alert, s)
    out = {}
    for key, text in ann.items():
        for lk in ('host', 'engine_instance'):
            text = text.replace('{{ $labels.%s }}' % lk, labels.get(lk, ''))
        out[key] = text
    return out


def alert_tests(settings, rule_file='rules.yml'):
    """A ``promtool test rules`` file (mapping) for the rules of `settings`, covering every alert:
    it fires after its condition held for its ``for`` and not before; the speculation alert fires
    within alert_bound() of a drop, not for a drop inside the margin, and resolves after recovery."""
    s = check(settings)
    step = s['scrape_interval_s']
    ev = s['evaluation_interval_s']
    bound = alert_bound(s)
    n_win = int(-(-s['acceptance_window_s'] // step))

    def at(sec):
        # an evaluation time in whole evaluation intervals, as a duration promtool reads
        sec = int(-(-sec // ev) * ev)
        return '%ds' % sec

    def steps(sec):
        return int(-(-sec // step))

    host, inst = 'engine-01', 'target-a'
    trt = {'host': host, 'engine_instance': inst, 'engine': 'trtllm', 'job': 'specdec-exporter',
           'instance': 'engine-01:%d' % s['exporter_port']}
    vl = {'host': host, 'engine_instance': 'target-v', 'engine': 'vllm', 'job': 'specdec-vllm', 'instance': 'engine-01:8001'}
    exp_trt = dict(trt)
    exp_vl = dict(vl, job='specdec-exporter', instance=trt['instance'])
    alert_labels = {'host': host, 'engine_instance': inst}
    sev = {'severity': SEVERITY['SpeculationStoppedPaying']}

    # speculation: expected 4 tokens per step; healthy 4.0, inside the margin, dropped to 1.5, recovered
    warm = max(2 * n_win, steps(ev * 2) + n_win)
    drop_at = warm * step
    fire_by = drop_at + bound['fire_s']
    recover_at = fire_by + 2 * step
    recover_steps = steps(recover_at)
    end_steps = recover_steps + steps(bound['resolve_s'] + 4 * ev)
    per = []
    for i in range(end_steps + 1):
        t = i * step
        per.append(10 * (1.5 if drop_at <= t < recover_at else 4.0))
    inside = 10 * 4.0 * (1 - s['acceptance_margin'] / 2)
    spec_tests = {
        'interval': '%ds' % step,
        'input_series': [
            _series('specdec_engine_decoded_tokens_total', trt, _values(per, end_steps + 1)),
            _series('specdec_engine_generation_steps_total', trt, _values([10] * (end_steps + 1), end_steps + 1)),
            _series('specdec_sweep_expected_acceptance_length', exp_trt, [4] * (end_steps + 1)),
            # vLLM: inside the margin the whole time, never fires
            _series('vllm:spec_decode_num_accepted_tokens_total', vl, _values([inside - 10] * (end_steps + 1), end_steps + 1)),
            _series('vllm:spec_decode_num_drafts_total', vl, _values([10] * (end_steps + 1), end_steps + 1)),
            _series('specdec_sweep_expected_acceptance_length', exp_vl, [4] * (end_steps + 1)),
        ],
        'alert_rule_test': [
            {'eval_time': at(drop_at - ev), 'alertname': 'SpeculationStoppedPaying', 'exp_alerts': []},
            {'eval_time': at(max(drop_at + s['acceptance_for_s'] - 2 * ev, drop_at)), 'alertname': 'SpeculationStoppedPaying',
             'exp_alerts': []},
            {'eval_time': at(fire_by), 'alertname': 'SpeculationStoppedPaying',
             'exp_alerts': [{'exp_labels': dict(alert_labels, **sev),
                             'exp_annotations': _expanded('SpeculationStoppedPaying', alert_labels, s)}]},
            {'eval_time': at(recover_at + bound['resolve_s']), 'alertname': 'SpeculationStoppedPaying', 'exp_alerts': []},
        ],
        'promql_expr_test': [
            {'expr': 'specdec:acceptance_length:rate{engine_instance="target-a"}', 'eval_time': at(drop_at - ev),
             'exp_samples': [{'labels': 'specdec:acceptance_length:rate{host="%s",engine_instance="%s"}' % (host, inst),
                              'value': 4}]},
        ],
    }

    def down_test(alert, name, labels, bad_value, good_value, dur_s, exp):
        """A gauge good for two evaluation intervals, then bad: fires only after `dur_s`."""
        good_steps = steps(2 * ev) + 1
        total = good_steps + steps(dur_s + 4 * ev) + 2
        values = [good_value] * good_steps + [bad_value] * (total - good_steps)
        start = good_steps * step
        return {
            'interval': '%ds' % step,
            'input_series': [_series(name, labels, values)],
            'alert_rule_test': [
                {'eval_time': at(start + dur_s - 2 * ev) if dur_s > 2 * ev else at(start - ev), 'alertname': alert,
                 'exp_alerts': []},
                {'eval_time': at(start + dur_s + 2 * ev + step), 'alertname': alert,
                 'exp_alerts': [{'exp_labels': dict(exp, severity=SEVERITY[alert]), 'exp_annotations': _expanded(alert, exp, s)}]},
            ],
        }

    def wedged_test(engine_labels, tokens, running, queued, exp):
        """Requests in flight and tokens flowing, then no token (still in flight): fires within wedged_bound(), not
        before ``for``. A second instance is idle (nothing in flight, no token) the whole time and never fires."""
        wb = wedged_bound(s)
        flowing = max(2 * n_win, steps(ev * 2) + n_win)
        stop_at = flowing * step
        total = flowing + steps(wb['fire_s'] + 4 * ev) + 2
        idle = dict(engine_labels, engine_instance='idle-' + engine_labels['engine_instance'])
        return {
            'interval': '%ds' % step,
            'input_series': [
                _series(tokens, engine_labels, _values([25] * flowing + [0] * (total - flowing), total)),
                _series(running, engine_labels, [2] * total),
                _series(queued, engine_labels, [0] * flowing + [3] * (total - flowing)),
                _series(tokens, idle, [100] * total),
                _series(running, idle, [0] * total),
                _series(queued, idle, [0] * total),
            ],
            'alert_rule_test': [
                {'eval_time': at(stop_at - ev), 'alertname': 'SpecdecEngineWedged', 'exp_alerts': []},
                {'eval_time': at(max(stop_at + s['engine_wedged_for_s'] - 2 * ev, stop_at)), 'alertname': 'SpecdecEngineWedged',
                 'exp_alerts': []},
                {'eval_time': at(stop_at + wb['fire_s']), 'alertname': 'SpecdecEngineWedged',
                 'exp_alerts': [{'exp_labels': dict(exp, severity=SEVERITY['SpecdecEngineWedged']),
                                 'exp_annotations': _expanded('SpecdecEngineWedged', exp, s)}]},
            ],
        }

    def probe_test():
        """TensorRT-LLM through the exporter: the wedge empties its iteration stats (nothing in flight, no token),
        and only the progress probe fails: fires within wedged_bound(). An idle engine beside it, no token and
        nothing in flight but its probe answering, never fires."""
        wb = wedged_bound(s)
        flowing = max(2 * n_win, steps(ev * 2) + n_win)
        stop_at = flowing * step
        total = flowing + steps(wb['fire_s'] + 4 * ev) + 2
        idle = dict(trt, engine_instance='idle-' + inst)
        series = []
        for labels, tokens, progress in ((trt, [25] * flowing + [0] * (total - flowing),
                                          [1] * (flowing + 2) + [0] * (total - flowing - 2)),
                                         (idle, [0] * total, [1] * total)):
            series += [_series('specdec_engine_generated_tokens_total', labels, _values(tokens, total)),
                       _series('specdec_engine_active_requests', labels, [0] * total),
                       _series('specdec_engine_queued_requests', labels, [0] * total),
                       _series('specdec_engine_progress', labels, progress)]
        return {
            'interval': '%ds' % step,
            'input_series': series,
            'alert_rule_test': [
                {'eval_time': at(stop_at - ev), 'alertname': 'SpecdecEngineWedged', 'exp_alerts': []},
                {'eval_time': at(stop_at + wb['fire_s']), 'alertname': 'SpecdecEngineWedged',
                 'exp_alerts': [{'exp_labels': dict(alert_labels, severity=SEVERITY['SpecdecEngineWedged']),
                                 'exp_annotations': _expanded('SpecdecEngineWedged', alert_labels, s)}]},
            ],
        }

    tests = [
        spec_tests,
        probe_test(),
        wedged_test(trt, 'specdec_engine_generated_tokens_total', 'specdec_engine_active_requests',
                    'specdec_engine_queued_requests', alert_labels),
        wedged_test(vl, 'vllm:generation_tokens_total', 'vllm:num_requests_running', 'vllm:num_requests_waiting',
                    {'host': host, 'engine_instance': 'target-v'}),
        down_test('SpecdecEngineDown', 'specdec_engine_up', trt, 0, 1, s['engine_down_for_s'], alert_labels),
        down_test('SpecdecEngineDown', 'up', vl, 0, 1, s['engine_down_for_s'], {'host': host, 'engine_instance': 'target-v'}),
        down_test('SpecdecEngineNotReady', 'specdec_engine_ready', trt, 0, 1, s['engine_down_for_s'], alert_labels),
        down_test('SpecdecExporterDown', 'up', {'job': 'specdec-exporter', 'host': host, 'instance': trt['instance']},
                  0, 1, s['engine_down_for_s'], {'host': host}),
        down_test('SpecdecKVCacheNearFull', 'specdec_engine_kv_cache_usage_ratio', trt,
                  min(1.0, s['kv_cache_threshold'] + 0.05), max(0.0, s['kv_cache_threshold'] - 0.3), s['kv_cache_for_s'],
                  alert_labels),
        down_test('SpecdecRequestsQueueing', 'specdec_engine_queued_requests', trt, s['queue_threshold'] + 3, 0,
                  s['queue_for_s'], alert_labels),
    ]
    return {'rule_files': [rule_file], 'evaluation_interval': '%ds' % ev, 'tests': tests}
