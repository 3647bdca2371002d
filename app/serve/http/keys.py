"""The keys of cove serve's clients: each has a name ("editor", "scripts"); only its sha256 is
kept, the key itself is shown once when it is made. The record names a request's key."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

import sqlite_utils

from models.timestamps import utc_timestamp
from models.transactions import write_transaction

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
PREFIX = "cove-"


class KeyRefused(ValueError):
    """A key name that cannot be used (taken, or not a name); the message says which."""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeys:
    """In the history database (`api_keys`), on the thread that opened it."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def add(self, name: str) -> str:
        """Make a key for `name` and return it (it is not kept: this is the only time it is seen)."""
        if not _NAME.fullmatch(name):
            raise KeyRefused("a key's name is 1 to 40 letters, digits, spaces, dots, dashes or underscores")
        if name in self.names():
            raise KeyRefused(f"there is a key named {name!r} already; remove it first or choose another name")
        key = PREFIX + secrets.token_urlsafe(32)
        with write_transaction(self.db):
            self.db.table("api_keys").insert({"name": name, "key_sha256": _digest(key), "created_at": utc_timestamp()})
        return key

    def remove(self, name: str) -> bool:
        with write_transaction(self.db):
            cursor = self.db.execute("DELETE FROM api_keys WHERE name = ?", [name])
        return cursor.rowcount > 0

    def names(self) -> list[str]:
        return [row["name"] for row in self.db.query("SELECT name FROM api_keys ORDER BY name")]

    def name_of(self, key: str) -> str | None:
        """The name of the client `key` belongs to, or None."""
        digest = _digest(key)
        found = None
        for row in self.db.query("SELECT name, key_sha256 FROM api_keys"):
            if hmac.compare_digest(row["key_sha256"], digest):  # every row compared: no early exit to time
                found = row["name"]
        return found
