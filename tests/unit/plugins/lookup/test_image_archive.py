"""image_archive: the image ID each tag of a docker save archive loads as, from manifest.json."""

import io
import json
import tarfile

import pytest

from ansible.errors import AnsibleLookupError

from ansible_collections.specdec.serve.plugins.lookup.image_archive import LookupModule
from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError, image_ids, read_archive

A = "a" * 64
B = "b" * 64


def write_tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_legacy_layout(tmp_path):
    manifest = [{"Config": A + ".json", "RepoTags": ["nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"],
                 "Layers": ["x/layer.tar"]},
                {"Config": B + ".json", "RepoTags": ["vllm/vllm-openai:v0.11.0", "vllm:latest"], "Layers": []}]
    path = write_tar(tmp_path / "a.tar", [("x/layer.tar", b"\0" * 4096), (A + ".json", b"{}"),
                                          ("manifest.json", json.dumps(manifest).encode())])
    assert read_archive(path) == {"nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6": "sha256:" + A,
                                  "vllm/vllm-openai:v0.11.0": "sha256:" + B, "vllm:latest": "sha256:" + B}


def test_oci_layout_of_docker_25():
    assert image_ids([{"Config": "blobs/sha256/" + A, "RepoTags": ["t:1"]}]) == {"t:1": "sha256:" + A}


def test_untagged_images_give_nothing():
    assert image_ids([{"Config": A + ".json", "RepoTags": None}]) == {}


@pytest.mark.parametrize("members, message", [
    ([("x", b"")], "has no manifest.json"),
    ([("manifest.json", b"{")], "not a readable docker save archive"),
    ([("manifest.json", b"{}")], "not a list of images"),
    ([("manifest.json", json.dumps([{"Config": "../etc/passwd"}]).encode())], "not a sha256 digest"),
])
def test_bad_archives_say_what_is_wrong(tmp_path, members, message):
    path = write_tar(tmp_path / "bad.tar", members)
    with pytest.raises(ImageArchiveError, match=message):
        read_archive(path)


def test_not_a_tar(tmp_path):
    path = tmp_path / "x.tar"
    path.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ImageArchiveError, match="not a readable docker save archive"):
        read_archive(str(path))


def test_lookup_returns_one_mapping_per_archive_and_fails_clearly(tmp_path):
    good = write_tar(tmp_path / "g.tar", [("manifest.json", json.dumps([{"Config": A + ".json", "RepoTags": ["t:1"]}]).encode())])
    assert LookupModule().run([good, good], variables={}) == [{"t:1": "sha256:" + A}] * 2
    with pytest.raises(AnsibleLookupError, match="missing.tar is not a readable docker save archive"):
        LookupModule().run([str(tmp_path / "missing.tar")], variables={})


# --------------------------------------------------------------------------- images_to_load (inference_server)
TRT, VLLM, EMU = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "vllm/vllm-openai:v0.11.0", "specdec/emu:1"


@pytest.mark.parametrize("host_ids, want", [
    # the host has each image the archive gives: nothing to load
    ({TRT: "sha256:" + A, VLLM: "sha256:" + B}, []),
    # absent (no key, an empty or a null ID)
    ({VLLM: "sha256:" + B}, [TRT]),
    ({TRT: "", VLLM: None}, [TRT, VLLM]),
    # another image behind the tag than the archive's
    ({TRT: "sha256:" + B, VLLM: "sha256:" + B}, [TRT]),
])
def test_images_to_load_are_the_absent_and_the_different_in_order(host_ids, want):
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import images_to_load
    archive = {TRT: "sha256:" + A, VLLM: "sha256:" + B}
    assert images_to_load([TRT, VLLM], host_ids, archive) == want


def test_an_image_the_archive_lacks_is_loaded_only_when_the_host_lacks_it():
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import images_to_load
    assert images_to_load([EMU], {EMU: "sha256:" + A}, {}) == []
    assert images_to_load([EMU], {}, {}) == [EMU]


@pytest.mark.parametrize("images, host_ids, archive", [
    (TRT, {}, {}), ([1], {}, {}), ([TRT], None, {}), ([TRT], {}, [TRT])])
def test_images_to_load_refuses_what_it_cannot_read(images, host_ids, archive):
    from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import ImageArchiveError, images_to_load
    with pytest.raises(ImageArchiveError, match="images_to_load"):
        images_to_load(images, host_ids, archive)


# --------------------------------------------------------------------------- the inference_server planner's entry

def judge(host_ids, archive, image_archive="/srv/engines.tar"):
    from ansible_collections.specdec.serve.plugins.plugin_utils._roles import inference_server
    settings = {"image_archive": image_archive, "image_pull": "missing"}
    return inference_server.images(settings, None, {"host": "h", "reported": {"host_ids": host_ids, "archive": archive}})


def test_the_planner_loads_the_absent_and_the_different_and_pulls_the_absent_without_an_archive():
    archive = {TRT: "sha256:" + A, VLLM: "sha256:" + B}
    assert judge({TRT: "", VLLM: "sha256:" + "c" * 64}, archive) == {"missing": [TRT], "to_fetch": [TRT, VLLM]}
    assert judge({TRT: "sha256:" + A, VLLM: "sha256:" + B}, archive) == {"missing": [], "to_fetch": []}
    assert judge({TRT: "", VLLM: "sha256:" + "c" * 64}, {}, image_archive="") == {"missing": [TRT], "to_fetch": [TRT]}


def test_the_planner_refuses_an_image_neither_on_the_host_nor_in_the_archive_naming_it():
    from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
    with pytest.raises(PlanRefusal) as err:
        judge({TRT: "", VLLM: ""}, {TRT: "sha256:" + A})
    assert err.value.errors == ["h: image(s) %s neither on the host nor in inference_server_image_archive=/srv/engines.tar "
                                "(it holds %s)." % (VLLM, TRT)]
    with pytest.raises(PlanRefusal, match="host_ids and archive must map"):
        judge([TRT], {})
