"""The Hugging Face access token (for gated models): OS keyring when a secure one exists, else memory.

Where the token may live, and nowhere else:
  * a secure OS keyring (macOS Keychain, Windows Credential Locker, the Secret Service or
    KWallet on Linux), under service "cove", username "huggingface";
  * otherwise this process's memory, for this run only, and the person is told so.
Never in SQLite, settings, logs, exception text, the environment of child processes, or
huggingface_hub's own token file (`$HF_HOME/token`, plain text): Cove never calls
`huggingface_hub.login()`, and the Hub code is handed the token explicitly per call.

"Secure" is decided by `classify_backend()`: keyring's fail backend (headless Linux, CI),
its null backend (which silently drops what it is given), anything from `keyrings.alt`
(keyring picks its plain-text file on its own once that package is installed), and a
chainer whose children include no secure keyring are all treated as *no secure storage*.

Every keyring failure (KeyringLocked, PasswordSetError, NoKeyringError, D-Bus errors...)
becomes a notice, one sentence, never a traceback and never the token.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

SERVICE = "cove"
USERNAME = "huggingface"
TOKENS_PAGE = "https://huggingface.co/settings/tokens"

Storage = Literal["keyring", "memory", "none"]

# The shape of a Hugging Face access token: "hf_" and then letters and digits (34 of them
# today). The log redaction pattern (hf_ + 8 or more letters/digits) covers every token
# this accepts, so an accepted token can always be redacted in full.
_TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]{8,250}")


class InvalidToken(ValueError):
    """The text cannot be a Hugging Face token; str() is a sentence that never quotes it."""


@dataclass(frozen=True)
class SaveResult:
    persisted: bool  # True: in a secure keyring. False: in this process's memory only.
    notice: str | None = None  # what to tell the person when it was not persisted


@dataclass(frozen=True)
class TokenStatus:
    present: bool
    storage: Storage
    backend: str  # human name of the keyring in use
    secure: bool  # whether that keyring counts as secure storage
    notice: str | None = None


class MemoryToken:
    """The token for this run when it cannot (or could not) be kept in a secure keyring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token: str | None = None

    def get(self) -> str | None:
        with self._lock:
            return self._token

    def set(self, token: str) -> None:
        with self._lock:
            self._token = token

    def clear(self) -> None:
        with self._lock:
            self._token = None

    def __repr__(self) -> str:  # never the token
        return f"<MemoryToken {'set' if self.get() else 'empty'}>"


# One per process: the window and the CLI are separate processes anyway.
_PROCESS_MEMORY = MemoryToken()


def validate_token_format(token: Any) -> str:
    """The token with surrounding whitespace removed, or `InvalidToken` with a sentence.

    Only the shape is checked (Cove never checks a token online); the sentence never
    contains the token.
    """
    if not isinstance(token, str):
        raise InvalidToken("The token must be text.")
    value = token.strip()
    if not value:
        raise InvalidToken(f"No token was given. Create a read token at {TOKENS_PAGE} and paste it.")
    if any(ch.isspace() for ch in value):
        raise InvalidToken(
            "That is not a Hugging Face token: a token is one word, with no spaces or line breaks "
            "(paste only the token, without 'Bearer' or other text)."
        )
    if not value.startswith("hf_"):
        raise InvalidToken(f"That is not a Hugging Face access token: they start with hf_ (create one at {TOKENS_PAGE}).")
    if not _TOKEN_SHAPE.fullmatch(value):
        if len(value) < len("hf_") + 8:
            raise InvalidToken("That is too short to be a Hugging Face access token; paste the whole token.")
        if len(value) > len("hf_") + 250:
            raise InvalidToken("That is too long to be a Hugging Face access token; paste only the token.")
        raise InvalidToken(
            "That is not a Hugging Face access token: after hf_ a token has only letters and digits "
            "(check for quotes or other characters pasted with it)."
        )
    return value


# --- keyring backends ----------------------------------------------------------------------

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


def _insecure_notice(backend: Any, present: bool = True) -> str:
    if _is_chainer(backend):
        reason = "none of the keyrings found is secure"
    else:
        reason = _insecure_reason(backend) or "it is not secure"
    if present:
        return f"No secure keyring is available on this system ({reason}), so the token is kept in memory for this run only."
    return f"No secure keyring is available on this system ({reason}), so a token can only be kept in memory for one run."


