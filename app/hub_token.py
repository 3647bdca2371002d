"""The Hugging Face access token (for gated models): OS keyring when a secure one exists, else memory.

Where the token may live, and nowhere else:
  * a secure OS keyring (macOS Keychain, Windows Credential Locker, the Secret Service or
    KWallet on Linux), under service "cove", username "huggingface";
  * otherwise this process's memory, for this run only, and the person is told so.
Never in SQLite, settings, logs, exception text, the environment of child processes, or
huggingface_hub's own token file (`$HF_HOME/token`, plain text): Cove never calls
`huggingface_hub.login()`, and the Hub code is handed the token explicitly per call.

Which keyring counts as secure, and the sentences for its failures: app/keyring_policy.py.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

from app.keyring_policy import SERVICE, KeyringUser, SaveResult, describe_backend, failure_reason, why_not_secure

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


def insecure_notice(backend: Any, present: bool = True) -> str:
    """Why the token cannot be kept in a keyring here, as the sentence the person reads."""
    reason = why_not_secure(backend)
    if present:
        return f"No secure keyring is available on this system ({reason}), so the token is kept in memory for this run only."
    return f"No secure keyring is available on this system ({reason}), so a token can only be kept in memory for one run."


# One per process: the window and the CLI are separate processes anyway.
PROCESS_MEMORY = MemoryToken()


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


class TokenStore(KeyringUser):
    """Reads, saves and clears the token. Never raises for keyring trouble; says what happened.

    `backend`: a keyring backend (default: `keyring.get_keyring()`, looked up on first use;
    `NoBackend(reason)` stands for none at all).
    `memory`: where the token is kept when it cannot be persisted (default: one per process).
    """

    def __init__(self, backend: Any | None = None, memory: MemoryToken | None = None) -> None:
        super().__init__(backend)
        self._memory = memory if memory is not None else PROCESS_MEMORY
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
            return SaveResult(False, insecure_notice(backend))
        name = describe_backend(target)
        try:
            target.set_password(SERVICE, USERNAME, token)
            stored = target.get_password(SERVICE, USERNAME)
        except Exception as exc:  # noqa: BLE001 - every keyring failure becomes a notice
            self._memory.set(token)
            return SaveResult(
                False,
                f"The token could not be saved in the {name}: {failure_reason(exc, 'save')}; it is kept in memory for this run only.",
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
            self.last_notice = f"The token could not be removed from the {describe_backend(target)}: {failure_reason(exc, 'remove')}."

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
                notice = insecure_notice(backend)
            return TokenStatus(True, "memory", name, secure, notice)
        if target is None:
            return TokenStatus(False, "none", name, False, insecure_notice(backend, present=False))
        try:
            value = target.get_password(SERVICE, USERNAME)
        except Exception as exc:  # noqa: BLE001
            reason = failure_reason(exc, "read")
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
