"""A host's architecture as packages and images name it (plugins/module_utils/platforms.py): every
choice for both architectures the collection serves on (x86_64: HGX B200; aarch64: DGX Spark, GB200)."""

from __future__ import annotations

import pytest

from ansible_collections.specdec.serve.plugins.filter.platforms import FilterModule
from ansible_collections.specdec.serve.plugins.module_utils import platforms as P


@pytest.mark.parametrize("machine, debian, platform", [
    ("x86_64", "amd64", "linux/amd64"),
    ("aarch64", "arm64", "linux/arm64"),
    ("riscv64", "riscv64", "linux/riscv64"),
])
def test_each_architecture_is_named_as_debian_and_images_name_it(machine, debian, platform):
    assert P.debian_arch(machine) == debian == FilterModule().filters()["debian_arch"](machine)
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
