"""Conversations and messages in the history file: the records, the writes of a chat turn
(user message, streaming assistant row, checkpoints, final result) and start-up repair."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

import sqlite_utils

import app.store.message_images as images_
from app.images.store import ImageStore
from app.statuses import FINAL_STATUSES, MessageStatus
from app.store.branches import branch_path, deepest_newest_descendant
from app.store.checkpoint import Checkpointer
from app.store.records import (
    MESSAGE_COLUMNS,
    BranchNode,
    Conversation,
    ConversationNotFound,
    Message,
    MessageNotFound,
    conversation_from_row,
    message_from_row,
    message_from_tuple,
    to_json,
)
from app.store.request_log import RequestLog
from app.store.writer import this_writer, writer_alive
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

__all__ = ["Checkpointer", "Conversation", "ConversationNotFound", "History", "Message", "MessageNotFound"]

# "tool_call": a call a model made (content: the call as text, params: its details); "tool": its
# result as the model was given it.
ROLES: Final = frozenset({"system", "user", "assistant", "tool_call", "tool"})
TOOL_ROLES: Final = frozenset({"tool_call", "tool"})
TITLE_MAX_CHARS: Final = 60
MIN_PREFIX_CHARS: Final = 4


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()

_CONVERSATION_SELECT = """
SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count
FROM conversations c
"""


def _title_from(content: str) -> str | None:
    """First line of the text, at most TITLE_MAX_CHARS characters, or None if blank."""
    line = next((ln.strip() for ln in content.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    if not line:
        return None
    if len(line) <= TITLE_MAX_CHARS:
        return line
    cut = line[:TITLE_MAX_CHARS].rsplit(" ", 1)[0] or line[:TITLE_MAX_CHARS]
    return cut.rstrip() + "…"


class History:
    """Reads and writes conversations through one connection.

    Thread invariant: sqlite3 connections belong to the thread that made them; call a
    History only from the thread that opened its database (the UI/storage thread).
    Every write method commits before it returns, unless the caller wrapped it in an
    outer transaction, in which case that transaction's commit makes it durable.
    """

    def __init__(
        self,
        db: sqlite_utils.Database,
        *,
        now: Callable[[], datetime] | None = None,
        forget: Callable[[str], None] | None = None,
        images: ImageStore | None = None,
    ) -> None:
        """`forget(conversation_id)`: called after a conversation is deleted, for what is kept of it
        outside the database (its saved KV state: app/engine/state_folders.py). `images`: where the
        messages' image files are (default: the `images` folder beside the database file)."""
        self.db = db
        self._now = now
        self._forget = forget
        self.images: ImageStore = images if images is not None else images_.images_beside(db)

    # -- conversations ---------------------------------------------------------------

    def create_conversation(
        self,
        *,
        title: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Conversation:
        return self.get_conversation(self.new_conversation_row(title=title, model=model, system_prompt=system_prompt, params=params))

    def new_conversation_row(
        self, *, title: str | None, model: str | None, system_prompt: str | None, params: dict[str, Any] | None, client: str | None = None
    ) -> str:
        """Insert a conversation (an API client's when `client` is given); returns its id."""
        stamp = self._stamp()
        conversation_id = uuid.uuid4().hex
        with write_transaction(self.db):
            self.db.table("conversations").insert(
                {
                    "id": conversation_id,
                    "title": title,
                    "created_at": stamp,
                    "updated_at": stamp,
                    "model": model,
                    "system_prompt": system_prompt,
                    "params": to_json(params),
                    "pinned": 0,
                    "client": client,
                }
            )
        return conversation_id

    def get_conversation(self, conversation_id: str) -> Conversation:
        """Look up by full id, or by a unique id prefix of at least 4 characters."""
        return conversation_from_row(self._conversation_row(conversation_id))

    def list_conversations(self, limit: int | None = None) -> list[Conversation]:
        """Pinned first, then the most recently active first."""
        sql = _CONVERSATION_SELECT + " ORDER BY c.pinned DESC, c.updated_at DESC, c.rowid DESC"
        params: list[Any] = []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        return [conversation_from_row(row) for row in self.db.query(sql, params)]

    def last_conversation(self) -> Conversation | None:
        """The most recently active conversation, pinned or not."""
        rows = list(self.db.query(_CONVERSATION_SELECT + " ORDER BY c.updated_at DESC, c.rowid DESC LIMIT 1"))
        return conversation_from_row(rows[0]) if rows else None

    def rename_conversation(self, conversation_id: str, title: str) -> Conversation:
        return self._update_conversation(conversation_id, {"title": title.strip() or None})

    def set_pinned(self, conversation_id: str, pinned: bool) -> Conversation:
        return self._update_conversation(conversation_id, {"pinned": 1 if pinned else 0})

    def update_conversation(
        self,
        conversation_id: str,
        *,
        model: str | None | _Unset = UNSET,
        system_prompt: str | None | _Unset = UNSET,
        params: dict[str, Any] | None | _Unset = UNSET,
    ) -> Conversation:
        """Change only the fields given; None clears a field."""
        given = {"model": model, "system_prompt": system_prompt, "params": params}
        changes = {k: v for k, v in given.items() if not isinstance(v, _Unset)}
        if not isinstance(params, _Unset):  # the same test that put "params" in `changes`
            changes["params"] = to_json(params)
        return self._update_conversation(conversation_id, changes)

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation; its messages (and their search entries), its saved KV state and,
        once this commits, the image files no other message refers to go with it."""
        full_id = self._conversation_row(conversation_id)["id"]
        with write_transaction(self.db):
            images_.remove_after_commit(self.db, self.images, images_.conversation_image_hashes(self.db, full_id))
            # messages go by ON DELETE CASCADE; the messages_ad trigger clears messages_fts.
            self.db.execute("DELETE FROM conversations WHERE id = ?", [full_id])
            # Its entries in the written record lose their text and stay as marked gaps, and the
            # erasure is an entry of its own.
            RequestLog(self.db).erase_conversation(full_id)
        if self._forget is not None:
            self._forget(full_id)

    def conversation_ids(self) -> list[str]:
        """Every conversation's id (window chats and API clients' alike)."""
        return [row[0] for row in self.db.execute("SELECT id FROM conversations").fetchall()]

    # -- messages --------------------------------------------------------------------

    def messages(self, conversation_id: str) -> list[Message]:
        """The current branch, oldest first (see app/store/branches.py for how it is chosen)."""
        conversation = self._conversation_row(conversation_id)
        return branch_path(self._all_messages(conversation["id"]), conversation.get("current_leaf_id"))

    def _all_messages(self, full_id: str) -> list[Message]:
        """Every message of a conversation, all branches, by seq: one query, tuples straight
        into records (10,000 messages are read when a long chat opens)."""
        cursor = self.db.conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY seq", [full_id])
        return images_.with_images([message_from_tuple(row) for row in cursor], images_.images_of_conversation(self.db, full_id))

    def siblings(self, message_id: str) -> list[Message]:
        """Every version of a message (same parent, same role), oldest first; itself included."""
        message = self.get_message(message_id)
        rows = self.db.query(
            "SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ? AND role = ? ORDER BY seq",
            [message.conversation_id, message.parent_id, message.role],
        )
        return images_.read_with_images(self.db, [message_from_row(row) for row in rows])

    def branch_outline(self, conversation_id: str) -> list[tuple[str, str, int, int]]:
        """The current branch as (id, role, version number, version count), oldest first, from
        one light query (no message text): cheap for a 10,000-message chat. Fetch the text of
        the part to show with messages_by_ids()."""
        conversation = self._conversation_row(conversation_id)
        rows = [
            BranchNode(*row)
            for row in self.db.conn.execute(
                "SELECT id, parent_id, role FROM messages WHERE conversation_id = ? ORDER BY seq", [conversation["id"]]
            )
        ]
        groups: dict[tuple[str | None, str], list[str]] = {}
        for node in rows:
            groups.setdefault((node.parent_id, node.role), []).append(node.id)
        out = []
        for node in branch_path(rows, conversation.get("current_leaf_id")):
            ids = groups[(node.parent_id, node.role)]
            out.append((node.id, node.role, ids.index(node.id) + 1, len(ids)))
        return out

    def messages_by_ids(self, ids: list[str]) -> list[Message]:
        """These messages, in the order given (unknown ids are skipped)."""
        found: dict[str, Message] = {}
        for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self.db.conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN ({marks})", chunk):
                message = message_from_tuple(row)
                found[message.id] = message
        return images_.read_with_images(self.db, [found[i] for i in ids if i in found])

    def select_branch(self, message_id: str) -> list[Message]:
        """Show the version of the conversation that goes through this message; returns it."""
        message = self.get_message(message_id)
        leaf = deepest_newest_descendant(self._all_messages(message.conversation_id), message.id)
        with write_transaction(self.db):
            self.db.table("conversations").update(message.conversation_id, {"current_leaf_id": leaf})
        return self.messages(message.conversation_id)

    def get_message(self, message_id: str) -> Message:
        rows = list(self.db.query("SELECT * FROM messages WHERE id = ?", [message_id]))
        if not rows:
            raise MessageNotFound(f"no message '{message_id}'")
        return images_.read_with_images(self.db, [message_from_row(rows[0])])[0]

    def add_user_message(
        self,
        conversation_id: str,
        content: str,
        *,
        images: Sequence[images_.ImageLike] = (),
        parent_id: str | None | _Unset = UNSET,
    ) -> Message:
        """Store the person's message, committed before this returns.

        With no parent_id it follows the last message of the current branch; an explicit
        None makes it a new root (an edit of the first message). The first user message
        names an untitled conversation. `images` (KeptImage, or checks.CheckedImage), in order,
        are linked to it in the same transaction; their files must be in the images folder
        already (ImageStore.put, just before this). An image that is not one is a ValueError.
        """
        kept = images_.kept_all(images)
        with write_transaction(self.db):
            conversation = self._conversation_row(conversation_id)
            untitled = conversation["title"] is None
            message_id = self._insert_message(
                conversation["id"],
                self._branch_tip(conversation["id"]) if isinstance(parent_id, _Unset) else parent_id,
                {"role": "user", "content": content, "status": MessageStatus.COMPLETE},
                {"title": _title_from(content)} if untitled else {},
            )
            images_.write_images(self.db, message_id, kept)
        return self.get_message(message_id)

    def start_assistant_message(
        self,
        conversation_id: str,
        *,
        parent_id: str,
        model_name: str,
        model_sha256: str | None,
        model_quant: str | None,
        params: dict[str, Any],
    ) -> Message:
        """Create the reply's row before the first token: status 'streaming', empty text."""
        with write_transaction(self.db):
            message_id = self._insert_message(
                self._conversation_row(conversation_id)["id"],
                parent_id,
                {
                    "role": "assistant",
                    "content": "",
                    "status": MessageStatus.STREAMING,
                    "model_name": model_name,
                    "model_sha256": model_sha256,
                    "model_quant": model_quant,
                    "params": to_json(params),
                    # Invariant: a 'streaming' row names the process writing it, so another
                    # process's start-up repair leaves it alone while that process runs.
                    "writer_pid": this_writer().pid,
                    "writer_started": this_writer().started,
                },
                {"model": model_name},
            )
        return self.get_message(message_id)

    def add_tool_message(self, conversation_id: str, parent_id: str, role: str, content: str, details: dict[str, Any]) -> Message:
        """A tool call ("tool_call") or its result ("tool") after `parent_id`, committed before this
        returns; `details` (server, tool, call id, arguments, decision, ...) go in its params."""
        if role not in TOOL_ROLES:
            raise ValueError(f"'{role}' is not a tool message's role")
        with write_transaction(self.db):
            message_id = self._insert_message(
                self._conversation_row(conversation_id)["id"],
                parent_id,
                {"role": role, "content": content, "status": MessageStatus.COMPLETE, "params": to_json(details)},
                {},
            )
        return self.get_message(message_id)

    def checkpoint_assistant(self, message_id: str, content: str) -> bool:
        """Save the partial reply in one small transaction; True if it was written.

        A 'streaming' row is written, and so is one this process is writing that another
        process marked 'interrupted' (it becomes 'streaming' again): a checkpoint of a live
        reply is never dropped. A finished row is left alone (False), so a late checkpoint
        can never overwrite a finished reply. Raises MessageNotFound if the row is gone.
        """
        me = this_writer()
        with write_transaction(self.db):
            cursor = self.db.execute(
                "UPDATE messages SET content = ?, status = ?, updated_at = ? "
                "WHERE id = ? AND (status = ? OR (status = ? AND writer_pid = ? AND writer_started = ?))",
                [
                    content,
                    MessageStatus.STREAMING,
                    self._stamp(),
                    message_id,
                    MessageStatus.STREAMING,
                    MessageStatus.INTERRUPTED,
                    me.pid,
                    me.started,
                ],
            )
            if cursor.rowcount:
                return True
            if self.db.execute("SELECT 1 FROM messages WHERE id = ?", [message_id]).fetchone() is None:
                raise MessageNotFound(f"no message '{message_id}'; its conversation was deleted")
            return False

    def reply_text(self, message_id: str) -> str | None:
        """A message's text as saved; None when it is gone."""
        row = self.db.execute("SELECT content FROM messages WHERE id = ?", [message_id]).fetchone()
        return row[0] if row else None

    def record_reply_model(self, message_id: str, model_sha256: str, model_quant: str | None) -> None:
        """The model file changed before the reply ran: the row names the bytes that wrote it."""
        with write_transaction(self.db):
            self.db.execute(
                "UPDATE messages SET model_sha256 = ?, model_quant = ? WHERE id = ?",
                [model_sha256, model_quant, message_id],
            )

    def finish_assistant(
        self,
        message_id: str,
        content: str,
        *,
        status: str,
        metrics: dict[str, Any],
        error: str | None = None,
        reasoning: str = "",
    ) -> Message:
        """Final text, reasoning (app/reasoning: "" when the reply had none), status and metrics
        in ONE transaction."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"unknown final status '{status}'; use one of {sorted(str(s) for s in FINAL_STATUSES)}")
        stamp = self._stamp()
        with write_transaction(self.db):
            row = self.db.execute("SELECT conversation_id FROM messages WHERE id = ?", [message_id]).fetchone()
            if row is None:
                raise MessageNotFound(f"no message '{message_id}'")
            self.db.table("messages").update(
                message_id,
                {
                    "content": content,
                    "reasoning": reasoning,
                    "status": status,
                    "error": error,
                    "metrics": to_json(metrics),
                    "updated_at": stamp,
                },
            )
            self.db.table("conversations").update(row[0], {"updated_at": stamp})
        return self.get_message(message_id)

    def repair_interrupted(self) -> int:
        """At start-up: replies left 'streaming' by a process that is gone (a crash, a kill)
        become 'interrupted', text kept. A reply another running process (the window, a
        second `cove chat`) is streaming right now is left alone.

        Returns how many rows were repaired (0 on a read-only database).
        """
        if self.db.conn.execute("PRAGMA query_only").fetchone()[0]:
            return 0
        with write_transaction(self.db):
            streaming = self.db.execute(
                "SELECT id, writer_pid, writer_started FROM messages WHERE status = ?", [MessageStatus.STREAMING]
            ).fetchall()
            orphans = [row[0] for row in streaming if not writer_alive(row[1], row[2])]
            stamp = self._stamp()
            for message_id in orphans:
                self.db.execute(
                    "UPDATE messages SET status = ?, updated_at = ? WHERE id = ? AND status = ?",
                    [MessageStatus.INTERRUPTED, stamp, message_id, MessageStatus.STREAMING],
                )
            return len(orphans)

    # -- internals -------------------------------------------------------------------

    def _stamp(self) -> str:
        return utc_timestamp(self._now() if self._now else None)

    def _conversation_row(self, conversation_id: str) -> dict[str, Any]:
        key = conversation_id.strip()
        rows = list(self.db.query(_CONVERSATION_SELECT + " WHERE c.id = ?", [key]))
        if not rows and len(key) >= MIN_PREFIX_CHARS:
            prefix = key.lower()
            rows = list(
                self.db.query(
                    _CONVERSATION_SELECT + " WHERE substr(c.id, 1, ?) = ? LIMIT 2",
                    [len(prefix), prefix],
                )
            )
            if len(rows) > 1:
                raise ConversationNotFound(f"more than one conversation starts with '{key}'; give more of the id")
        if not rows:
            raise ConversationNotFound(f"no conversation '{key}'; `cove history list` shows them")
        return rows[0]

    def _branch_tip(self, conversation_id: str) -> str | None:
        outline = self.branch_outline(conversation_id)  # ids only: no message text is read
        return outline[-1][0] if outline else None

    @staticmethod
    def title_from(content: str) -> str | None:
        return _title_from(content)

    def insert_message(
        self, conversation_id: str, parent_id: str | None, fields_: dict[str, Any], conversation_changes: dict[str, Any]
    ) -> str:
        """A message with the fields given (an API exchange's), inside the caller's write transaction."""
        return self._insert_message(conversation_id, parent_id, fields_, conversation_changes)

    def _insert_message(
        self,
        conversation_id: str,
        parent_id: str | None,
        fields_: dict[str, Any],
        conversation_changes: dict[str, Any],
    ) -> str:
        """Insert a message with the next seq and bump the conversation; returns its id.

        Call inside a write transaction: seq is read and written under the same lock, so
        it is unique and increasing within a conversation.
        """
        if fields_["role"] not in ROLES:
            raise ValueError(f"unknown role '{fields_['role']}'")
        if parent_id is not None:
            owner = self.db.execute("SELECT conversation_id FROM messages WHERE id = ?", [parent_id]).fetchone()
            if owner is None or owner[0] != conversation_id:
                raise MessageNotFound(f"no message '{parent_id}' in conversation '{conversation_id}'")
        next_seq = self.db.execute(
            "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE conversation_id = ?",
            [conversation_id],
        ).fetchone()[0]
        stamp = self._stamp()
        message_id = uuid.uuid4().hex
        self.db.table("messages").insert(
            {
                **fields_,
                "id": message_id,
                "conversation_id": conversation_id,
                "parent_id": parent_id,
                "created_at": stamp,
                "updated_at": stamp,
                "seq": int(next_seq),
            }
        )
        # The newest message is what the conversation shows next (its branch becomes current).
        self.db.table("conversations").update(conversation_id, {**conversation_changes, "updated_at": stamp, "current_leaf_id": message_id})
        return message_id

    def _update_conversation(self, conversation_id: str, changes: dict[str, Any]) -> Conversation:
        full_id = self._conversation_row(conversation_id)["id"]
        if changes:
            with write_transaction(self.db):
                self.db.table("conversations").update(full_id, changes)
        return self.get_conversation(full_id)
