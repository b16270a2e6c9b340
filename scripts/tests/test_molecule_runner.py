"""scripts/molecule.py, the runner of `make molecule`: its lanes, and how it runs them (with a fake
`molecule` on PATH that records what it was asked and fails where told)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "molecule.py"
spec = importlib.util.spec_from_file_location("molecule_runner", SCRIPT)
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)

REAL = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


def test_every_scenario_of_the_project_is_scheduled_once_or_has_a_make_target_of_its_own():
    names = list(runner.FIRST + runner.QUEUE)
    assert sorted(names + list(runner.OWN_TARGET)) == REAL and len(names) == len(set(names))
    makefile = (REPO / "Makefile").read_text()
    for scenario, target in runner.OWN_TARGET.items():
        assert "\n%s:" % target.split()[-1] in makefile and "molecule.py %s" % scenario in makefile


def test_the_foundation_runs_first_and_what_needs_the_checks_is_queued():
    assert runner.FIRST == ("default",)
    assert set(runner.AFTER_CHECKS) <= set(runner.QUEUE)


def test_a_scenario_no_list_names_is_queued_last_and_missing_ones_drop_out():
    assert runner.schedule(["default", "stack", "extra", "fleet"]) == ([["default"], []], ["fleet", "stack", "extra"])
    assert runner.schedule(["serving"], checks=True) == ([[], [runner.CHECKS]], ["serving"])


# A scenario in FAKE_WAIT runs until the runner has recorded the failure of every one in FAKE_FAIL (its
# results file); one in FAKE_FAIL fails only once every FAKE_WAIT scenario has started. So the test does
# not depend on which thread gets the CPU first.
FAKE = """#!/bin/sh
echo "$3" >> "$FAKE_CALLS"
echo "output of $3"
case " $FAKE_WAIT " in *" $3 "*)
  for f in $FAKE_FAIL; do while ! grep -qs "^$f " lab/.state/molecule/results; do sleep 0.1; done; done ;;
esac
case " $FAKE_FAIL " in *" $3 "*)
  for w in $FAKE_WAIT; do while ! grep -qx "$w" "$FAKE_CALLS"; do sleep 0.1; done; done
  exit 3 ;;
