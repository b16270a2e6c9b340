"""The filter files import no implementation at load time (docs/ARCHITECTURE.md, "Filter files"):
ansible-core loads every filter file of the collection in each worker that resolves a filter whose
name is not a file's, so a top-level import would be paid by every such task and host."""

import ast
import glob
import importlib
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
    from ansible_collections.specdec.serve.plugins.filter import spec_config
    from ansible_collections.specdec.serve.plugins.plugin_utils import _fleet, _spec_profiles
    view = {"instances": []}
    assert _fleet.fleet_plan([], {})["serving"] == []
    assert _fleet.rollout_status(view, view, 1, 2, [])["status"] == "unchanged"
    rendered = spec_config.FilterModule().filters()["spec_config"](
        {"name": "t", "profile": "trtllm-gpt-oss-120b-eagle3", "engine_version": "1.2.0rc6"})
    assert rendered["profile"] == "trtllm-gpt-oss-120b-eagle3"
    # disks_below and spec_profiles were filters; their logic stays in plugin_utils (fleet_preflight applies the one)
    assert _fleet.disks_below(["Mounted on Avail", "/ 1000000000", "/data 9000000000"], 5) == ["/ (1.0 GB)"]
    assert isinstance(_spec_profiles.profiles_for(), dict)


# filters no role, playbook or scenario called, made internal (changelogs/fragments/unused-filters-private.yml)
INTERNAL = ("fleet_table", "monitoring_alert_bound", "spec_profiles", "invalid_cidrs", "firewall_bypass", "gateway_rows",
            "gateway_section", "sweep_drift", "disks_below", "gpu_check")


def test_the_internal_helpers_are_no_filter_and_have_no_filter_documentation():
    sys.path.insert(0, os.path.join(REPO, "collections"))
    registered = set()
    for path in FILES:
        module = importlib.import_module("ansible_collections.specdec.serve.plugins.filter." + os.path.basename(path)[:-3])
        registered.update(module.FilterModule().filters())
    assert len(registered) > 5  # the public API is at most MAX_FILTERS (test_public_api.py)
    assert sorted(registered.intersection(INTERNAL)) == []
    documented = [n for n in INTERNAL if os.path.exists(os.path.join(REPO, "plugins", "filter", n + ".yml"))]
    assert documented == []
