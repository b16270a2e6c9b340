#!/usr/bin/env python3
"""Build the lab's NVIDIA container toolkit apt repository (test packages, no GPU).

The repository has the layout of NVIDIA's own (https://nvidia.github.io/libnvidia-container):

    OUT/gpgkey                                 armoured public key (for the signed-by keyring)
    OUT/gpgkey.fingerprint                     its fingerprint (what container_toolkit pins)
    OUT/stable/deb/<arch>/*.deb                the four packages, in every version
    OUT/stable/deb/<arch>/Packages[.gz]        the index
    OUT/stable/deb/<arch>/Release, InRelease, Release.gpg

so apt reads it through the same source line: `deb [signed-by=KEYRING] URL/stable/deb/$(ARCH) /`.

The packages carry the real names and dependencies (nvidia-container-toolkit depends on
nvidia-container-toolkit-base of the same version and on libnvidia-container-tools, which
depends on libnvidia-container1); their programs are the small scripts in payload/: `nvidia-ctk`
answers --version, `runtime configure --dry-run`, `cdi generate` and `cdi list`, and
`nvidia-container-runtime` hands over to runc. Two versions are built so that pinning matters.

The signing key is generated afresh for every build in a temporary GnuPG home and thrown away;
only its public half is kept (OUT/gpgkey).

Needs python3, dpkg-deb and gpg (a Debian or Ubuntu host has them). Stdlib only.

    python3 lab/aptrepo/build.py --out DIR [--version 1.17.8-1 --version 1.18.0-1] [--arch amd64 --arch arm64]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAYLOAD = HERE / "payload"
DEFAULT_VERSIONS = ["1.17.8-1", "1.18.0-1"]
DEFAULT_ARCHES = ["amd64", "arm64"]
MAINTAINER = "specdec.serve lab <lab@specdec.invalid>"
HOMEPAGE = "https://github.com/NVIDIA/nvidia-container-toolkit"

# name -> (description, depends (format with v=version, up=upstream), files: (payload, path, mode), conffiles)
PACKAGES = {
    "libnvidia-container1": (
        "NVIDIA container runtime library (specdec.serve lab test package)",
        "",
        [],
        [],
    ),
    "libnvidia-container-tools": (
        "NVIDIA container runtime library, command-line tools (specdec.serve lab test package)",
        "libnvidia-container1 (>= {v})",
        [("nvidia-container-cli", "usr/bin/nvidia-container-cli", 0o755)],
        [],
    ),
    "nvidia-container-toolkit-base": (
        "NVIDIA Container Toolkit Base (specdec.serve lab test package)",
        "",
        [("nvidia-ctk", "usr/bin/nvidia-ctk", 0o755),
         ("nvidia-container-runtime", "usr/bin/nvidia-container-runtime", 0o755),
         ("config.toml", "etc/nvidia-container-runtime/config.toml", 0o644)],
        ["/etc/nvidia-container-runtime/config.toml"],
    ),
    "nvidia-container-toolkit": (
        "NVIDIA Container toolkit (specdec.serve lab test package)",
        "nvidia-container-toolkit-base (= {v}), libnvidia-container-tools (>= {v}), libnvidia-container-tools (<< 2.0.0)",
        [("nvidia-container-runtime-hook", "usr/bin/nvidia-container-runtime-hook", 0o755)],
        [],
    ),
}

POSTINST_BASE = """#!/bin/sh
set -e
if [ "$1" = configure ]; then
    nvidia-ctk --quiet config --config-file=/etc/nvidia-container-runtime/config.toml --in-place || true
