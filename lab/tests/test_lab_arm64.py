"""The lab's aarch64 hosts (lab/vmhost.py, lab/lab.py): host specs, the initramfs, the arm64 image archive."""

import gzip
import hashlib
import io
import json
import subprocess
import tarfile

import pytest

import lab
import vmhost


def test_a_host_spec_names_its_architecture_after_an_at_sign():
    assert lab.parse_host("spark-01:spark-nodes,gpu@arm64") == ("spark-01", ["spark-nodes", "gpu"], "arm64")
    assert lab.parse_host("spark-01@aarch64") == ("spark-01", [], "arm64")
    assert lab.parse_host("b200-01:b200-nodes") == ("b200-01", ["b200-nodes"], "amd64")
    assert lab.parse_host("b200-01:b200-nodes@x86_64")[2] == "amd64"
    with pytest.raises(SystemExit, match="unknown architecture 'riscv64'"):
        lab.parse_host("rv-01@riscv64")


MODULES_DEP = """kernel/fs/ext4/ext4.ko.xz: kernel/lib/crc16.ko.xz kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz
kernel/fs/jbd2/jbd2.ko.xz:
kernel/fs/mbcache.ko.xz:
kernel/lib/crc16.ko.xz:
kernel/drivers/block/virtio_blk.ko.xz:
kernel/crypto/crc32c_generic.ko.xz:
kernel/net/bridge/bridge.ko.xz: kernel/net/802/stp.ko.xz kernel/net/llc/llc.ko.xz
"""


def test_the_initramfs_loads_each_module_after_what_it_needs():
    order = vmhost.module_order(MODULES_DEP, ["virtio_blk", "ext4"])
    assert order[0] == "kernel/drivers/block/virtio_blk.ko.xz" and order[-1] == "kernel/fs/ext4/ext4.ko.xz"
    assert sorted(order[1:-1]) == ["kernel/fs/jbd2/jbd2.ko.xz", "kernel/fs/mbcache.ko.xz", "kernel/lib/crc16.ko.xz"]
    assert "bridge" not in " ".join(order)
    with pytest.raises(SystemExit, match="no module nvme"):
        vmhost.module_order(MODULES_DEP, ["nvme"])


def read_cpio(archive):
    """(name, mode, data) of each entry of a newc archive, read field by field."""
    offset, entries = 0, []
    while True:
        header = archive[offset:offset + 110]
        assert header[:6] == b"070701", offset
        size, namesize = int(header[54:62], 16), int(header[94:102], 16)
        name = archive[offset + 110:offset + 110 + namesize - 1].decode()
        offset += 110 + namesize
        offset += -offset % 4
        data = archive[offset:offset + size]
        offset += size + (-size % 4)
        if name == "TRAILER!!!":
            return entries
        entries.append((name, int(header[14:22], 16), data))


def test_the_initramfs_archive_is_what_the_kernel_and_cpio_read(tmp_path):
    """newc headers, 4-byte alignment, modes, and the trailer: GNU cpio lists and extracts it as written."""
    entries = [("bin", 0o40755, b""), ("bin/busybox", 0o100755, b"\x7fELF..."), ("init", 0o100755, b"#!/bin/sh\n"),
               ("modules", 0o100644, b"a.ko\nb.ko\n")]
    archive = vmhost.cpio_newc(entries)
    assert archive.startswith(b"070701") and archive.rstrip(b"\0").endswith(b"TRAILER!!!")
    assert len(archive) % 4 == 0
    assert read_cpio(archive) == entries
    if subprocess.run(["sh", "-c", "command -v cpio"], capture_output=True, check=False).returncode != 0:
        return  # GNU cpio is not on every machine; the structure was read back above
    listing = subprocess.run(["cpio", "-itv"], input=archive, capture_output=True, check=True).stdout.decode()
    assert [line.split()[-1] for line in listing.splitlines()] == [name for name, _, _ in entries]
    subprocess.run(["cpio", "-id", "--quiet"], input=archive, cwd=tmp_path, check=True)
    assert (tmp_path / "modules").read_bytes() == b"a.ko\nb.ko\n"
    assert (tmp_path / "init").stat().st_mode & 0o777 == 0o755


def saved_archive(path, tag):
    """A `docker save` archive as docker 20.10 writes it: one image labelled amd64."""
    layer = io.BytesIO()
    tarfile.open(fileobj=layer, mode="w").close()
    layer = layer.getvalue()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Entrypoint": ["/e"]},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}})
    config_name = hashlib.sha256(config.encode()).hexdigest() + ".json"
    repo, _, version = tag.rpartition(":")
    files = {"abc/layer.tar": layer, config_name: config.encode(),
             "manifest.json": json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": ["abc/layer.tar"]}]).encode(),
             "repositories": json.dumps({repo: {version: "abc"}}).encode()}
    with tarfile.open(path, "w") as out:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))


