"""An image built for another platform than the host's (NGC publishes some TensorRT-LLM tags for one
architecture only): an empty layer and a config that says so, written as `docker save` writes an archive,
so that `docker load` records its platform (docker import does not). The scenarios' tests run it on a lab
host: python3 -c "$(cat other_platform_image.py)" TAG ARCH PATH"""

import hashlib
import io
import json
import sys
import tarfile

tag, arch, path = sys.argv[1:]
layer_tar = io.BytesIO()
tarfile.open(fileobj=layer_tar, mode="w").close()
layer = layer_tar.getvalue()
config = json.dumps({"architecture": arch, "os": "linux", "config": {"Cmd": ["/bin/false"]},
                     "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
name = hashlib.sha256(config).hexdigest() + ".json"
manifest = json.dumps([{"Config": name, "RepoTags": [tag], "Layers": ["layer/layer.tar"]}]).encode()
with tarfile.open(path, "w") as out:
    for member, data in (("layer/layer.tar", layer), (name, config), ("manifest.json", manifest)):
        info = tarfile.TarInfo(member)
        info.size = len(data)
        out.addfile(info, io.BytesIO(data))
