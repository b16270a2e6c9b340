#!/usr/bin/env python3
"""Build the lab's stand-in for Docker's apt repository (docker-ce, docker-ce-cli, containerd.io).

Lab hosts reach nothing outside, so the packages are made on the lab host itself by repackaging what
Debian's own engine installed there (the files `dpkg -L` lists for docker.io, containerd and runc, with
their maintainer scripts and conffiles, as dpkg-repack would) under Docker's package names:

    containerd.io   containerd + runc        Provides/Conflicts/Replaces containerd, runc
    docker-ce-cli   /usr/bin/docker           Conflicts/Replaces docker.io
    docker-ce       the rest of docker.io     Depends containerd.io, docker-ce-cli;
                                              Provides docker-engine; Conflicts/Replaces docker.io, docker-engine

each in two versions (an older and a newer one, the same binaries), so an upgrade is available. The
repository has Docker's layout (https://download.docker.com/linux/debian):

    OUT/linux/debian/gpg                                         armoured public key
    OUT/linux/debian/gpg.fingerprint                             its fingerprint (what docker_host pins)
    OUT/linux/debian/dists/<codename>/{Release,InRelease,Release.gpg}
    OUT/linux/debian/dists/<codename>/stable/binary-<arch>/Packages[.gz]
    OUT/linux/debian/dists/<codename>/pool/stable/<arch>/*.deb

so apt reads it through Docker's documented line:
`deb [arch=<arch> signed-by=/etc/apt/keyrings/docker.asc] URL/linux/debian <codename> stable`.
The signing key is generated for each build and thrown away; only its public half is kept.

Needs root (it reads the installed files), python3, dpkg, dpkg-deb and gpg. Stdlib only.

    python3 lab/aptrepo/docker_repo.py --out DIR [--codename bookworm]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import gpg, hashes, run, sign_release  # noqa: E402  (the NVIDIA-layout repository's helpers)

# (Docker's version strings: epoch 5 for the engine and the CLI, as Docker's repository numbers them)
ENGINE_VERSIONS = ["5:20.10.24-1~debian.12~bookworm", "5:20.10.25-1~debian.12~bookworm"]
CONTAINERD_VERSIONS = ["1.6.20-1", "1.6.21-1"]
MAINTAINER = "specdec.serve lab <lab@specdec.invalid>"
CLI_FILES = ("/usr/bin/docker",)
SCRIPTS = ("preinst", "postinst", "prerm", "postrm")


def split_depends(depends: str, drop: tuple[str, ...]) -> list[str]:
    """The entries of a Depends field, without those whose first alternative names a package in `drop`."""
    out = []
    for entry in (e.strip() for e in depends.split(",")):
        if entry and entry.split("|")[0].split("(")[0].split(":")[0].strip() not in drop:
            out.append(entry)
    return out


def control_text(fields: dict[str, str]) -> str:
    return "".join(f"{k}: {v}\n" for k, v in fields.items() if v)


def plan(query) -> dict[str, dict]:
    """What each package is made of, from the installed packages: `query(package, field)` answers dpkg-query
    (${Depends}, ${Description}) and `query(package, 'files')` the paths dpkg -L lists."""
    engine_files = [f for f in query("docker.io", "files") if f not in CLI_FILES]
    cli_files = [f for f in query("docker.io", "files") if f in CLI_FILES]
    return {
        "containerd.io": {
            "from": ["containerd", "runc"],
            "files": query("containerd", "files") + query("runc", "files"),
            "versions": CONTAINERD_VERSIONS,
            "fields": {
                "Depends": ", ".join(split_depends(query("containerd", "Depends"), ("runc",))
                                     + split_depends(query("runc", "Depends"), ("libc6",))),
                "Provides": "containerd, runc", "Conflicts": "containerd, runc", "Replaces": "containerd, runc",
                "Description": "An open and reliable container runtime (specdec.serve lab: Debian's containerd and runc)"},
        },
        "docker-ce-cli": {
            "from": [],
            "files": cli_files,
            "versions": ENGINE_VERSIONS,
            # (not docker-engine: docker-ce provides it)
            "fields": {"Depends": "libc6", "Conflicts": "docker.io", "Replaces": "docker.io",
                       "Description": "Docker CLI (specdec.serve lab: the docker client of Debian's docker.io)"},
        },
        "docker-ce": {
            "from": ["docker.io"],
            "files": engine_files,
            "versions": ENGINE_VERSIONS,
            "fields": {
                "Depends": ", ".join(split_depends(query("docker.io", "Depends"), ("containerd", "runc"))
                                     + ["containerd.io (>= 1.6)", "docker-ce-cli"]),
                "Provides": "docker-engine", "Conflicts": "docker.io, docker-engine", "Replaces": "docker.io, docker-engine",
                "Description": "Docker: the open-source application container engine (specdec.serve lab: Debian's docker.io)"},
        },
    }


def dpkg_query(package: str, what: str) -> list[str] | str:
    if what == "files":
        out = run(["dpkg", "-L", package], capture_output=True, text=True).stdout.splitlines()
        return [p for p in out if p.startswith("/") and p != "/."]
    return run(["dpkg-query", "-W", "-f=${%s}" % what, package], capture_output=True, text=True).stdout.strip()


def build_deb(name: str, spec: dict, version: str, arch: str, dest: Path, work: Path) -> Path:
    root = work / f"{name}_{version.replace(':', '_')}_{arch}"
    (root / "DEBIAN").mkdir(parents=True)
    for path in spec["files"]:
        src = Path(path)
        target = root / path.lstrip("/")
        if src.is_dir():  # a directory, or the host's merged-/usr link (/lib): a directory in the package
            target.mkdir(parents=True, exist_ok=True)
            shutil.copystat(src, target)
        elif src.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), target)
        elif src.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    conffiles = []
    for pkg in spec["from"]:
        info = Path("/var/lib/dpkg/info")
        for script in SCRIPTS:
            if (info / f"{pkg}.{script}").exists() and not (root / "DEBIAN" / script).exists():
                shutil.copy2(info / f"{pkg}.{script}", root / "DEBIAN" / script)
        if (info / f"{pkg}.conffiles").exists():
            conffiles += [c for c in (info / f"{pkg}.conffiles").read_text().split()
                          if (root / c.lstrip("/")).exists()]
    if conffiles:
        (root / "DEBIAN/conffiles").write_text("\n".join(conffiles) + "\n")
    fields = {"Package": name, "Version": version, "Architecture": arch, "Maintainer": MAINTAINER,
              "Section": "admin", "Priority": "optional", "Homepage": "https://www.docker.com", **spec["fields"]}
    (root / "DEBIAN/control").write_text(control_text(fields))
    deb = dest / f"{name}_{version.split(':')[-1]}_{arch}.deb"
    # uncompressed: the lab serves it on loopback, and compressing ~80 MB of Go binaries twice takes minutes
    run(["dpkg-deb", "--root-owner-group", "-Znone", "--build", str(root), str(deb)], stdout=subprocess.DEVNULL)
    return deb


def release_text(codename: str, arch: str, files: dict[str, bytes]) -> str:
    lines = ["Origin: Docker", "Label: Docker CE", f"Suite: {codename}", f"Codename: {codename}",
             f"Architectures: {arch}", "Components: stable",
             "Description: Docker CE packages (specdec.serve lab stand-in: Debian's engine repackaged)",
             f"Date: {formatdate(time.time(), usegmt=True)}"]
    for algo in ("MD5Sum", "SHA1", "SHA256"):
        lines.append(f"{algo}:")
        lines += [f" {hashes(data)[algo]} {len(data):>8} {name}" for name, data in files.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (replaced)")
    p.add_argument("--codename", default="bookworm")
    args = p.parse_args(argv)
    for tool in ("dpkg", "dpkg-deb", "gpg"):
        if not shutil.which(tool):
            print(f"docker_repo.py: {tool} not found", file=sys.stderr)
            return 1
    arch = run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    packages = plan(dpkg_query)
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    base = out / "linux" / "debian"
    dist = base / "dists" / args.codename
    pool = dist / "pool" / "stable" / arch
    index = dist / "stable" / f"binary-{arch}"
    pool.mkdir(parents=True)
    index.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="dockerrepo-") as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "gnupg"
        home.mkdir(mode=0o700)
        gpg(home, "--quick-generate-key", "specdec.serve lab Docker repository <lab@specdec.invalid>",
            "ed25519", "sign", "never")
        fpr = [line.split(":")[9] for line in
               gpg(home, "--with-colons", "--list-secret-keys", capture_output=True, text=True).stdout.splitlines()
               if line.startswith("fpr:")][0]
        (base / "gpg").write_bytes(gpg(home, "--armor", "--export", fpr, capture_output=True).stdout)
        (base / "gpg.fingerprint").write_text(fpr + "\n")
        stanzas = []
        for name, spec in packages.items():
            for version in spec["versions"]:
                deb = build_deb(name, spec, version, arch, pool, tmp_path / "build")
                data = deb.read_bytes()
                h = hashes(data)
                control = run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True).stdout.strip()
                stanzas.append(control + f"\nFilename: {deb.relative_to(base)}\nSize: {len(data)}\n"
                               f"MD5sum: {h['MD5Sum']}\nSHA1: {h['SHA1']}\nSHA256: {h['SHA256']}\n")
        text = "\n".join(stanzas).encode()
        (index / "Packages").write_bytes(text)
        (index / "Packages.gz").write_bytes(gzip.compress(text, mtime=0))
        files = {f"stable/binary-{arch}/{n}": (index / n).read_bytes() for n in ("Packages", "Packages.gz")}
        (dist / "Release").write_text(release_text(args.codename, arch, files))
        sign_release(home, fpr, dist)
    print(f"docker_repo.py: {sum(len(s['versions']) for s in packages.values())} packages ({arch}, {args.codename}) "
          f"signed by {fpr} in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
