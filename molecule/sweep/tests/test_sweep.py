"""After the sweep: the winner is applied (rendered config and local fact) and the report on the
controller is consistent with its JSON and with the emulator's analytic optimum."""

import glob
import json
import os
import re

import pytest

REPORTS = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), "reports", "molecule")


@pytest.fixture(scope="module")
def report():
    files = glob.glob(os.path.join(REPORTS, "*.json"))
    assert len(files) == 1, files
    with open(files[0], encoding="utf-8") as fh:
        data = json.load(fh)
    with open(files[0][:-5] + ".md", encoding="utf-8") as fh:
        md = fh.read()
    assert os.path.getsize(files[0][:-5] + ".png") > 10000
    return data, md


def test_winner_is_the_analytic_optimum(report):
    data, _ = report
    assert [e["draft_len"] for e in data["selection"]["by_concurrency"]] == [4, 4]
    assert data["applied"] is True


def test_markdown_numbers_match_the_json(report):
    data, md = report
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \|", md, re.M)
    groups = {(g["concurrency"], g["draft_len"]): g for g in data["selection"]["groups"]}
    assert len(rows) == len(groups)
    for conc, dl, runs, failed, med in rows:
        g = groups[(int(conc), int(dl))]
        assert int(runs) == g["runs"] and int(failed) == g["failed_runs"]
        assert float(med) == pytest.approx(g["median"], abs=0.05)
    runs = [m for m in data["selection"]["measurements"] if m.get("repetition") is not None]
    assert len(runs) == len(data["candidates"]) * 2 * 3


def test_fact_and_rendered_config_hold_the_winner(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/specdec_sweep.fact").content_string)
    (name, entry), = fact.items()
    assert entry["applied"]["max_draft_len"] == 4
    cfg = host.run("grep -r 'max_draft_len' /etc/specdec/%s/" % name)
    assert "max_draft_len: 4" in cfg.stdout
    assert not host.file("/var/lib/specdec/sweep/%s.json" % name).exists
    assert host.service("specdec-%s" % name).is_running