def test_the_arm64_archive_carries_the_instances_tag_and_the_arm64_platform(tmp_path):
    """Built here under a name of its own (this docker labels it amd64), it loads on an aarch64 host as
    the tag instances name, as linux/arm64, its config's digest its new ID, its layers untouched."""
    saved_archive(tmp_path / "saved.tar", "specdec-lab-arm64/emu:1.2.0rc6")
    lab.retag_archive(tmp_path / "saved.tar", tmp_path / "arm64.tar", {"specdec-lab-arm64/emu:1.2.0rc6": "specdec-lab/emu:1.2.0rc6"},
                      "arm64")
    with tarfile.open(tmp_path / "arm64.tar") as archive, tarfile.open(tmp_path / "saved.tar") as saved:
        manifest = json.load(archive.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == ["specdec-lab/emu:1.2.0rc6"]
        raw = archive.extractfile(manifest[0]["Config"]).read()
        assert manifest[0]["Config"] == hashlib.sha256(raw).hexdigest() + ".json"
        config = json.loads(raw)
        assert (config["os"], config["architecture"], config["config"]) == ("linux", "arm64", {"Entrypoint": ["/e"]})
        assert json.load(archive.extractfile("repositories")) == {"specdec-lab/emu": {"1.2.0rc6": "abc"}}
        assert archive.extractfile("abc/layer.tar").read() == saved.extractfile("abc/layer.tar").read()


def test_the_vm_gets_the_lab_key_and_a_reachable_name_server(tmp_path, monkeypatch):
    """The public key rides on the kernel command line with commas for its spaces (lab-vm-setup turns
    them back); a loopback resolver (docker's, systemd-resolved's) is of no use to a VM."""
    setup = (vmhost.VM_DIR / "lab-vm-setup").read_text()
    assert "tr ',' ' '" in setup
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.53\nnameserver 10.1.2.3\n")
    real = lab.Path

    def fake_path(name, *rest):
        return resolv if name == "/etc/resolv.conf" else real(name, *rest)

    monkeypatch.setattr(lab, "Path", fake_path)
    assert lab.name_server() == "10.1.2.3"
    resolv.write_text("nameserver 127.0.0.11\n")
    assert lab.name_server() == ""


def test_the_initramfs_holds_busybox_the_modules_and_init(tmp_path):
    """make_initramfs from a root with the kernel's modules (xz-compressed, as Debian ships them)."""
    import lzma
    version = "6.12.0-arm64"
    moddir = tmp_path / "lib" / "modules" / version
    for path in ("kernel/drivers/block/virtio_blk.ko.xz", "kernel/crypto/crc32c_generic.ko.xz", "kernel/fs/ext4/ext4.ko.xz", "kernel/fs/jbd2/jbd2.ko.xz",
                 "kernel/fs/mbcache.ko.xz", "kernel/lib/crc16.ko.xz"):
        (moddir / path).parent.mkdir(parents=True, exist_ok=True)
        (moddir / path).write_bytes(lzma.compress(path.encode()))
    (moddir / "modules.dep").write_text(MODULES_DEP)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "busybox").write_bytes(b"busybox")
    entries = {name: (mode, data) for name, mode, data in read_cpio(gzip.decompress(vmhost.make_initramfs(tmp_path, version)))}
    assert entries["bin/busybox"] == (0o100755, b"busybox")
    assert entries["lib/modules/ext4.ko"][1] == b"kernel/fs/ext4/ext4.ko.xz"  # decompressed
    modules = entries["modules"][1].decode().split()
    assert modules[:2] == ["virtio_blk.ko", "crc32c_generic.ko"] and modules[-1] == "ext4.ko" and len(modules) == 6
    assert all("lib/modules/" + name in entries for name in modules)
    assert entries["init"] == (0o100755, (vmhost.VM_DIR / "init").read_bytes())


def test_what_building_an_aarch64_host_needs_is_installed_from_the_archive_and_nothing_when_present(monkeypatch):
    calls, said = [], []
    monkeypatch.setattr(vmhost, "tools_missing", lambda: ["mmdebstrap", "qemu-user-static"])
    monkeypatch.setattr(vmhost.shutil, "which", lambda name: "/usr/bin/" + name if name != "update-binfmts" else None)
    monkeypatch.setattr(vmhost.os, "geteuid", lambda: 0)
    vmhost.install_tools(lambda cmd, **kw: calls.append(cmd), said.append)
    assert calls[0] == ["apt-get", "update", "-qq"]
    assert calls[1][-3:] == ["mmdebstrap", "qemu-user-static", "binfmt-support"]
    assert "DEBIAN_FRONTEND=noninteractive" in calls[1] and "install" in calls[1]
    assert "mmdebstrap qemu-user-static binfmt-support" in said[0]
    monkeypatch.setattr(vmhost.os, "geteuid", lambda: 1000)
    calls.clear()
    vmhost.install_tools(lambda cmd, **kw: calls.append(cmd), said.append)
    assert calls[0][0] == "sudo" and calls[1][0] == "sudo"
    monkeypatch.setattr(vmhost, "tools_missing", lambda: [])
    monkeypatch.setattr(vmhost.shutil, "which", lambda name: "/usr/bin/" + name)
    calls.clear()
    vmhost.install_tools(lambda cmd, **kw: calls.append(cmd), said.append)
    assert calls == []
