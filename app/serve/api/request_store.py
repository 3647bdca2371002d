"""The server's own thread for the history file (every read and write `cove serve` makes, never on
its event loop), and what it writes about a request, and when: on acceptance its entry in the record and
(for a chat) its conversation in the history with the reply's row streaming; checkpoints of the
reply's text as it streams, at most one per interval (as the window saves its replies); and on
its end the closing entry and the finished row. A request in flight when the process dies is
thus in both, closed as interrupted at the next start (app/core.py).

A write waiting for another program's lock (up to the busy timeout) or a
slow disk holds up no client. A write that fails (the disk is full, the file stays locked) loses
nothing: the request is kept in memory, the client is told what was not saved, and the writes
are tried again every few seconds, in order, and once more when the server stops (as the
window's unsaved replies are)."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.engine.state_folders import forget_conversation
from app.serve.http.keys import ApiKeys
from app.store.api_conversations import OpenExchange, close_exchange, open_exchange
from app.store.checkpoint import Checkpointer
from app.store.database import open_writer
from app.store.history import History
from app.store.record_requests import OpenRequest, close_request, open_request
from app.store.records import MessageNotFound
from app.store.request_log import RequestLog, timings, usage
from app.store.save_errors import write_failure
from models.library import InstalledModel, ModelLibrary
from models.transactions import write_transaction

RETRY_S = 5.0  # how often writes that failed are tried again

T = TypeVar("T")


@dataclass(eq=False)
class Opened:
    """A request as accepted; entered in the history file at once when it can be, else later.
    Closed once by RequestStore.close."""

    client: str
    remote: str
    endpoint: str
    model: InstalledModel
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    conversation: bool
    record: OpenRequest | None = None  # None until the opening entry is written
    exchange: OpenExchange | None = None
    checkpointer: Checkpointer | None = None
    closed: bool = False
    # Why something of this request is not in the history file yet (None: all of it is).
    not_saved: str | None = None
    _end: dict[str, Any] = field(default_factory=dict)  # how it ended, kept while its writes wait


class StoreThread:
    """One thread that owns the server's connection to the history file (its history, record,
    library and keys), and the functions run on it."""

    def __init__(self, database: Path, models_dir: Path, kv_states_dir: Path, settings_file: Path | None = None) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cove-serve-store")
        self.settings_file = settings_file  # read for what Auto learned from the person (the window may change it)
        self.history: History
        self.record: RequestLog
        self.library: ModelLibrary
        self.keys: ApiKeys
        self._executor.submit(self._open, database, models_dir, kv_states_dir).result()

    def _open(self, database: Path, models_dir: Path, kv_states_dir: Path) -> None:
        db = open_writer(database)
        self.history = History(db, forget=functools.partial(forget_conversation, kv_states_dir))
        self.record = RequestLog(db)
        self.library = ModelLibrary(db, models_dir)
        self.keys = ApiKeys(db)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the store's thread, awaited without blocking the event loop."""
        return await asyncio.wrap_future(self._executor.submit(fn, *args))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """`fn(*args)` on the store's thread, not awaited (in order with everything else)."""
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._executor.submit(self.history.db.close).result()
        self._executor.shutdown()


