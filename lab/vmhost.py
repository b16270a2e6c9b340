"""aarch64 lab hosts: a real arm64 Debian kernel and userland under full-system emulation.

A DGX Spark or a GB200 host is aarch64. Under qemu-user (binfmt) an arm64 container runs systemd and
Python but not the parts a GPU host's roles exist for: the kernel's netfilter is out of reach
(`iptables-nft`: "Protocol not supported") and dockerd cannot start a container (the runc shim fails).
So an aarch64 lab host is a virtual machine: `qemu-system-aarch64` (TCG) boots Debian trixie's arm64
kernel on a disk made here, inside a runner container on the lab network that hands the VM its lab
address (lab/vm/run-vm). What is emulated is the CPU, and only the CPU: the kernel, systemd, dockerd,
containerd, runc, iptables, apt and every package are Debian's own arm64 builds. Building the disk uses
qemu-user (binfmt) for the packages' maintainer scripts, as any cross-architecture debootstrap does.

    base disk  ~/.cache/specdec-lab/arm64/{disk.raw,vmlinuz,initrd.img}  mmdebstrap, cached by recipe
    runner     specdec-lab/vm-runner:latest                     qemu-system-aarch64 on the lab's core image

Stdlib only, like lab.py.
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

VM_DIR = Path(__file__).resolve().parent / "vm"
VM_SUITE = "trixie"
RUNNER_IMAGE = "specdec-lab/vm-runner:latest"
# What lab/host/Dockerfile installs on an x86_64 lab host, and what a machine (not a container) needs to
# boot: udev and kmod, systemd-networkd's resolver-less DNS file (lab-vm-setup), busybox for the initramfs.
VM_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "udev", "kmod", "openssh-server", "sudo", "iproute2", "iputils-ping",
    "procps", "curl", "gnupg", "docker.io", "docker-cli", "iptables", "python3-venv", "python3-apt", "apt-utils", "less",
    "ca-certificates", "busybox-static",
]
# The initramfs loads these (and what modules.dep says they need) to mount the root disk; ext4 asks the
# crypto API for crc32c, which modules.dep does not list.
ROOT_MODULES = ["virtio_blk", "crc32c_generic", "ext4"]
DISK_SIZE = "6G"
# lab/vm's files that go into the disk (its recipe): the initramfs's init, the boot-time settings, the code cache
DISK_FILES = ("customize-disk", "init", "lab-vm-setup", "lab-vm-setup.service", "lab_zipimport_cache.py")


def tools_missing() -> list[str]:
    """Debian packages this machine needs to build an aarch64 host."""
    need = []
    if not shutil.which("mmdebstrap"):
        need.append("mmdebstrap")
    if not Path("/usr/libexec/qemu-binfmt/aarch64-binfmt-P").exists() and not shutil.which("qemu-aarch64-static"):
        need.append("qemu-user-static")
    if not shutil.which("mkfs.ext4"):
        need.append("e2fsprogs")
    return need


def install_tools(run, say) -> None:
    """Install what building an aarch64 host needs (tools_missing) from the distribution archive, as
    `make test` installs docker: with apt-get, as root or through sudo."""
    need = tools_missing()
    if need and not shutil.which("update-binfmts"):
        need.append("binfmt-support")
    if not need:
        return
    if not shutil.which("apt-get"):
        raise SystemExit(f"lab: building an aarch64 host needs {' '.join(need)}, and this machine has no apt-get")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    say(f"installing {' '.join(need)} from the distribution archive (building an aarch64 host needs them)")
    run(sudo + ["apt-get", "update", "-qq"], quiet=True)
    run(sudo + ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", *need], quiet=True)


def ensure_binfmt() -> None:
    """arm64 programs run here through qemu-user (the maintainer scripts of the disk's packages)."""
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)], check=False)
    if not (binfmt / "qemu-aarch64").exists() and shutil.which("update-binfmts"):
        subprocess.run(["update-binfmts", "--enable", "qemu-aarch64"], check=False, capture_output=True)
    if not (binfmt / "qemu-aarch64").exists():
        raise SystemExit("lab: arm64 programs cannot run here: qemu-aarch64 is not registered in "
                         "/proc/sys/fs/binfmt_misc (apt-get install qemu-user-static binfmt-support, as root)")


