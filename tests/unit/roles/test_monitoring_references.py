"""What the monitoring queries read from an engine (plugin_utils/_monitoring_references.py: query_expressions,
metric_references, exposition_labels, unserved): the names and labels the real_engine scenario checks
against the real vLLM's /metrics."""

import json
from pathlib import Path

from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_references as M
from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R

DASHBOARD = Path(__file__).resolve().parents[3] / "roles" / "monitoring" / "files" / "grafana" / "specdec-dashboard.json"


def test_query_expressions_cover_rules_panels_and_variables():
    rules = {"groups": [{"rules": [{"record": "a:b", "expr": "sum(x)"}, {"alert": "Down", "expr": "up == 0"}]}]}
    dash = {"panels": [{"title": "P", "targets": [{"expr": "rate(y[1m])"}, {"refId": "B"}]}],
            "templating": {"list": [{"name": "host", "query": {"query": "label_values(z, host)"}},
                                    {"name": "old", "query": "label_values(w, job)"}, {"name": "c", "type": "custom"}]}}
    assert M.query_expressions(rules, dash) == [
        ("rule a:b", "sum(x)"), ("rule Down", "up == 0"), ("panel P", "rate(y[1m])"),
        ("variable host", "label_values(z, host)"), ("variable old", "label_values(w, job)")]
    assert M.query_expressions() == []


def test_a_by_aggregation_needs_its_labels_only_inside_it():
    refs = M.metric_references([
        "sum by (host, position) (rate(vllm:per_pos_total[1m])) / on (host) group_left() sum by (host) (rate(vllm:drafts_total[1m]))",
    ], "vllm:")
    assert refs == {"names": {"vllm:per_pos_total": ["host", "position"], "vllm:drafts_total": ["host"]},
                    "patterns": {}}


def test_a_trailing_by_and_the_matchers_and_label_values_are_needed():
    refs = M.metric_references([
        ("panel", 'sum(rate(vllm:a_total{model_name="m", finished_reason!="abort"}[5m])) by (engine)'),
        "label_values(vllm:b, model_name)",
        "vllm:c * on (host) group_right (engine_instance) other",
    ], "vllm:")
    assert refs["names"] == {"vllm:a_total": ["engine", "finished_reason", "model_name"],
                             "vllm:b": ["model_name"], "vllm:c": ["engine_instance", "host"]}


def test_without_and_ignoring_need_nothing_and_strings_name_no_metric():
    refs = M.metric_references([
        'sum without (engine) (vllm:a) + ignoring (position) vllm:b',
        'count(up{job="vllm:not_a_metric"})',
        'max by (host) ({__name__=~"vllm:(kv|gpu)_cache_usage_perc", model_name!=""})',
        'other_metric{__name__=~"specdec_.*"}',
    ], "vllm:")
    assert refs["names"] == {"vllm:a": [], "vllm:b": []}
    assert refs["patterns"] == {"vllm:(kv|gpu)_cache_usage_perc": ["host", "model_name"]}


def test_exposition_labels_reads_every_sample_and_skips_comments():
    text = "\n".join([
        "# HELP vllm:drafts Number of drafts.",
        "# TYPE vllm:drafts counter",
        'vllm:drafts_total{engine="0",model_name="m"} 12.0',
        'vllm:drafts_created{engine="0",model_name="m"} 1.7e9',
        'vllm:per_pos_total{engine="0",model_name="m",position="0"} 3.0',
        'vllm:per_pos_total{engine="0",model_name="m",position="1"} 2.0',
        'vllm:req{le="+Inf",odd="a, \\"b\\" = c"} 1',
        "process_open_fds 7",
        "",
    ])
    assert M.exposition_labels(text) == {
        "process_open_fds": [], "vllm:drafts_created": ["engine", "model_name"],
        "vllm:drafts_total": ["engine", "model_name"], "vllm:per_pos_total": ["engine", "model_name", "position"],
        "vllm:req": ["le", "odd"]}


def test_unserved_names_a_missing_name_label_or_pattern():
    served = {"vllm:drafts_total": ["engine", "model_name"], "vllm:kv_cache_usage_perc": ["model_name"],
              "vllm:per_pos_total": ["model_name"]}
    refs = {"names": {"vllm:drafts_total": ["host", "model_name"], "vllm:drafts": [],
                      "vllm:per_pos_total": ["host", "position"]},
            "patterns": {"vllm:(kv|gpu)_cache_usage_perc": ["host"], "vllm:gpu_.*": [],
                         "vllm:kv_cache_usage": []}}
    assert M.unserved(refs, served, provided=("host",)) == [
        "vllm:drafts is not served",
        "vllm:per_pos_total is served without label(s) position",
        "no served name matches vllm:gpu_.*",
        "no served name matches vllm:kv_cache_usage",  # a name regex matches whole names
    ]
    assert "vllm:drafts_total is served without label(s) host" in M.unserved(refs, served)
    refs = {"patterns": {"vllm:kv_cache_usage_perc": ["engine"]}}
    assert M.unserved(refs, served) == ["no name matching vllm:kv_cache_usage_perc is served with label(s) engine"]


def test_the_roles_vllm_queries():
    """What the role's rules and dashboard read from vLLM: the spec-decode counters as served
    (``_total``), the per-position counter by ``position``, the KV cache gauge by either name."""
    refs = M.metric_references(M.query_expressions(R.rules({}), json.loads(DASHBOARD.read_text())), "vllm:")
    assert refs["names"]["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == ["engine_instance", "host", "position"]
    assert refs["names"]["vllm:spec_decode_num_drafts_total"] == ["engine_instance", "host"]
    assert set(refs["names"]) >= {"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total",
                                  "vllm:generation_tokens_total", "vllm:num_requests_waiting", "vllm:num_requests_running"}
    assert list(refs["patterns"]) == ["vllm:(kv|gpu)_cache_usage_perc"]
