"""Seals over the record's hash chain (app/store/request_log.py), made the way journald's Forward
Secure Sealing makes them: every entry is sealed as it is written, each seal with the key of its
epoch, and the key then evolves (k[n+1] = sha256(label + k[n])) and the old one is overwritten.
Whoever takes the machine's key today cannot make yesterday's seals again, while the verification
key (epoch 0's key, given out once by `cove record key --export` and kept elsewhere) derives every
epoch's key and checks them all.

A seal (table `record_seals`) names its series (`key_id`), its epoch, the entry it covers (seq and
that entry's chain hash, which covers every entry before it), and the previous seal's MAC; it
carries two MACs over that: `mac` with the epoch's evolving key (checked with the verification
key) and `check_mac` with a fixed key kept beside the sealing key (checked on this machine by
`cove record verify` alone). The sealing state says which epoch comes next, so seals cut from the
end are missed by their number. A record's series follow one another: a new one begins only with
an entry that announces it (app/store/record_series.py).

docs/record.md says what this proves and what it cannot.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
from dataclasses import dataclass, replace
from typing import Any

import sqlite_utils

from app.store.seal_keys import SealKeyError, SealKeys, SealState
from models.timestamps import utc_timestamp
from models.transactions import after_commit

_NEXT = b"cove record seal: next key\0"


def next_key(key: bytes) -> bytes:
    return hashlib.sha256(_NEXT + key).digest()


def key_at(start: bytes, from_epoch: int, epoch: int) -> bytes:
    """The key of `epoch`, from the key of `from_epoch` (never backwards: that is the point)."""
    if epoch < from_epoch:
        raise ValueError("a sealing key cannot be turned back to an earlier epoch")
    key = start
    for _ in range(epoch - from_epoch):
        key = next_key(key)
    return key


def key_id_of(verification: bytes) -> str:
    return hashlib.sha256(b"cove record key id\0" + verification).hexdigest()[:16]


def _payload(key_id: str, epoch: int, seq: int, head: str, prev_mac: str) -> bytes:
    return json.dumps([key_id, epoch, seq, head, prev_mac], separators=(",", ":")).encode()


def _mac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def new_series() -> SealState:
    """A fresh series: a verification key (epoch 0's sealing key) and a local check key."""
    verification = secrets.token_bytes(32)
    return SealState(
        key_id=key_id_of(verification),
        epoch=0,
        key=verification.hex(),
        check=secrets.token_bytes(32).hex(),
        verification=verification.hex(),
        made=utc_timestamp(),
    )


class Sealer:
    """Seals entries of the record in `db` (on the thread that opened it) with the state in `keys`."""

    def __init__(self, db: sqlite_utils.Database, keys: SealKeys) -> None:
        self.db, self.keys = db, keys

    def prepare(self) -> SealState:
        """The state the next seal is made with; inside the entry's write transaction (so no other
        process seals in between). Raises SealKeyError."""
        return self._current()

    def seal(self, state: SealState, seq: int, head: str) -> None:
        """Seal the entry `seq` whose chain hash is `head` with `state` (from `prepare`), in the
        same transaction. The key evolves once the transaction has committed."""
        last = self._last_seal(state.key_id)
        payload = _payload(state.key_id, state.epoch, seq, head, last["mac"] if last else "")
        self.db.table("record_seals").insert(
            {
                "key_id": state.key_id,
                "epoch": state.epoch,
                "seq": seq,
                "head": head,
                "at": utc_timestamp(),
                "mac": _mac(bytes.fromhex(state.key), payload),
                "check_mac": _mac(bytes.fromhex(state.check), payload),
            }
        )
        after_commit(self.db, lambda: self._advance(state.epoch + 1, seq))

    def _current(self) -> SealState:
        """The state to seal with: a new series the first time; brought forward when a seal of its
        epoch is in the database already (Cove stopped after a commit, before the key evolved)."""
        state = self.keys.load()
        if state is None:
            state = new_series()
            self.keys.save(state)
            return state
        last = self._last_seal(state.key_id)
        if last is not None and state.epoch <= last["epoch"]:
            state = replace(_forward(state, last["epoch"] + 1), last_seq=max(state.last_seq, int(last["seq"])))
            self.keys.save(state)
        return state

    def then(self, state: SealState, seq: int) -> SealState:
        """The state of the next seal in the same transaction, after `state` sealed entry `seq`."""
        return replace(_forward(state, state.epoch + 1), last_seq=max(state.last_seq, seq))

    def has_sealed(self, state: SealState) -> bool:
        """Whether this record holds a seal of `state`'s series."""
        return self._last_seal(state.key_id) is not None

    def latest_seal(self) -> dict[str, Any] | None:
        """The seal over the newest entry, of whichever series."""
        return next(self.db.query("SELECT * FROM record_seals ORDER BY seq DESC, epoch DESC LIMIT 1"), None)

    def _advance(self, epoch: int, seq: int) -> None:
        """Overwrite the key with the one of `epoch` (after a commit): the old key is gone."""
        try:
            state = self.keys.load()
            if state is not None and state.epoch < epoch:
                self.keys.save(replace(_forward(state, epoch), last_seq=max(state.last_seq, seq)))
        except SealKeyError as exc:  # the entry and its seal are in; the next seal brings the key forward
            print(f"cove: {exc}; the record's next entry evolves it", file=sys.stderr)

    def _last_seal(self, key_id: str) -> dict[str, Any] | None:
        return next(self.db.query("SELECT * FROM record_seals WHERE key_id = ? ORDER BY epoch DESC LIMIT 1", [key_id]), None)


def _forward(state: SealState, epoch: int) -> SealState:
    return replace(state, epoch=epoch, key=key_at(bytes.fromhex(state.key), state.epoch, epoch).hex())


@dataclass(frozen=True)
class SeriesCheck:
    """What the seals of one series say about the entries they cover."""

    good: tuple[int, ...]  # the entries covered by a seal that matches (its MAC, when a key was at hand, too)
    bad: tuple[int, ...]  # epochs whose MAC, link or covered entry does not match
    missing: tuple[int, ...]  # epochs absent between the first (0) and the last one present
    last_epoch: int  # the last epoch present (-1: none)


def check_series(
    seals: list[dict[str, Any]], heads: dict[int, str], *, verification: bytes | None = None, check_key: bytes | None = None
) -> SeriesCheck:
    """Check the seals of one series (`seals`, by epoch) against the entries' chain hashes `heads`
    (seq -> hash): with `verification` (epoch 0's key) every MAC with its epoch's key; else with
    `check_key` (this machine's) the local check MACs; with neither only what needs no key (each
    seal names the chain hash its entry has now)."""
    macs = {int(r["epoch"]): r["mac"] for r in seals}
    key, key_epoch = verification, 0
    good: list[int] = []
    bad: list[int] = []
    missing: list[int] = []
    expected = 0
    for row in seals:
        epoch = int(row["epoch"])
        missing.extend(range(expected, epoch))  # seals deleted from the middle
        payload = _payload(row["key_id"], epoch, row["seq"], row["head"], macs.get(epoch - 1, ""))
        fine = heads.get(row["seq"]) == row["head"]
        if key is not None:
            key, key_epoch = key_at(key, key_epoch, epoch), epoch
            fine = fine and hmac.compare_digest(_mac(key, payload), row["mac"])
        elif check_key is not None:
            fine = fine and hmac.compare_digest(_mac(check_key, payload), row["check_mac"])
        if fine:
            good.append(int(row["seq"]))
        else:
            bad.append(epoch)
        expected = epoch + 1
    return SeriesCheck(tuple(good), tuple(bad), tuple(missing), expected - 1)
