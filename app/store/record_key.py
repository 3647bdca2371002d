"""The record's verification key given out once (`cove record key --export`, and the window's
Server panel), and read back from the text it was given out as (`cove record verify --key FILE`).
The text names the record and the key's id, so a key is never tried on another record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import sqlite_utils

from app.store.record_seals import Sealer, key_id_of
from app.store.request_log import RequestLog
from app.store.seal_keys import SealState
from models.transactions import write_transaction

KEY_FILE_HEADER = "cove record verification key"
ALREADY_GIVEN = (
    "the verification key was given out once already and is not kept here (that is what makes it worth "
    "keeping elsewhere); without it, cove record verify checks with this machine's key"
)


def sealing_state(db: sqlite_utils.Database) -> SealState:
    """The record's sealing state, a new series begun if there is none. Raises SealKeyError."""
    with write_transaction(db):  # no other process begins a series meanwhile
        return Sealer(db, RequestLog(db).keys).prepare()


def key_text(record_id: str, state: SealState) -> str:
    assert state.verification is not None
    return f"{KEY_FILE_HEADER}\nrecord: {record_id}\nkey id: {state.key_id}\nkey: {state.verification}\nmade: {state.made}"


def give_out(db: sqlite_utils.Database, shown: Callable[[str], None]) -> bool:
    """Hand the verification key's text to `shown` (which prints it or puts it on screen), then
    forget it. False (nothing shown) when it was given out before. Raises SealKeyError."""
    keys = RequestLog(db).keys
    state = sealing_state(db)
    if not state.verification:
        return False
    shown(key_text(keys.record_id, state))
    now = keys.load()  # forgotten only once shown (another process may have sealed since)
    if now is not None:
        keys.save(replace(now, verification=None))
    return True


def parse_key_text(text: str, record_id: str, where: str) -> tuple[str, bytes]:
    """(key id, verification key) from the text `give_out` gave; ValueError with one sentence."""
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.splitlines()[1:] if ":" in line)}
    if not text.startswith(KEY_FILE_HEADER) or not {"record", "key id", "key"} <= fields.keys():
        raise ValueError(f"{where} is not a verification key of Cove's record (cove record key --export writes one)")
    if fields["record"] != record_id:
        raise ValueError(f"the key in {where} belongs to another record ({fields['record']}), not this one ({record_id})")
    try:
        key = bytes.fromhex(fields["key"])
    except ValueError:
        raise ValueError(f"the key in {where} is damaged (it is not hexadecimal)") from None
    if key_id_of(key) != fields["key id"]:
        raise ValueError(f"the key in {where} is damaged (it does not match its id)")
    return fields["key id"], key
