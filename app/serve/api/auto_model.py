"""`"model": "auto"` in the three chat APIs: the installed model Auto (app/routing/auto.py) chooses
for the request, read on the store's thread (the library, each model file's chat template, the
speeds measured in the history), with what is loaded in the pool now. The response's `model` is
the chosen one; its `cove` object says why (`cove_field`), and the record keeps the choice."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.engine.request import ReplyRequest
from app.routing.auto import AutoChoice, NoModelCan, choose
from app.routing.candidates import Needs
from app.routing.for_message import CHARS_PER_TOKEN
from app.routing.installed import installed_candidates
from app.routing.preferences import preferred
from app.serve.http.errors import ApiError
from app.settings import load_settings

if TYPE_CHECKING:
    from app.serve.api.job import ChatRead, Job
    from app.serve.api.request_store import StoreThread
    from models.library import InstalledModel


def needs_of(read: ChatRead) -> tuple[str, Needs, int]:
    """(the last user message's text, what the request needs, the characters before that message)."""
    request = ReplyRequest.chat(read.messages)
    return _needs(request, read)


def _needs(request: ReplyRequest, read: ChatRead) -> tuple[str, Needs, int]:
    users = [i for i, m in enumerate(request.messages) if m.role == "user"]
    last = users[-1] if users else len(request.messages) - 1
    text = request.messages[last].text if request.messages else ""
    before = sum(len(m.text) for m in request.messages[:last])
    total = sum(len(m.text) for m in request.messages)
    tools = read.tools is not None and read.tools.active
    needs = Needs(
        images=bool(request.images()),
        tools=tools,
        tokens=total // CHARS_PER_TOKEN + 16 * len(request.messages),
        reply=read.params.max_tokens or 0,
        reasoning=read.reasoning not in ("", "none"),
    )
    return text, needs, before


def auto_choice(thread: StoreThread, read: ChatRead, loaded: set[str]) -> tuple[InstalledModel, AutoChoice]:
    """The model Auto chooses for `read`, with the choice. On the store's thread. Raises ApiError."""
    started = time.perf_counter()
    request = ReplyRequest.chat(read.messages)
    text, needs, before = _needs(request, read)
    try:
        candidates = installed_candidates(thread.library, thread.history.db, loaded, read.params.n_ctx)
        choice = choose(
            text,
            needs,
            candidates,
            holds=_holds(thread, request),
            conversation_tokens=before // CHARS_PER_TOKEN,
            conversation_chars=before,
            preferred=_preferred(thread),
        )
    except NoModelCan as exc:
        raise ApiError(400, str(exc), param="model", code="model_not_found") from None
    return thread.library.get(choice.model), replace(choice, took_ms=round((time.perf_counter() - started) * 1000, 2))


RECENT_ENTRIES = 500  # how far back the record is searched for the reply a conversation goes on from


def _holds(thread: StoreThread, request: ReplyRequest) -> str | None:
    """The model that wrote the request's last assistant message, found in the record's recent
    entries by its text: a client sends the whole conversation each time, and the model that wrote
    the reply it goes on from keeps the conversation in a slot, so it reads only the new message."""
    replies = [m.text for m in request.messages if m.role == "assistant" and m.text]
    if not replies:
        return None
    row = thread.history.db.execute(
        "SELECT model_name FROM record_entries WHERE reply = ? AND seq > (SELECT COALESCE(MAX(seq), 0) FROM record_entries) - ?"
        " ORDER BY seq DESC LIMIT 1",
        [replies[-1], RECENT_ENTRIES],
    ).fetchone()
    return row[0] if row else None


def _preferred(thread: StoreThread) -> dict[str, str]:
    """What Auto learned from the person, read from the settings file each time (the window or
    `cove chat` may have learned more since this server started)."""
    if thread.settings_file is None:
        return {}
    return preferred(load_settings(thread.settings_file))


def cove_field(job: Job) -> dict[str, Any]:
    """The response's `cove` object when Auto chose its model: {"auto": {"chosen", "why", "kind",
    "difficulty", "passed_over"}}; nothing otherwise."""
    return {"cove": {"auto": job.auto.record()}} if job.auto is not None else {}