class RequestStore:
    """Opens, checkpoints and closes requests on a StoreThread; keeps what could not be written."""

    def __init__(self, thread: StoreThread) -> None:
        self.thread = thread
        self._waiting: list[Opened] = []  # on the store's thread only: requests whose writes failed, in order
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()  # guards _timer (the event loop's thread and the store's)
        self._stopped = False

    @property
    def history(self) -> History:
        return self.thread.history

    @property
    def record(self) -> RequestLog:
        return self.thread.record

    async def open(
        self,
        *,
        client: str,
        remote: str,
        endpoint: str,
        model: InstalledModel,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        conversation: bool,
    ) -> Opened:
        """Enter the request: the record's opening entry and, with `conversation`, the history's
        conversation with a streaming reply, in one transaction. When the file cannot take it
        now, the request is kept and entered later (`not_saved` says why)."""
        opened = Opened(client, remote, endpoint, model, messages, params, conversation)
        await self.thread.run(self._open_now, opened)
        return opened

    def checkpoint(self, opened: Opened, parts: list[str]) -> None:
        """Save the reply so far (its parts) if a checkpoint is due; not awaited (the store's
        thread writes it in order). A failed write is retried at the next."""
        checkpointer = opened.checkpointer
        if checkpointer is None or not checkpointer.due():
            return
        text = "".join(parts)
        self.thread.submit(self._checkpoint_now, opened, checkpointer, text)

    async def close(
        self,
        opened: Opened,
        *,
        reply: str,
        status: str,
        metrics: dict[str, Any],
        error: str | None = None,
        model: InstalledModel | None = None,
        extra: dict[str, Any] | None = None,
        reasoning: str = "",
    ) -> None:
        """Enter how the request ended (one transaction). `model`: the file that ran, when a
        recheck found it changed after the request was accepted; `extra`: more the closing entry
        keeps in its params (a reply's parsed tool calls, its reasoning); `reasoning`: the reply's
        reasoning, for its row. A conversation the person
        deleted meanwhile stays deleted, and the reply's entry is erased with it. When the file
        cannot take it now, it is kept and written later; `opened.not_saved` says so."""
        if opened.closed:
            return
        opened.closed = True
        opened._end = {
            "reply": reply,
            "status": status,
            "metrics": metrics,
            "error": error,
            "model": model,
            "extra": extra,
            "reasoning": reasoning,
        }
        await self.thread.run(self._close_now, opened)

    def stop(self) -> None:
        """The server stops (any thread but the store's): one last try of what is waiting; a line
        on stderr for each request that still could not be written."""
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
        left = self.thread.submit(self._retry).result()
        for opened in left:
            print(
                f"cove serve: a request of {opened.client} to {opened.endpoint} could not be saved in the history "
                f"({opened.not_saved}); it is lost now that the server stops",
                file=sys.stderr,
            )

    # -- on the store's thread ----------------------------------------------------------

    # While writes wait, a new one joins them without touching the file (each try could wait the
    # busy timeout, and they would pile up on this thread); the timer tries them all in order.

    def _open_now(self, opened: Opened) -> None:
        if self._waiting:
            self._wait(opened, self._waiting[0].not_saved or "earlier requests are still waiting to be saved")
            return
        try:
            self._enter(opened)
        except sqlite3.Error as exc:
            self._wait(opened, write_failure(exc))

    def _enter(self, opened: Opened) -> None:
        with write_transaction(self.history.db):
            exchange = (
                open_exchange(self.history, client=opened.client, model=opened.model, messages=opened.messages, params=opened.params)
                if opened.conversation
                else None
            )
            record = open_request(
                self.record,
                client=opened.client,
                remote=opened.remote,
                endpoint=opened.endpoint,
                model_name=opened.model.name,
                model_sha256=opened.model.sha256,
                quant=opened.model.quant,
                params=opened.params,
                messages=opened.messages,
                conversation_id=exchange.conversation_id if exchange else None,
                message_id=exchange.message_id if exchange else None,
            )
        opened.record, opened.exchange = record, exchange
        opened.checkpointer = Checkpointer(self.history, exchange.message_id) if exchange else None

    def _checkpoint_now(self, opened: Opened, checkpointer: Checkpointer, text: str) -> None:
        if opened.checkpointer is not checkpointer or opened.closed or self._waiting:
            return  # closed meanwhile (its final text is written, or waits), or the file is failing now
        try:
            checkpointer.update(text)
        except MessageNotFound:  # the person deleted the conversation: nothing more to save into it
            opened.checkpointer = None

    def _close_now(self, opened: Opened) -> None:
        if self._waiting:
            self._wait(opened, opened.not_saved or self._waiting[0].not_saved or "earlier requests are still waiting")
            return
        try:
            self._finish(opened)
        except sqlite3.Error as exc:
            self._wait(opened, write_failure(exc))

    def _finish(self, opened: Opened) -> None:
        """The request's closing writes (and its opening ones first, if they are still owed)."""
        end = opened._end
        model: InstalledModel | None = end["model"]
        with write_transaction(self.history.db):
            if opened.record is None:
                self._enter(opened)
            assert opened.record is not None
            changed = model is not None and model.sha256 != opened.record.model_sha256
            kept = opened.exchange is None or close_exchange(
                self.history,
                opened.exchange,
                messages=opened.messages,
                reply=end["reply"],
                status=end["status"],
                metrics=end["metrics"],
                error=end["error"],
                model_sha256=model.sha256 if model and changed else None,
                model_quant=model.quant if model and changed else None,
                reasoning=end.get("reasoning") or "",
            )
            seq = close_request(
                self.record,
                opened.record,
                reply=end["reply"],
                status=end["status"],
                usage=usage(end["metrics"]),
                timings=timings(end["metrics"]),
                error=end["error"],
                model_sha256=model.sha256 if model and changed else None,
                extra=end.get("extra"),
            )
            if not kept:
                self.record.erase([seq])
        opened.not_saved = None

    def _wait(self, opened: Opened, why: str) -> None:
        opened.not_saved = why
        if opened not in self._waiting:
            self._waiting.append(opened)
        self._arm()

    def _retry(self) -> list[Opened]:
        """Write what is waiting, oldest first, stopping at the first that still fails (so the
        order the requests came in is kept); returns what is still waiting."""
        while self._waiting:
            opened = self._waiting[0]
            try:
                if opened.closed:
                    self._finish(opened)
                elif opened.record is None:
                    self._enter(opened)
            except sqlite3.Error as exc:
                opened.not_saved = write_failure(exc)
                self._arm()
                break
            opened.not_saved = None
            self._waiting.pop(0)
        return list(self._waiting)

    def _arm(self) -> None:
        with self._lock:
            if self._stopped or (self._timer is not None and self._timer.is_alive()):
                return
            self._timer = threading.Timer(RETRY_S, lambda: self.thread.submit(self._retry))
            self._timer.daemon = True
            self._timer.start()
