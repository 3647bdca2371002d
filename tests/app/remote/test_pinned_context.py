"""A paired connection trusts the certificate pairing saved and nothing else: not the system's CAs,
not certifi's. Any other connection with a CA file trusts that file beside them."""

from __future__ import annotations

from pathlib import Path

from app.remote.connections import PINNED_FOLDER, pinned_file
from app.remote.http_client import ssl_context
from app.serve.http.tls import machine_certificate


def test_a_paired_certificate_is_the_only_one_trusted(tmp_path: Path) -> None:
    cert = machine_certificate(tmp_path / "tls", "127.0.0.2")
    data = tmp_path / "data"
    (data / PINNED_FOLDER).mkdir(parents=True)
    (data / "cove.db").write_bytes(b"")
    saved = data / PINNED_FOLDER / "desk.pem"
    saved.write_bytes(Path(cert.cert_file).read_bytes())
    assert pinned_file(str(saved)) and not pinned_file(str(cert.cert_file)) and not pinned_file(None)
    pinned = ssl_context(str(saved), pinned=True)
    assert pinned.cert_store_stats()["x509"] == 1 and pinned.check_hostname  # that certificate, and no other
    assert ssl_context(str(saved)).cert_store_stats()["x509"] > 1  # a CA file the person gave: beside the others
