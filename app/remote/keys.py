"""The keys of the person's servers: the OS keyring (service "cove", username "remote:NAME")
when a secure one exists, else this process's memory for the run, with a sentence saying so.

The same backend rules as the Hugging Face token (app/keyring_policy.py decides what counts as
secure). A key is never in SQLite, settings, logs, exception text, a child's environment or
arguments; every keyring failure becomes a notice that never quotes the key.
"""

from __future__ import annotations

import threading
from typing import Any

from app.keyring_policy import SERVICE, KeyringUser, NoBackend, SaveResult, describe_backend, failure_reason

# Longest key accepted (keys of vLLM, llama-server, Ollama proxies and Cove are far shorter).
MAX_KEY_CHARS = 4096

_UNSET = object()


class InvalidKey(ValueError):
    """The text cannot be sent as a key; str() is a sentence that never quotes it."""


def username(name: str) -> str:
    """The keyring username of connection `name`'s key."""
    return f"remote:{name}"


def validate_key(key: object) -> str:
    """The key without surrounding whitespace, or `InvalidKey` (a sentence without the key).
    A key travels in an HTTP header, so it is one word of printable ASCII."""
    if not isinstance(key, str):
        raise InvalidKey("The key must be text.")
    value = key.strip()
    if value.lower().startswith("bearer "):
        raise InvalidKey("Paste only the key, without 'Bearer' before it.")
    if not value:
        raise InvalidKey("No key was given.")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidKey(f"That is too long to be a key ({len(value)} characters; at most {MAX_KEY_CHARS}).")
    if any(ch.isspace() for ch in value):
        raise InvalidKey("A key is one word, with no spaces or line breaks; paste only the key.")
    if not all(33 <= ord(ch) < 127 for ch in value):
        raise InvalidKey("A key has only letters, digits and ASCII punctuation (check for quotes or other characters pasted with it).")
    return value


class MemoryKeys:
    """Keys for this run that could not be kept in a secure keyring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        with self._lock:
            return self._keys.get(name)

    def set(self, name: str, key: str) -> None:
        with self._lock:
            self._keys[name] = key

    def clear(self, name: str) -> None:
        with self._lock:
            self._keys.pop(name, None)

    def __repr__(self) -> str:  # never a key
        with self._lock:
            return f"<MemoryKeys {len(self._keys)} kept>"


class ConnectionKeys(KeyringUser):
    """Reads, saves and deletes connection keys. Never raises for keyring trouble.

    `backend`: a keyring backend (default: keyring's choice, looked up on first use);
    `memory`: where keys that cannot be persisted are kept (default: one per ConnectionKeys).
    """

    def __init__(self, backend: Any | None = None, memory: MemoryKeys | None = None) -> None:
        super().__init__(backend)
        self._memory = memory if memory is not None else MemoryKeys()
        self.last_notice: str | None = None  # set by delete() when the keyring could not forget a key

    def __repr__(self) -> str:
        return f"<ConnectionKeys backend={describe_backend(self.backend)!r}>"

    @property
    def secure(self) -> bool:
        """Whether keys saved now are kept in a secure keyring."""
        return self._target() is not None

    def get(self, name: str) -> str | None:
        """Connection `name`'s key for this run, or None. Memory first, then the keyring."""
        key = self._memory.get(name)
        if key:
            return key
        target = self._target()
        if target is None:
            return None
        try:
            value = target.get_password(SERVICE, username(name))
        except Exception:  # noqa: BLE001 - locked, gone, D-Bus trouble: no key this time
            return None
        if not isinstance(value, str):
            return None
        return value.strip() or None

    def save(self, name: str, key: str) -> SaveResult:
        """Keep `key` (checked with `validate_key`, which raises `InvalidKey`) for connection `name`."""
        key = validate_key(key)
        target = self._target()
        if target is None:
            self._memory.set(name, key)
            return SaveResult(False, self._insecure_notice())
        where = describe_backend(target)
        try:
            target.set_password(SERVICE, username(name), key)
            stored = target.get_password(SERVICE, username(name))
        except Exception as exc:  # noqa: BLE001 - every keyring failure becomes a notice
            self._memory.set(name, key)
            return SaveResult(
                False, f"The key could not be saved in the {where}: {failure_reason(exc, 'save')}; it is kept in memory for this run only."
            )
        if stored != key:
            self._memory.set(name, key)
            return SaveResult(False, f"The {where} did not keep the key, so it is kept in memory for this run only.")
        self._memory.clear(name)
        return SaveResult(True, None)

    def delete(self, name: str) -> None:
        """Forget connection `name`'s key everywhere; `last_notice` says when the keyring could not."""
        self.last_notice = None
        self._memory.clear(name)
        target = self._target()
        if target is None:
            return
        try:
            if target.get_password(SERVICE, username(name)) is None:
                return
            target.delete_password(SERVICE, username(name))
        except Exception as exc:  # noqa: BLE001
            self.last_notice = f"The key could not be removed from the {describe_backend(target)}: {failure_reason(exc, 'remove')}."

    def _insecure_notice(self) -> str:
        backend = self.backend
        if isinstance(backend, NoBackend):
            reason = backend.reason
        else:
            reason = f"{describe_backend(backend)} is not secure storage"
        return f"No secure keyring is available on this system ({reason}), so the key is kept in memory for this run only."
