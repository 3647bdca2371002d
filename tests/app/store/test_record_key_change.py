"""A key that vanished is evidence (issue 46, app/store/record_series.py): when the record's sealing
key is gone, the next entry begins a new key with an entry that names the one before and how far it
sealed; `verify` on this machine then reports the entries of the vanished key as not checked, a key
the record never announced vouches for nothing, a replaced key cannot seal again or be cut back, and
only the verification keys of every key the record was sealed with make it verify again."""

from __future__ import annotations

import json

import pytest

from app.core import open_core
from app.paths import resolve_paths
from app.store.request_log import RequestLog
from tests.support.record_tampering import (
    fill_record,
    forget_the_key,
    key_rolled_mid_record,
    reply_changed_and_rehashed,
    resealed_with_a_key_of_ones_own,
    run_sql,
    seal_heads_rewritten,
)


def _verification(log: RequestLog) -> tuple[str, bytes]:
    state = log.keys.load()
    assert state is not None and state.verification is not None
    return state.key_id, bytes.fromhex(state.verification)


@pytest.fixture
def log(cove_core) -> RequestLog:
    record = RequestLog(cove_core.db)
    fill_record(record, 4)
    assert record.verify().intact
    return record


def test_a_vanished_key_begins_a_new_one_with_an_entry_that_says_so(cove_core, log: RequestLog, capsys: pytest.CaptureFixture[str]) -> None:
    first = _verification(log)
    last_seal = dict(next(cove_core.db.query("SELECT * FROM record_seals ORDER BY epoch DESC LIMIT 1")))
    forget_the_key(cove_core)
    (seq,) = fill_record(log, 1)
    assert seq == 6 and "a new key seals it from entry 5 on" in capsys.readouterr().err
    change = log.entries()[4]
    params = json.loads(change["params"])
    assert change["endpoint"] == change["status"] == "key change" and change["client"] == "Cove"
    assert (params["follows"], params["follows_epoch"], params["follows_seq"], params["follows_mac"]) == (first[0], 3, 4, last_seal["mac"])
    second = _verification(log)
    assert second[0] == params["key_id"] != first[0]
    assert [
        (r["key_id"], r["epoch"], r["seq"])
        for r in cove_core.db.query("SELECT * FROM record_seals WHERE key_id = ? ORDER BY epoch", [second[0]])
    ] == [(second[0], 0, 5), (second[0], 1, 6)]

    here = log.verify()  # this machine holds only the new key: the old one's entries are not checked
    assert not here.intact and here.unchecked == (1, 2, 3, 4) and not (here.unsealed or here.bad_seals)
    (why,) = here.why_unchecked
    assert f"Key {first[0]} sealed entries 1 to 4 and is not on this machine: it vanished" in why
    assert "cove record verify --key FILE" in why
    old_only = log.verify(first)  # the key kept elsewhere proves its part, and nothing after it
    assert not old_only.intact and old_only.unchecked == (5, 6) and not old_only.bad_seals
    assert "is not among the verification keys given" in old_only.why_unchecked[0]
    both = log.verify(first, second)
    assert both.intact and both.checked_with == "the verification key"
    assert [(r.key_id, r.first, r.last, r.began_at) for r in both.series] == [(first[0], 1, 4, None), (second[0], 5, 6, 5)]


def test_a_forged_reply_is_not_hidden_by_deleting_the_key(cove_core, log: RequestLog) -> None:
    fill_record(log, 2)
    first = _verification(log)
    reply_changed_and_rehashed(cove_core)  # entry 3, every hash from it on recomputed with Cove's functions
    seal_heads_rewritten(cove_core)  # and each seal made to name them: only the MACs are left to tell
    forget_the_key(cove_core)
    fill_record(log, 1)  # one ordinary entry
    second = _verification(log)
    here = log.verify()
    assert not here.intact and here.unchecked == (1, 2, 3, 4, 5, 6)
    keyed = log.verify(first, second)
    assert not keyed.intact and keyed.bad_seals == (2, 3, 4, 5) and keyed.unsealed == (3, 4, 5, 6)


def test_seals_of_a_key_the_record_never_announced_vouch_for_nothing(cove_core, log: RequestLog) -> None:
    fill_record(log, 2)
    first = _verification(log)
    key_rolled_mid_record(cove_core)
    for verdict in (log.verify(), log.verify(first)):
        assert not verdict.intact and verdict.unsealed == (3, 4, 5, 6)
        (finding,) = verdict.key_findings
        assert "4 seals were made with key" in finding and "never announced" in finding
        assert "starts over at entry 3" in finding


def test_a_whole_record_made_again_with_a_key_of_ones_own_is_caught_only_by_the_kept_key(cove_core, log: RequestLog) -> None:
    first = _verification(log)
    reply_changed_and_rehashed(cove_core)
    resealed_with_a_key_of_ones_own(cove_core, 1)
    assert log.verify().intact  # on this machine it looks genuine: docs/record.md says so
    keyed = log.verify(first)
    assert not keyed.intact and keyed.unchecked == (1, 2, 3, 4)
    assert f"no seal of key {first[0]}, whose verification key was given, is in this record" in keyed.key_findings[0]


def test_a_replaced_key_cannot_seal_again(cove_core, log: RequestLog) -> None:
    first = _verification(log)
    saved = log.keys.fallback.read_bytes()  # type: ignore[union-attr]
    forget_the_key(cove_core)
    fill_record(log, 1)
    second = _verification(log)
    log.keys.fallback.write_bytes(saved)  # type: ignore[union-attr]  # the old key put back
    fill_record(log, 1)
    verdict = log.verify(first, second)
    assert not verdict.intact
    assert any(f"key {first[0]} went on sealing after it was replaced at entry 5 (epochs 4)" in f for f in verdict.key_findings), (
        verdict.key_findings
    )


def test_a_replaced_key_cannot_be_cut_back_from_where_the_change_found_it(cove_core, log: RequestLog) -> None:
    first = _verification(log)
    forget_the_key(cove_core)
    fill_record(log, 1)
    second = _verification(log)
    run_sql(cove_core, "DELETE FROM record_seals WHERE key_id = ? AND epoch = 3", [first[0]])
    verdict = log.verify(first, second)
    assert not verdict.intact and verdict.missing_seals == (3,)


def test_a_record_whose_seals_and_key_are_both_gone_is_not_sealed_as_it_is_found(tmp_path, cove_core, log: RequestLog) -> None:
    run_sql(cove_core, "DELETE FROM record_seals")
    forget_the_key(cove_core)
    again = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))  # Cove opens it again
    try:
        assert next(again.db.query("SELECT count(*) AS n FROM record_seals"))["n"] == 0
        record = RequestLog(again.db)
        fill_record(record, 1)
        verdict = record.verify()
        change = json.loads(record.entries()[4]["params"])
        assert change["follows"] is None and change["follows_epoch"] is None
        assert not verdict.intact and verdict.unsealed == (1, 2, 3, 4)
    finally:
        again.close()


def test_cove_writing_on_after_a_change_keeps_verifying_with_both_keys(cove_core, log: RequestLog) -> None:
    first = _verification(log)
    forget_the_key(cove_core)
    fill_record(log, 3)
    conversation = cove_core.history.create_conversation(model="tiny")
    fill_record(log, 2, conversation_id=conversation.id)
    cove_core.history.delete_conversation(conversation.id)  # an erasure, sealed with the new key
    second = _verification(log)
    verdict = log.verify(first, second)
    assert verdict.intact and verdict.erased == (9, 10) and verdict.entries == 11
