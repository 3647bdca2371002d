"""TLS is verified: a server with a certificate of its own (llama-cpp-python's server over
https with a self-signed certificate made here) fails verification until the connection
trusts that certificate file, and then works."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.engine.request import ReplyRequest, Sampling
from app.remote.connections import ConnectionProblem, Connections
from app.remote.errors import RemoteProblem
from app.remote.keys import ConnectionKeys
from app.remote.probe import probe
from app.statuses import MessageStatus
from app.store.database import open_database
from models.network import NetworkGate
from tests.app.remote.conftest import connection_to, engine_for
from tests.support.keyrings import InMemoryKeyring
from tests.support.llama_cpp_server import LlamaCppServer, llama_cpp_server


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that signs itself (its own CA), and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cove test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LlamaCppServer, Path]]:
    folder = tmp_path_factory.mktemp("tls-server")
    cert_file, key_file = self_signed(folder)
    with llama_cpp_server(folder, certfile=cert_file, keyfile=key_file) as server:
        yield server, cert_file


def test_a_self_signed_server_fails_verification_without_its_certificate(
    tls_server: tuple[LlamaCppServer, Path], gate: NetworkGate
) -> None:
    server, _ = tls_server
    assert server.url.startswith("https://")
    with pytest.raises(RemoteProblem) as failed:
        probe(connection_to(server.url), None, gate)
    assert failed.value.kind == "tls"
    assert "certificate could not be verified" in str(failed.value) and "127.0.0.1" in str(failed.value)
    engine, model = engine_for(server.url, gate)
    final = engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model).wait(30)
    assert final.status == MessageStatus.ERROR and "certificate could not be verified" in (final.error or "")


def test_trusting_the_certificate_file_makes_it_work(tls_server: tuple[LlamaCppServer, Path], gate: NetworkGate) -> None:
    server, cert_file = tls_server
    info = probe(connection_to(server.url, ca_file=str(cert_file)), None, gate)
    assert info.kind == "llama-cpp-python" and [m["id"] for m in info.models] == ["tiny"]
    engine, model = engine_for(server.url, gate, ca_file=str(cert_file))
    final = engine.generate(
        ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=12, temperature=0.0)), model=model
    ).wait(30)
    assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and final.text
    engine.close()


def test_http_to_an_https_server_and_https_to_an_http_one_are_sentences(
    tls_server: tuple[LlamaCppServer, Path], llama_server: LlamaCppServer, gate: NetworkGate
) -> None:
    server, _ = tls_server
    with pytest.raises(RemoteProblem) as wrong_way:
        probe(connection_to(llama_server.url.replace("http://", "https://")), None, gate)
    assert wrong_way.value.kind == "tls" and "use an http:// address" in str(wrong_way.value)
    with pytest.raises(RemoteProblem) as plain:
        probe(connection_to(server.url.replace("https://", "http://")), None, gate)
    assert plain.value.kind == "protocol" and "use an https:// address" in str(plain.value)


def test_a_connection_keeps_its_certificate_file_checked(tmp_path: Path, tls_server: tuple[LlamaCppServer, Path]) -> None:
    _, cert_file = tls_server
    connections = Connections(open_database(tmp_path / "cove.db").db, ConnectionKeys(InMemoryKeyring()))
    added = connections.add("secure", "https://127.0.0.1:8443", ca_file=str(cert_file))
    assert added.ca_file == str(cert_file.resolve()) and connections.get("secure").ca_file == added.ca_file
    not_a_cert = tmp_path / "notes.txt"
    not_a_cert.write_text("hello")
    for bad, words in ((str(not_a_cert), "could not be read as a certificate"), (str(tmp_path / "missing.pem"), "no file")):
        with pytest.raises(ConnectionProblem) as refused:
            connections.add("other", "https://127.0.0.1:8443", ca_file=bad)
        assert words in str(refused.value)
    with pytest.raises(ConnectionProblem) as plain:
        connections.add("other", "http://127.0.0.1:8443", ca_file=str(cert_file))
    assert "only for an https:// address" in str(plain.value)
    assert [c.name for c in connections.list()] == ["secure"]
