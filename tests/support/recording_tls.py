"""A TLS server for the pairing tests that accepts one connection with a certificate of its own
(app/serve/http/tls.py, made for `named`) and keeps every byte the client sends after the
handshake: a machine in the middle, or a server whose address the certificate does not name."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.serve.http.tls import machine_certificate


class RecordingTls:
    """Listens on `host` (a free port: `port`); `der` is its certificate, `handshakes` how many
    completed, `received` what came after. `close()` when done."""

    def __init__(self, cert_dir: Path, host: str, named: str | None = None) -> None:
        cert = machine_certificate(cert_dir, named or host)
        self.der = x509.load_pem_x509_certificate(cert.cert_file.read_bytes()).public_bytes(serialization.Encoding.DER)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert.cert_file, cert.key_file)
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.handshakes = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(30)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    self.handshakes += 1
                    tls.settimeout(10)
                    while chunk := tls.recv(4096):
                        self.received += chunk
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(15)
