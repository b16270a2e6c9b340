"""fleet_view.collected_instances: each instance a host serves with its health and last sweep, and the
report's rows built from them."""

from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet_view as fleet_view

INSTANCES = [
    {"name": "a", "image": "img", "engine": "trtllm", "engine_version": "1.2.0rc6", "model": "m",
     "speculative_method": "eagle3", "max_draft_len": 3},
    {"name": "b", "image": "img2", "engine": "vllm", "engine_version": "0.10.1", "speculative_method": "none",
     "health": "stale"},
    {"name": "c", "image": "img3", "engine": "vllm"},
    {"name": "d", "image": "img4", "engine": "vllm"},
]
HEALTH = [
    {"stage": "ready", "failed": False, "log_lines": [], "engine_version": "1.2.0rc5",
     "container_state": {"StartedAt": "2026-11-28T10:00:00Z", "Status": "running"}},
    {"stage": "generate", "failed": True, "msg": "engine is down", "log_lines": ["x", "y"], "container_state": None},
    {"skipped": True},
    {"stage": "ready", "failed": True, "msg": "ready but failed", "container_state": {}},
]
SWEEPS = {
    "a": {"last_sweep": {"run_id": "r1", "winner": {"draft_len": 4, "speedup": 1.5}},
          "applied": {"run_id": "r1", "max_draft_len": 4}},
    "b": {"last_sweep": {"run_id": "r2", "winner": None}},
    "c": None,
}


def test_each_instance_gets_its_health_and_sweep():
    got = fleet_view.collected_instances(INSTANCES, HEALTH, SWEEPS)
    assert got[0] == dict(INSTANCES[0], health="ready", health_stage="ready", health_error=None, health_log=[],
                          started_at="2026-11-28T10:00:00Z", engine_version_live="1.2.0rc5",
                          last_sweep=SWEEPS["a"]["last_sweep"], sweep_applied=SWEEPS["a"]["applied"], heal=None)
    # the fact's own health is replaced in place; a failed probe is down with its message and log
    assert got[1] == dict(INSTANCES[1], health="down", health_stage="generate", health_error="engine is down",
                          health_log=["x", "y"], started_at=None, engine_version_live=None,
                          last_sweep=SWEEPS["b"]["last_sweep"], sweep_applied=None, heal=None)
    assert list(got[1]) == list(INSTANCES[1]) + ["health_stage", "health_error", "health_log", "started_at",
                                                 "engine_version_live", "last_sweep", "sweep_applied", "heal"]
    # a probe that did not run; a null sweep entry
    assert got[2] == dict(INSTANCES[2], health="down", health_stage=None, health_error=None, health_log=[],
                          started_at=None, engine_version_live=None, last_sweep=None, sweep_applied=None, heal=None)
    # ready but failed is down, with no error (its stage is ready)
    assert got[3]["health"] == "down" and got[3]["health_error"] is None and got[3]["started_at"] is None
    assert INSTANCES[1]["health"] == "stale"


def test_no_instances_no_sweeps():
    assert fleet_view.collected_instances([], [], {}) == []
    assert fleet_view.collected_instances(INSTANCES[:1], HEALTH[:1], None)[0]["last_sweep"] is None


def test_the_rows_are_built_from_the_collected_instances():
    instances = fleet_view.collected_instances(INSTANCES[:2], HEALTH[:2], SWEEPS)
    report = fleet_view.build_report("t", "g", ["h"], {}, {"h": {"collected_at": 1.0, "instances": instances}})
    assert [(r["instance"], r["health"], r["engine"], r["draft_len"], r["sweep"]) for r in report["rows"]] == [
        ("a", "ready", "trtllm 1.2.0rc6 (serving 1.2.0rc5)", 3, "draft 4, x1.50 (r1)"),
        ("b", "down", "vllm 0.10.1", None, None),
    ]


HEAL = {"restarts": 2, "restarted_at": ["2026-12-06T01:00:00Z", "2026-12-06T01:10:00Z"], "drained": True,
        "last_heal": {"at": "2026-12-06T01:20:00Z", "outcome": "left drained", "reason": "restart limit: ..."},
        "window_s": 3600.0, "engine": "h/a"}


def test_a_healed_instance_shows_its_restarts_and_last_heal_and_the_table_gets_its_column():
    instances = fleet_view.collected_instances(INSTANCES[:2], HEALTH[:2], SWEEPS, {"a": HEAL, "b": "not a record"})
    assert instances[0]["heal"] == HEAL and instances[1]["heal"] is None
    report = fleet_view.build_report("t", "g", ["h"], {}, {"h": {"collected_at": 1.0, "instances": instances}})
    assert [r["heals"] for r in report["rows"]] == ["2 in 1h (last 2026-12-06T01:20:00Z: left drained), DRAINED", None]
    assert report["rows"][0]["heal"] == HEAL
    assert ["heals", "HEALS"] in fleet_view.columns(False, None, None, True)
    assert ["heals", "HEALS"] not in fleet_view.columns(False, None, None)
    back = dict(HEAL, restarts=1, drained=False, window_s=90.0,
                last_heal={"at": "2026-12-06T02:00:00Z", "outcome": "restarted"})
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [dict(INSTANCES[0], heal=back)]}}))
    assert row[0]["heals"] == "1 in 90s (last 2026-12-06T02:00:00Z: restarted)"
