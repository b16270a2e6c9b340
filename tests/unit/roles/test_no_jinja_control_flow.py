"""No program in task YAML: the roles' tasks, handlers, vars and defaults, the playbooks (and their vars) and the
molecule scenarios hold no Jinja statement ({% for %}, {% if %}, {% set %}, {%- ... -%}). What decides, loops over or builds data
is a filter, a module or an action plugin with unit tests; templates (roles/*/templates/*.j2) are where
Jinja statements belong.

A {% raw %} ... {% endraw %} block only quotes text that is not Jinja (a shell script's Go templates),
so it and what it quotes are left out."""

import glob
import os
import re

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATTERNS = ("roles/*/tasks/**/*.yml", "roles/*/tasks/**/*.yaml", "roles/*/handlers/**/*.yml",
            "roles/*/handlers/**/*.yaml", "roles/*/vars/**/*.yml", "roles/*/defaults/**/*.yml",
            "playbooks/*.yml", "playbooks/*.yaml", "playbooks/vars/*.yml", "site.yml",
            "molecule/*/*.yml", "molecule/*/*.yaml")
RAW = re.compile(r"\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}", re.S)


def files():
    found = set()
    for pattern in PATTERNS:
        found.update(glob.glob(os.path.join(REPO, pattern), recursive=True))
    return sorted(found)


def statements(text):
    """[(line, text)] of every line that opens a Jinja statement, outside raw blocks."""
    text = RAW.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if "{%" in line]


def test_the_scan_finds_every_kind_of_statement():
    text = ("- name: x\n  set_fact:\n    a: >-\n      {% set out = [] %}{{ out }}\n"
            "    b: \"{%- for i in x -%}{{ i }}{%- endfor -%}\"\n    c: |\n      {% if y %}1{% endif %}\n"
            "    d: \"{{ {'k': 1} }}\"\n")
    assert [n for n, dummy in statements(text)] == [4, 5, 7]


def test_the_scan_leaves_out_raw_blocks_and_keeps_line_numbers():
    text = ("a: |\n  {% raw %}x=$(docker info --format '{{.DockerRootDir}}')\n  {% if %}\n  {% endraw %}\n"
            "b: \"{% if z %}1{% endif %}\"\n")
    assert statements(text) == [(5, 'b: "{% if z %}1{% endif %}"')]


def test_the_scan_covers_the_roles_playbooks_and_scenarios():
    names = [os.path.relpath(p, REPO) for p in files()]
    assert "site.yml" in names
    assert "roles/draft_sweep/tasks/candidate.yml" in names
    assert "roles/inference_server/tasks/restart.yml" in names
    assert "roles/gateway/vars/main.yml" in names and "roles/draft_sweep/defaults/main.yml" in names
    assert "playbooks/vars/fleet.yml" in names
    assert any(n.startswith("playbooks/") for n in names)
    assert any(n.startswith("molecule/") for n in names)
    assert not any("/templates/" in n for n in names)


def test_no_jinja_statement_in_task_yaml():
    found = []
    for path in files():
        with open(path) as handle:
            for number, line in statements(handle.read()):
                found.append("%s:%d: %s" % (os.path.relpath(path, REPO), number, line[:120]))
    if found:
        pytest.fail("Jinja statements in task YAML; move the logic into a filter or plugin_utils "
                    "(with unit tests):\n" + "\n".join(found))
