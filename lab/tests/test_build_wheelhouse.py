"""lab/hfhub/build_wheelhouse.py: the pip download arguments of a wheelhouse for another architecture."""

from hfhub import build_wheelhouse as W


def test_this_interpreters_wheelhouse_needs_no_platform_arguments():
    assert W.download_args() == []


def test_an_architectures_wheelhouse_is_binary_wheels_of_its_manylinux_tags_for_the_lab_python():
    args = W.download_args("aarch64")
    assert args[0] == "--only-binary=:all:" and args[-2:] == ["--python-version", "3.13"]  # the aarch64 hosts' trixie
    assert W.download_args("x86_64")[-2:] == ["--python-version", "3.11"]  # the x86_64 hosts' bookworm
    tags = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert tags == W.ARCH_PLATFORMS["aarch64"] and all(t.endswith("_aarch64") for t in tags)
    assert W.download_args("x86_64", python_version="3.12")[-2:] == ["--python-version", "3.12"]


def test_platform_tags_given_directly_are_passed_as_given():
    assert W.download_args(platforms=["manylinux_2_28_aarch64"]) == [
        "--only-binary=:all:", "--platform", "manylinux_2_28_aarch64"]
    assert W.download_args(python_version="3.13") == ["--only-binary=:all:", "--python-version", "3.13"]
