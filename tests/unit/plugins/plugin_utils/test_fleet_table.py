"""fleet_table (plugin_utils/_fleet_table.py): the text table of the fleet view; internal since it stopped being
a public filter, its errors still filter errors."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.plugin_utils._fleet_table import fleet_table

COLUMNS = [["host", "HOST"], ["draft_len", "DRAFT"], ["health", "HEALTH"]]


def test_aligned_columns_header_and_rule():
    rows = [{"host": "spark-01", "draft_len": 5, "health": "ready"},
            {"host": "b200-1", "draft_len": 3, "health": "down"}]
    lines = fleet_table(rows, COLUMNS).split("\n")
    assert lines == [
        "HOST      DRAFT  HEALTH",
        "--------  -----  ------",
        "spark-01  5      ready",
        "b200-1    3      down",
    ]


def test_missing_none_empty_bool_float_and_whitespace():
    rows = [{"host": "h", "draft_len": None, "health": ""}, {"host": "a\n  b", "draft_len": 1.50, "health": True}]
    lines = fleet_table(rows, COLUMNS).split("\n")
    assert lines[2].split() == ["h", "-", "-"]
    assert lines[3].split() == ["a", "b", "1.5", "yes"]


def test_plain_keys_and_long_cells_cut():
    out = fleet_table([{"image": "x" * 30}], ["image"], max_width=10)
    assert out.split("\n") == ["IMAGE", "----------", "xxxxxxx..."]


def test_no_rows_gives_the_header():
    assert fleet_table([], COLUMNS).split("\n")[0] == "HOST  DRAFT  HEALTH"


@pytest.mark.parametrize("rows, columns, width, word", [
    ("x", COLUMNS, 60, "rows must be a list"),
    ([{}], [], 60, "columns must be a non-empty list"),
    ([{}], [["a", "b", "c"]], 60, "each column"),
    (["row"], COLUMNS, 60, "row 0 is not a mapping"),
    ([{}], COLUMNS, "wide", "max_width must be an integer"),
    ([{}], COLUMNS, 2, "at least 4"),
])
def test_errors(rows, columns, width, word):
    with pytest.raises(AnsibleFilterError, match=word):
        fleet_table(rows, columns, width)


def test_the_fleet_report_action_prints_this_table():
    from ansible_collections.specdec.serve.plugins.action import fleet_report
    assert fleet_report.fleet_table is fleet_table
