"""fleet_report: the fleet view's rows, columns and JSON, built on the controller."""

import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.specdec.serve.plugins.action.fleet_report import query_prometheus
from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet_view as fleet_view
from ansible_collections.specdec.serve.plugins.plugin_utils._monitoring_live import LIVE_QUERIES

INSTANCE = {
    "name": "main", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2", "engine": "trtllm",
    "engine_version": "1.2.0rc2", "engine_version_live": "1.2.0rc2", "model": "nvidia/Llama-3.1-8B-Instruct-FP8",
    "speculative_method": "eagle3", "max_draft_len": 5, "health": "ready",
    "last_sweep": {"run_id": "20261124T1000Z", "winner": {"draft_len": 4, "speedup": 1.734,
                                                          "acceptance_length": 3.1, "acceptance_length_estimate": 2.9}},
}


def test_a_row_per_instance_with_the_sweep_winner():
    records = {"spark-01": {"collected_at": 1.0, "instances": [INSTANCE]}}
    report = fleet_view.build_report("Fleet", "2026-11-25T00:00:00Z", ["spark-01"], {}, records)
    assert report["rows"] == [{
        "host": "spark-01", "status": None, "instance": "main", "image": INSTANCE["image"],
        "engine": "trtllm 1.2.0rc2", "model": INSTANCE["model"], "speculative": "eagle3", "draft_len": 5,
        "health": "ready", "stack": None, "sweep": "draft 4, x1.73 (20261124T1000Z)", "sweep_acceptance_length": 3.1,
        "sweep_acceptance_estimate": 2.9, "tuned_on": None, "tuned_drift": None, "verified_at": None,
        "heals": None, "heal": None}]
    assert report["hosts"]["spark-01"] == {"status": None, "checked": True, "collected_at": 1.0,
                                           "instances": [INSTANCE]}
    assert "gateways" not in report


MEASURED_ON = {"engine": "trtllm", "engine_version": "1.2.0rc2", "image": INSTANCE["image"], "image_id": "sha256:aa",
               "model": INSTANCE["model"], "draft_model": None, "host_groups": ["spark-nodes"]}


def test_what_the_sweep_was_tuned_on_against_what_serves():
    proven = dict(INSTANCE["last_sweep"], measured_on=MEASURED_ON, finished_at="2026-11-24T10:00:00Z",
                  served_check={"mode": "schedule", "keep": True, "served_draft_len": 4, "reason": "kept: ..."})
    inst = dict(INSTANCE, image_id="sha256:aa", last_sweep=proven)
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [inst]}}))[0]
    assert row["tuned_on"] == "as serving" and row["tuned_drift"] == []
    assert row["verified_at"] == "2026-11-24T10:00:00Z"
    assert row["sweep"] == "schedule from draft 4, x1.73 (20261124T1000Z)"
    # a new image under the sweep's answer is flagged, with what changed
    moved = dict(inst, image="nvcr.io/nvidia/tensorrt-llm/release:1.2.1", image_id="sha256:bb", engine_version="1.2.1")
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [moved]}}))[0]
    assert row["tuned_on"] == "changed: engine_version, image, image_id"
    assert row["tuned_drift"] == ["engine_version", "image", "image_id"]
    # a schedule that fell back serves one length, and the cell says which
    fell = dict(proven, served_check={"mode": "schedule", "keep": False, "served_draft_len": 2, "reason": "fell back"})
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [dict(inst, last_sweep=fell)]}}))[0]
    assert row["sweep"] == "draft 2, x1.73 (20261124T1000Z)"


def test_hosts_not_collected_or_serving_nothing_say_so_with_their_status():
    status = {"spark-02": {"status": "failed"}}
    records = {"spark-01": {"collected_at": 1.0, "instances": []}, "spark-02": None}
    rows = fleet_view.build_report("t", "g", ["spark-01", "spark-02"], status, records)["rows"]
    assert rows == [{"host": "spark-01", "status": None, "health": "nothing deployed"},
                    {"host": "spark-02", "status": "failed", "health": "not checked"}]


def test_engine_serving_another_version_no_speculation_and_no_sweep():
    inst = dict(INSTANCE, engine_version_live="1.1.0", speculative_method="none", last_sweep=None)
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [inst]}}))[0]
    assert row["engine"] == "trtllm 1.2.0rc2 (serving 1.1.0)"
    assert row["draft_len"] is None
    assert row["sweep"] is None and row["sweep_acceptance_length"] is None
    inst = dict(INSTANCE, engine_version_live=None,
                last_sweep={"run_id": "r", "winner": {"draft_len": 2, "speedup": None}})
    row = fleet_view.rows(["h"], fleet_view.host_views(["h"], {}, {"h": {"instances": [inst]}}))[0]
    assert row["engine"] == "trtllm 1.2.0rc2"
    assert row["sweep"] == "draft 2 (r)"


def test_live_figures_and_gateways_are_added_when_given():
    vector = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"host": "h", "engine_instance": "main"}, "value": [0, "3.0"]}]}}
    live = dict((k, vector) for k in LIVE_QUERIES)
    gateways = [{"item": "gw-01", "servers": [{"server": "h:main", "status": "UP", "sessions": 2}]}]
    report = fleet_view.build_report("t", "g", ["h"], {}, {"h": {"instances": [INSTANCE]}}, live=live,
                                     live_margin=0.2, gateways=gateways)
    row = report["rows"][0]
    assert row["live_acceptance_length"] == 3.0 and row["live_vs_sweep"] == "agrees"
    assert row["gateway"] == "gw-01: UP (2 in flight)"
    assert report["gateways"] == {"gw-01": {"servers": gateways[0]["servers"], "error": None}}