def module_order(modules_dep: str, wanted: list[str]) -> list[str]:
    """The module files to load for `wanted`, each after what it depends on (modules.dep's paths)."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in modules_dep.splitlines():
        path, _, rest = line.partition(":")
        if not path:
            continue
        deps[path] = rest.split()
        by_name[Path(path).name.split(".ko")[0].replace("-", "_")] = path
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for dep in reversed(deps.get(path, [])):
            visit(dep)
        order.append(path)

    for name in wanted:
        if name not in by_name:
            raise SystemExit(f"lab: the arm64 kernel has no module {name} (is it built in? then drop it)")
        visit(by_name[name])
    return order


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """An initramfs archive (cpio "newc") of (path, mode, content) entries; directories have no content."""
    out = io.BytesIO()

    def record(name: str, mode: int, data: bytes, ino: int) -> None:
        encoded = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        out.write(b"070701" + b"".join(b"%08X" % field for field in fields) + encoded)
        out.write(b"\0" * (-(110 + len(encoded)) % 4))
        out.write(data)
        out.write(b"\0" * (-len(data) % 4))

    for ino, (name, mode, data) in enumerate(entries, start=1):
        record(name, mode, data, ino)
    record("TRAILER!!!", 0, b"", 0)
    return out.getvalue()


def make_initramfs(root: Path, version: str) -> bytes:
    """busybox, the root disk's modules (decompressed) and lab/vm/init: enough to mount /dev/vda."""
    moddir = root / "lib" / "modules" / version
    order = module_order((moddir / "modules.dep").read_text(), ROOT_MODULES)
    entries: list[tuple[str, int, bytes]] = [("bin", 0o40755, b""), ("lib", 0o40755, b""),
                                             ("lib/modules", 0o40755, b"")]
    entries.append(("bin/busybox", 0o100755, (root / "bin" / "busybox").read_bytes()))
    names = []
    for path in order:
        data = (moddir / path).read_bytes()
        if path.endswith(".xz"):
            data = lzma.decompress(data)
        name = Path(path).name.split(".ko")[0] + ".ko"
        entries.append((f"lib/modules/{name}", 0o100644, data))
        names.append(name)
    entries.append(("modules", 0o100644, ("\n".join(names) + "\n").encode()))
    entries.append(("init", 0o100755, (VM_DIR / "init").read_bytes()))
    return gzip.compress(cpio_newc(entries), compresslevel=6)


def build_disk(cache: Path, mirror: str, recipe: str, run, say) -> None:
    """The base disk of every aarch64 lab host: Debian trixie arm64 from `mirror` with mmdebstrap, customized
    by lab/vm/customize-disk (the kernel from Debian's linux-image-arm64, unpacked; the lab's units), with the
    initramfs made here, as an ext4 image."""
    need = tools_missing()
    if need:
        raise SystemExit(f"lab: building an aarch64 host needs {' '.join(need)} (apt-get install {' '.join(need)})")
    ensure_binfmt()
    started = time.monotonic()
    say(f"building the aarch64 lab host disk: Debian {VM_SUITE} arm64 with mmdebstrap (several minutes: "
        "the packages' scripts run under qemu-user)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="specdec-arm64-", dir=cache) as tmp:
        root = Path(tmp) / "root"
        run(["mmdebstrap", "--quiet", "--arch=arm64", "--variant=minbase", f"--include={','.join(VM_PACKAGES)}",
             f'--customize-hook={VM_DIR / "customize-disk"} "$1" {VM_DIR.parent}', VM_SUITE, str(root), mirror],
            quiet=True)
        versions = sorted(p.name for p in (root / "lib" / "modules").iterdir())
        if len(versions) != 1:
            raise SystemExit(f"lab: expected one arm64 kernel in the disk, found {versions}")
        version = versions[0]
        shutil.copy(root / "boot" / f"vmlinuz-{version}", Path(tmp) / "vmlinuz")
        (Path(tmp) / "initrd.img").write_bytes(make_initramfs(root, version))
        run(["mkfs.ext4", "-q", "-F", "-L", "root", "-d", str(root), str(Path(tmp) / "disk.raw"), DISK_SIZE],
            quiet=True)
        for name in ("vmlinuz", "initrd.img", "disk.raw"):
            os.replace(Path(tmp) / name, cache / name)
        shutil.rmtree(root, ignore_errors=True)
    (cache / "recipe").write_text(recipe)
    say(f"built the aarch64 lab host disk (kernel {version}) in {time.monotonic() - started:.0f} s")
