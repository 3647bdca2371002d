"""The pairing codes `cove serve pair` makes, in the history database (`pairing_codes`): only the
SHA-256 of each code's secret, when it ends (10 minutes after it is made), when it was used and by
which key, and how many wrong secrets were tried while it was open. Redeeming a code makes the
client's API key (app/serve/http/keys.py) and marks the code used in one transaction; every wrong
secret counts against every open code, and a code with MAX_FAILURES of them is dead.

Like ApiKeys, a `PairingCodes` belongs to the thread that opened its database."""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlite_utils
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.pairing.code import PairingCode, is_secret, new_code, secret_digest
from app.serve.http.keys import ApiKeys
from app.serve.http.tls import CERT_FILE, KEY_FILE, RENEW_DAYS, MachineCertificate, TlsUnavailable, fingerprint, machine_certificate
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

TABLE = "pairing_codes"
VALID = timedelta(minutes=10)
MAX_FAILURES = 10  # wrong secrets tried while a code is open, after which it is dead
KEY_PREFIX = "paired-"
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Redeemed:
    """What a secret came to: `status` "paired" (with the new key and its name), "wrong" (no code
    has it), "used", "expired" or "spent" (too many wrong tries while it was open)."""

    status: str
    key: str | None = None
    key_name: str | None = None


def key_name_for(client_name: str, taken: list[str]) -> str:
    """The API key's name for a client calling itself `client_name`: `paired-NAME`, NAME cut to
    the characters and length a key's name allows, with -2, -3… when it is taken."""
    cleaned = _NOT_IN_NAME.sub("-", client_name or "").strip("-._")[:26] or "machine"
    base = KEY_PREFIX + cleaned
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def served_certificate(folder: Path, host: str | None, *, now: datetime | None = None) -> tuple[MachineCertificate, bytes]:
    """The certificate a code is made for, and its DER bytes. With `host` None, the one in
    `folder` as it is, when it reads and lasts more than RENEW_DAYS: a `cove serve` running now
    serves that one, and making another would change the fingerprint under it. Otherwise the
    machine's certificate for `host` (app/serve/http/tls.py; for None the machine's names and
    addresses), made or renewed as `cove serve --host` would. TlsUnavailable with a sentence."""
    now = now or datetime.now(UTC)
    if host is None:
        try:
            cert = x509.load_pem_x509_certificate((folder / CERT_FILE).read_bytes())
        except (OSError, ValueError):
            cert = None
        if cert is not None and cert.not_valid_after_utc - now > timedelta(days=RENEW_DAYS):
            try:
                san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                dns = tuple(san.get_values_for_type(x509.DNSName))
                ips = tuple(str(a) for a in san.get_values_for_type(x509.IPAddress))
            except x509.ExtensionNotFound:
                dns, ips = (), ()
            described = MachineCertificate(folder / CERT_FILE, folder / KEY_FILE, fingerprint(cert), cert.not_valid_after_utc, dns, ips)
            return described, cert.public_bytes(serialization.Encoding.DER)
    made = machine_certificate(folder, host or "0.0.0.0", now=now)
    try:
        der = x509.load_pem_x509_certificate(made.cert_file.read_bytes()).public_bytes(serialization.Encoding.DER)
    except (OSError, ValueError) as exc:
        raise TlsUnavailable(f"the certificate {made.cert_file} could not be read back ({exc})") from None
    return made, der


class PairingCodes:
    """Makes and redeems pairing codes; `now` is the clock (tests give their own)."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def make(self, der: bytes, *, now: datetime | None = None) -> tuple[PairingCode, datetime]:
        """A new code for the certificate `der` and the moment it ends; only its secret's hash is kept."""
        now = now or datetime.now(UTC)
        code = new_code(der)
        ends = now + VALID
        row = {
            "secret_sha256": secret_digest(code.secret),
            "created_at": utc_timestamp(now),
            "expires_at": utc_timestamp(ends),
            "used_at": None,
            "key_name": None,
            "failures": 0,
        }
        with write_transaction(self.db):
            self.forget_ended(now=now)
            self.db.table(TABLE).insert(row)
        return code, ends

    def redeem(self, secret: object, client_name: str, *, now: datetime | None = None) -> Redeemed:
        """Check `secret`; a right one on an open code makes a key for the client (named after
        `client_name`) and marks the code used, in one transaction. A wrong one counts against
        every open code."""
        stamp = utc_timestamp(now or datetime.now(UTC))
        digest = secret_digest(secret) if isinstance(secret, str) and is_secret(secret) else ""
        with write_transaction(self.db):
            found = None
            for row in self.db.query(f"SELECT id, secret_sha256, expires_at, used_at, failures FROM {TABLE}"):
                if hmac.compare_digest(row["secret_sha256"], digest or "-"):  # every row compared: no early exit to time
                    found = row
            if found is None:
                self.db.execute(f"UPDATE {TABLE} SET failures = failures + 1 WHERE used_at IS NULL AND expires_at > ?", [stamp])
                return Redeemed("wrong")
            if found["used_at"] is not None:
                return Redeemed("used")
            if found["expires_at"] <= stamp:
                return Redeemed("expired")
            if found["failures"] >= MAX_FAILURES:
                return Redeemed("spent")
            keys = ApiKeys(self.db)
            name = key_name_for(client_name, keys.names())
            key = keys.add(name)  # a savepoint inside this transaction
            self.db.execute(f"UPDATE {TABLE} SET used_at = ?, key_name = ? WHERE id = ?", [stamp, name, found["id"]])
        return Redeemed("paired", key, name)

    def forget_ended(self, *, now: datetime | None = None, keep: timedelta = timedelta(days=1)) -> None:
        """Drop the codes that ended more than `keep` ago (used ones included: their keys stay)."""
        before = utc_timestamp((now or datetime.now(UTC)) - keep)
        with write_transaction(self.db):
            self.db.execute(f"DELETE FROM {TABLE} WHERE expires_at < ?", [before])
