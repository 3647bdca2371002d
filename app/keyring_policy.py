"""The keyring policy: which OS keyring counts as secure storage for a secret, the one to read
and write through, its human name, and a sentence for any keyring failure.

"Secure" is decided by `classify_backend()`: keyring's fail backend (headless Linux, CI),
its null backend (which silently drops what it is given), anything from `keyrings.alt`
(keyring picks its plain-text file on its own once that package is installed), and a
chainer whose children include no secure keyring are all treated as *no secure storage*.

Every keyring failure (KeyringLocked, PasswordSetError, NoKeyringError, D-Bus errors...)
becomes a clause for a sentence (`failure_reason`), never a traceback and never the secret.
The stores that use it: app/hub_token.py (the Hugging Face token), app/remote/keys.py (the
keys of the person's servers) and app/store/seal_keys.py (the record's sealing key).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

SERVICE = "cove"  # every secret Cove keeps is under this keyring service


@dataclass(frozen=True)
class SaveResult:
    persisted: bool  # True: in a secure keyring. False: in this process's memory only.
    notice: str | None = None  # what to tell the person when it was not persisted


_FRIENDLY_NAMES = {
    "keyring.backends.macOS": "macOS Keychain",
    "keyring.backends.Windows": "Windows Credential Locker",
    "keyring.backends.SecretService": "Secret Service keyring (GNOME Keyring or KWallet)",
    "keyring.backends.kwallet": "KWallet",
    "keyring.backends.libsecret": "libsecret keyring",
}


class NoBackend:
    """Stands for "no keyring at all": the package is missing or its configuration is broken."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<NoBackend: {self.reason}>"


def _module(backend: Any) -> str:
    return type(backend).__module__ or ""


def _is_chainer(backend: Any) -> bool:
    try:
        from keyring.backends.chainer import ChainerBackend
    except Exception:  # noqa: BLE001 - no keyring package: nothing is a chainer
        return False
    return isinstance(backend, ChainerBackend)


def _chain_children(backend: Any) -> list[Any]:
    try:
        return list(backend.backends)
    except Exception:  # noqa: BLE001 - a chainer that cannot list its children has none
        return []


def _priority(backend: Any) -> float | None:
    """keyring's own rating; None when the backend says it is not viable here."""
    try:
        return float(backend.priority)
    except Exception:  # noqa: BLE001 - keyring raises RuntimeError (or anything) for "not viable"
        return None


def _insecure_reason(backend: Any) -> str | None:
    """Why a single (non-chain) backend is not secure storage, or None when it is."""
    if backend is None:
        return "the keyring package is not available"
    if isinstance(backend, NoBackend):
        return backend.reason
    module = _module(backend)
    name = type(backend).__name__
    if module == "keyring.backends.fail":
        return "no keyring backend was found"
    if module == "keyring.backends.null":
        return "the null keyring keeps nothing"
    if module.startswith("keyrings.alt") or "plaintext" in name.lower():
        return "it would be stored as plain text"
    priority = _priority(backend)
    if priority is None:
        return f"{describe_backend(backend)} does not work here"
    if priority < 1:  # keyring's own line between "recommended" and not (keyring.core.recommended)
        return f"{describe_backend(backend)} is not one keyring recommends"
    return None


def secure_target(backend: Any) -> Any | None:
    """The backend to read and write the token with, or None when there is no secure one.

    For a chainer that is its highest-priority secure child (writing through the chainer
    itself could land in a plain-text child that outranks the secure one)."""
    if backend is None or isinstance(backend, NoBackend):
        return None
    if _is_chainer(backend):
        secure = [child for child in _chain_children(backend) if not _is_chainer(child) and _insecure_reason(child) is None]
        secure.sort(key=lambda child: _priority(child) or 0.0, reverse=True)
        return secure[0] if secure else None
    return backend if _insecure_reason(backend) is None else None


