"""The model locks on the controller (plugin_utils/_model_cache.py): where they are, when they are read, when
a model is refused for having none, and the settings of the locks and the peer TLS files."""

import json

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _model_cache as mc
from ansible_collections.specdec.serve.plugins.plugin_utils import _role_spec as role_spec
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as st

COMMIT = "d53e12e816449f0a2280eb2654a189dd33220755"


def settings(lock_dir, models, **extra):
    return dict({"models": models, "instances": [], "default_revision": "main", "default_ignore_patterns": [],
                 "verify": "size", "refresh": False, "lock_dir": str(lock_dir)}, **extra)


def write_lock(lock_dir, repo, commit, files=None):
    org, name = repo.split("/")
    (lock_dir / org).mkdir(parents=True, exist_ok=True)
    doc = {"format": 1, "repo_id": repo, "revision": commit, "files": files or {"a": {"size": 1, "sha256": "b" * 64}}}
    (lock_dir / org / ("%s@%s.json" % (name, commit))).write_text(json.dumps(doc))
    return doc


def test_a_pinned_model_gets_its_lock_path_and_its_lock_when_there(tmp_path):
    warnings = []
    items = mc.with_locks([{"repo_id": "org/a", "revision": COMMIT}, {"repo_id": "org/b", "revision": COMMIT}],
                          {"lock_dir": str(tmp_path)}, warn=warnings.append)
    assert items[0]["lock_path"] == str(tmp_path / "org" / ("a@%s.json" % COMMIT)) and items[0]["lock"] is None
    doc = write_lock(tmp_path, "org/b", COMMIT)
    got = mc.model_list(settings(tmp_path, [{"repo_id": "org/b", "revision": COMMIT}]))
    assert got[0]["lock"] == doc and got[0]["lock_path"].endswith("org/b@%s.json" % COMMIT)
    assert warnings == []


def test_a_branch_is_not_locked_and_a_warning_names_it(tmp_path):
    warnings = []
    items = mc.with_locks([{"repo_id": "org/a", "revision": "main"}], {"lock_dir": str(tmp_path)}, warn=warnings.append)
    assert items[0]["lock_path"] is None and items[0]["lock"] is None
    assert len(warnings) == 1 and "org/a@main is not locked" in warnings[0] and str(tmp_path) in warnings[0]


def test_require_lock_refuses_a_branch_and_a_missing_lock(tmp_path):
    with pytest.raises(mc.ModelListError) as err:
        mc.model_list(settings(tmp_path, ["org/a", {"repo_id": "org/b", "revision": COMMIT}], require_lock=True))
    msg = str(err.value)
    assert "model_cache_require_lock" in msg and "org/a@main" in msg and "org/b@%s.json" % COMMIT in msg
    write_lock(tmp_path, "org/b", COMMIT)
    assert mc.model_list(settings(tmp_path, [{"repo_id": "org/b", "revision": COMMIT}], require_lock=True))[0]["lock"]


def test_a_broken_lock_is_refused_with_its_path(tmp_path):
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / ("a@%s.json" % COMMIT)).write_text("{not json")
    with pytest.raises(mc.ModelListError, match="a@%s.json is not JSON" % COMMIT):
        mc.model_list(settings(tmp_path, [{"repo_id": "org/a", "revision": COMMIT}]))


def test_without_a_lock_dir_the_list_is_as_before():
    got = mc.model_list({"models": ["org/a"], "instances": [], "default_revision": "main",
                         "default_ignore_patterns": [], "verify": "size", "refresh": False})
    assert "lock_path" not in got[0]


def test_peer_tls_files_must_be_there(tmp_path):
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    problems = mc.source_problems({"source": "peer", "peer_seed": "h", "peer_tls_cert": str(cert),
                                   "peer_tls_key": str(tmp_path / "missing.key")}, ["h"])
    assert problems == ['model_cache_peer_tls_key="%s" is not a file on the controller.' % (tmp_path / "missing.key")]


def check(values):
    options = role_spec.load_options("model_cache")
    return st.check_settings(dict((k, options[k]) for k in values), values)


def test_tls_cert_and_key_go_together_and_the_ca_with_them():
    with pytest.raises(st.SettingsError) as err:
        check({"model_cache_peer_tls_cert": "/etc/seed.crt", "model_cache_peer_tls_key": "",
               "model_cache_peer_tls_ca": ""})
    assert any("model_cache_peer_tls_cert" in e and "model_cache_peer_tls_key is empty" in e for e in err.value.errors)
    with pytest.raises(st.SettingsError) as err:
        check({"model_cache_peer_tls_cert": "", "model_cache_peer_tls_key": "", "model_cache_peer_tls_ca": "/ca.pem"})
    assert any(e.startswith("model_cache_peer_tls_ca") for e in err.value.errors)
    assert check({"model_cache_peer_tls_cert": "a.crt", "model_cache_peer_tls_key": "a.key",
                  "model_cache_peer_tls_ca": ""})["model_cache_peer_tls_cert"].startswith("/")


def test_the_lock_dir_is_a_controller_path_as_a_user_writes_it_used_normalised():
    import os
    assert check({"model_cache_lock_dir": "inventory/../locks"})["model_cache_lock_dir"] == os.path.abspath("locks")
    assert check({"model_cache_lock_dir": "~/locks/../l"})["model_cache_lock_dir"] == os.path.expanduser("~/l")
