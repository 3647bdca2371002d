"""The written record (app/store/request_log.py): entries chained by hash; verify passes on an
untouched record, names an entry edited by hand, reports a deleted one as missing, and keeps an
erased entry (its text gone) as a marked gap that still verifies (tests/app/store/test_record_seals.py
has every way of tampering)."""

from __future__ import annotations

import json

from app.store.request_log import RequestLog


def _fill(log: RequestLog, n: int) -> None:
    for i in range(n):
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
        )


def test_an_untouched_record_verifies(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _fill(log, 4)
    verdict = log.verify()
    assert verdict.intact and verdict.entries == 4 and not verdict.missing and not verdict.erased
    assert [e["client"] for e in log.entries()] == ["scripts"] * 4
    assert log.entries(client="nobody") == []


def test_an_entry_edited_by_hand_is_found(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _fill(log, 4)
    cove_core.db.execute("UPDATE record_entries SET reply = 'a different answer' WHERE seq = 2")
    cove_core.db.conn.commit()
    assert log.verify().tampered == (2,)
    _fill(log, 0)
    # Its hashes recomputed too (a careful forger): the next entry's link gives it away.
    from app.store.request_log import content_hash, entry_hash

    row = next(r for r in log.entries() if r["seq"] == 2)
    row["content_hash"] = content_hash(row["messages"], row["reply"])
    row["hash"] = entry_hash(row)
    cove_core.db.execute("UPDATE record_entries SET content_hash = ?, hash = ? WHERE seq = 2", [row["content_hash"], row["hash"]])
    cove_core.db.conn.commit()
    assert log.verify().tampered == (3,) and not log.verify().intact


def test_a_deleted_entry_is_missing_and_an_erased_one_a_marked_gap(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _fill(log, 5)
    log.erase([4])
    verdict = log.verify()
    assert verdict.intact and verdict.erased == (4,) and verdict.entries == 6  # 5 and the erasure's own entry
    erased = next(e for e in log.entries() if e["seq"] == 4)
    assert erased["messages"] is None and erased["reply"] is None  # the text is gone, the entry stays
    cove_core.db.execute("DELETE FROM record_entries WHERE seq = 3")
    cove_core.db.conn.commit()
    verdict = log.verify()
    assert not verdict.intact and verdict.missing == (3,)


def test_a_turn_of_the_window_or_the_command_line_is_an_entry_too(cove_core) -> None:
    from app.settings import SamplingParams
    from app.statuses import MessageStatus
    from app.turn.record import TurnRecord

    model = cove_core.library.list()[0]
    conversation = cove_core.history.create_conversation(model=model.name)
    turn = TurnRecord.begin(cove_core.history, conversation.id, "what is a lighthouse?", model=model, params=SamplingParams())
    turn.append("A tower with a light.")
    turn.finish(MessageStatus.COMPLETE, {"prompt_tokens": 9, "gen_tokens": 6, "ttft_ms": 12.5})
    (entry,) = RequestLog(cove_core.db).entries()
    assert entry["client"] == "this window" and entry["endpoint"] == "chat" and entry["model_sha256"] == model.sha256
    assert entry["reply"] == "A tower with a light." and '"what is a lighthouse?"' in entry["messages"]
    assert RequestLog(cove_core.db).verify().intact


def test_a_turns_entry_holds_the_messages_sent_and_goes_with_its_conversation(cove_core) -> None:
    from app.settings import SamplingParams
    from app.statuses import MessageStatus
    from app.turn.record import TurnRecord

    model = cove_core.library.list()[0]
    conversation = cove_core.history.create_conversation(model=model.name)
    turn = TurnRecord.begin(cove_core.history, conversation.id, "and the second?", model=model, params=SamplingParams())
    turn.sent = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "first?"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "and the second?"},
    ]
    turn.finish(MessageStatus.COMPLETE, {"prompt_tokens": 20, "gen_tokens": 2})
    log = RequestLog(cove_core.db)
    (entry,) = log.entries()
    assert json.loads(entry["messages"]) == turn.sent  # the whole prompt, not only the newest message
    cove_core.history.delete_conversation(conversation.id)
    entry, erasure = log.entries()
    assert entry["erased"] == 1 and entry["messages"] is None
    assert erasure["endpoint"] == "erasure" and json.loads(erasure["params"])["erases"] == [entry["seq"]]
    verdict = log.verify()
    assert verdict.intact and verdict.erased == (entry["seq"],) and verdict.tampered == ()


RAN_ON = {"connection": "gpu-box", "host": "gpu-box.lan:8000", "kind": "llama-server", "model_id": "qwen-7b", "fingerprint": None}


def _remote_entry(log: RequestLog, ran_on: dict | None = RAN_ON) -> int:
    return log.append(
        client="command line",
        remote="",
        endpoint="chat",
        model_name="qwen-7b@gpu-box",
        model_sha256=None,
        quant=None,
        params={"temperature": 0.7},
        messages=[{"role": "user", "content": "hi"}],
        reply="hello",
        status="complete",
        usage={"prompt_tokens": 4},
        timings={"ttft_ms": 80.0},
        ran_on=ran_on,
    )


def test_where_a_turn_ran_is_kept_and_chained(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _fill(log, 1)  # a local entry: no ran_on, hashed as entries always were
    _remote_entry(log)
    _fill(log, 1)
    local, remote, after = log.entries()
    assert local["ran_on"] is None and after["ran_on"] is None
    assert json.loads(remote["ran_on"]) == RAN_ON
    assert log.verify().intact
    # Every field is in an entry's hash, where it ran too (empty for here).
    import hashlib

    from app.store.request_log import _CHAINED_V2, _json

    assert local["v"] == 2 and "ran_on" in _CHAINED_V2 and "conversation_id" in _CHAINED_V2
    assert local["hash"] == hashlib.sha256(_json([local.get(n) for n in _CHAINED_V2]).encode()).hexdigest()


def test_editing_where_a_turn_ran_is_tampering(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _remote_entry(log)
    _fill(log, 1)
    _remote_entry(log)
    # Say the reply ran elsewhere...
    moved = json.dumps({**RAN_ON, "host": "somewhere-else.example:8000"})
    cove_core.db.execute("UPDATE record_entries SET ran_on = ? WHERE seq = 1", [moved])
    # ...that a local reply ran on a server...
    cove_core.db.execute("UPDATE record_entries SET ran_on = ? WHERE seq = 2", [json.dumps(RAN_ON)])
    # ...and that a remote one ran here.
    cove_core.db.execute("UPDATE record_entries SET ran_on = NULL WHERE seq = 3")
    cove_core.db.conn.commit()
    assert log.verify().tampered == (1, 2, 3)


def test_an_empty_ran_on_is_this_machine(cove_core) -> None:
    log = RequestLog(cove_core.db)
    _remote_entry(log, ran_on={})
    (entry,) = log.entries()
    assert entry["ran_on"] is None and log.verify().intact