def classify_backend(backend: Any) -> bool:
    """True when `backend` (a keyring backend) counts as secure storage for the token."""
    try:
        return secure_target(backend) is not None
    except Exception:  # noqa: BLE001 - anything odd about a backend means "not secure"
        return False


def describe_backend(backend: Any) -> str:
    """A human name for a keyring backend (for sentences and `cove auth status`)."""
    if backend is None or isinstance(backend, NoBackend):
        return "no keyring"
    module = _module(backend)
    name = type(backend).__name__
    if _is_chainer(backend):
        target = secure_target(backend)
        if target is not None:
            return describe_backend(target)
        return "keyring chain with no secure keyring"
    if module == "keyring.backends.fail":
        return "no keyring backend"
    if module == "keyring.backends.null":
        return "null keyring (keeps nothing)"
    if module.startswith("keyrings.alt"):
        return "plain-text file keyring (keyrings.alt)" if "plaintext" in name.lower() else f"{name} (keyrings.alt)"
    for prefix, friendly in _FRIENDLY_NAMES.items():
        if module == prefix or module.startswith(prefix + "."):
            return friendly
    try:
        label = str(getattr(backend, "name", "") or "")
    except Exception:  # noqa: BLE001
        label = ""
    return label or name


def why_not_secure(backend: Any) -> str:
    """Why `backend` is not secure storage, as a clause ("the null keyring keeps nothing")."""
    if _is_chainer(backend):
        return "none of the keyrings found is secure"
    return _insecure_reason(backend) or "it is not secure"


def failure_reason(exc: BaseException, action: str) -> str:
    """A clause for a keyring failure; never str(exc) verbatim (it could echo input)."""
    kr_errors: ModuleType | None
    try:
        from keyring import errors as kr_errors
    except Exception:  # noqa: BLE001
        kr_errors = None
    if kr_errors is not None:
        if isinstance(exc, kr_errors.KeyringLocked):
            return "the keyring is locked (unlock it and try again)"
        if isinstance(exc, kr_errors.NoKeyringError):
            return "no keyring backend is available"
        if isinstance(exc, kr_errors.PasswordSetError):
            return "the keyring refused to store it"
        if isinstance(exc, kr_errors.PasswordDeleteError):
            return "the keyring refused to remove it"
        if isinstance(exc, kr_errors.InitError):
            return "the keyring could not be opened"
    from models.hub_errors import redact

    detail = redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
    detail = detail[:160]
    return f"the keyring failed to {action} it ({type(exc).__name__}{': ' + detail if detail else ''})"


def default_backend() -> Any:
    """keyring's choice for this system, or a `NoBackend` saying why there is none."""
    try:
        import keyring
    except Exception:  # noqa: BLE001
        return NoBackend("the keyring package is not installed")
    try:
        return keyring.get_keyring()
    except Exception as exc:  # noqa: BLE001 - e.g. PYTHON_KEYRING_BACKEND or keyringrc names a missing backend
        return NoBackend(f"the keyring configuration could not be loaded: {type(exc).__name__}")


_UNSET = object()


class KeyringUser:
    """The keyring backend a store uses (`backend`, looked up on first use unless given) and the
    secure backend behind it, worked out once (`_target()`: None when there is none)."""

    def __init__(self, backend: Any | None = None) -> None:
        self._backend = backend
        self._backend_resolved = backend is not None
        self._target_cache: Any = _UNSET

    @property
    def backend(self) -> Any:
        if not self._backend_resolved:
            self._backend = default_backend()
            self._backend_resolved = True
        return self._backend

    def _target(self) -> Any | None:
        """The secure backend to use, worked out once per store (a viability check can mean a
        D-Bus round trip)."""
        if self._target_cache is _UNSET:
            try:
                self._target_cache = secure_target(self.backend)
            except Exception:  # noqa: BLE001 - anything odd about a backend means "not secure"
                self._target_cache = None
        return self._target_cache
