"""A request's life in the record: an entry opens it when it is accepted (who asked which model
what, before any engine is free), and a later entry closes it when it ends (what came back, with
which status). A request whose process died in between (kill -9, a power cut) is closed at the
next start as interrupted, with the reply's text as far as the history's checkpoints saved it, so
no accepted request is missing from the record. Both entries are sealed like every other.

`record_open` lists the open requests (with the process writing each) only so that start-up
finds them without reading the whole record; what the record proves is in its entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.statuses import MessageStatus
from app.store.request_log import RequestLog
from app.store.writer import this_writer, writer_alive
from models.transactions import write_transaction

OPEN = "open"  # the status of an entry that opens a request


@dataclass(frozen=True)
class OpenRequest:
    """An entry that opened a request, and what its closing entry repeats."""

    seq: int
    client: str
    remote: str
    endpoint: str
    model_name: str
    model_sha256: str | None
    quant: str | None
    conversation_id: str | None


def open_request(
    log: RequestLog,
    *,
    client: str,
    remote: str,
    endpoint: str,
    model_name: str,
    model_sha256: str | None,
    quant: str | None,
    params: dict[str, Any],
    messages: list[dict[str, Any]],
    conversation_id: str | None = None,
    message_id: str | None = None,
) -> OpenRequest:
    """Enter an accepted request: its messages and settings, status "open". `message_id`: the
    history's row its reply streams into (its text closes the entry if this process dies)."""
    me = this_writer()
    with write_transaction(log.db):
        seq = log.append(
            client=client,
            remote=remote,
            endpoint=endpoint,
            model_name=model_name,
            model_sha256=model_sha256,
            quant=quant,
            params=params,
            messages=messages,
            reply="",
            status=OPEN,
            usage={},
            timings={},
            conversation_id=conversation_id,
        )
        log.db.table("record_open").insert({"seq": seq, "message_id": message_id, "writer_pid": me.pid, "writer_started": me.started})
    return OpenRequest(seq, client, remote, endpoint, model_name, model_sha256, quant, conversation_id)


def close_request(
    log: RequestLog,
    opened: OpenRequest,
    *,
    reply: str,
    status: str,
    usage: dict[str, Any],
    timings: dict[str, Any],
    error: str | None = None,
    model_sha256: str | None = None,
    extra: dict[str, Any] | None = None,
) -> int:
    """Enter how the request `opened` ended; returns the closing entry's number. `model_sha256`:
    the file that ran, when a recheck found it changed after the request was opened."""
    params: dict[str, Any] = {"closes": opened.seq, **(extra or {})}
    if error:
        params["error"] = error
    with write_transaction(log.db):
        seq = log.append(
            client=opened.client,
            remote=opened.remote,
            endpoint=opened.endpoint,
            model_name=opened.model_name,
            model_sha256=model_sha256 or opened.model_sha256,
            quant=opened.quant,
            params=params,
            messages=[],
            reply=reply,
            status=status,
            usage=usage,
            timings=timings,
            conversation_id=opened.conversation_id,
        )
        log.db.execute("DELETE FROM record_open WHERE seq = ?", [opened.seq])
    return seq


def close_interrupted(log: RequestLog, reply_text: Callable[[str], str | None]) -> int:
    """At start-up: close every request whose process is gone as interrupted, with its reply's
    text as the history holds it (`reply_text(message_id)`; None when the row is gone). A request
    another running process is answering is left open. Returns how many were closed."""
    rows = list(log.db.query("SELECT seq, message_id, writer_pid, writer_started FROM record_open ORDER BY seq"))
    gone = [row for row in rows if not writer_alive(row["writer_pid"], row["writer_started"])]
    closed = 0
    for row in gone:
        entry = next(log.db.query("SELECT * FROM record_entries WHERE seq = ?", [row["seq"]]), None)
        if entry is None:  # the opening entry was deleted: verify reports it missing; nothing to close
            log.db.execute("DELETE FROM record_open WHERE seq = ?", [row["seq"]])
            continue
        opened = OpenRequest(
            entry["seq"],
            entry["client"],
            entry["remote"],
            entry["endpoint"],
            entry["model_name"],
            entry["model_sha256"] or None,
            entry["quant"] or None,
            entry["conversation_id"],
        )
        text = reply_text(row["message_id"]) if row["message_id"] else None
        close_request(
            log,
            opened,
            reply=text or "",
            status=MessageStatus.INTERRUPTED,
            usage={},
            timings={},
            error="Cove stopped before this request ended",
            extra={"closed_at_start": True},
        )
        closed += 1
    return closed
