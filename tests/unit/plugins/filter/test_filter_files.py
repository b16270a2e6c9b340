"""The filter files import no implementation at load time (docs/ARCHITECTURE.md, "Filter files"):
ansible-core loads every filter file of the collection in each worker that resolves a filter whose
name is not a file's, so a top-level import would be paid by every such task and host."""

import ast
import glob
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FILES = sorted(glob.glob(os.path.join(REPO, "plugins", "filter", "*.py")))


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_a_filter_file_imports_only_ansible_and_the_standard_library_at_load_time(path):
    with open(path) as handle:
        tree = ast.parse(handle.read())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [n.module if isinstance(n, ast.ImportFrom) else n.names[0].name for n in top]
    assert [n for n in names if n and n.startswith("ansible_collections")] == [], names


def test_loading_every_filter_file_loads_no_plugin_utils_or_module_utils():
    """What a worker pays to resolve one filter: the files, and nothing they would import."""
    code = ("import importlib, sys, glob, os\n"
            "for f in sorted(glob.glob(os.path.join(%r, 'plugins', 'filter', '*.py'))):\n"
            "    m = importlib.import_module('ansible_collections.specdec.serve.plugins.filter.' +"
            " os.path.basename(f)[:-3])\n"
            "    m.FilterModule().filters()\n"
            "print('\\n'.join(n for n in sys.modules if n.startswith('ansible_collections') and"
            " ('.plugin_utils' in n or '.module_utils' in n)))\n" % REPO)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections")))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []


def test_the_filters_still_reach_their_implementation():
    sys.path.insert(0, os.path.join(REPO, "collections"))
    from ansible_collections.specdec.serve.plugins.filter import fleet_plan, serving_plan, spec_config
    assert fleet_plan.disks_below(["Mounted on Avail", "/ 1000000000", "/data 9000000000"], 5) == ["/ (1.0 GB)"]
    assert isinstance(spec_config.FilterModule().filters()["spec_profiles"](), dict)
    assert serving_plan.published_ports([]) == []
