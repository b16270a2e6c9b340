"""The two rulebooks: each valid by ansible-rulebook's own schema, and the controller's the command line's with its
action a job template launch carrying the same extra vars."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_rulebook.validators import Validate
from jsonschema.exceptions import ValidationError

RULEBOOKS = Path(__file__).resolve().parents[3] / "extensions" / "eda" / "rulebooks"


def load(name):
    return yaml.safe_load((RULEBOOKS / name).read_text())


def test_each_rulebook_is_valid_for_ansible_rulebook():
    for name in ("retune.yml", "retune_controller.yml"):
        Validate.rulebook(load(name))  # raises on a rulebook ansible-rulebook would refuse
    # as it does for an action it does not know
    (bad,) = load("retune_controller.yml")
    bad["rules"][0]["action"] = {"run_jobtemplate": bad["rules"][0]["action"]["run_job_template"]}
    with pytest.raises(ValidationError):
        Validate.rulebook([bad])


def test_the_controller_rulebook_is_the_command_line_one_launching_a_job_template():
    (cli,), (ctl,) = load("retune.yml"), load("retune_controller.yml")
    assert ctl["sources"] == cli["sources"] and ctl["execution_strategy"] == cli["execution_strategy"]
    assert [r["condition"] for r in ctl["rules"]] == [r["condition"] for r in cli["rules"]]
    fire_cli, fire_ctl = cli["rules"][0]["action"], ctl["rules"][0]["action"]
    assert fire_cli["run_playbook"]["name"] == "specdec.serve.retune"
    assert fire_ctl["run_job_template"]["job_args"]["extra_vars"] == fire_cli["run_playbook"]["extra_vars"]
    assert fire_ctl["run_job_template"]["name"] == "{{ retune_job_template }}"
    assert ctl["rules"][1]["action"] == cli["rules"][1]["action"]
