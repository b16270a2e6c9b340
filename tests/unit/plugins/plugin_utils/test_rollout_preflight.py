"""The rollout's checks of a host (plugin_utils/_fleet.py, ``preflight``, which the rollout role's planner applies in
its ``preflight`` entry), from the rollout role's probe output; and the probe itself, run by sh with fake docker, df
and nvidia-smi, so its output is the one the checks read."""

import os
import subprocess
import tarfile
import io
import json

import pytest
import yaml

from ansible_collections.specdec.serve.plugins.plugin_utils._checks import PlanRefusal
from ansible_collections.specdec.serve.plugins.plugin_utils._fleet import preflight
from ansible_collections.specdec.serve.plugins.plugin_utils._image_archive import read_archive
from ansible_collections.specdec.serve.plugins.plugin_utils._roles import rollout

def fleet_preflight(lines, host, **kwargs):
    """The checks as the planner applies them: the image archive's tags read on the controller."""
    return preflight(lines, host, archive_tags=lambda path: sorted(read_archive(path)), **kwargs)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6"
GOOD = ["docker 0 /var/lib/docker", "df / 900000000000", "df /var/lib/specdec 800000000000",
        "image %s sha256:abc" % IMAGE, "model openai/gpt-oss-120b yes"]


def test_a_ready_host_has_no_problem():
    assert fleet_preflight(GOOD, "b200-01", min_free_gb=50) == {"missing_images": [], "problems": []}


def test_docker_not_answering_is_the_only_problem_named():
    out = fleet_preflight(["docker 1 Cannot connect to the Docker daemon"], "b200-01", min_free_gb=50)
    assert out["problems"] == ["docker does not answer on b200-01 (Cannot connect to the Docker daemon); "
                               "run playbooks/prepare.yml first."]


def test_every_other_problem_at_once():
    lines = ["docker 0 /var/lib/docker", "df / 10000000000", "df /models 900000000000",
             "image %s -" % IMAGE, "image vllm/vllm-openai:v0.11.0 sha256:def", "model org/a no", "model org/b yes",
             "gpu-rc 0", "gpu 0, NVIDIA B200, 570.124.06"]
    out = fleet_preflight(lines, "b200-01", min_free_gb=50, gpu_count=8, min_driver="575", models_dir="/models",
                          registry=[{"item": IMAGE, "rc": 1}])
    assert out["missing_images"] == [IMAGE]
    assert out["problems"] == [
        "b200-01: expected 8 GPU(s) with driver >= 575, nvidia-smi lists 1: 0, NVIDIA B200, 570.124.06",
        "b200-01: less than rollout_min_free_gb=50 GB free on / (10.0 GB).",
        "b200-01: image(s) %s neither on the host nor in their registry (docker manifest inspect failed)." % IMAGE,
        "b200-01: model(s) org/a not in /models; run playbooks/prepare.yml (model_cache) first."]


def test_gpu_checks_only_for_a_gpu_class_and_nvidia_smi_failing():
    assert fleet_preflight(GOOD, "h")["problems"] == []
    out = fleet_preflight(GOOD + ["gpu-rc 127", "gpu sh: 1: nvidia-smi: not found"], "h", gpu_count=1)
    assert out["problems"] == ["h: expected 1 GPU(s), nvidia-smi failed: sh: 1: nvidia-smi: not found"]


def test_an_image_the_registry_has_is_no_problem():
    lines = ["docker 0 /d", "image %s -" % IMAGE]
    assert fleet_preflight(lines, "h", registry=[{"item": IMAGE, "rc": 0}])["problems"] == []


