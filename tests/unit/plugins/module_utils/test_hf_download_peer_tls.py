"""model_cache's peer server over TLS: the peers verify the seed against the CA they are given, never without."""

import datetime
import importlib.util
import ipaddress
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub", reason="huggingface_hub is in requirements-test.txt")

from ansible_collections.specdec.serve.plugins.module_utils.hf_download import Snapshot, SnapshotError  # noqa: E402
from hfhub import hfhub  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
spec = importlib.util.spec_from_file_location("specdec_model_peer_tls", REPO / "roles/model_cache/files/specdec_model_peer.py")
peer_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer_mod)
REPO_ID = "specdec-lab/tiny-gpt-oss-eagle3"


def self_signed(directory, name):
    """A self-signed certificate for 127.0.0.1 (cryptography when installed, else openssl)."""
    cert, key = directory / (name + ".crt"), directory / (name + ".key")
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "2", "-subj", "/CN=" + name, "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(private.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                   .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)   # restored after: Snapshot(ca_file=...) sets the first two


@pytest.fixture()
def tls_seed(tmp_path):
    hub = hfhub.HubServer().start()
    root = tmp_path / "seed"
    Snapshot(REPO_ID, revision="v1.0", dest=str(root / REPO_ID), endpoint=hub.url).run()
    cert, key = self_signed(tmp_path, "seed")
    handler = type("H", (peer_mod.PeerHandler,), {"root": str(root), "tiktoken_dir": None, "token": "peer-secret",
                                                  "log_message": lambda *a: None})
    httpd = peer_mod.make_server("127.0.0.1", 0, handler, str(cert), str(key))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield "https://127.0.0.1:%d" % httpd.server_address[1], cert, hub
    httpd.shutdown()
    hub.stop()


def test_a_peer_copies_over_tls_verifying_the_seed_against_the_ca(tls_seed, tmp_path):
    url, cert, hub = tls_seed
    lock = Snapshot(REPO_ID, revision=hub.state.repos[REPO_ID].refs["v1.0"], dest=str(tmp_path / "locked" / REPO_ID),
                    endpoint=hub.url, record_lock=True).run()["lock"]
    result = Snapshot(REPO_ID, revision=lock["revision"], dest=str(tmp_path / "peer" / REPO_ID), endpoint=url,
                      token="peer-secret", ca_file=str(cert), lock=lock).run()
    assert result["cached"] and result["network"]


def test_a_seed_whose_certificate_the_ca_did_not_sign_is_refused(tls_seed, tmp_path):
    url, _cert, _hub = tls_seed
    other, _ = self_signed(tmp_path, "other")
    with pytest.raises(SnapshotError) as err:
        Snapshot(REPO_ID, revision="v1.0", dest=str(tmp_path / "peer" / REPO_ID), endpoint=url, token="peer-secret",
                 ca_file=str(other)).run()
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "certificate" in str(err.value).lower()
    assert not (tmp_path / "peer" / REPO_ID).exists()


def test_the_tls_server_speaks_tls_1_2_or_later_only(tls_seed):
    url, cert, _hub = tls_seed
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen("http://127.0.0.1:%d/api/models/x/y" % port, timeout=5)
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(cert))
    try:
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        old = None  # this OpenSSL cannot offer TLS 1.1 at all: no client of it can ask for it
    if old is not None:
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            urllib.request.urlopen(url + "/api/models/x/y", timeout=5, context=old)
    good = ssl.create_default_context(cafile=str(cert))
    with pytest.raises(urllib.error.HTTPError) as denied:      # TLS is fine; no token: refused
        urllib.request.urlopen(url + "/api/models/%s" % REPO_ID, timeout=5, context=good)
    assert denied.value.code == 401


def test_cert_without_key_is_refused():
    with pytest.raises(SystemExit, match="go together"):
        peer_mod.make_server("127.0.0.1", 0, peer_mod.PeerHandler, "/x.crt", None)
