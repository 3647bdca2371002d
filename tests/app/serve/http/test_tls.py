"""This machine's certificate (app/serve/http/tls.py): made once and kept, its key 0600 in a 0700
folder, made again near its end or for an address it does not name, a damaged file set aside,
and a real TLS handshake with it (Python's ssl on both ends, no mocks)."""

from __future__ import annotations

import hashlib
import socket
import ssl
import stat
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from app.serve.http.tls import RENEW_DAYS, TlsUnavailable, fingerprint, is_loopback, machine_certificate, server_context


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_made_once_then_kept_private_and_named_for_the_address(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    first = machine_certificate(folder, "127.0.0.2")
    assert first.notices and "Made this machine's certificate" in first.notices[0]
    assert _mode(folder) == 0o700 and _mode(first.key_file) == 0o600
    assert first.covers("127.0.0.2") and first.covers("localhost") and first.covers("127.0.0.1") and first.covers("::1")
    assert first.covers(socket.gethostname())
    assert not first.covers("10.9.8.7")
    assert timedelta(days=360) < first.not_after - datetime.now(UTC) <= timedelta(days=365)
    again = machine_certificate(folder, "127.0.0.2")
    assert again.fingerprint == first.fingerprint and again.notices == ()
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == ["cert.pem", "key.pem"]


def test_the_fingerprint_is_the_sha256_of_the_der_as_openssl_prints_it(tmp_path: Path) -> None:
    made = machine_certificate(tmp_path / "tls", "127.0.0.2")
    cert = x509.load_pem_x509_certificate(made.cert_file.read_bytes())
    der = ssl.PEM_cert_to_DER_cert(made.cert_file.read_text())
    assert made.fingerprint == fingerprint(cert) == ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    try:
        shown = subprocess.run(
            ["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", str(made.cert_file)], capture_output=True, text=True
        )
    except FileNotFoundError:
        return  # no openssl command here; the digest above is the same definition
    assert shown.stdout.strip().endswith(made.fingerprint)


def test_made_again_when_it_ends_within_the_renewal_window_keeping_the_key(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    short = machine_certificate(folder, "127.0.0.2", valid_days=RENEW_DAYS - 1)
    key_before = short.key_file.read_bytes()
    renewed = machine_certificate(folder, "127.0.0.2")
    assert renewed.fingerprint != short.fingerprint
    assert any("Made a new certificate" in n and "ends on" in n for n in renewed.notices)
    assert renewed.not_after - datetime.now(UTC) > timedelta(days=360)
    assert renewed.key_file.read_bytes() == key_before and _mode(renewed.key_file) == 0o600
    # A year on, the renewed one is near its end too.
    later = machine_certificate(folder, "127.0.0.2", now=datetime.now(UTC) + timedelta(days=340))
    assert later.fingerprint != renewed.fingerprint and any("ends on" in n for n in later.notices)
    ended = machine_certificate(folder, "127.0.0.2", now=datetime.now(UTC) + timedelta(days=2 * 365 + 1))
    assert any("ended on" in n for n in ended.notices)


def test_made_again_for_an_address_it_does_not_name_keeping_the_old_names(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    first = machine_certificate(folder, "127.0.0.2")
    other = machine_certificate(folder, "127.0.0.3")
    assert other.fingerprint != first.fingerprint and any("did not name 127.0.0.3" in n for n in other.notices)
    assert other.covers("127.0.0.3") and other.covers("127.0.0.2")
    back = machine_certificate(folder, "127.0.0.2")  # both named now: no new certificate
    assert back.fingerprint == other.fingerprint and back.notices == ()
    named = machine_certificate(folder, "Cove-Box.LAN")
    assert named.covers("cove-box.lan") and named.covers("127.0.0.3")


def test_the_wildcard_address_needs_only_the_machines_name(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    made = machine_certificate(folder, "0.0.0.0")
    assert made.covers(socket.gethostname()) and made.covers("127.0.0.1")
    assert machine_certificate(folder, "0.0.0.0").fingerprint == made.fingerprint


def test_a_damaged_key_is_set_aside_and_replaced_with_a_sentence(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    first = machine_certificate(folder, "127.0.0.2")
    first.key_file.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    replaced = machine_certificate(folder, "127.0.0.2")
    aside = [p for p in folder.iterdir() if p.name.startswith("key.pem.corrupt-")]
    assert len(aside) == 1 and b"not a key" in aside[0].read_bytes()
    assert any(f"could not be read; it was moved to {aside[0]}" in n for n in replaced.notices)
    assert any("Made a new certificate" in n for n in replaced.notices)
    assert replaced.fingerprint != first.fingerprint and _mode(replaced.key_file) == 0o600
    server_context(replaced)  # the new key and the new certificate belong together


def test_a_damaged_certificate_is_set_aside_and_made_again_with_the_same_key(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    first = machine_certificate(folder, "127.0.0.2")
    key = first.key_file.read_bytes()
    first.cert_file.write_bytes(b"\x00garbage")
    replaced = machine_certificate(folder, "127.0.0.2")
    assert [p.name.startswith("cert.pem.corrupt-") for p in folder.iterdir()].count(True) == 1
    assert any("The certificate" in n and "moved to" in n for n in replaced.notices)
    assert replaced.key_file.read_bytes() == key and replaced.covers("127.0.0.2")
    server_context(replaced)


def test_a_folder_that_cannot_be_made_is_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "tls").write_text("a file where the folder goes")
    with pytest.raises(TlsUnavailable, match="could not be stored in"):
        machine_certificate(tmp_path / "tls", "127.0.0.2")


def test_loopback_is_only_127_0_0_1_and_1_and_localhost() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("127.0.0.2", "0.0.0.0", "::", "192.168.1.2", "box.lan"))


def _serve_once(context: ssl.SSLContext) -> tuple[int, threading.Thread]:
    """A TLS server on 127.0.0.2 that answers one connection with b'ok' (or fails its handshake)."""
    listener = socket.create_server(("127.0.0.2", 0))
    port = listener.getsockname()[1]

    def answer() -> None:
        with listener:
            conn, _ = listener.accept()
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return port, thread


def _client(ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.verify_flags |= ssl.VERIFY_X509_STRICT  # as Python 3.13's default context checks
    return context


def test_a_client_trusting_this_certificate_connects_and_one_trusting_another_is_refused(tmp_path: Path) -> None:
    made = machine_certificate(tmp_path / "tls", "127.0.0.2")
    other = machine_certificate(tmp_path / "other", "127.0.0.2")
    context = server_context(made)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2

    port, thread = _serve_once(context)
    with socket.create_connection(("127.0.0.2", port)) as raw, _client(made.cert_file).wrap_socket(raw, server_hostname="127.0.0.2") as tls:
        assert tls.recv(2) == b"ok" and tls.version() in ("TLSv1.2", "TLSv1.3")
        assert fingerprint(x509.load_der_x509_certificate(tls.getpeercert(binary_form=True) or b"")) == made.fingerprint
    thread.join(10)

    port, thread = _serve_once(context)
    with socket.create_connection(("127.0.0.2", port)) as raw, pytest.raises(ssl.SSLCertVerificationError):
        _client(other.cert_file).wrap_socket(raw, server_hostname="127.0.0.2")
    thread.join(10)
