"""API requests as conversations of the history, under their client: a request whose messages
continue an earlier exchange of the same client (its messages so far, as the client sends them
again) is added to that conversation, any other starts one. A request is stored when it is
accepted, its reply streaming into its row, and finished when it ends, so a request in flight
when Cove dies is in the history (marked interrupted at the next start). Searchable like chats
and listed by `cove history`."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from app.images.store import passing_images
from app.statuses import MessageStatus
from app.store.history import History
from app.store.message_images import KeptImage, write_images
from app.store.records import to_json
from app.store.writer import this_writer
from models.library import InstalledModel
from models.transactions import write_transaction


def thread_hash(messages: list[dict[str, Any]]) -> str:
    """The hash of a message list as a client sends it (role and text of each, in order)."""
    data = json.dumps([[m.get("role"), m.get("content")] for m in messages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


@dataclass(frozen=True)
class OpenExchange:
    """A request's place in the history: its conversation, and the reply's row (streaming)."""

    conversation_id: str
    message_id: str


def open_exchange(
    history: History, *, client: str, model: InstalledModel, messages: list[dict[str, Any]], params: dict[str, Any]
) -> OpenExchange:
    """Store a request as it is accepted: the client's messages, and its reply's row, 'streaming'
    (named as this process's, so start-up repair marks it interrupted if the process dies)."""
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system") or None
    turns = [m for m in messages if m.get("role") in ("user", "assistant")]
    db = history.db
    pictures = {id(turn): _keep_images(history, turn.get("content")) for turn in turns}  # files first, then the rows naming them
    with write_transaction(db):
        found = (
            db.execute(
                "SELECT id FROM conversations WHERE client = ? AND thread_hash = ? ORDER BY updated_at DESC LIMIT 1",
                [client, thread_hash(messages[:-1])],
            ).fetchone()
            if len(turns) > 1
            else None
        )
        if found is not None:
            conversation_id = found[0]
            new_turns = turns[-1:]
            parent = db.execute("SELECT id FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1", [conversation_id]).fetchone()
            parent_id = parent[0] if parent else None
        else:
            conversation_id = history.new_conversation_row(title=None, model=model.name, system_prompt=system, params=params, client=client)
            new_turns, parent_id = turns, None
        # The history's own insert (next seq, the conversation bumped, the search index by trigger).
        for turn in new_turns:
            fields: dict[str, Any] = {"role": turn["role"], "content": _text(turn.get("content")), "status": "complete"}
            if turn["role"] == "assistant":  # an earlier reply, as the client sent it back
                fields.update(model_name=model.name, params=to_json({"sent_by_client": True}))
            parent_id = history.insert_message(conversation_id, parent_id, fields, _title(history, conversation_id, turn))
            write_images(db, parent_id, pictures[id(turn)])
        me = this_writer()
        message_id = history.insert_message(
            conversation_id,
            parent_id,
            {
                "role": "assistant",
                "content": "",
                "status": MessageStatus.STREAMING,
                "model_name": model.name,
                "model_sha256": model.sha256,
                "model_quant": model.quant,
                "params": to_json(params),
                "writer_pid": me.pid,
                "writer_started": me.started,
            },
            {"model": model.name},
        )
        # Until the reply ends, no later request continues this thread (it has no reply to send back yet).
        db.execute("UPDATE conversations SET thread_hash = NULL WHERE id = ?", [conversation_id])
    return OpenExchange(conversation_id, message_id)


def close_exchange(
    history: History,
    opened: OpenExchange,
    *,
    messages: list[dict[str, Any]],
    reply: str,
    status: str,
    metrics: dict[str, Any],
    error: str | None = None,
    model_sha256: str | None = None,
    model_quant: str | None = None,
    reasoning: str = "",
) -> bool:
    """Store how the request ended: the reply's text, status and figures, and the thread's hash
    so the client's next request continues this conversation. False when the person deleted the
    conversation meanwhile (nothing is stored then)."""
    db = history.db
    with write_transaction(db):
        if db.execute("SELECT 1 FROM messages WHERE id = ?", [opened.message_id]).fetchone() is None:
            return False
        if model_sha256:  # the file changed under the server: the row names the one that ran
            history.record_reply_model(opened.message_id, model_sha256, model_quant)
        history.finish_assistant(opened.message_id, reply, status=status, metrics=metrics, error=error, reasoning=reasoning)
        after = [*messages, {"role": "assistant", "content": reply}]
        db.execute("UPDATE conversations SET thread_hash = ? WHERE id = ?", [thread_hash(after), opened.conversation_id])
    return True


def _title(history: History, conversation_id: str, turn: dict[str, Any]) -> dict[str, Any]:
    if turn["role"] != "user":
        return {}
    row = history.db.execute("SELECT title FROM conversations WHERE id = ?", [conversation_id]).fetchone()
    return {"title": history.title_from(_text(turn.get("content")))} if row and row[0] is None else {}


def _text(content: Any) -> str:
    """A message's text: its content, or the text parts of a content list (images left out)."""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return content or ""


def _keep_images(history: History, content: Any) -> list[KeptImage]:
    """The image parts of a message's content, their files copied from the request's passing folder
    (app/images/store.py) into the history's images folder, as the history keeps them. An image
    whose file is not there (or a history without an images folder) is left out."""
    if not isinstance(content, list) or history.images is None:
        return []
    passing = passing_images().store
    out: list[KeptImage] = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "image":
            continue
        sha = str(part.get("sha256") or "")
        source = passing.path(sha)
        if source is None:
            continue
        data = source.read_bytes()
        history.images.put(data, sha)
        out.append(KeptImage(sha, str(part.get("mime") or ""), int(part.get("width") or 0), int(part.get("height") or 0), len(data)))
    return out
