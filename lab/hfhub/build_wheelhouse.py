#!/usr/bin/env python3
"""Build the offline wheelhouse that model_cache installs huggingface_hub from on air-gapped hosts (or, with
``--requirement``, any other: the monitoring role's tune loop installs ansible-rulebook from one).

``pip download`` of ``huggingface_hub[hf_xet]`` and its dependencies into lab/.cache/wheels/ (the
role variable ``model_cache_wheelhouse`` points at such a directory on the controller; the role copies
it to the host and installs with ``--no-index --find-links``). A wheelhouse holds compiled wheels
(``hf-xet``, ``PyYAML``) for one architecture and one Python: for hosts of another architecture than the
controller, ``--arch aarch64`` (or ``x86_64``) downloads that architecture's manylinux wheels into
lab/.cache/wheels-<arch>/ for ``--python-version`` (default: the Python of the lab's hosts of that
architecture, 3.11 on the x86_64 ones' Debian bookworm, 3.13 on the aarch64 ones' trixie; give 3.12 for a
DGX Spark on DGX OS 7). ``model_cache_wheelhouse`` then maps each architecture to its own.
``--platform`` gives pip's platform tags directly instead.

Usage: python3 lab/hfhub/build_wheelhouse.py [--dest DIR] [--requirement R ...] [--arch A [--python-version V] | --platform P ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

# Keep in step with model_cache_hub_requirement in roles/model_cache/defaults/main.yml.
REQUIREMENT = "huggingface_hub[hf_xet]>=0.34,<3"
# pip's platform tags of the manylinux wheels each architecture installs (the glibc baselines their wheels use)
ARCH_PLATFORMS = {
    "x86_64": ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"],
    "aarch64": ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"],
}
# the Python of the lab's hosts of each architecture (lab/lab.py: bookworm containers, lab/vmhost.py: trixie VMs)
LAB_PYTHON = {"x86_64": "3.11", "aarch64": "3.13"}


def download_args(arch=None, platforms=(), python_version=None):
    """pip download's arguments for a wheelhouse of another platform than this interpreter's: binary wheels
    only, of these platform tags (``arch``'s, or ``platforms``) and this Python; none for this one's."""
    tags = list(ARCH_PLATFORMS[arch]) if arch else list(platforms)
    if arch and not python_version:
        python_version = LAB_PYTHON[arch]
    if not tags and not python_version:
        return []
    out = ["--only-binary=:all:"]
    for tag in tags:
        out += ["--platform", tag]
    return out + (["--python-version", python_version] if python_version else [])


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", help="default lab/.cache/wheels, or lab/.cache/wheels-ARCH with --arch")
    parser.add_argument("--requirement", action="append", default=[],
                        help="a pip requirement (repeatable; default %s)" % REQUIREMENT)
    parser.add_argument("--arch", choices=sorted(ARCH_PLATFORMS), help="the hosts' architecture (uname -m)")
    parser.add_argument("--platform", action="append", default=[], help="pip --platform (repeatable)")
    parser.add_argument("--python-version")
    parser.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads")
    args = parser.parse_args(argv)
    if args.arch and args.platform:
        parser.error("give --arch or --platform, not both")
    dest = args.dest or os.path.join(here, "..", ".cache", ("wheels-%s" % args.arch) if args.arch else "wheels")
    os.makedirs(dest, exist_ok=True)
    cmd = [args.python, "-m", "pip", "download", "--quiet", "-d", dest] + (args.requirement or [REQUIREMENT])
    subprocess.run(cmd + download_args(args.arch, args.platform, args.python_version), check=True)
    wheels = sorted(f for f in os.listdir(dest) if f.endswith(".whl"))
    print("%d wheels in %s" % (len(wheels), os.path.abspath(dest)))
    for wheel in wheels:
        print("  " + wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
