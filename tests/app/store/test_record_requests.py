"""A request's opening and closing entries: closed once; left open while its process lives; closed
as interrupted at start-up, with the history's saved text, once its process is gone; and the
record verifies throughout."""

from __future__ import annotations

import json
import subprocess
import sys

from app.core import open_core
from app.store.api_conversations import open_exchange
from app.store.record_requests import OPEN, close_interrupted, close_request, open_request
from app.store.request_log import RequestLog


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(done.stdout)


def _open(core, text: str):
    log = RequestLog(core.db)
    (model,) = core.library.list()
    exchange = open_exchange(
        core.history, client="local API", model=model, messages=[{"role": "user", "content": text}], params={"max_tokens": 9}
    )
    opened = open_request(
        log,
        client="local API",
        remote="127.0.0.1",
        endpoint="/v1/chat/completions",
        model_name=model.name,
        model_sha256=model.sha256,
        quant=model.quant,
        params={"max_tokens": 9},
        messages=[{"role": "user", "content": text}],
        conversation_id=exchange.conversation_id,
        message_id=exchange.message_id,
    )
    return log, exchange, opened


def test_a_closed_request_is_two_sealed_entries_and_nothing_stays_open(cove_core) -> None:
    log, _exchange, opened = _open(cove_core, "hello")
    close_request(log, opened, reply="hi", status="complete", usage={}, timings={})
    first, second = log.entries()
    assert first["status"] == OPEN and json.loads(first["messages"]) == [{"role": "user", "content": "hello"}]
    assert second["status"] == "complete" and second["reply"] == "hi" and json.loads(second["params"]) == {"closes": 1}
    assert not list(cove_core.db.query("SELECT * FROM record_open"))
    assert close_interrupted(log, cove_core.history.reply_text) == 0
    assert log.verify().intact


def test_an_open_request_of_a_living_process_is_left_open(cove_core) -> None:
    log, _exchange, _opened = _open(cove_core, "still going")
    assert close_interrupted(log, cove_core.history.reply_text) == 0
    assert [e["status"] for e in log.entries()] == [OPEN]


def test_at_the_next_start_a_request_whose_process_died_is_closed_as_interrupted_with_its_saved_text(cove_core) -> None:
    log, exchange, _opened = _open(cove_core, "tell me")
    cove_core.history.checkpoint_assistant(exchange.message_id, "Once upon")
    dead = _dead_pid()
    cove_core.db.execute("UPDATE record_open SET writer_pid = ?", [dead])
    cove_core.db.execute("UPDATE messages SET writer_pid = ? WHERE id = ?", [dead, exchange.message_id])
    cove_core.db.conn.commit()

    again = open_core(cove_core.paths)  # the next start (the first connection stays open, as another process's)
    try:
        log = RequestLog(again.db)
        opening, closing = log.entries()
        assert opening["status"] == OPEN
        assert closing["status"] == "interrupted" and closing["reply"] == "Once upon"
        assert json.loads(closing["params"])["closes"] == opening["seq"]
        assert closing["conversation_id"] == exchange.conversation_id
        reply = again.history.get_message(exchange.message_id)
        assert reply.status == "interrupted" and reply.content == "Once upon"
        assert log.verify().intact
    finally:
        again.close()
    reopened = open_core(cove_core.paths)  # closed once: a later start adds nothing
    try:
        assert len(RequestLog(reopened.db).entries()) == 2
    finally:
        reopened.close()
