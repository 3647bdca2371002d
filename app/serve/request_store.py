"""What `cove serve` writes about a request, and when: on acceptance its entry in the record and
(for a chat) its conversation in the history with the reply's row streaming; checkpoints of the
reply's text as it streams, at most one per interval (as the window saves its replies); and on
its end the closing entry and the finished row. A request in flight when the process dies is
thus in both, closed as interrupted at the next start (app/core.py). On the thread that opened
the history database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.store.api_conversations import OpenExchange, close_exchange, open_exchange
from app.store.checkpoint import Checkpointer
from app.store.history import History
from app.store.record_requests import OpenRequest, close_request, open_request
from app.store.records import MessageNotFound
from app.store.request_log import RequestLog, timings, usage
from models.library import InstalledModel
from models.transactions import write_transaction


@dataclass
class Opened:
    """A request entered on acceptance; closed once by RequestStore.close."""

    record: OpenRequest
    messages: list[dict[str, Any]]
    exchange: OpenExchange | None = None
    checkpointer: Checkpointer | None = None
    closed: bool = False


class RequestStore:
    def __init__(self, history: History, record: RequestLog) -> None:
        self.history, self.record = history, record

    def open(self, *, client: str, remote: str, endpoint: str, model: InstalledModel, messages: list[dict[str, Any]],
             params: dict[str, Any], conversation: bool) -> Opened:
        """Enter the request (one transaction): the record's opening entry and, with
        `conversation`, the history's conversation with a streaming reply."""
        with write_transaction(self.history.db):
            exchange = open_exchange(self.history, client=client, model=model, messages=messages,
                                     params=params) if conversation else None
            record = open_request(self.record, client=client, remote=remote, endpoint=endpoint, model_name=model.name,
                                  model_sha256=model.sha256, quant=model.quant, params=params, messages=messages,
                                  conversation_id=exchange.conversation_id if exchange else None,
                                  message_id=exchange.message_id if exchange else None)
        checkpointer = Checkpointer(self.history, exchange.message_id) if exchange else None
        return Opened(record, messages, exchange, checkpointer)

    def checkpoint(self, opened: Opened, parts: list[str]) -> None:
        """Save the reply so far (its parts) if a checkpoint is due; a failed write is retried
        at the next."""
        checkpointer = opened.checkpointer
        if checkpointer is None or not checkpointer.due():
            return
        try:
            checkpointer.update("".join(parts))
        except MessageNotFound:  # the person deleted the conversation: nothing more to save into it
            opened.checkpointer = None

    def close(self, opened: Opened, *, reply: str, status: str, metrics: dict[str, Any], error: str | None = None,
              model: InstalledModel | None = None) -> None:
        """Enter how the request ended (one transaction). `model`: the file that ran, when a
        recheck found it changed after the request was accepted. A conversation the person
        deleted meanwhile stays deleted, and the reply's entry is erased with it."""
        if opened.closed:
            return
        changed = model is not None and model.sha256 != opened.record.model_sha256
        with write_transaction(self.history.db):
            kept = opened.exchange is None or close_exchange(
                self.history, opened.exchange, messages=opened.messages, reply=reply, status=status, metrics=metrics,
                error=error, model_sha256=model.sha256 if model and changed else None,
                model_quant=model.quant if model and changed else None)
            seq = close_request(self.record, opened.record, reply=reply, status=status, usage=usage(metrics),
                                timings=timings(metrics), error=error,
                                model_sha256=model.sha256 if model and changed else None)
            if not kept:
                self.record.erase([seq])
        opened.closed = True