def test_columns_only_for_what_has_data():
    plain = fleet_view.columns(False, [], {})
    assert [c[0] for c in plain][:2] == ["host", "instance"] and len(plain) == len(fleet_view.BASE_COLUMNS)
    full = fleet_view.columns(True, [{"item": "gw"}], {"h": {"status": "updated"}})
    assert [c[0] for c in full][-5:] == ["live_acceptance_length", "live_tokens_per_s", "live_vs_sweep",
                                          "gateway", "status"]


def test_the_json_is_written_whole_and_only_when_it_changed(tmp_path):
    path = str(tmp_path / "new" / "fleet.json")
    text = fleet_view.report_json({"b": 1, "a": [1]})
    assert json.loads(text) == {"b": 1, "a": [1]} and text.index('"a"') < text.index('"b"')
    assert fleet_view.write_report(path, text) is True
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert fleet_view.write_report(path, text) is False
    assert fleet_view.write_report(path, fleet_view.report_json({"a": 2})) is True
    assert json.loads(open(path).read()) == {"a": 2}
    assert sorted(os.listdir(os.path.dirname(path))) == ["fleet.json"]  # no temporary file left


class _Prometheus(BaseHTTPRequestHandler):
    fail = False
    seen = []
    authorization = None  # the Authorization header every request must carry, when set

    def do_GET(self):  # noqa: N802 (http.server's name)
        _Prometheus.seen.append(self.path)
        if _Prometheus.authorization and self.headers.get("Authorization") != _Prometheus.authorization:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="prometheus"')
            self.end_headers()
            return
        if _Prometheus.fail:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def prometheus():
    server = HTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Prometheus.fail, _Prometheus.seen, _Prometheus.authorization = False, [], None
    yield "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()


def test_prometheus_is_asked_every_live_query(prometheus):
    responses = query_prometheus(prometheus)
    assert sorted(responses) == sorted(LIVE_QUERIES)
    assert sorted(_Prometheus.seen) == sorted("/api/v1/query?query=%s" % q.replace(":", "%3A")
                                              for q in LIVE_QUERIES.values())


def test_a_prometheus_that_fails_fails_the_task_naming_the_query(prometheus):
    _Prometheus.fail = True
    with pytest.raises(AnsibleActionFail, match="could not read specdec:"):
        query_prometheus(prometheus)


def test_a_prometheus_behind_basic_authentication_is_asked_as_the_user(prometheus):
    _Prometheus.authorization = "Basic " + base64.b64encode(b"viewer:v1ew-Secret").decode()
    with pytest.raises(AnsibleActionFail, match="401") as exc:
        query_prometheus(prometheus)
    assert "v1ew" not in str(exc.value)
    with pytest.raises(AnsibleActionFail, match="401") as exc:
        query_prometheus(prometheus, user="viewer", password="wrong-Secret")
    assert "wrong-Secret" not in str(exc.value)
    assert sorted(query_prometheus(prometheus, user="viewer", password="v1ew-Secret")) == sorted(LIVE_QUERIES)


def _action(args):
    """The action plugin as ansible-core runs it, with the task's arguments already templated."""
    from types import SimpleNamespace

    from ansible.template import Templar

    from ansible_collections.specdec.serve.plugins.action.fleet_report import ActionModule
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="specdec.serve.fleet_report")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    return ActionModule(task, connection, None, None, Templar(loader=None), None)


def settings(tmp_path, **extra):
    base = {"title": "Fleet view", "hosts": ["spark-01", "spark-02"], "status": {}, "report_dir": str(tmp_path),
            "report_name": "fleet", "prometheus_url": "", "prometheus_user": "", "prometheus_ca": "",
            "live_margin": 0.2, "changed": False}
    base.update(extra)
    return base


def test_the_action_writes_the_json_and_returns_the_table(tmp_path):
    hostvars = {"spark-01": {"fleet_view_host": {"collected_at": 1.0, "instances": [INSTANCE]}}, "spark-02": {}}
    out = _action({"settings": settings(tmp_path), "gateways": []}).run(task_vars={"hostvars": hostvars})
    assert out["changed"] is False and out["path"] == str(tmp_path / "fleet.json")
    written = json.loads((tmp_path / "fleet.json").read_text())
    assert written == out["report"] == out["ansible_facts"]["fleet_view_report"]
    assert [r["health"] for r in written["rows"]] == ["ready", "not checked"]
    assert out["lines"][0].startswith("Fleet view (") and out["lines"][0].endswith("JSON: %s)" % out["path"])
    assert out["lines"][1].split()[:3] == ["HOST", "INSTANCE", "IMAGE"] and "STATUS" not in out["lines"][1]
    assert out["lines"][3].split()[:2] == ["spark-01", "main"]


def test_the_action_refuses_settings_that_are_not_the_roles(tmp_path):
    with pytest.raises(AnsibleActionFail, match="registered result of specdec.serve.settings"):
        _action({"settings": {"title": "x"}}).run(task_vars={})
    with pytest.raises(AnsibleActionFail, match="Invalid options"):
        _action({"settings": settings(tmp_path), "extra": 1}).run(task_vars={})
