"""Keyring backends for tests, so no test ever touches the real OS keyring.

In-process: `keyring.set_keyring(InMemoryKeyring())` (see `use_keyring`).
In a subprocess: `PYTHON_KEYRING_BACKEND=tests.support.keyrings.FileKeyring` with
`COVE_TEST_KEYRING_FILE` naming a JSON file, so login, status and logout can run as
separate `cove` processes and still share one keyring.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import keyring
from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, PasswordDeleteError, PasswordSetError

# keyring registers every KeyringBackend subclass it sees and may pick the highest-priority
# one as its default (or chain it). Test backends stay out of that registry, so nothing
# but a test that asks for one of them can ever end up using it.


class Unregistered(type(KeyringBackend)):
    """Metaclass for test backends: keyring never offers them in its own detection."""

    def _register(cls) -> None:
        pass


class InMemoryKeyring(KeyringBackend, metaclass=Unregistered):
    """A secure-looking keyring (high priority) that keeps passwords in a dict."""

    priority = 10  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}
        self.set_calls = 0

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.set_calls += 1
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.passwords:
            raise PasswordDeleteError("not found")
        del self.passwords[(service, username)]


class PlaintextKeyring(InMemoryKeyring):
    """Stands in for keyrings.alt's plain-text file keyring: only its module says what it is.
    (Priority is high on purpose, so only the module name can mark it as insecure.)"""


PlaintextKeyring.__module__ = "keyrings.alt.file"


class DroppingKeyring(InMemoryKeyring):
    """Accepts set_password and keeps nothing (like keyring's null backend, but 'recommended')."""

    def set_password(self, service: str, username: str, password: str) -> None:
        self.set_calls += 1


class LockedKeyring(InMemoryKeyring):
    """Every operation fails because the keyring is locked."""

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("Failed to unlock the collection!")

    def set_password(self, service: str, username: str, password: str) -> None:
        self.set_calls += 1
        raise KeyringLocked("Failed to unlock the collection!")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("Failed to unlock the collection!")


class RefusingKeyring(InMemoryKeyring):
    """Reads work; storing raises PasswordSetError (whose text, carelessly, echoes the password)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        self.set_calls += 1
        raise PasswordSetError(f"cannot store {password!r} for {service}")


class NotViableKeyring(InMemoryKeyring):
    """A backend whose priority says it does not work here (keyring's 'not viable')."""

    @property
    def priority(self) -> float:  # type: ignore[override]
        raise RuntimeError("not available on this platform")


class FileKeyring(KeyringBackend, metaclass=Unregistered):
    """A keyring kept in the JSON file named by COVE_TEST_KEYRING_FILE (for subprocess tests)."""

    priority = 10  # type: ignore[assignment]

    @staticmethod
    def _path() -> Path:
        return Path(os.environ["COVE_TEST_KEYRING_FILE"])

    def _load(self) -> dict[str, str]:
        try:
            return json.loads(self._path().read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(data), encoding="utf-8")

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("not found")
        self._path().write_text(json.dumps(data), encoding="utf-8")


@contextlib.contextmanager
def use_keyring(backend: KeyringBackend) -> Iterator[KeyringBackend]:
    """Make `backend` keyring's default for the block, then put the previous one back."""
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under `root` whose bytes contain `needle` (as UTF-8, or base64 of it)."""
    import base64

    patterns = [needle.encode(), base64.b64encode(needle.encode())[:-4] or needle.encode()]
    hits = []
    if not root.exists():
        return hits
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(p in data for p in patterns):
                hits.append(path)
    return hits
