"""Where the record's sealing key lives: outside the database, in the OS keyring when a secure
one exists (service "cove", username "record-seal:RECORD_ID", beside Cove's other secrets), else
in a file of its own beside the database, 0600 (a machine without a keyring: a server, CI).

What is kept is the sealing state (app/store/record_seals.py): the epoch of the next seal and
its key, the fixed key of the local check, and, until `cove record key --export` has given it
out once, the verification key. A key that evolved is overwritten, never kept.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.atomic_file import write_text_whole
from app.keyring_policy import SERVICE, KeyringUser, describe_backend


class SealKeyError(RuntimeError):
    """The sealing state could not be read or written; str() is one sentence without any key."""


@dataclass(frozen=True)
class SealState:
    key_id: str  # names this series of seals (a digest of its verification key)
    epoch: int  # the epoch of the next seal
    key: str  # hex: that epoch's sealing key
    check: str  # hex: the key of the local check, the same for every epoch
    verification: str | None  # hex: epoch 0's key, until it was exported once
    made: str  # when the series began (UTC)
    last_seq: int = 0  # the last entry sealed, so numbers cut from the end are never given again


def username(record_id: str) -> str:
    return f"record-seal:{record_id}"


class SealKeys(KeyringUser):
    """The sealing state of one record (`record_id`). `fallback`: the file used when no secure
    keyring exists; None (a database in memory) keeps it in this object only."""

    def __init__(self, record_id: str, fallback: Path | None, backend: Any | None = None) -> None:
        super().__init__(backend)
        self.record_id, self.fallback = record_id, fallback
        self._memory: str | None = None

    @property
    def where(self) -> str:
        """Where the state is kept, in words."""
        target = self._target()
        if target is not None:
            return f"the {describe_backend(target)}"
        return f"the file {self.fallback}" if self.fallback is not None else "this process's memory"

    def load(self) -> SealState | None:
        """The state, or None when this record was never sealed here. Raises SealKeyError."""
        text = self._read()
        if text is None:
            return None
        try:
            return SealState(**json.loads(text))
        except (ValueError, TypeError) as exc:
            raise SealKeyError(f"the record's sealing key in {self.where} is damaged ({type(exc).__name__})") from None

    def save(self, state: SealState) -> None:
        """Replace the state (the old key is gone once this returns). Raises SealKeyError."""
        text = json.dumps(asdict(state), sort_keys=True)
        target = self._target()
        try:
            if target is not None:
                target.set_password(SERVICE, username(self.record_id), text)
            elif self.fallback is not None:
                write_text_whole(self.fallback, text)  # 0600: mkstemp's mode
            else:
                self._memory = text
        except Exception as exc:  # noqa: BLE001 - every keyring or disk failure becomes one sentence
            raise SealKeyError(f"the record's sealing key could not be saved in {self.where} ({type(exc).__name__})") from None

    def _read(self) -> str | None:
        target = self._target()
        try:
            if target is not None:
                value = target.get_password(SERVICE, username(self.record_id))
                return value if isinstance(value, str) and value else None
            if self.fallback is not None:
                return self.fallback.read_text(encoding="utf-8") if self.fallback.exists() else None
            return self._memory
        except Exception as exc:  # noqa: BLE001
            raise SealKeyError(f"the record's sealing key could not be read from {self.where} ({type(exc).__name__})") from None
