"""The person's own servers: named connections kept in the history file (table `connections`),
each with its key in the keyring (app/remote/keys.py), and what each server last said of itself.

Thread rule: a `Connections` belongs to the thread that owns the database (like History).
A `Connection` is a frozen snapshot any thread may read (the probe and the engine get one).
"""

from __future__ import annotations

import json
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import sqlite_utils

from app.remote.keys import ConnectionKeys, InvalidKey, validate_key
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

# Disk-format invariant: a connection's name; it ends every remote model's name in the history.
CONNECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
TABLE = "connections"
# Beside the history file: the certificates `cove remote pair` saved, one per paired connection,
# each that connection's CA file (app/remote/pairing.py); removing the connection deletes it.
PINNED_FOLDER = "paired"
API_ROOT = "/v1"  # added to a URL that has no path
# Paths a person may paste by mistake after the API root; they are cut off.
_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


class ProbeResult(Protocol):
    """What `record_probe` keeps: app/remote/probe.py's ServerInfo (a frozen dataclass)."""

    @property
    def kind(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def models(self) -> list[dict[str, Any]]: ...
    @property
    def private(self) -> bool | None: ...


class ConnectionProblem(ValueError):
    """A bad name, URL, key or CA file, a duplicate, or no such connection: one sentence."""


@dataclass(frozen=True)
class Connection:
    name: str
    base_url: str  # normalised: no trailing slash, ends with the API root (e.g. http://gpu-box.lan:8000/v1)
    ca_file: str | None  # a CA or certificate file trusted for this connection besides the system's
    host: str  # host[:port] of base_url, as shown to the person
    # The last probe: {"kind", "version", "probed_at", "models": [{"id", "fingerprint",
    # "context_length"}...], "private"}; {} before the first one.
    server: dict[str, Any] = field(default_factory=dict, hash=False)
    public_ok: bool = False  # the person agreed once that messages go to this non-private host
    created_at: str = ""

    @property
    def tls(self) -> bool:
        return self.base_url.startswith("https://")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not CONNECTION_NAME.fullmatch(name):
        raise ConnectionProblem(
            f"'{name}' cannot name a connection: use 1 to 40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (for example gpu-box)."
        )
    return name


def normalise_url(url: str) -> str:
    """The connection's base URL: http(s)://host[:port]/API-ROOT, no trailing slash; /v1 added
    when the URL has no path. Raises ConnectionProblem with a sentence."""
    text = (url or "").strip()
    example = "for example http://gpu-box.lan:8000/v1"
    if "://" not in text:
        raise ConnectionProblem(f"Start the server's address with http:// or https:// ({example}).")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ConnectionProblem(f"Cove talks to servers over http:// or https://, not {scheme}:// ({example}).")
    if parts.username is not None or parts.password is not None:
        raise ConnectionProblem("Leave the user name and password out of the address; give the key in the key field instead.")
    if parts.query or parts.fragment:
        raise ConnectionProblem(f"The server's address cannot have a query or a '#' part ({example}).")
    host = parts.hostname
    if not host:
        raise ConnectionProblem(f"The address names no server ({example}).")
    try:
        port = parts.port
    except ValueError:
        raise ConnectionProblem(f"The port in {text} is not a number from 1 to 65535.") from None
    if port == 0:
        raise ConnectionProblem(f"The port in {text} is not a number from 1 to 65535.")
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    if not path:
        path = API_ROOT
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return f"{scheme}://{netloc}{path}"


def host_of(base_url: str) -> str:
    """host[:port] of a normalised base URL."""
    return urlsplit(base_url).netloc


def check_ca_file(ca_file: str) -> str:
    """The CA file's absolute path, once it has been read as certificates."""
    path = Path(ca_file).expanduser()
    if not path.is_file():
        raise ConnectionProblem(f"There is no file at {path} to trust as the server's certificate.")
    try:
        ssl.create_default_context().load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise ConnectionProblem(f"{path} could not be read as a certificate or CA file in PEM format ({reason}).") from None
    return str(path.resolve())


def _from_row(row: dict[str, Any]) -> Connection:
    try:
        server = json.loads(row.get("server") or "{}")
    except ValueError:
        server = {}
    return Connection(
        name=row["name"],
        base_url=row["base_url"],
        ca_file=row.get("ca_file") or None,
        host=host_of(row["base_url"]),
        server=server if isinstance(server, dict) else {},
        public_ok=bool(row.get("public_ok")),
        created_at=row.get("created_at") or "",
    )


class Connections:
    """Adds, lists and removes connections; their keys go to `keys`, never to the database."""

    def __init__(self, db: sqlite_utils.Database, keys: ConnectionKeys) -> None:
        self._db = db
        self.keys = keys
        self.last_notice: str | None = None  # what to tell the person about the last add/set_key/remove

    def _row(self, name: str) -> dict[str, Any] | None:
        rows = list(self._db.query(f"SELECT * FROM {TABLE} WHERE name = ? COLLATE NOCASE", [name]))
        return rows[0] if rows else None

    def add(self, name: str, url: str, key: str | None = None, ca_file: str | None = None) -> Connection:
        """Store a new connection (its key in the keyring); `last_notice` says when the key could
        only be kept in memory. Raises ConnectionProblem."""
        self.last_notice = None
        name = check_name(name)
        base_url = normalise_url(url)
        if key is not None and not key.strip():
            key = None
        if key is not None:
            try:
                key = validate_key(key)
            except InvalidKey as exc:
                raise ConnectionProblem(str(exc)) from None
        ca = None
        if ca_file:
            if not base_url.startswith("https://"):
                raise ConnectionProblem("A certificate file is used only for an https:// address; the address is http://.")
            ca = check_ca_file(ca_file)
        existing = self._row(name)
        if existing is not None:
            raise ConnectionProblem(f"A connection named {existing['name']} already exists; remove it first or pick another name.")
        row = {"name": name, "base_url": base_url, "ca_file": ca, "server": "{}", "public_ok": 0, "created_at": utc_timestamp()}
        with write_transaction(self._db):
            self._db.table(TABLE).insert(row)
        if key is not None:
            saved = self.keys.save(name, key)
            self.last_notice = saved.notice
        return _from_row(row)

    def list(self) -> list[Connection]:
        return [_from_row(row) for row in self._db.query(f"SELECT * FROM {TABLE} ORDER BY created_at, name")]

    def get(self, name: str) -> Connection:
        row = self._row(name)
        if row is None:
            known = ", ".join(c.name for c in self.list())
            hint = f" (there are: {known})" if known else " (cove remote add NAME URL adds one)"
            raise ConnectionProblem(f"There is no connection named {name}{hint}.")
        return _from_row(row)

    @property
    def pinned_dir(self) -> Path | None:
        """The folder of the certificates pairing saved (PINNED_FOLDER beside the history file);
        None for a database without a file."""
        rows = self._db.conn.execute("PRAGMA database_list").fetchall()
        main = next((row[2] for row in rows if row[1] == "main"), "")
        return Path(main).parent / PINNED_FOLDER if main else None

    def is_pinned(self, connection: Connection) -> bool:
        """Whether the connection's CA file is a certificate Cove saved when it paired."""
        folder = self.pinned_dir
        return bool(connection.ca_file and folder is not None and Path(connection.ca_file).resolve().parent == folder.resolve())

    def remove(self, name: str) -> None:
        """Forget the connection, its key, and the certificate pairing saved for it (a CA file the
        person gave stays); `last_notice` says when the keyring kept the key."""
        connection = self.get(name)
        with write_transaction(self._db):
            self._db.execute(f"DELETE FROM {TABLE} WHERE name = ?", [connection.name])
        if self.is_pinned(connection) and connection.ca_file:
            Path(connection.ca_file).unlink(missing_ok=True)
        self.keys.delete(connection.name)
        self.last_notice = self.keys.last_notice

    def set_key(self, name: str, key: str | None) -> Connection:
        """Replace (or, with None, forget) the connection's key."""
        self.last_notice = None
        connection = self.get(name)
        if key is None or not key.strip():
            self.keys.delete(connection.name)
            self.last_notice = self.keys.last_notice
            return connection
        try:
            saved = self.keys.save(connection.name, key)
        except InvalidKey as exc:
            raise ConnectionProblem(str(exc)) from None
        self.last_notice = saved.notice
        return connection

    def record_probe(self, name: str, info: ProbeResult) -> Connection:
        """Keep what the server said of itself (its kind, version and models)."""
        connection = self.get(name)
        server = {
            "kind": info.kind,
            "version": info.version,
            "probed_at": utc_timestamp(),
            "models": [dict(m) for m in info.models],
            "private": info.private,
        }
        with write_transaction(self._db):
            self._db.table(TABLE).update(connection.name, {"server": json.dumps(server)})
        return self.get(connection.name)

    def confirm_public(self, name: str) -> Connection:
        """The person agreed that messages go to this connection's (non-private) host."""
        connection = self.get(name)
        with write_transaction(self._db):
            self._db.table(TABLE).update(connection.name, {"public_ok": 1})
        return self.get(connection.name)

    def key(self, name: str) -> str | None:
        """The connection's key for this run (keyring, or this run's memory), or None."""
        return self.keys.get(self.get(name).name)


def pinned_file(ca_file: str | None) -> bool:
    """Whether `ca_file` is a certificate pairing saved (in PINNED_FOLDER beside a history file):
    such a connection trusts that certificate alone (app/remote/http_client.py ssl_context)."""
    if not ca_file:
        return False
    folder = Path(ca_file).parent
    return folder.name == PINNED_FOLDER and (folder.parent / "cove.db").is_file()
