#!/usr/bin/env python3
"""The lab gateway's secrets, made on the controller with openssl: a lab CA, a server certificate it
signs for the gateway hosts (names and addresses as subjectAltName), and a random API key.

    python3 lab/gateway_tls.py --out lab/.cache/gateway --dns fleet-gw --ip 172.29.6.15

Writes ca.crt, ca.key, server.crt, server.key (0600) and api-key (0600) under --out. The CA and the
key are kept across runs; the server certificate is made again only when its names change. The lab
inventory (inventories/lab/group_vars/gateways) reads them; tests verify TLS against ca.crt.
"""

import argparse
import os
import secrets
import subprocess
import sys
from pathlib import Path


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--out", required=True)
    p.add_argument("--dns", action="append", default=[])
    p.add_argument("--ip", action="append", default=[])
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    changed = []
    if not (out / "ca.crt").exists():
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=specdec lab CA",
                "-keyout", str(out / "ca.key"), "-out", str(out / "ca.crt"),
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        changed.append("ca.crt")
    san = ",".join(["DNS:%s" % d for d in args.dns] + ["IP:%s" % i for i in args.ip]) or "DNS:localhost"
    if not (out / "server.san").exists() or (out / "server.san").read_text() != san:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % (args.dns or ["specdec-gateway"])[0],
                "-keyout", str(out / "server.key"), "-out", str(out / "server.csr"))
        ext = out / "server.ext"
        ext.write_text("subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n" % san)
        openssl("x509", "-req", "-in", str(out / "server.csr"), "-CA", str(out / "ca.crt"), "-CAkey",
                str(out / "ca.key"), "-CAcreateserial", "-days", "825", "-sha256", "-extfile", str(ext),
                "-out", str(out / "server.crt"))
        (out / "server.san").write_text(san)
        changed.append("server.crt")
    if not (out / "api-key").exists():
        (out / "api-key").write_text("sk-lab-%s\n" % secrets.token_hex(24))
        changed.append("api-key")
    for name in ("ca.key", "server.key", "api-key"):
        os.chmod(out / name, 0o600)
    print("changed: %s" % (", ".join(changed) if changed else "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
