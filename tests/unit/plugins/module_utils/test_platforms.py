"""A host's architecture as packages and images name it (plugins/module_utils/platforms.py): every
choice for both architectures the collection serves on (x86_64: HGX B200; aarch64: DGX Spark, GB200)."""

from __future__ import annotations

import re

import pytest

from ansible_collections.specdec.serve.plugins.module_utils import platforms as P


@pytest.mark.parametrize("machine, debian, platform", [
    ("x86_64", "amd64", "linux/amd64"),
    ("aarch64", "arm64", "linux/arm64"),
    ("riscv64", "riscv64", "linux/riscv64"),
])
def test_each_architecture_is_named_as_debian_and_images_name_it(machine, debian, platform):
    assert P.debian_arch(machine) == debian
    assert P.host_platform(machine) == platform and P.host_platform(machine, "Linux") == platform


@pytest.mark.parametrize("image, host, runs", [
    ("linux/amd64", "linux/amd64", True),
    ("linux/arm64", "linux/arm64", True),
    ("linux/arm64/v8", "linux/arm64", True),
    ("linux/arm64", "linux/amd64", False),
    ("linux/amd64", "linux/arm64", False),
    ("linux/arm/v7", "linux/arm64", False),
    ("windows/amd64", "linux/amd64", False),
    ("/", "linux/amd64", False),
    ("", "linux/arm64", False),
])
def test_an_image_runs_only_on_a_host_of_its_platform(image, host, runs):
    assert P.same_platform(image, host) is runs


def test_the_refusal_names_the_image_its_platform_and_the_hosts():
    msg = P.platform_refusal("gpt-oss-120b", "nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev",
                             "linux/amd64", "linux/arm64", "aarch64")
    assert msg.startswith("instance 'gpt-oss-120b': image nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev "
                          "is built for linux/amd64, and this host is linux/arm64 (aarch64)")
    assert "the running engine keeps serving" in msg and "built for linux/arm64" in msg


# A fleet of both architectures (DGX Spark aarch64, HGX B200 x86_64): one artifact per architecture.
BOTH = {"x86_64": "wheels/amd64", "arm64": "wheels/arm64"}


@pytest.mark.parametrize("machine, path", [("x86_64", "wheels/amd64"), ("aarch64", "wheels/arm64")])
def test_a_per_architecture_setting_gives_each_host_its_own_by_either_name(machine, path):
    assert P.for_host(BOTH, machine, "model_cache_wheelhouse") == path
    assert P.for_host({"amd64": "a.tar", "aarch64": "b.tar"}, machine, "x") == {"x86_64": "a.tar", "aarch64": "b.tar"}[machine]
    # a plain path is every architecture's
    assert P.for_host("wheels", machine, "model_cache_wheelhouse") == "wheels"


@pytest.mark.parametrize("value, problem", [
    ({}, "names no architecture: give a path, or map aarch64 and x86_64 to paths"),
    ({"sparc64": "x"}, "has keys that are not architectures: sparc64 (allowed: aarch64, amd64, arm64, x86_64)"),
    ({"x86_64": "a", "amd64": "b"}, "names x86_64 twice (amd64 and x86_64)"),
    ({"aarch64": ""}, "has an empty or non-string path for aarch64"),
    ({"aarch64": ["x"]}, "has an empty or non-string path for aarch64"),
])
def test_a_mapping_that_is_not_one_path_per_architecture_is_refused(value, problem):
    assert P.per_architecture_problem(value) == problem
    with pytest.raises(ValueError, match="^inference_server_image_archive: " + re.escape(problem)):
        P.for_host(value, "x86_64", "inference_server_image_archive")
    assert P.per_architecture_problem(BOTH) is None and P.per_architecture_problem("x") is None


def test_a_host_the_mapping_lacks_is_refused_naming_the_setting_and_its_architecture():
    with pytest.raises(ValueError) as exc:
        P.for_host({"x86_64": "amd64.tar"}, "aarch64", "inference_server_image_archive")
    assert str(exc.value) == (
        "inference_server_image_archive: has no entry for this host's architecture, aarch64 (arm64); it names x86_64. "
        "Nothing was changed. Add this architecture's, e.g. inference_server_image_archive: {aarch64: <path>, ...}")
    with pytest.raises(ValueError, match="this host's architecture, riscv64, is none it can name"):
        P.for_host(BOTH, "riscv64", "model_cache_wheelhouse")
    with pytest.raises(ValueError, match=r"the host's architecture is not known: gather its facts"):
        P.for_host(BOTH, None, "model_cache_wheelhouse")
