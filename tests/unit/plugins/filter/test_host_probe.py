"""The shared read-only host probe: its script run for real with sh, and the comparison with what a role wants."""

import grp
import os
import pwd
import subprocess
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.specdec.serve.plugins.filter.host_probe import host_probe_argv, host_probe_drift
from ansible_collections.specdec.serve.plugins.plugin_utils import _host_probe as host_probe

OWNER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


def probe(tmp_path, units=(), **kw):
    """Run the probe's argv with a systemctl that knows two units: good.service (active, enabled) and
    off.service (inactive, disabled); any other is unknown and prints nothing to is-enabled."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "systemctl"
    fake.write_text('#!/bin/sh\ncase "$1 $2" in\n'
                    '  "is-active good.service") echo active;; "is-enabled good.service") echo enabled;;\n'
                    '  "is-active off.service") echo inactive; exit 3;; "is-enabled off.service") echo disabled; exit 1;;\n'
                    '  *) exit 4;;\nesac\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    out = subprocess.run(host_probe_argv(list(units), **kw), env=env, check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


@pytest.fixture
def tree(tmp_path):
    d = tmp_path / "rules dir"  # a space: the line's fixed fields are split from the right
    d.mkdir(mode=0o750)
    d.chmod(0o750)
    f = d / "docker-user.v4"
    f.write_text("*filter\nCOMMIT\n")
    f.chmod(0o640)
    x = tmp_path / "restore"
    x.write_text("#!/bin/sh\n")
    x.chmod(0o755)
    return d, f, x


def test_the_script_prints_one_line_per_item_as_documented(tmp_path, tree):
    d, f, x = tree
    lines = probe(tmp_path, ["good.service", "off.service", "gone.service"], execs=[str(x), str(f)],
                  dirs=[str(d), str(tmp_path / "nope")], files=[str(f), str(d), str(tmp_path / "nope")],
                  imports={sys.executable: "json, os.path"})
    assert lines == [
        "unit good.service active enabled",
        "unit off.service inactive disabled",
        "unit gone.service none none",
        "exec %s yes" % x,
        "exec %s no" % f,
        "dir %s 750:%s:%s" % (d, OWNER, GROUP),
        "dir %s -" % (tmp_path / "nope"),
        "file %s 640:%s:%s %s" % (f, OWNER, GROUP, host_probe.sha1("*filter\nCOMMIT\n")),
        "file %s dir -" % d,
        "file %s - -" % (tmp_path / "nope"),
        "import %s ok" % sys.executable,
    ]
    # a module the interpreter cannot import, and an interpreter that is not there
    assert probe(tmp_path, imports={sys.executable: "json,no_such_module_here"}) == ["import %s failed" % sys.executable]
    assert probe(tmp_path, imports={str(tmp_path / "python"): "json"}) == ["import %s failed" % (tmp_path / "python")]


def want(d, f, x, **over):
    w = dict(units={"good.service": "active enabled"}, execs=[str(x)],
             dirs={str(d): {"mode": "0750", "owner": OWNER, "group": GROUP}},
             files={str(f): {"mode": "0640", "owner": OWNER, "group": GROUP, "content": "*filter\nCOMMIT\n"}})
    w.update(over)
    return w


def test_a_host_as_wanted_has_no_drift_and_each_difference_is_named(tmp_path, tree):
    d, f, x = tree
    w = want(d, f, x)
    lines = probe(tmp_path, list(w["units"]), execs=w["execs"], dirs=list(w["dirs"]), files=list(w["files"]))
    assert host_probe_drift(lines, **w) == []
    # the same wanted state by digest, as for a file that holds secrets
    by_digest = {str(f): {"mode": "640", "owner": OWNER, "group": GROUP, "sha1": host_probe.sha1("*filter\nCOMMIT\n")}}
    assert host_probe_drift(lines, **want(d, f, x, files=by_digest)) == []
    # content, mode, owner, unit state, a missing executable: each named by kind and path
    assert host_probe_drift(lines, **want(d, f, x, files={str(f): dict(w["files"][str(f)], content="*nat\n")})) == ["file %s" % f]
    assert host_probe_drift(lines, **want(d, f, x, dirs={str(d): {"mode": "0755", "owner": OWNER, "group": GROUP}})) == ["dir %s" % d]
    assert host_probe_drift(lines, **want(d, f, x, dirs={str(d): {"mode": "0750"}})) == (
        [] if (OWNER, GROUP) == ("root", "root") else ["dir %s" % d])
    assert host_probe_drift(lines, **want(d, f, x, units={"good.service": "active disabled"})) == ["unit good.service"]
    assert host_probe_drift(lines, **want(d, f, x, execs=[str(x), "/no/such"])) == ["exec /no/such"]
    # a file that must not be there, and one that is not
    assert host_probe_drift(lines, **want(d, f, x, files={str(f): None})) == ["file %s" % f]
    gone = probe(tmp_path, files=[str(tmp_path / "nope")])
    assert host_probe_drift(gone, files={str(tmp_path / "nope"): None}) == []


def test_only_what_is_asked_about_is_compared(tmp_path, tree):
    d, f, x = tree
    lines = probe(tmp_path, ["off.service"], dirs=[str(d)], files=[str(f)])
    # the unit is off, but a task that mends only the directory asks only about it
    assert host_probe_drift(lines, dirs={str(d): {"mode": "0750", "owner": OWNER, "group": GROUP}}) == []
    assert host_probe_drift(lines, units={"off.service": "active enabled"}) == ["unit off.service"]
    # an item the probe was not asked about counts as different (never as in place)
    assert host_probe_drift([], files={str(f): None}) == ["file %s" % f]


@pytest.mark.parametrize("call, message", [
    (lambda: host_probe_argv(["a.service; rm -rf /"]), "units: 'a.service; rm -rf /' is not a systemd unit name"),
    (lambda: host_probe_argv([], files=["relative/path"]), "files: 'relative/path' is not an absolute path"),
    (lambda: host_probe_argv([], dirs=["/a\n/b"]), "is not an absolute path on one line"),
    (lambda: host_probe_argv([], imports={"/usr/bin/python3": "os; import shutil"}),
     "is not a comma-separated list of module names"),
    (lambda: host_probe_drift([], dirs={"/x": {"mode": "rwx"}}), "mode must be an octal string"),
    (lambda: host_probe_drift([], files={"/x": {"mode": "0644"}}), "expected content \\(text\\) or sha1"),
])
def test_bad_requests_are_refused_with_the_value(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


def test_the_modules_go_to_python_as_one_import_statement():
    args = host_probe_argv([], imports={"/opt/venv/bin/python": "huggingface_hub, hf_xet"})
    assert args[:2] == ["sh", "-c"] and args[3:] == ["host-probe", "import:huggingface_hub,hf_xet", "/opt/venv/bin/python"]
