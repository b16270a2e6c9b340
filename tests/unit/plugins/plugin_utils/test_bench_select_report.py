"""The sweep's Markdown report and plot, rendered from a selection as the role renders them."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.specdec.serve.plugins.plugin_utils._bench_select import select_workloads

ROLE = Path(__file__).resolve().parents[4] / "roles" / "draft_sweep"


def runs(workload, dl, value, flagged=0):
    return [{"workload": workload, "concurrency": 1, "draft_len": dl, "repetition": i, "output_throughput": value,
             "acceptance_length_estimate": 1.0 + dl, "client_bottleneck": i < flagged} for i in range(3)]


def report(measurements, workloads):
    return {"run_id": "r1", "host": "h1", "instance": "i1", "engine": "trtllm", "image": "img", "method": "eagle3",
            "previous_max_draft_len": 2, "candidates": [0, 2, 4], "concurrency": [1],
            "workload": {"repetitions": 3, "requests_per_worker": 2, "warmup_requests_per_worker": 1, "max_tokens": 49,
                         "temperature": 0.0, "ignore_eos": True, "prompt_set": "mixed", "workloads": workloads,
                         "workload_rule": "worst_case"},
            "sampling": {"warning": None, "honoured": True, "greedy_only": False}, "apply_requested": False,
            "applied": False, "applied_speculative": None, "wall_s": 1.0, "phases": [],
            "phase_totals": {"restart_s": 1.0, "probe_s": 0.0, "warmup_s": 0.0, "measure_s": 1.0},
            "selection": select_workloads(measurements), "equivalence": {"enabled": False}}


def workload(name, **kw):
    w = {"name": name, "prompt_set": "mixed", "prompts": None, "dataset": None, "input_len": None, "output_len": None,
         "max_tokens": 49, "temperature": 0.0, "request_rate": None, "arrival": "poisson"}
    w.update(kw)
    return w


def render(data):
    try:
        from ansible.template import trust_as_template
    except ImportError:  # ansible-core before 2.19 templates any string
        def trust_as_template(text):
            return text
    text = (ROLE / "templates" / "report.md.j2").read_text()
    return Templar(loader=DataLoader(), variables={"_draft_sweep_report": data}).template(trust_as_template(text))


MULTI = (runs("code", 0, 50) + runs("code", 2, 70) + runs("code", 4, 100)
         + runs("prose", 0, 50) + runs("prose", 2, 80) + runs("prose", 4, 60, flagged=1))


def test_several_workloads_get_a_row_each_the_ratings_and_a_workload_column():
    md = render(report(MULTI, [workload("code", prompts=["a", "b"]),
                               workload("prose", prompt_set=None, dataset="x.jsonl", request_rate=2.0)]))
    assert ", 2 workloads (below)" in md
    assert re.search(r"^- Workload: .*, 2 workloads \(below\)\n- Acceptance length: ", md, re.M), md  # a line each
    # prose at 4 lost a run to the client's bottleneck: 2 runs left, so it cannot be rated; 4 is out
    assert "**Winner: draft length 2** at concurrency 1, chosen for 2 workloads by rule worst_case" in md
    assert "| code | 2 given | - / - | 49 | 0.0 | closed loop | 4 | 100.0 | 2.000 | - |" in md
    assert "| prose | dataset `x.jsonl` | - / - | 49 | 0.0 | open loop, 2.0 req/s poisson | 2 | 80.0 | 1.600 | - |" in md
    assert "| 1 | 2 | 0.700 | 1.000 | 0.700 |" in md and "| 1 | 4 | 1.000 | - | - |" in md
    assert "| prose | 1 | 4 | 2 | 0 | 1 | 60.0 |" in md and md.count("| client_bottleneck |") == 1


def test_one_workload_reads_as_before():
    md = render(report(runs("default", 0, 50) + runs("default", 3, 90), [workload("default")]))
    assert ", prompts `mixed`" in md and "## Workloads" not in md
    assert re.search(r"^- Workload: .*, prompts `mixed`\n- Acceptance length: ", md, re.M), md
    assert "**Winner: draft length 3** at concurrency 1: 90.0 tok/s, speedup 1.800x over no speculation" in md
    assert "| 1 | 3 | 3 | 0 | 0 | 90.0 |" in md
    assert "- Stack:" not in md  # the report of a host's own instance (no `stack`, or null) names none


def test_a_stacks_report_names_its_members_and_the_head_that_measured():
    data = report(runs("default", 0, 50) + runs("default", 3, 90), [workload("default")])
    data["stack"] = {"group": "spark-stack-a", "members": ["spark-03", "spark-04"], "head": "spark-03", "role": "head"}
    md = render(data)
    assert re.search(r"^- Stack: `spark-stack-a` \(spark-03, spark-04\); every member served each candidate, "
                     r"measured at its head spark-03\n- Candidates: ", md, re.M), md
    assert "- Stack:" not in render(dict(data, stack=None))


def test_the_plot_has_a_row_per_workload(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib, a declared controller requirement")
    src, dst = tmp_path / "r.json", tmp_path / "r.png"
    src.write_text(json.dumps(report(MULTI, [workload("code"), workload("prose")])))
    subprocess.run([sys.executable, str(ROLE / "files" / "sweep_plot.py"), str(src), str(dst)], check=True)
    png = dst.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    height = int.from_bytes(png[20:24], "big")  # IHDR: two rows of panels, 4.8 inches each at 110 dpi
    assert height == int(2 * 4.8 * 110)


def levels(conc, table):
    return [dict(r, concurrency=conc) for dl, v in table.items() for r in runs("default", dl, v)]


def test_a_schedule_measured_as_served_gets_its_section_with_the_decision():
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_schedule import schedule_plan, schedule_verdict
    sweep = levels(1, {0: 100, 1: 150, 4: 250}) + levels(8, {0: 500, 1: 700, 4: 450})
    data = report(sweep, [workload("default")])
    data["concurrency"] = [1, 8]
    plan = schedule_plan(data["selection"])
    served = [dict(r, draft_len=4) for r in levels(1, {4: 248}) + levels(8, {4: 500})]
    data["served_check"] = schedule_verdict(data["selection"], served, plan)
    md = render(data)
    assert "## Served, measured as served" in md
    assert ("Decision: fell back to draft length 4: at concurrency 8 the schedule (draft length 1) rated 0.714 against "
            "1.000 for the best fixed length 1 (noise 0.010).") in md, md
    assert "Planned: the schedule `draft_len_schedule: {\"1\": 4, \"8\": 1}`; served now: draft length 4." in md
    assert "| 1 | 4 | 1.000 | 4 | 0.992 | 0.010 | yes | 0: 0.400, 1: 0.600, 4: 1.000 |" in md
    assert "| 8 | 1 | 1.000 | 1 | 0.714 | 0.010 | no | 0: 0.714, 1: 1.000, 4: 0.643 |" in md
    assert "served 0.842; draft length 0 0.534, draft length 1 0.775, draft length 4 0.802; the best single length is 4." in md
    # a sweep that proved nothing has no such section
    assert "## Served" not in render(report(sweep, [workload("default")]))


def test_an_input_length_axis_gets_its_section_with_where_speculation_stopped_paying():
    from ansible_collections.specdec.serve.plugins.plugin_utils._sweep_context import by_input_length
    measured = (runs("prose-in32", 0, 50) + runs("prose-in32", 2, 80) + runs("prose-in32", 4, 70)
                + runs("prose-in4096", 0, 40) + runs("prose-in4096", 2, 30) + runs("prose-in4096", 4, 20))
    data = report(measured, [workload("prose-in32", input_len={"mean": 32}),
                             workload("prose-in4096", input_len={"mean": 4096})])
    axis = {"prose-in32": {"workload": "prose", "input_len": 32}, "prose-in4096": {"workload": "prose", "input_len": 4096}}
    data["context"] = json.loads(json.dumps(by_input_length(data["selection"], axis)))  # as the JSON report holds it
    md = render(data)
    assert "## Input length" in md
    assert "Workload `prose`, concurrency 1: **speculation stopped paying beyond 32 input tokens**" in md
    assert "| 32 | 50.0 | 2 | 80.0 | 1.6 | - | yes |" in md
    assert "| 4096 | 40.0 | 2 | 30.0 | 0.75 | - | no |" in md
    # without an axis there is no section
    assert "## Input length" not in render(report(MULTI, [workload("code"), workload("prose")]))