def _failure_reason(exc: BaseException, action: str) -> str:
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


def _default_backend() -> Any:
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
            self._backend = _default_backend()
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


class TokenStore(KeyringUser):
    """Reads, saves and clears the token. Never raises for keyring trouble; says what happened.

    `backend`: a keyring backend (default: `keyring.get_keyring()`, looked up on first use;
    `NoBackend(reason)` stands for none at all).
    `memory`: where the token is kept when it cannot be persisted (default: one per process).
    """

    def __init__(self, backend: Any | None = None, memory: MemoryToken | None = None) -> None:
        super().__init__(backend)
        self._memory = memory if memory is not None else _PROCESS_MEMORY
        self.last_notice: str | None = None  # set by clear() when the keyring could not forget it

    def __repr__(self) -> str:
        return f"<TokenStore backend={describe_backend(self.backend)!r}>"

    def get(self) -> str | None:
        """The token for this run, or None. Memory first (a token saved this run that could
        not be persisted, or is newer than the keyring's), then the secure keyring."""
        token = self._memory.get()
        if token:
            return token
        target = self._target()
        if target is None:
            return None
        try:
            value = target.get_password(SERVICE, USERNAME)
        except Exception:  # noqa: BLE001 - locked, gone, D-Bus trouble: no token this time
            return None
        if not isinstance(value, str):
            return None
        return value.strip() or None

    def save(self, token: str) -> SaveResult:
        """Keep `token` (checked with `validate_token_format`, which raises `InvalidToken`)."""
        token = validate_token_format(token)
        backend = self.backend
        target = self._target()
        if target is None:
            self._memory.set(token)
            return SaveResult(False, _insecure_notice(backend))
        name = describe_backend(target)
        try:
            target.set_password(SERVICE, USERNAME, token)
            stored = target.get_password(SERVICE, USERNAME)
        except Exception as exc:  # noqa: BLE001 - every keyring failure becomes a notice
            self._memory.set(token)
            return SaveResult(
                False,
                f"The token could not be saved in the {name}: {_failure_reason(exc, 'save')}; "
                "it is kept in memory for this run only.",
            )
        if stored != token:  # a backend that silently dropped it
            self._memory.set(token)
            return SaveResult(False, f"The {name} did not keep the token, so it is kept in memory for this run only.")
        self._memory.clear()  # the keyring is the one copy now
        return SaveResult(True, None)

    def clear(self) -> None:
        """Forget the token: memory and the secure keyring. Never raises; when the keyring
        could not forget it, `last_notice` says why (and `status()` still shows it)."""
        self.last_notice = None
        self._memory.clear()
        target = self._target()
        if target is None:
            return
        try:
            if target.get_password(SERVICE, USERNAME) is None:
                return
            target.delete_password(SERVICE, USERNAME)
        except Exception as exc:  # noqa: BLE001
            self.last_notice = (
                f"The token could not be removed from the {describe_backend(target)}: {_failure_reason(exc, 'remove')}."
            )

    def status(self) -> TokenStatus:
        """Whether there is a token, where, and in which keyring. Never the token; never raises."""
        backend = self.backend
        target = self._target()
        secure = target is not None
        try:
            name = describe_backend(target if target is not None else backend)
        except Exception:  # noqa: BLE001
            name = "unknown keyring"
        if self._memory.get():
            if secure:
                notice = f"The token could not be saved in the {name}, so it is kept in memory for this run only."
            else:
                notice = _insecure_notice(backend)
            return TokenStatus(True, "memory", name, secure, notice)
        if target is None:
            return TokenStatus(False, "none", name, False, _insecure_notice(backend, present=False))
        try:
            value = target.get_password(SERVICE, USERNAME)
        except Exception as exc:  # noqa: BLE001
            reason = _failure_reason(exc, "read")
            return TokenStatus(False, "none", name, True, f"The {name} could not be read: {reason}.")
        if isinstance(value, str) and value.strip():
            return TokenStatus(True, "keyring", name, True, None)
        return TokenStatus(False, "none", name, True, None)


def load_token() -> str | None:
    """The token for this run (secure keyring, or this process's memory), None if there is none.
    Never raises."""
    try:
        return TokenStore().get()
    except Exception:  # noqa: BLE001
        return None
