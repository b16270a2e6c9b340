"""The Grafana dashboard that ships with the monitoring role: importable JSON whose every query reads
what the rules record or the exporter serves. promtool (where installed) parses every query; the
molecule monitoring scenario runs every one against the lab's Prometheus."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils import _monitoring_rules as R

DASHBOARD = Path(__file__).resolve().parents[3] / "roles" / "monitoring" / "files" / "grafana" / "specdec-dashboard.json"
EXPORTER = (Path(__file__).resolve().parents[3] / "roles" / "monitoring_exporter" / "files" / "specdec_exporter.py").read_text()
PROMTOOL = os.environ.get("SPECDEC_PROMTOOL") or shutil.which("promtool")


def dashboard():
    return json.loads(DASHBOARD.read_text())


def queries(dash=None):
    """(panel title, expr) of every panel target, with the template variables as Grafana's All sends them."""
    dash = dash or dashboard()
    out = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            out.append((panel["title"], target["expr"].replace("$host", ".*").replace("$instance", ".*")))
    return out


def test_dashboard_is_importable():
    dash = dashboard()
    assert dash["uid"] and dash["title"]
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))


def test_every_query_reads_a_recorded_or_exported_series():
    recorded = set(r["record"] for g in R.rules({})["groups"] for r in g["rules"] if "record" in r)
    for title, expr in queries():
        names = set(re.findall(r"\b(specdec[a-z_:]*)", expr))
        assert names or "ALERTS" in expr, title
        for name in names:
            if ":" in name:
                assert name in recorded, (title, name)
            else:
                assert '"%s' % name[len("specdec_"):] in EXPORTER or name in EXPORTER, (title, name)


@pytest.mark.skipif(not PROMTOOL, reason="promtool is not installed (Debian package prometheus)")
def test_promtool_parses_every_query(tmp_path):
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": "dashboard:query_%d" % i, "expr": expr}
                                                        for i, (title, expr) in enumerate(queries())]}]}
    (tmp_path / "q.yml").write_text(yaml.safe_dump(rules))
    out = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "q.yml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
