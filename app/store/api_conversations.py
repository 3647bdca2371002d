"""API requests as conversations of the history, under their client: a request whose messages
continue an earlier exchange of the same client (its messages so far, as the client sends them
again) is added to that conversation, any other starts one. Written in one transaction, so
they are searchable like chats and listed by `cove history`."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.store.history import History
from app.store.records import to_json
from models.library import InstalledModel
from models.transactions import write_transaction


def thread_hash(messages: list[dict[str, Any]]) -> str:
    """The hash of a message list as a client sends it (role and text of each, in order)."""
    data = json.dumps([[m.get("role"), m.get("content")] for m in messages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def remember_exchange(history: History, *, client: str, model: InstalledModel, messages: list[dict[str, Any]],
                      reply: str, status: str, params: dict[str, Any], metrics: dict[str, Any],
                      error: str | None = None) -> str:
    """Store one request and its reply; returns the conversation's id."""
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system") or None
    turns = [m for m in messages if m.get("role") in ("user", "assistant")]
    db = history.db
    with write_transaction(db):
        found = db.execute(
            "SELECT id FROM conversations WHERE client = ? AND thread_hash = ? ORDER BY updated_at DESC LIMIT 1",
            [client, thread_hash(messages[:-1])]).fetchone() if len(turns) > 1 else None
        if found is not None:
            conversation_id = found[0]
            new_turns = turns[-1:]
            parent = db.execute("SELECT id FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1",
                                [conversation_id]).fetchone()
            parent_id = parent[0] if parent else None
        else:
            conversation_id = history.new_conversation_row(title=None, model=model.name, system_prompt=system, params=params,
                                                           client=client)
            new_turns, parent_id = turns, None
        # The history's own insert (next seq, the conversation bumped, the search index by trigger).
        for turn in new_turns:
            fields: dict[str, Any] = {"role": turn["role"], "content": turn.get("content") or "", "status": "complete"}
            if turn["role"] == "assistant":  # an earlier reply, as the client sent it back
                fields.update(model_name=model.name, params=to_json({"sent_by_client": True}))
            parent_id = history.insert_message(conversation_id, parent_id, fields, _title(history, conversation_id, turn))
        parent_id = history.insert_message(conversation_id, parent_id, {
            "role": "assistant", "content": reply, "status": status, "error": error, "model_name": model.name,
            "model_sha256": model.sha256, "model_quant": model.quant, "params": to_json(params),
            "metrics": to_json(metrics)}, {"model": model.name})
        after = [*messages, {"role": "assistant", "content": reply}]
        db.execute("UPDATE conversations SET thread_hash = ? WHERE id = ?", [thread_hash(after), conversation_id])
    return conversation_id


def _title(history: History, conversation_id: str, turn: dict[str, Any]) -> dict[str, Any]:
    if turn["role"] != "user":
        return {}
    row = history.db.execute("SELECT title FROM conversations WHERE id = ?", [conversation_id]).fetchone()
    return {"title": history.title_from(turn.get("content") or "")} if row and row[0] is None else {}
