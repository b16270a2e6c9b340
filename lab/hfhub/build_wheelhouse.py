#!/usr/bin/env python3
"""Build the offline wheelhouse that model_cache installs huggingface_hub from on air-gapped hosts.

``pip download`` of ``huggingface_hub[hf_xet]`` and its dependencies into lab/.cache/wheels/ (the
role variable ``model_cache_wheelhouse`` points at such a directory on the controller; the role copies
it to the host and installs with ``--no-index --find-links``). Target hosts may differ from the
controller: pass ``--platform``/``--python-version`` (e.g. ``manylinux2014_aarch64`` and ``3.12`` for
a DGX Spark running Ubuntu 24.04).

Usage: python3 lab/hfhub/build_wheelhouse.py [--dest lab/.cache/wheels] [--platform P] [--python-version V]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

# Keep in step with model_cache_hub_requirement in roles/model_cache/defaults/main.yml.
REQUIREMENT = "huggingface_hub[hf_xet]>=0.34,<3"


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", default=os.path.join(here, "..", ".cache", "wheels"))
    parser.add_argument("--requirement", default=REQUIREMENT)
    parser.add_argument("--platform", action="append", default=[], help="pip --platform (repeatable)")
    parser.add_argument("--python-version")
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads")
    args = parser.parse_args(argv)
    os.makedirs(args.dest, exist_ok=True)
    cmd = [args.python, "-m", "pip", "download", "--quiet", "-d", args.dest, args.requirement]
    if args.platform or args.python_version:
        cmd += ["--only-binary=:all:"]
        for platform in args.platform:
            cmd += ["--platform", platform]
        if args.python_version:
            cmd += ["--python-version", args.python_version]
    subprocess.run(cmd, check=True)
    wheels = sorted(f for f in os.listdir(args.dest) if f.endswith(".whl"))
    print("%d wheels in %s" % (len(wheels), os.path.abspath(args.dest)))
    for wheel in wheels:
        print("  " + wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
