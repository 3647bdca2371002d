"""A record written the way Cove writes it (`fill_record`), and the edits of issues 29 and 46 a
determined editor of the database and the key's file can make to it (`TAMPERING`: each edit, and
what `verify` must then say): for the record's own tests (tests/app/store/test_record_seals.py,
test_record_key_change.py), the window's record-key section and bench/record_tamper.py."""

from __future__ import annotations

import json
from dataclasses import replace

from app.store.record_seals import Sealer, new_series, next_key
from app.store.request_log import GENESIS, RequestLog, content_hash, entry_hash
from models.transactions import write_transaction


def fill_record(log: RequestLog, n: int, conversation_id: str | None = None) -> list[int]:
    """`n` complete replies appended to `log`; returns their sequence numbers."""
    return [
        log.append(
            client="scripts",
            remote="127.0.0.1",
            endpoint="/v1/chat/completions",
            model_name="tiny",
            model_sha256="ab" * 32,
            quant="F32",
            params={"temperature": 0.0, "seed": i},
            messages=[{"role": "user", "content": f"question {i}"}],
            reply=f"answer {i}",
            status="complete",
            usage={"prompt_tokens": 3, "completion_tokens": 2},
            timings={"ttft_ms": 1.5},
            conversation_id=conversation_id,
        )
        for i in range(n)
    ]


def run_sql(core, statement: str, args: list | tuple = ()) -> None:
    """`statement` run on the core's database and committed, as an editor of the file would."""
    core.db.execute(statement, list(args))
    core.db.conn.commit()


def _rehash_from(core, first: int) -> None:
    """What a careful forger does with Cove's own functions: every hash from `first` on recomputed."""
    log = RequestLog(core.db)
    rows = log.entries()
    previous = next((r["hash"] for r in rows if r["seq"] == first - 1), GENESIS)
    for row in rows:
        if row["seq"] < first:
            continue
        row["prev_hash"] = previous
        if row["messages"] is not None:
            row["content_hash"] = content_hash(row["messages"], row["reply"] or "")
        row["hash"] = entry_hash(row)
        run_sql(
            core,
            "UPDATE record_entries SET prev_hash = ?, content_hash = ?, hash = ? WHERE seq = ?",
            (row["prev_hash"], row["content_hash"], row["hash"], row["seq"]),
        )
        previous = row["hash"]


def forget_the_key(core) -> None:
    """Delete the record's sealing key: the file beside the database (tests have no secure keyring)."""
    keys = RequestLog(core.db).keys
    assert keys.fallback is not None and keys.fallback.is_file(), keys.where
    keys.fallback.unlink()


def seal_heads_rewritten(core) -> None:
    """Each seal made to name the chain hash its entry has now (its MACs cannot be made again)."""
    run_sql(core, "UPDATE record_seals SET head = (SELECT hash FROM record_entries e WHERE e.seq = record_seals.seq)")


def rehashed_and_key_deleted(core) -> None:
    """Issue 46: a reply changed, every hash recomputed, the key deleted; then Cove writes one more entry."""
    reply_changed_and_rehashed(core)
    forget_the_key(core)
    fill_record(RequestLog(core.db), 1)


def _rehashed_seals_pointed_and_key_deleted(core) -> None:
    reply_changed_and_rehashed(core)
    seal_heads_rewritten(core)
    forget_the_key(core)
    fill_record(RequestLog(core.db), 1)


def resealed_with_a_key_of_ones_own(core, first: int) -> None:
    """The seals from entry `first` on deleted, and a key of the forger's own, made with Cove's
    functions and kept where Cove keeps its key, sealing those entries again."""
    run_sql(core, "DELETE FROM record_seals WHERE seq >= ?", [first])
    log = RequestLog(core.db)
    state = new_series()
    log.keys.save(state)
    sealer = Sealer(core.db, log.keys)
    with write_transaction(core.db):
        for row in log.entries()[first - 1 :]:
            sealer.seal(state, row["seq"], row["hash"])
            state = replace(state, epoch=state.epoch + 1, key=next_key(bytes.fromhex(state.key)).hex(), last_seq=row["seq"])


def key_rolled_mid_record(core) -> None:
    """A reply changed and re-hashed, and re-sealed from there on with a key of the forger's own."""
    reply_changed_and_rehashed(core)
    resealed_with_a_key_of_ones_own(core, 3)


# The table of issues 29 and 46: each edit of the database (and the key), and what verify must say.
def _delete_last(core) -> None:
    run_sql(core, "DELETE FROM record_entries WHERE seq = 6")


def _delete_last_with_its_seal(core) -> None:
    run_sql(core, "DELETE FROM record_entries WHERE seq = 6")
    run_sql(core, "DELETE FROM record_seals WHERE seq = 6")


def delete_last_three(core) -> None:
    run_sql(core, "DELETE FROM record_entries WHERE seq >= 4")
    run_sql(core, "DELETE FROM record_seals WHERE seq >= 4")


def _delete_everything(core) -> None:
    run_sql(core, "DELETE FROM record_entries")
    run_sql(core, "DELETE FROM record_seals")


