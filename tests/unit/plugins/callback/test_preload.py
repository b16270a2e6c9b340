"""specdec.serve.preload: the collection's controller-side Python imported in the main process, once per run.

ansible-core forks a worker for each task and host; a module the main process has imported is inherited, one it
has not is compiled again in every worker. The figures are in docs/PERFORMANCE.md (bench/noop_converge).
"""

import os
import subprocess
import sys

from ansible_collections.specdec.serve.plugins.callback import preload as cb

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PLUGINS = os.path.join(REPO, "plugins")
PKG = "ansible_collections.specdec.serve.plugins."


def test_the_modules_are_the_controllers_plugins_and_the_code_they_share():
    names = cb.controller_modules(PLUGINS)
    assert names == sorted(set(names))
    for expected in ("action.settings", "filter.network", "lookup.image_archive", "plugin_utils._settings",
                     "plugin_utils._roles.inference_server"):
        assert PKG + expected in names
    # what runs on the hosts, or is no code, is not imported on the controller
    kinds = {name[len(PKG):].split(".")[0] for name in names}
    assert kinds == {"action", "filter", "lookup", "plugin_utils"}
    assert not [n for n in names if "engine_tables" in n or "__pycache__" in n]
    on_disk = sum(1 for kind in ("action", "filter", "lookup")
                  for f in os.listdir(os.path.join(PLUGINS, kind)) if f.endswith(".py"))
    assert len([n for n in names if not n.startswith(PKG + "plugin_utils")]) == on_disk


def test_a_module_that_fails_to_import_is_named_and_the_rest_are_imported(tmp_path):
    (tmp_path / "filter").mkdir()
    (tmp_path / "filter" / "network.py").write_text("")
    (tmp_path / "filter" / "no_such_filter_file.py").write_text("")
    imported, failed = cb.preload(str(tmp_path))
    assert imported == 1
    assert list(failed) == [PKG + "filter.no_such_filter_file"]
    assert "ModuleNotFoundError" in failed[PKG + "filter.no_such_filter_file"]


def test_a_playbook_run_imports_every_module_once_before_its_first_task(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n        msg: \"{{ 'a%b' | specdec.serve.quote_for('unit') }}\"\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-vvv", "-i",
                           "localhost,", "-c", "local", str(playbook)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count = len(cb.controller_modules(PLUGINS))
    line = "specdec.serve.preload: %d modules imported" % count
    assert line in proc.stdout
    assert "left to its task" not in proc.stdout
    # before the play, so before any worker is forked
    assert proc.stdout.index(line) < proc.stdout.index("PLAY [localhost]")
    assert 'a%%b' in proc.stdout  # the filter ran: systemd's escape of %
