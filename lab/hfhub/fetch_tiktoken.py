#!/usr/bin/env python3
"""Put the real tiktoken encodings (o200k_base, cl100k_base) under lab/.cache/tiktoken/.

The lab has no access to the public blob store the encodings come from. The ``litellm`` wheel on
PyPI carries both files under the names tiktoken gives its download cache (the sha1 of the download
URL), so this script downloads that wheel with pip (no install), reads the two files out of it with
``zipfile`` and checks them against the sha256 that tiktoken itself pins. The stand-in serves them at
``/encodings/<name>.tiktoken``.

Usage: python3 lab/hfhub/fetch_tiktoken.py [--cache lab/.cache] [--python PYTHON]
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import subprocess
import sys
import zipfile

LITELLM = "litellm==1.109.1"
BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
# Published by tiktoken (tiktoken_ext/openai_public.py, expected_hash=...).
ENCODINGS = {
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default=os.path.join(here, "..", ".cache"))
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads the wheel")
    args = parser.parse_args(argv)
    out_dir = os.path.join(args.cache, "tiktoken")
    os.makedirs(out_dir, exist_ok=True)

    if all(os.path.exists(os.path.join(out_dir, n)) and sha256_file(os.path.join(out_dir, n)) == h
           for n, h in ENCODINGS.items()):
        print("tiktoken encodings present and verified in %s" % out_dir)
        return 0

    wheel_dir = os.path.join(args.cache, "pip-litellm")
    wheels = glob.glob(os.path.join(wheel_dir, "litellm-1.109.1-*.whl"))
    if not wheels:
        subprocess.run([args.python, "-m", "pip", "download", "--no-deps", "--quiet", "-d", wheel_dir, LITELLM],
                       check=True)
        wheels = glob.glob(os.path.join(wheel_dir, "litellm-1.109.1-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        for name, expected in ENCODINGS.items():
            key = hashlib.sha1((BLOB_BASE + name).encode()).hexdigest()
            member = next((n for n in names if n.endswith("/" + key)), None)
            if member is None:
                print("error: %s (cache key %s) not found in %s" % (name, key, wheels[0]), file=sys.stderr)
                return 1
            data = wheel.read(member)
            actual = hashlib.sha256(data).hexdigest()
            if actual != expected:
                print("error: %s has sha256 %s, tiktoken publishes %s" % (name, actual, expected), file=sys.stderr)
                return 1
            tmp = os.path.join(out_dir, name + ".tmp")
            with open(tmp, "wb") as handle:
                handle.write(data)
            os.replace(tmp, os.path.join(out_dir, name))
            print("%s: %d bytes, sha256 %s (verified)" % (name, len(data), actual))
    return 0


if __name__ == "__main__":
    sys.exit(main())