def _delete_middle(core) -> None:
    run_sql(core, "DELETE FROM record_entries WHERE seq = 3")


def _delete_first(core) -> None:
    run_sql(core, "DELETE FROM record_entries WHERE seq = 1")
    run_sql(core, "DELETE FROM record_seals WHERE seq = 1")


def _forged_erasure_with_new_text(core) -> None:
    run_sql(
        core,
        "UPDATE record_entries SET erased = 1, messages = ?, reply = 'forged reply' WHERE seq = 2",
        [json.dumps([{"role": "user", "content": "a question never asked"}])],
    )


def _forged_erasure(core) -> None:
    run_sql(core, "UPDATE record_entries SET erased = 1, messages = NULL, reply = NULL WHERE seq = 2")


def reply_changed_and_rehashed(core) -> None:
    run_sql(core, "UPDATE record_entries SET reply = 'a different answer' WHERE seq = 3")
    _rehash_from(core, 3)


def _rehashed_and_seals_removed(core) -> None:
    reply_changed_and_rehashed(core)
    run_sql(core, "DELETE FROM record_seals")


def _forged_entry_appended(core) -> None:
    last = RequestLog(core.db).entries()[-1]
    row = {
        **last,
        "seq": 7,
        "messages": json.dumps([{"role": "user", "content": "planted"}]),
        "reply": "planted",
        "prev_hash": last["hash"],
    }
    row["content_hash"] = content_hash(row["messages"], row["reply"])
    row["hash"] = entry_hash(row)
    core.db.table("record_entries").insert(row)
    core.db.conn.commit()


def _forged_entry_with_a_made_up_seal(core) -> None:
    _forged_entry_appended(core)
    seal = dict(next(core.db.query("SELECT * FROM record_seals ORDER BY epoch DESC LIMIT 1")))
    forged = {
        **seal,
        "epoch": seal["epoch"] + 1,
        "seq": 7,
        "head": RequestLog(core.db).entries()[-1]["hash"],
        "mac": "00" * 32,
        "check_mac": "11" * 32,
    }
    core.db.table("record_seals").insert(forged)
    core.db.conn.commit()


def _conversation_changed(core) -> None:
    run_sql(core, "UPDATE record_entries SET conversation_id = 'another' WHERE seq = 4")


def _reply_edited(core) -> None:
    run_sql(core, "UPDATE record_entries SET reply = 'forged' WHERE seq = 4")


def _model_edited(core) -> None:
    run_sql(core, "UPDATE record_entries SET model_sha256 = ? WHERE seq = 4", ["cd" * 32])


def _two_swapped(core) -> None:
    rows = {r["seq"]: r for r in RequestLog(core.db).entries()}
    for seq, other in ((2, 3), (3, 2)):
        run_sql(
            core,
            "UPDATE record_entries SET messages = ?, reply = ?, content_hash = ? WHERE seq = ?",
            (rows[other]["messages"], rows[other]["reply"], rows[other]["content_hash"], seq),
        )


TAMPERING = {
    "the last entry deleted": (_delete_last, {"missing": (6,)}),
    "the last entry and its seal deleted": (_delete_last_with_its_seal, {"missing": (6,), "missing_seals": (5,)}),
    "the last three deleted with their seals": (delete_last_three, {"missing": (4, 5, 6), "missing_seals": (3, 4, 5)}),
    "every entry and seal deleted": (_delete_everything, {"missing": (1, 2, 3, 4, 5, 6)}),
    "an entry in the middle deleted": (_delete_middle, {"missing": (3,)}),
    "the first deleted with its seal": (_delete_first, {"missing": (1,), "missing_seals": (0,)}),
    "erased=1 with a forged question and reply": (_forged_erasure_with_new_text, {"changed": (2,)}),
    "an erasure nobody made": (_forged_erasure, {"changed": (2,)}),
    "a reply changed and every hash recomputed": (reply_changed_and_rehashed, {"unsealed": (3, 4, 5, 6)}),
    "re-hashed and every seal deleted": (_rehashed_and_seals_removed, {"missing_seals": (0, 1, 2, 3, 4, 5)}),
    "a forged entry appended with correct links": (_forged_entry_appended, {"unsealed": (7,)}),
    "a forged entry with a made-up seal": (_forged_entry_with_a_made_up_seal, {"bad_seals": (6,)}),
    "conversation_id changed": (_conversation_changed, {"changed": (4,)}),
    "a reply edited": (_reply_edited, {"changed": (4,)}),
    "a model_sha256 edited": (_model_edited, {"changed": (4,)}),
    "two entries swapped": (_two_swapped, {"changed": (2, 3)}),
    "a reply changed, re-hashed, the key deleted, one more entry": (rehashed_and_key_deleted, {"bad_seals": (2, 3, 4, 5)}),
    "the same with the seals made to name the new hashes": (_rehashed_seals_pointed_and_key_deleted, {}),
    "a reply changed, re-hashed and re-sealed with a key of the forger's own": (key_rolled_mid_record, {"unsealed": (3, 4, 5, 6)}),
}