fi
"""


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kwargs)


def build_deb(name: str, version: str, arch: str, dest: Path, work: Path) -> Path:
    upstream = version.rsplit("-", 1)[0]
    desc, depends, files, conffiles = PACKAGES[name]
    root = work / f"{name}_{version}_{arch}"
    (root / "DEBIAN").mkdir(parents=True)
    for src, rel, mode in files:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((PAYLOAD / src).read_text().replace("@UPSTREAM@", upstream))
        target.chmod(mode)
    doc = root / "usr/share/doc" / name
    doc.mkdir(parents=True)
    (doc / "README").write_text(
        f"{name} {version}: a test package of the specdec.serve lab. It has the name, version and\n"
        "dependencies of NVIDIA's package, and small scripts in place of the GPU programs.\n")
    control = [f"Package: {name}", f"Version: {version}", f"Architecture: {arch}",
               f"Maintainer: {MAINTAINER}", "Section: utils", "Priority: optional",
               f"Homepage: {HOMEPAGE}"]
    if depends:
        control.append("Depends: " + depends.format(v=version, up=upstream))
    control.append(f"Description: {desc}")
    (root / "DEBIAN/control").write_text("\n".join(control) + "\n")
    if conffiles:
        (root / "DEBIAN/conffiles").write_text("\n".join(conffiles) + "\n")
    if name == "nvidia-container-toolkit-base":
        post = root / "DEBIAN/postinst"
        post.write_text(POSTINST_BASE)
        post.chmod(0o755)
    deb = dest / f"{name}_{version}_{arch}.deb"
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
        stdout=subprocess.DEVNULL)
    return deb


def deb_control(deb: Path) -> str:
    return run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True).stdout.strip()


def hashes(data: bytes) -> dict[str, str]:
    return {"MD5Sum": hashlib.md5(data).hexdigest(), "SHA1": hashlib.sha1(data).hexdigest(),
            "SHA256": hashlib.sha256(data).hexdigest()}


def write_index(repo: Path, arch: str) -> None:
    """Packages, Packages.gz and an unsigned Release for a flat repository directory."""
    stanzas = []
    for deb in sorted(repo.glob("*.deb")):
        data = deb.read_bytes()
        h = hashes(data)
        stanzas.append(deb_control(deb) + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"MD5sum: {h['MD5Sum']}\nSHA1: {h['SHA1']}\nSHA256: {h['SHA256']}\n")
    packages = "\n".join(stanzas).encode()
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = ["Origin: specdec.serve lab", "Label: NVIDIA container toolkit test packages",
             f"Architectures: {arch}", f"Date: {formatdate(time.time(), usegmt=True)}",
             "Description: test packages named like NVIDIA's libnvidia-container repository"]
    files = {n: (repo / n).read_bytes() for n in ("Packages", "Packages.gz")}
    for algo in ("MD5Sum", "SHA1", "SHA256"):
        lines.append(f"{algo}:")
        for n, data in files.items():
            lines.append(f" {hashes(data)[algo]} {len(data):>8} {n}")
    (repo / "Release").write_text("\n".join(lines) + "\n")


def gpg(home: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run(["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback",
                "--passphrase", "", *args], **kwargs)


def sign_release(home: Path, fpr: str, directory: Path) -> None:
    """InRelease (clear-signed) and Release.gpg (detached) for the Release file in `directory`, as apt reads them."""
    gpg(home, "--local-user", fpr, "--digest-algo", "SHA256", "--clearsign",
        "--output", str(directory / "InRelease"), str(directory / "Release"))
    gpg(home, "--local-user", fpr, "--digest-algo", "SHA256", "--armor", "--detach-sign",
        "--output", str(directory / "Release.gpg"), str(directory / "Release"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (replaced)")
    p.add_argument("--version", action="append", dest="versions", help="package version (repeat)")
    p.add_argument("--arch", action="append", dest="arches", help="architecture (repeat)")
    args = p.parse_args(argv)
    versions = args.versions or DEFAULT_VERSIONS
    arches = args.arches or DEFAULT_ARCHES
    for tool in ("dpkg-deb", "gpg"):
        if not shutil.which(tool):
            print(f"build.py: {tool} not found", file=sys.stderr)
            return 1
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory(prefix="aptrepo-") as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "gnupg"
        home.mkdir(mode=0o700)
        gpg(home, "--quick-generate-key", "specdec.serve lab apt repository <lab@specdec.invalid>",
            "ed25519", "sign", "never")
        fpr = [line.split(":")[9] for line in
               gpg(home, "--with-colons", "--list-secret-keys", capture_output=True, text=True).stdout.splitlines()
               if line.startswith("fpr:")][0]
        out.mkdir(parents=True)
        (out / "gpgkey").write_bytes(gpg(home, "--armor", "--export", fpr, capture_output=True).stdout)
        (out / "gpgkey.fingerprint").write_text(fpr + "\n")  # what an inventory pins
        for arch in arches:
            repo = out / "stable" / "deb" / arch
            repo.mkdir(parents=True)
            for version in versions:
                for name in PACKAGES:
                    build_deb(name, version, arch, repo, tmp_path / "build")
            write_index(repo, arch)
            sign_release(home, fpr, repo)
    print(f"build.py: {len(PACKAGES) * len(versions) * len(arches)} packages "
          f"({', '.join(versions)}; {', '.join(arches)}) signed by {fpr} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
