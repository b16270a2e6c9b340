"""scripts/role_defaults.py: every role's defaults/main.yml written from its meta/argument_specs.yml, and
refused (--check) when it differs."""

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("role_defaults", REPO / "scripts" / "role_defaults.py")
role_defaults = importlib.util.module_from_spec(spec)
spec.loader.exec_module(role_defaults)


@pytest.fixture
def roles(tmp_path, monkeypatch):
    for part in ("meta", "defaults"):
        shutil.copytree(REPO / "roles" / "gateway" / part, tmp_path / "roles" / "gateway" / part)
    monkeypatch.setattr(role_defaults, "TOP", str(tmp_path))
    monkeypatch.setattr(role_defaults, "ROLES_DIR", str(tmp_path / "roles"))
    return tmp_path / "roles" / "gateway"


def test_the_checkout_is_current():
    assert role_defaults.main(["--check"]) == 0


def test_a_changed_default_is_refused_until_written(roles, capsys):
    spec_file = roles / "meta" / "argument_specs.yml"
    spec_file.write_text(spec_file.read_text().replace("default: 8443", "default: 9443"))
    assert role_defaults.main(["--check"]) == 1
    assert "roles/gateway/defaults/main.yml" in capsys.readouterr().err
    assert role_defaults.main(["write", "gateway"]) == 0
    assert role_defaults.main(["--check", "gateway"]) == 0
    assert yaml.safe_load((roles / "defaults" / "main.yml").read_text())["gateway_port"] == 9443


def test_every_option_has_its_default_and_its_description():
    text = role_defaults.render("gateway")
    assert text.startswith("---\n# Generated from meta/argument_specs.yml")
    assert "\n# HAProxy's runtime API socket (admin level, mode 0600, root only).\ngateway_socket: " in text
    assert role_defaults.short_description({"description": ["See C(x), e.g. O(a.b.c#role:main:y). Then more."]}) \
        == "See x, e.g. y."


@pytest.mark.parametrize("argv", [[], ["write", "--check"]])
def test_write_or_check_is_asked_for(argv):
    with pytest.raises(SystemExit):
        role_defaults.main(argv)
