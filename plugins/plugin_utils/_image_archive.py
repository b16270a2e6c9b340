# -*- coding: utf-8 -*-
# Copyright: (c) 2026, specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The images of a `docker save` archive by tag, from its manifest.json (stdlib only).

Both layouts docker writes are read: the legacy one ("Config": "<hex>.json") and the OCI one of
Docker 25 and later ("Config": "blobs/sha256/<hex>"). The image ID is the digest of the config, so
the result says which image ID `docker load` of the archive gives each tag, without loading it and
without reading the layers: tarfile seeks over every member's data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import tarfile

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ImageArchiveError(ValueError):
    pass


def image_ids(manifest):
    """{tag: 'sha256:<hex>'} from the parsed manifest.json of a docker save archive."""
    if not isinstance(manifest, list):
        raise ImageArchiveError("manifest.json is not a list of images")
    result = {}
    for entry in manifest:
        config = entry.get("Config", "") if isinstance(entry, dict) else ""
        digest = config.rsplit("/", 1)[-1]
        if digest.endswith(".json"):
            digest = digest[:-len(".json")]
        if not _HEX64.match(digest):
            raise ImageArchiveError("manifest.json names a config that is not a sha256 digest: %r" % (config,))
        for tag in entry.get("RepoTags") or []:
            result[tag] = "sha256:" + digest
    return result


def read_archive(path):
    """{tag: image ID} of the docker save archive at path (an uncompressed tar, as docker save writes)."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            for member in tar:
                if member.isfile() and member.name.lstrip("./") == "manifest.json":
                    handle = tar.extractfile(member)
                    if handle is None:
                        raise AssertionError("no content for the regular file %s" % member.name)
                    manifest = json.loads(handle.read().decode("utf-8"))
                    return image_ids(manifest)
    except (OSError, tarfile.TarError, ValueError) as exc:
        if isinstance(exc, ImageArchiveError):
            raise ImageArchiveError("%s: %s" % (path, exc))
        raise ImageArchiveError("%s is not a readable docker save archive: %s" % (path, exc))
    raise ImageArchiveError("%s has no manifest.json: not a docker save archive" % path)


def images_to_load(images, host_ids, archive_ids):
    """The images of `images` to load from the archive, in their order: those the host does not have
    (no ID in `host_ids`, {image: ID or empty}), and those behind whose tag the host has another ID than
    the archive's (`archive_ids`, {tag: ID}, what `docker load` of it gives). An image the archive does
    not hold is loaded only when the host lacks it (the archive is then the only way the role knows)."""
    if not isinstance(images, (list, tuple)) or not all(isinstance(i, str) for i in images):
        raise ImageArchiveError("images_to_load: expects a list of image references, got %r" % (images,))
    for what, ids in (("host_ids", host_ids), ("archive_ids", archive_ids)):
        if not isinstance(ids, dict):
            raise ImageArchiveError("images_to_load: %s must be a mapping of image to ID, got %r" % (what, ids))
    load = []
    for image in images:
        have = host_ids.get(image) or ''
        if not have or have != archive_ids.get(image, have):
            load.append(image)
    return load
