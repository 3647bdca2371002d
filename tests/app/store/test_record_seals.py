"""The record proves itself (app/store/record_seals.py, app/store/request_log.py): each way a
determined editor of the database can change it (the table of issue 29, and a forger holding
today's key) makes `verify` fail and say what happened, while Cove's own use (replies, deleted
conversations, a crash between an entry and its key's evolution, an older Cove's record) verifies
clean."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.core import open_core
from app.paths import resolve_paths
from app.store import record_seals
from app.store.record_seals import key_at
from app.store.request_log import GENESIS, RequestLog, content_hash, entry_hash
from app.store.seal_keys import SealKeyError
from tests.support.paths import REPO_ROOT
from tests.support.record_tampering import TAMPERING, delete_last_three, fill_record, reply_changed_and_rehashed, run_sql


@pytest.fixture
def log(cove_core) -> RequestLog:
    record = RequestLog(cove_core.db)
    fill_record(record, 6, conversation_id="c-1")
    assert record.verify().intact
    return record


def test_normal_use_verifies_with_this_machines_key_and_with_the_verification_key(cove_core, log: RequestLog) -> None:
    state = log.keys.load()
    assert state is not None and state.epoch == 6 and state.last_seq == 6
    verdict = log.verify()
    assert verdict.intact and verdict.checked_with == "this machine's key" and verdict.entries == 6
    assert state.verification is not None
    full = log.verify((state.key_id, bytes.fromhex(state.verification)))
    assert full.intact and full.checked_with == "the verification key"
    # The key evolved: what the machine holds now is not any earlier epoch's key.
    assert state.key != state.verification and state.key == key_at(bytes.fromhex(state.verification), 0, 6).hex()


@pytest.mark.parametrize("kind", list(TAMPERING))
def test_each_edit_of_the_database_is_found(cove_core, log: RequestLog, kind: str) -> None:
    edit, expected = TAMPERING[kind]
    state = log.keys.load()
    assert state is not None and state.verification is not None
    edit(cove_core)
    for verdict in (log.verify(), log.verify((state.key_id, bytes.fromhex(state.verification)))):
        assert not verdict.intact, kind
        for field, seqs in expected.items():
            assert set(seqs) <= set(getattr(verdict, field)), (kind, field, verdict)


def test_a_forger_with_todays_key_is_caught_by_the_verification_key(cove_core, log: RequestLog) -> None:
    # Someone who read the keyring today: they hold this epoch's key and the local check key.
    state = log.keys.load()
    assert state is not None and state.verification is not None
    verification = (state.key_id, bytes.fromhex(state.verification))
    reply_changed_and_rehashed(cove_core)
    heads = {r["seq"]: r["hash"] for r in log.entries()}
    previous = ""
    for seal in [dict(r) for r in cove_core.db.query("SELECT * FROM record_seals ORDER BY epoch")]:
        payload = json.dumps([seal["key_id"], seal["epoch"], seal["seq"], heads[seal["seq"]], previous], separators=(",", ":")).encode()
        mac = hmac.new(bytes.fromhex(state.key), payload, hashlib.sha256).hexdigest()  # the best key they have
        check = hmac.new(bytes.fromhex(state.check), payload, hashlib.sha256).hexdigest()
        run_sql(
            cove_core,
            "UPDATE record_seals SET head = ?, mac = ?, check_mac = ? WHERE key_id = ? AND epoch = ?",
            (heads[seal["seq"]], mac, check, seal["key_id"], seal["epoch"]),
        )
        previous = mac
    assert log.verify().intact  # this machine's own check is fooled: docs/record.md says so
    full = log.verify(verification)
    assert not full.intact and set(full.bad_seals) == {0, 1, 2, 3, 4, 5}


def test_a_deleted_conversation_is_a_sealed_erasure_that_verifies(cove_core, log: RequestLog) -> None:
    conversation = cove_core.history.create_conversation(model="tiny")
    ids = fill_record(log, 2, conversation_id=conversation.id)
    cove_core.history.delete_conversation(conversation.id)
    verdict = log.verify()
    assert verdict.intact and verdict.erased == tuple(ids)
    erasure = log.entries()[-1]
    assert erasure["endpoint"] == "erasure" and json.loads(erasure["params"])["erases"] == ids
    assert all(e["messages"] is None and e["reply"] is None for e in log.entries() if e["seq"] in ids)


def test_numbers_cut_from_the_end_are_never_given_again(cove_core, log: RequestLog) -> None:
    delete_last_three(cove_core)
    (seq,) = fill_record(log, 1)
    assert seq == 7
    verdict = log.verify()
    assert not verdict.intact and verdict.missing == (4, 5, 6)


def test_cove_stopping_between_an_entry_and_its_keys_evolution_is_not_tampering(
    cove_core, log: RequestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record_seals.Sealer, "_advance", lambda self, epoch, seq: None)  # killed right after COMMIT
    fill_record(log, 1)
    state = log.keys.load()
    assert state is not None and state.epoch == 6  # the key did not evolve
    assert log.verify().intact
    monkeypatch.undo()
    fill_record(log, 1)  # the next entry brings the key forward first
    state = log.keys.load()
    assert state is not None and state.epoch == 8 and log.verify().intact


def test_an_entry_whose_key_cannot_be_used_is_written_unsealed_and_reported(
    cove_core, log: RequestLog, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def locked(self):
        raise SealKeyError("the record's sealing key could not be read from the Secret Service (KeyringLocked)")

    monkeypatch.setattr(record_seals.Sealer, "prepare", locked)
    (seq,) = fill_record(log, 1)
    assert "not sealed" in capsys.readouterr().err
    assert log.entries()[-1]["reply"] == "answer 0"  # the entry is there: nothing is lost to a locked keyring
    monkeypatch.undo()
    verdict = log.verify()
    assert not verdict.intact and verdict.unsealed == (seq,)


def test_an_older_coves_record_is_sealed_as_it_is_when_sealing_begins(cove_core) -> None:
    # Entries as Cove wrote them before sealing (format 1, no seals), one erased.
    previous = GENESIS
    for seq in (1, 2, 3):
        messages = json.dumps([{"role": "user", "content": f"q{seq}"}])
        row = {
            "seq": seq,
            "at": f"2026-11-0{seq}T10:00:00Z",
            "client": "this window",
            "remote": "",
            "endpoint": "chat",
            "model_name": "tiny",
            "model_sha256": "ab" * 32,
            "quant": "F32",
            "params": "{}",
            "messages": messages,
            "reply": f"a{seq}",
            "status": "complete",
            "usage": "{}",
            "timings": "{}",
            "erased": 0,
            "content_hash": content_hash(messages, f"a{seq}"),
            "prev_hash": previous,
        }
        row["hash"] = entry_hash(row)
        cove_core.db.table("record_entries").insert(row)
        previous = row["hash"]
    run_sql(cove_core, "UPDATE record_entries SET messages = NULL, reply = NULL, erased = 1 WHERE seq = 2")
    log = RequestLog(cove_core.db)
    log.begin_sealing()
    verdict = log.verify()
    assert verdict.intact and verdict.erased == (2,) and verdict.entries == 4
    log.begin_sealing()  # once only
    assert len(log.entries()) == 4
    # Seals deleted from a sealed record are not made again when Cove next opens it.
    run_sql(cove_core, "DELETE FROM record_seals")
    log.begin_sealing()
    assert next(cove_core.db.query("SELECT count(*) AS n FROM record_seals"))["n"] == 0
    assert log.verify().missing_seals == (0,)
    run_sql(cove_core, "UPDATE record_entries SET reply = 'changed' WHERE seq = 3")
    assert log.verify().changed == (3,)


def test_the_key_lives_outside_the_database_in_a_private_file_without_a_keyring(cove_core, log: RequestLog) -> None:
    assert log.keys.fallback is not None and log.keys.fallback.is_file()
    assert log.keys.fallback.stat().st_mode & 0o077 == 0
    assert log.keys.fallback.parent == Path(cove_core.paths.database).parent
    state = log.keys.load()
    assert state is not None
    dump = "\n".join(cove_core.db.conn.iterdump())
    assert state.key not in dump and state.check not in dump and (state.verification or "x") not in dump


def _cove(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COVE_HOME": str(home)},
    )


def test_the_verification_key_is_given_once_and_checks_every_seal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    core = open_core(resolve_paths({"COVE_HOME": str(home)}))
    try:
        fill_record(RequestLog(core.db), 4)
    finally:
        core.close()
    status = _cove(home, "record", "key")
    assert status.returncode == 0 and "not given out yet" in status.stdout
    exported = _cove(home, "record", "key", "--export")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith("cove record verification key") and "Keep this elsewhere" in exported.stderr
    key_file = tmp_path / "record-key.txt"
    key_file.write_text(exported.stdout, encoding="utf-8")
    again = _cove(home, "record", "key", "--export")
    assert again.returncode == 1 and "given out once already" in again.stderr and "Traceback" not in again.stderr
    assert again.stdout == ""
    # Not on this machine any more: neither in the database nor in the key's store.
    secret = next(line.split(":", 1)[1].strip() for line in exported.stdout.splitlines() if line.startswith("key:"))
    assert [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []

    checked = _cove(home, "record", "verify", "--key", str(key_file))
    assert checked.returncode == 0 and "4 entries: intact" in checked.stdout
    assert "checked with the verification key" in checked.stdout
    with sqlite3.connect(home / "data" / "cove.db") as db:
        db.execute("DELETE FROM record_entries WHERE seq = 4")
        db.execute("DELETE FROM record_seals WHERE seq = 4")
    cut = _cove(home, "record", "verify", "--key", str(key_file))
    assert cut.returncode == 1 and "NOT INTACT" in cut.stdout and "Entries missing (deleted, or cut from the end): 4." in cut.stdout
    as_json = json.loads(_cove(home, "record", "verify", "--json").stdout)
    assert as_json["intact"] is False and as_json["missing"] == [4] and as_json["missing_seals"] == [3]

    key_file.write_text("not a key\n", encoding="utf-8")
    wrong = _cove(home, "record", "verify", "--key", str(key_file))
    assert wrong.returncode == 1 and "is not a verification key" in wrong.stderr and "Traceback" not in wrong.stderr
    gone = _cove(home, "record", "verify", "--key", str(tmp_path / "nowhere.txt"))
    assert gone.returncode == 1 and "cannot be read" in gone.stderr
