"""Settings with one artifact per architecture (inference_server_image_archive, model_cache_wheelhouse): checked
as any setting, then resolved for each host from its facts on the controller (the settings action, and the
rollout role's planner, which reads the archive inference_server will load); and every architecture-dependent
choice of the collection rendered for both architectures it serves on."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from ansible.template import Templar

from ansible_collections.specdec.serve.plugins.action.settings import ActionModule
from ansible_collections.specdec.serve.plugins.module_utils import platforms
from ansible_collections.specdec.serve.plugins.plugin_utils import _settings as S
from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import docker_host, rollout
from role_defaults import role_defaults  # tests/unit, on the test path

ARCHIVES = {"x86_64": "images/engines-amd64.tar", "arm64": "images/engines-arm64.tar"}
WHEELHOUSES = {"amd64": "~/wheels/amd64", "aarch64": "~/wheels/arm64"}


@pytest.mark.parametrize("var", S.PER_ARCHITECTURE)
@pytest.mark.parametrize("value, refusal", [
    ({"sparc64": "x"}, "has keys that are not architectures: sparc64 (allowed: aarch64, amd64, arm64, x86_64)"),
    ({"x86_64": "a", "amd64": "b"}, "names x86_64 twice (amd64 and x86_64)"),
    ({}, "names no architecture"),
    (7, "7 must be a path, or a mapping of architecture to path"),
    (["a"], "must be a path, or a mapping of architecture to path"),
])
def test_a_bad_per_architecture_value_is_refused_naming_the_setting(var, value, refusal):
    with pytest.raises(S.SettingsError) as exc:
        S.check_value(var, value)
    (error,) = exc.value.errors
    assert error.startswith(var + ": ") and refusal in error, error


def test_each_host_gets_the_path_of_its_architecture_expanded_and_a_plain_path_is_everyones():
    typed = {"inference_server_image_archive": S.check_value("inference_server_image_archive", ARCHIVES),
             "model_cache_wheelhouse": S.check_value("model_cache_wheelhouse", WHEELHOUSES), "other": {"x86_64": 1}}
    home = os.path.expanduser("~")
    assert S.for_architecture(typed, "aarch64") == {"inference_server_image_archive": "images/engines-arm64.tar",
                                                    "model_cache_wheelhouse": home + "/wheels/arm64",
                                                    "other": {"x86_64": 1}}
    assert S.for_architecture(typed, "x86_64")["model_cache_wheelhouse"] == home + "/wheels/amd64"
    plain = {"inference_server_image_archive": "~/images/all.tar", "model_cache_wheelhouse": ""}
    assert S.for_architecture(plain, None) == {"inference_server_image_archive": home + "/images/all.tar",
                                               "model_cache_wheelhouse": ""}


def test_every_setting_a_host_lacks_is_named_in_one_refusal():
    typed = {"inference_server_image_archive": {"x86_64": "a.tar"}, "model_cache_wheelhouse": {"amd64": "w"}}
    with pytest.raises(S.SettingsError) as exc:
        S.for_architecture(typed, "aarch64")
    assert [e.split(":")[0] for e in exc.value.errors] == ["inference_server_image_archive", "model_cache_wheelhouse"]
    assert all("this host's architecture, aarch64 (arm64)" in e for e in exc.value.errors)


def pick(value, machine, name):
    """inference_server_image_archive as the rollout role's planner resolves it for a host (``name``: that setting)."""
    assert name == "inference_server_image_archive"
    ctx = {"vars": {name: value}, "facts": {"architecture": machine}}
    return rollout._paths(ctx)["image_archive"]


def test_the_rollout_planner_checks_and_resolves_as_the_settings_action_does():
    assert pick(ARCHIVES, "aarch64", "inference_server_image_archive") == "images/engines-arm64.tar"
    assert pick("", "aarch64", "inference_server_image_archive") == ""
    with pytest.raises(PlanRefusal, match="has no entry for this host's architecture, aarch64"):
        pick({"x86_64": "a.tar"}, "aarch64", "inference_server_image_archive")
    # a path as a user writes it: '..' and '~' are accepted, and the normalised path is what the role gets
    assert pick({"x86_64": "lab/../lab/.cache/a.tar"}, "x86_64", "inference_server_image_archive") == "lab/.cache/a.tar"
    assert pick("/srv/inv/../../lab/a.tar", "x86_64", "inference_server_image_archive") == "/lab/a.tar"
    assert pick("~/a/../b.tar", "x86_64", "inference_server_image_archive") == os.path.expanduser("~/b.tar")


def _settings_action(role):
    task = SimpleNamespace(args={"role": role}, async_val=0, check_mode=False, action="specdec.serve.settings",
                           _role=None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/nonexistent"))
    return ActionModule(task, connection, None, None, Templar(loader=None), None)


@pytest.mark.parametrize("machine, wheelhouse", [("x86_64", "/w/amd64"), ("aarch64", "/w/arm64")])
def test_the_settings_action_returns_the_hosts_own_path_from_its_facts(machine, wheelhouse):
    task_vars = dict(role_defaults("model_cache"), model_cache_wheelhouse={"x86_64": "/w/amd64", "aarch64": "/w/arm64"},
                     ansible_facts={"architecture": machine})
    out = _settings_action("model_cache").run(task_vars=task_vars)
    assert not out.get("failed"), out.get("msg")
    assert out["wheelhouse"] == wheelhouse


def test_the_settings_action_refuses_a_host_the_mapping_lacks_before_anything_changes():
    task_vars = {"inference_server_image_archive": {"x86_64": "/i/amd64.tar"},
                 "ansible_facts": {"architecture": "aarch64"}}
    out = _settings_action("inference_server").run(task_vars=task_vars)
    assert out["failed"] is True
    assert out["msg"].startswith("inference_server settings refused on the controller (no host was changed):\n- "
                                 "inference_server_image_archive: has no entry for this host's architecture, "
                                 "aarch64 (arm64); it names x86_64.")


# Every choice that depends on the host's architecture, for both: Docker's apt source (docker_host),
# the toolkit's (NVIDIA's flat repository: apt fills in $(ARCH) itself, so the role writes the same line),
# the platform an engine image must have (engine_check), and the artifacts per architecture.
CHOICES = {
    "x86_64": {"docker_apt_architecture": "amd64", "image_platform": "linux/amd64",
               "image_archive": "images/engines-amd64.tar", "wheelhouse": "wheels/amd64"},
    "aarch64": {"docker_apt_architecture": "arm64", "image_platform": "linux/arm64",
                "image_archive": "images/engines-arm64.tar", "wheelhouse": "wheels/arm64"},
}


@pytest.mark.parametrize("machine", sorted(CHOICES))
def test_every_architecture_dependent_choice_for_both_architectures(machine):
    rendered = {
        "docker_apt_architecture": docker_host.PLANNERS["main"]({}, None, {"facts": {"architecture": machine}})[
            "apt_architecture"],
        "image_platform": platforms.host_platform(machine),
        "image_archive": pick(ARCHIVES, machine, "inference_server_image_archive"),
        "wheelhouse": S.for_architecture({"model_cache_wheelhouse": {"x86_64": "wheels/amd64",
                                                                     "aarch64": "wheels/arm64"}}, machine)[
            "model_cache_wheelhouse"],
    }
    assert rendered == CHOICES[machine]
    # an image of the other architecture is refused on this host
    other = [m for m in CHOICES if m != machine][0]
    assert not platforms.same_platform(CHOICES[other]["image_platform"], rendered["image_platform"])
