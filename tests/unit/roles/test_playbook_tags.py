"""The playbooks' tags select a part of a run and still give that part the facts it needs.

ansible-core tags a play's implicit fact gathering `always` only when the play itself has no tags
(ansible/executor/play_iterator.py). A play that gathers facts and carries a phase tag therefore
skips the gathering under any other tag (`--tags firewall`), and the first role that reads a fact
fails. So a play that gathers facts carries no tags; its roles and tasks carry the phase tag
instead. A tag on `include_role` selects only the include itself; `apply` gives it to the role's
tasks.
"""

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
INCLUDES = ("ansible.builtin.include_role", "include_role", "ansible.builtin.include_tasks", "include_tasks")


def plays():
    for path in PLAYBOOKS:
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" in play:
                yield path.name, play


def params(selected):
    return [pytest.param(book, play, id="%s: %s" % (book, play["name"])) for book, play in selected]


def entries(play):
    """Every role entry and task of a play (blocks opened), as (name, dict)."""
    for role in play.get("roles", []):
        yield "role %s" % role.get("role", role), role
    stack = [t for key in ("pre_tasks", "tasks", "post_tasks") for t in play.get(key, [])]
    while stack:
        task = stack.pop(0)
        if "block" in task:
            stack[:0] = task["block"] + task.get("rescue", []) + task.get("always", [])
            continue
        yield task.get("name", "?"), task


def gathers(play):
    return play.get("gather_facts", True) not in (False, "false", "no")


@pytest.mark.parametrize("book, play", params(p for p in plays() if gathers(p[1])))
def test_a_play_that_gathers_facts_carries_no_tags_its_roles_and_tasks_do(book, play):
    assert "tags" not in play, "%s: %r gathers facts and has play tags %r" % (book, play["name"], play["tags"])
    for name, entry in entries(play):
        assert entry.get("tags"), "%s: %r in %r has no tag" % (book, name, play["name"])


@pytest.mark.parametrize("book, play", params(plays()))
def test_a_tagged_include_gives_its_tags_to_what_it_includes(book, play):
    for name, entry in entries(play):
        action = next((a for a in INCLUDES if a in entry), None)
        if action is None or not entry.get("tags"):
            continue
        applied = (entry[action].get("apply") or {}).get("tags", [])
        assert set(entry["tags"]) <= set(applied), (
            "%s: %r tags the include %r but applies %r to what it includes" % (book, name, entry["tags"], applied))


def test_the_phase_plays_that_gather_facts_are_found():
    # the tests above pass vacuously if the playbooks stop loading or gathering: name the plays
    found = {(book, play["name"]) for book, play in plays() if gathers(play)}
    assert {("prepare.yml", "Prepare the hosts and cache the models"),
            ("rollout.yml", "Preflight every host before the first batch"),
            ("deploy.yml", "Deploy the engine instances")} <= found