def _archive(path, tags):
    config = "blobs/sha256/" + "a" * 64
    manifest = json.dumps([{"Config": config, "RepoTags": tags, "Layers": []}]).encode()
    with tarfile.open(str(path), "w") as tar:
        for name, data in (("manifest.json", manifest), (config, b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_missing_images_are_looked_up_in_the_archive_on_the_controller(tmp_path):
    archive = tmp_path / "engines.tar"
    _archive(archive, [IMAGE])
    lines = ["docker 0 /d", "image %s -" % IMAGE, "image other:1 -"]
    out = fleet_preflight(lines, "h", image_archive=str(archive))
    assert out["problems"] == ["h: image(s) other:1 neither on the host nor in the archive %s (tags in it: %s)."
                               % (archive, IMAGE)]
    out = fleet_preflight(lines, "h", image_archive=str(tmp_path / "gone.tar"))
    assert "(missing on the controller)" in out["problems"][0] and IMAGE in out["problems"][0]


SETTINGS = {"min_free_gb": 50, "gpu_count": 0, "min_driver_version": ""}


def test_the_planner_judges_the_probe_with_inference_servers_paths_and_refuses_another_shape():
    out = rollout.PLANNERS["preflight"](SETTINGS, None, {"host": "b200-01", "reported": {"probe": GOOD}})
    # inference_server's defaults where the host sets neither (its argument spec)
    assert out == {"missing_images": [], "problems": [], "models_dir": "/var/lib/specdec/models", "image_archive": ""}
    lines = ["docker 0 /var/lib/docker", "df / 900000000000", "df /m 800000000000", "image %s -" % IMAGE]
    ctx = {"host": "b200-01", "vars": {"inference_server_models_dir": "/m"},
           "reported": {"probe": lines, "registry": [{"item": IMAGE, "rc": 0}]}}
    assert rollout.PLANNERS["preflight"](SETTINGS, None, ctx)["missing_images"] == [IMAGE]
    with pytest.raises(PlanRefusal, match="reported.probe"):
        rollout.PLANNERS["preflight"](SETTINGS, None, {"host": "h", "reported": {"probe": "docker 0 /d"}})


def _script():
    tasks = yaml.safe_load(open(os.path.join(REPO, "roles", "rollout", "tasks", "main.yml")))
    task = [t for t in tasks if t["name"].startswith("Probe docker")][0]
    text = task["vars"]["_script"]
    return text.replace("{% raw %}", "").replace("{% endraw %}", "")


@pytest.fixture
def bin_dir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    fakes = {
        "docker": """#!/bin/sh
case "$1 $2" in
  "info --format") echo /var/lib/docker ;;
  "image inspect") [ "$5" = present:1 ] && echo sha256:abc || { echo "No such image: $5" >&2; exit 1; } ;;
esac
""",
        "df": "#!/bin/sh\necho 'Mounted on Avail'\nfor p in \"$@\"; do case $p in /*) echo \"$p 123\";; esac; done\n",
        "nvidia-smi": "#!/bin/sh\necho '0, NVIDIA GB10, 580.95.05'\n",
    }
    for name, text in fakes.items():
        (d / name).write_text(text)
        os.chmod(str(d / name), 0o755)
    return d


def test_the_probe_prints_what_the_checks_read(tmp_path, bin_dir):
    models = tmp_path / "models"
    (models / "org" / "a").mkdir(parents=True)
    (models / "org" / "a" / "config.json").write_text("{}")
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % bin_dir)
    out = subprocess.run(["sh", "-c", _script(), "preflight", str(models), "yes", "2", "present:1", "absent:1",
                          "org/a", "org/b"], capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    assert out == ["docker 0 /var/lib/docker", "df /var/lib/docker 123", "df %s 123" % models,
                   "image present:1 sha256:abc", "image absent:1 -", "model org/a yes", "model org/b no",
                   "gpu-rc 0", "gpu 0, NVIDIA GB10, 580.95.05"]
    result = fleet_preflight(out, "spark-01", gpu_count=1, models_dir=str(models), registry=[{"item": "absent:1", "rc": 0}])
    assert result == {"missing_images": ["absent:1"], "problems": [
        "spark-01: model(s) org/b not in %s; run playbooks/prepare.yml (model_cache) first." % models]}