esac
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("aa", "bb", "cc", "dd"):
        (tmp_path / "molecule" / name).mkdir(parents=True)
        (tmp_path / "molecule" / name / "molecule.yml").write_text("---\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "molecule").write_text(FAKE)
    (bin_dir / "molecule").chmod(0o755)
    (tmp_path / "scripts").mkdir()
    def script(after):
        """The runner with the fake project's schedule: aa first in lane 1, then bb, cc and dd (named by no list)."""
        text = SCRIPT.read_text()
        for name, value in (("FIRST", '("aa",)'), ("QUEUE", '("bb", "cc")'), ("AFTER_CHECKS", after)):
            line = "%s = %r\n" % (name, getattr(runner, name))
            assert line.replace("'", '"') in text  # the fake project's schedule replaces exactly this line
            text = text.replace(line.replace("'", '"'), "%s = %s\n" % (name, value))
        (tmp_path / "scripts" / "molecule.py").write_text(text)

    def run(*args, fail="", wait="", lanes="2", after="()"):
        script(after)
        env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), FAKE_CALLS=str(tmp_path / "calls"),
                   FAKE_FAIL=fail, FAKE_WAIT=wait, SPECDEC_MOLECULE_LANES=lanes)
        proc = subprocess.run([sys.executable, "scripts/molecule.py", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        calls = (tmp_path / "calls").read_text().split() if (tmp_path / "calls").exists() else []
        (tmp_path / "calls").unlink(missing_ok=True)
        return proc, calls
    return run


def test_the_whole_set_runs_in_lanes_each_output_whole_and_logged(project, tmp_path):
    proc, calls = project()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(calls) == ["aa", "bb", "cc", "dd"]
    assert "==> molecule: 2 lanes (SPECDEC_MOLECULE_LANES=2)\n" in proc.stdout
    # dd: named by no list, so the last
    assert "==> lane 1 starts with: aa\n==> lane 2 starts with: the queue\n==> then each lane takes the next of: bb cc dd\n" \
        in proc.stdout
    for name in ("aa", "bb", "cc", "dd"):
        assert (tmp_path / "lab/.state/molecule" / (name + ".log")).read_text() == "output of %s\n" % name
        head = "==> molecule test -s %s: its output (lab/.state/molecule/%s.log)\n" % (name, name)
        assert head + "output of %s\n==> molecule test -s %s: passed in " % (name, name) in proc.stdout
    assert "==> molecule: all passed in" in proc.stdout
    assert sorted((tmp_path / "lab/.state/molecule/results").read_text().splitlines()) == ["aa 0", "bb 0", "cc 0", "dd 0"]


def test_one_lane_runs_the_lanes_one_after_another_output_as_it_comes(project):
    proc, calls = project(lanes="1")
    assert proc.returncode == 0 and calls == ["aa", "bb", "cc", "dd"]
    assert "==> molecule: 1 lane (SPECDEC_MOLECULE_LANES=1)\n" in proc.stdout
    assert "lane 1:" not in proc.stdout and "output of aa\n==> molecule test -s aa: passed in" in proc.stdout


def test_a_lane_count_other_than_1_or_2_is_refused_and_nothing_runs(project):
    proc, calls = project(lanes="3")
    assert proc.returncode == 1 and calls == []
    assert "SPECDEC_MOLECULE_LANES='3': it must be 1 or 2" in proc.stderr


@pytest.mark.parametrize("idle, lanes", [(1.9, 2), (1.5, 2), (1.4, 1), (0.05, 1)])
def test_without_a_setting_the_idle_cores_choose_the_lanes(idle, lanes):
    count, why = runner.lane_count({}, measure=lambda: idle)
    assert count == lanes and ("%.2f of" % idle) in why


def test_where_the_idle_cores_cannot_be_measured_both_lanes_run():
    assert runner.lane_count({}, measure=lambda: None) == (2, "the idle cores could not be measured (/proc/stat)")


def test_idle_cores_are_the_idle_share_of_the_cpu_time_between_two_samples(tmp_path):
    stat = tmp_path / "stat"
    samples = iter([
        # user nice system idle iowait irq softirq steal guest guest_nice
        "cpu  100 0 50 800 50 0 0 0 7 0\ncpu0 1 2 3\n",
        "cpu  400 0 150 1000 50 0 0 0 9 0\ncpu0 1 2 3\n",
    ])

    def times():
        stat.write_text(next(samples))
        return runner.cpu_times(str(stat))
    # between the samples: 300 user + 100 system busy, 200 idle: a third of 2 cores idle
    assert runner.idle_cores(cores=2, times=times, sleep=lambda s: None) == pytest.approx(2 / 3.0)
    assert runner.cpu_times(str(tmp_path / "missing")) is None
    assert runner.idle_cores(cores=2, times=lambda: None, sleep=lambda s: None) is None


def test_a_failure_ends_its_lane_and_the_exit_status_says_so(project, tmp_path):
    proc, calls = project(fail="aa", lanes="1")
    assert proc.returncode == 1
    assert calls == ["aa"] and "==> molecule test -s aa: FAILED (exit 3) in" in proc.stdout
    assert re.search(r"==> molecule: FAILED in \d+ s \(failed: aa\)\n\Z", proc.stdout), proc.stdout[-300:]
    assert "aa 3" in (tmp_path / "lab/.state/molecule/results").read_text().splitlines()


def test_after_both_lanes_the_failed_scenarios_log_is_summed_up_before_the_last_line(project):
    # bb (lane 2) prints its whole output after aa's: aa's failure must be shown again at the end
    proc, _ = project(fail="aa", wait="bb")
    tail = proc.stdout[proc.stdout.index("==> molecule test -s bb: passed in"):]
    assert "==> molecule test -s aa failed: its failed tasks again (whole log: lab/.state/molecule/aa.log)\n" \
        "output of aa\n==> molecule: FAILED in " in tail, tail


def test_a_failure_summary_holds_the_failed_tasks_and_what_follows_them_without_colour():
    log = ["ok: [h] %d" % n for n in range(100)]
    log[30] = "\x1b[0;31mfatal: [h]: FAILED! => {\"msg\": \"first\"}\x1b[0m"
    log[31] = "...ignoring"
    log[70] = "fatal: [h]: FAILED! => {\"msg\": \"" + "x" * 500
    log[90] = "CRITICAL Ansible return code was 2"
    out = runner.failure_summary("\n".join(log)).splitlines()
    assert out[0] == 'fatal: [h]: FAILED! => {"msg": "first"}' and out[1] == "...ignoring"
    assert out[out.index("ok: [h] 42") + 1] == "[...]"  # 30 and the 12 lines after it, then a gap
    assert len(out[out.index("[...]") + 1]) == runner.LINE_CHARS
    assert out[-1] == "ok: [h] 99" and "CRITICAL Ansible return code was 2" in out
    assert "ok: [h] 50" not in out and "ok: [h] 29" not in out


def test_a_failure_summary_keeps_the_last_failures_and_without_one_the_last_lines():
    many = "\n".join("fatal: [h%d]: FAILED!" % n for n in range(200))
    out = runner.failure_summary(many).splitlines()
    assert out[0] == "[...]" and len(out) == runner.MAX_LINES + 1 and out[-1] == "fatal: [h199]: FAILED!"
    plain = runner.failure_summary("\n".join("line %d" % n for n in range(100))).splitlines()
    assert plain == ["line %d" % n for n in range(100 - runner.LAST_LINES, 100)]
    assert runner.failure_summary("") == ""


def test_a_failure_in_one_lane_lets_the_other_finish_its_scenario_but_start_no_new_one(project):
    # bb (lane 2, the first of the queue) runs until aa (lane 1) has failed; cc and dd would come next
    proc, calls = project(fail="aa", wait="bb")
    assert proc.returncode == 1 and sorted(calls) == ["aa", "bb"]
    assert "==> molecule test -s bb: passed in" in proc.stdout
    assert "==> molecule test -s cc: not started (a scenario failed)" in proc.stdout
    assert "==> molecule test -s dd: not started (a scenario failed)" in proc.stdout


def test_named_scenarios_run_in_the_order_given_their_output_as_it_comes(project, tmp_path):
    proc, calls = project("cc", "aa")
    assert proc.returncode == 0 and calls == ["cc", "aa"]
    assert "lane" not in proc.stdout and "output of cc\n==> molecule test -s cc: passed in" in proc.stdout


def test_a_failure_among_named_scenarios_starts_no_later_one(project):
    proc, calls = project("aa", "bb", fail="aa")
    assert proc.returncode == 1 and calls == ["aa"]
    assert "==> molecule test -s bb: not started (a scenario failed)" in proc.stdout


def test_an_unknown_scenario_is_refused_and_nothing_runs(project):
    proc, calls = project("aa", "nope")
    assert proc.returncode == 1 and calls == []
    assert "no such molecule scenario: nope (there are: aa bb cc dd)" in proc.stderr


def test_the_causes_are_the_last_failed_tests_and_tasks_one_line_each_out_of_molecules_frame():
    log = ["  \u2502 ok: [h] %d" % n for n in range(20)]
    fatal = "fatal: [h]: FAILED! => {\"msg\": \"" + "x" * 500 + "\"}"
    log[3] = "  \u2502 \x1b[31m" + fatal + "\x1b[0m"
    log[5] = "  \u2502 tests/test_a.py::test_b FAILED"  # the verbose line: the summary names it again
    log[9] = "  \u2502 FAILED tests/test_a.py::test_b - assert 2 == 3"
    log[10] = "  \u2502 ERROR tests/test_a.py::test_c - RuntimeError: no host"
    log[12] = "INFO     sweep \u279c verify: Executed: Failed (Verifier tests failed)"
    out = runner.causes("\n".join(log)).splitlines()
    assert out == [fatal[:runner.LINE_CHARS],
                   "FAILED tests/test_a.py::test_b - assert 2 == 3",
                   "ERROR tests/test_a.py::test_c - RuntimeError: no host"]
    many = "\n".join("FAILED t.py::test_%d - x" % n for n in range(20))
    assert runner.causes(many).splitlines() == ["FAILED t.py::test_%d - x" % n for n in range(20 - runner.CAUSES, 20)]
    assert runner.causes("ok\nchanged") == ""


def test_the_checks_run_first_in_the_second_lane_beside_the_first_lanes_scenarios(project, tmp_path):
    # the checks record themselves as the fake molecule does, and wait until aa (lane 1) has started
    checks = 'echo checks >> "$FAKE_CALLS"; while ! grep -qx aa "$FAKE_CALLS"; do sleep 0.1; done; echo checked'
    proc, calls = project("--checks", checks)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "==> lane 1 starts with: aa\n==> lane 2 starts with: checks\n" in proc.stdout
    assert sorted(calls) == ["aa", "bb", "cc", "checks", "dd"]
    assert (tmp_path / "lab/.state/molecule/checks.log").read_text() == "checked\n"
    assert "==> %s: its output (lab/.state/molecule/checks.log)\nchecked\n==> %s: passed in " % (checks, checks) \
        in proc.stdout


def test_a_lane_comes_free_takes_the_next_scenario_and_one_that_needs_the_checks_waits_for_them(project):
    # bb needs the checks: lane 1, free after aa, must take cc and dd while the checks run; they end only once cc started
    checks = 'echo checks >> "$FAKE_CALLS"; while ! grep -qx cc "$FAKE_CALLS"; do sleep 0.1; done; echo checks-end >> "$FAKE_CALLS"'
    proc, calls = project("--checks", checks, after='("bb",)')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "==> then each lane takes the next of: bb cc dd (bb once the checks ended)\n" in proc.stdout
    assert calls.index("aa") < calls.index("cc") < calls.index("checks-end") < calls.index("bb")
    assert sorted(calls) == ["aa", "bb", "cc", "checks", "checks-end", "dd"]


def test_a_failure_while_a_lane_waits_for_the_checks_starts_nothing_more(project):
    proc, calls = project("--checks", "while ! grep -qs '^aa ' lab/.state/molecule/results; do sleep 0.1; done; exit 2",
                          fail="aa", after='("bb", "cc")')
    assert proc.returncode == 1 and sorted(calls) == ["aa"]
    for name in ("bb", "cc", "dd"):
        assert "==> molecule test -s %s: not started (a scenario failed)" % name in proc.stdout


def test_failed_checks_end_the_run_like_a_failed_scenario(project, tmp_path):
    proc, calls = project("--checks", "echo 'FAILED tests/unit/test_x.py::test_y - boom'; exit 2", lanes="1")
    assert proc.returncode == 1 and calls == []  # one lane: the checks first, then no scenario
    assert "==> molecule test -s aa: not started (a scenario failed)" in proc.stdout
    assert "FAILED (exit 2) in" in proc.stdout and "(failed: checks)" in proc.stdout


def test_the_checks_take_one_command_and_no_scenario(project):
    for args in (["--checks"], ["--checks", "true", "aa"]):
        proc, calls = project(*args)
        assert proc.returncode == 1 and calls == [] and "--checks COMMAND" in proc.stderr


def test_each_jobs_lane_start_and_time_are_listed_before_the_last_line(project):
    proc, _ = project(fail="bb", wait="aa")
    lines = proc.stdout.splitlines()
    timed = [line for line in lines if re.match(r"==> \w+ ran from \d+ s to \d+ s \(\d+ s\) in lane \d", line)]
    assert sorted(line.split()[1] for line in timed) == ["aa", "bb"], timed  # cc, dd never started
    assert [line for line in timed if line.endswith(", FAILED")] == [line for line in timed if " bb " in line]
    assert lines.index(timed[-1]) < lines.index("==> molecule test -s bb failed: its failed tasks again "
                                                "(whole log: lab/.state/molecule/bb.log)")


def test_a_scenario_with_a_make_target_of_its_own_runs_only_when_named(project, tmp_path):
    (tmp_path / "molecule" / "aarch64").mkdir()
    (tmp_path / "molecule" / "aarch64" / "molecule.yml").write_text("---\n")
    proc, calls = project()
    assert proc.returncode == 0 and sorted(calls) == ["aa", "bb", "cc", "dd"]
    proc, calls = project("aarch64")
    assert proc.returncode == 0 and calls == ["aarch64"]
