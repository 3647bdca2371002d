"""`TurnRecord`: the history side of one window or `cove chat` turn (the `TurnWriter` of
app/turn/writer.py), used only on the thread that owns the database. It commits the person's
message first, creates the assistant row as `streaming`, takes text as it arrives (checkpointed
at most every `CHECKPOINT_INTERVAL_S`), writes a tool loop's calls and results as rows of their
own, and finishes the row with its status and metrics in one transaction, then its sources and
its entry in the written record. The API writes its turns through its request's writer
(app/serve/api/request_turn.py).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.remote.remote_model import RemoteModel
from app.remote.remote_tools import SERVED_BY
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.checkpoint import CHECKPOINT_INTERVAL_S, Checkpointer
from app.store.history import History, Message
from app.store.message_images import KeptImage, request_content
from app.store.request_log import RequestLog, timings, usage
from app.store.save_errors import ReplyNotSaved
from app.store.sources import Source, write_sources
from app.turn.backend import ran_on, reply_identity
from models.library import FileRecheck, InstalledModel, ModelLibrary

if TYPE_CHECKING:
    from app.docs.turn_sources import TurnDocuments


class TurnRecord:
    """The history side of one turn. Not thread-safe: call it from the database's thread."""

    def __init__(self, history: History, conversation_id: str, user: Message, assistant: Message, checkpoint_interval_s: float) -> None:
        self.history = history
        self.conversation_id = conversation_id
        self.user = user
        self.assistant = assistant
        self._parts: list[str] = []
        self._interval = checkpoint_interval_s
        self._checkpoint = Checkpointer(history, assistant.id, interval_s=checkpoint_interval_s)
        self.final: Message | None = None
        self.unsaved: Message | None = None  # the finished reply, when the history could not take it
        self.client = "this window"  # who asked, in the written record ("command line" for cove chat)
        self.sent: list[dict] | None = None  # the messages sent to the engine, for the record
        # A reply that asked for tools, as the record keeps it: the model's raw output and the calls
        # read from it (the row keeps only the text outside the calls). Set by finish_step.
        self._step_record: dict[str, Any] | None = None
        # Where the reply runs when it is not this machine: {"connection", "host", "kind",
        # "model_id", "fingerprint"} of a RemoteModel (the record's ran_on); None here.
        self.ran_on: dict[str, Any] | None = None
        self._last_id: str | None = None  # the newest tool row of this turn, once there is one
        # The turn's documents (app/docs/turn_sources.py), when the conversation has collections: their
        # passages are found on the turn's thread while the prompt is built, and written here with the reply.
        self.docs: TurnDocuments | None = None
        self._sources: list[Source] = []
        self.reasoning = ""  # the reply's reasoning, set by the Turn before `finish` (app/reasoning)

    @classmethod
    def begin(
        cls,
        history: History,
        conversation_id: str,
        text: str,
        *,
        model: InstalledModel | RemoteModel,
        params: SamplingParams,
        edit_of: str | None = None,
        checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
        images: Sequence[KeptImage] = (),
        auto: Mapping[str, Any] | None = None,
    ) -> TurnRecord:
        """Commit the person's message, then the empty `streaming` reply. With `edit_of` the
        message becomes a new version beside that earlier one (the old one is kept). `images`:
        the message's pictures, in order, their files already in the history's images folder.
        `auto`: Auto's choice of the model (AutoChoice.record()), kept in the reply's params.
        Invariant: the user's words are on disk before anything else can fail."""
        if not text.strip() and not images:
            raise ValueError("the message is empty; type something to send")
        if edit_of is None:
            user = history.add_user_message(conversation_id, text, images=images)
        else:
            original = history.get_message(edit_of)
            if original.role != "user" or original.conversation_id != conversation_id:
                raise ValueError("only one of your own messages in this conversation can be edited")
            user = history.add_user_message(conversation_id, text, images=images, parent_id=original.parent_id)
        return cls._with_reply(history, conversation_id, user, model, params, checkpoint_interval_s, auto)

    @classmethod
    def regenerate(
        cls,
        history: History,
        user_message_id: str,
        *,
        model: InstalledModel | RemoteModel,
        params: SamplingParams,
        checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
        auto: Mapping[str, Any] | None = None,
    ) -> TurnRecord:
        """A new reply to an existing user message, beside the old one (nothing is replaced);
        `auto` as for `begin` (app/routing/preferences.py `regeneration_params` when the person
        regenerates an Auto reply with another model)."""
        user = history.get_message(user_message_id)
        if user.role != "user":
            raise ValueError("only a reply to one of your messages can be regenerated")
        return cls._with_reply(history, user.conversation_id, user, model, params, checkpoint_interval_s, auto)

    @classmethod
    def _with_reply(
        cls,
        history: History,
        conversation_id: str,
        user: Message,
        model: InstalledModel | RemoteModel,
        params: SamplingParams,
        interval: float,
        auto: Mapping[str, Any] | None = None,
    ) -> TurnRecord:
        # start_assistant_message also records the model as the conversation's latest (for a
        # remote one MODEL_ID@CONNECTION, so reopening the conversation picks it again).
        sha256, quant = reply_identity(model)  # for a server's model its fingerprint of the weights, if any
        assistant = history.start_assistant_message(
            conversation_id,
            parent_id=user.id,
            model_name=model.name,
            model_sha256=sha256,
            model_quant=quant,
            params={**params.to_dict(), **({"auto": dict(auto)} if auto else {})},
        )
        record = cls(history, conversation_id, user, assistant, interval)
        record.ran_on = ran_on(model)
        return record

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            if self._checkpoint.due():  # join the reply only when it is written: O(1) per token
                self._checkpoint.update(self.text)

    def record_recheck(self, library: ModelLibrary, model_name: str, recheck: FileRecheck) -> InstalledModel:
        """The model file changed since it was checked: update its library entry and make this
        reply's row name the bytes that actually run. Returns the updated model."""
        model = library.record_recheck(model_name, recheck)
        self.history.record_reply_model(self.assistant.id, model.sha256, model.quant)
        self.assistant = replace(self.assistant, model_sha256=model.sha256, model_quant=model.quant)
        return model

    def finish(self, status: str, metrics: dict[str, Any], error: str | None = None, text: str | None = None) -> Message:
        """Write the final text, status and metrics. Raises ReplyNotSaved (saying what the file
        keeps) when the history cannot be written; `unsaved` then holds the reply, and
        `retry_finish()` writes it once that is possible again."""
        final = self.text if text is None else text
        if self.ran_on is not None and "remote" not in metrics:  # a reply that never reached the server
            metrics = {**metrics, "remote": self.ran_on}
        try:
            self.final = self.history.finish_assistant(
                self.assistant.id, final, status=status, metrics=metrics, error=error, reasoning=self.reasoning
            )
        except sqlite3.Error as exc:
            self.unsaved = replace(self.assistant, content=final, status=status, metrics=metrics, error=error, reasoning=self.reasoning)
            raise ReplyNotSaved(exc, saved_chars=self._checkpoint.saved_chars, total_chars=len(final)) from exc
        self.unsaved = None
        self._write_sources(self.final)
        self._enter_in_record(self.final)
        self._step_record = None
        return self.final

    def _write_sources(self, reply: Message) -> None:
        """The passages the reply was given (those the engine found room for), each marked cited or
        not, beside the saved reply."""
        kept = reply.metrics.get("passages_kept") if isinstance(reply.metrics, dict) else None
        self._sources = self.docs.sources(reply.content, kept) if self.docs is not None and self.docs.given else []
        if not self._sources:
            return
        try:
            write_sources(self.history.db, reply.id, self._sources)
        except sqlite3.Error as exc:
            print(f"cove: the reply is saved, but not the list of passages it was given ({exc})", file=sys.stderr)

    def _enter_in_record(self, reply: Message) -> None:
        """The turn as an entry of the written record (app/store/request_log.py), beside the
        API's requests. The reply is saved already: a record that cannot be written says so."""
        try:
            RequestLog(self.history.db).append(
                client=self.client,
                remote="",
                endpoint="chat",
                model_name=reply.model_name or "",
                model_sha256=reply.model_sha256,
                quant=reply.model_quant,
                params=self._record_params(reply),
                messages=_as_recorded(self.sent) or [{"role": "user", "content": request_content(self.user)}],
                reply=self._step_record["raw"] if self._step_record else reply.content,
                status=reply.status,
                conversation_id=self.conversation_id,
                usage=usage(reply.metrics),
                timings=timings(reply.metrics),
                ran_on=self._ran_on(reply),
            )
        except sqlite3.Error as exc:
            print(f"cove: the reply is saved, but not its entry in the written record ({exc})", file=sys.stderr)

    def _record_params(self, reply: Message) -> dict[str, Any]:
        """The reply's params, with the calls read from its raw output and a note on calls that did
        not run (cut off, over the step limit), so the record answers "why did the tool not run"."""
        params = dict(reply.params or {})
        if self._step_record and self._step_record["calls"]:
            params["tool_calls"] = self._step_record["calls"]
        note = reply.metrics.get("tool_note") if isinstance(reply.metrics, dict) else None
        if note:
            params["tool_note"] = note
        if self._sources:  # what the model was shown of the person's documents: where from, and the hash
            params["documents"] = [source.provenance() for source in self._sources]
        if reply.reasoning:  # the reply's reasoning, kept apart from its text (app/reasoning)
            params["reasoning"] = reply.reasoning
        return params

    def _ran_on(self, reply: Message) -> dict[str, Any] | None:
        """Where the reply ran, as the record keeps it: what the turn began with, refined by what
        the server said about itself while answering (its kind, the model's fingerprint)."""
        if self.ran_on is None:
            return None
        seen = reply.metrics.get("remote")
        said: dict[str, Any] = seen if isinstance(seen, dict) else {}
        where = {key: said.get(key) or value for key, value in self.ran_on.items()}
        # Another Cove names the machine and the model file that served it (app/remote/remote_tools.py served_by).
        where.update({key: said[key] for key in SERVED_BY if isinstance(said.get(key), str) and said[key]})
        return where

    # -- a turn with tools (app/turn/tools.py): replies, calls and results as rows of their own ---

    def note_raw(self, raw: str, calls: list[dict[str, Any]] | None = None) -> None:
        """The model's raw output (and the calls read from it: id, name, arguments) for this reply's
        record entry, where the row keeps less (the text outside the calls, or a cut-off call left out)."""
        self._step_record = {"raw": raw, "calls": calls or []}

    def finish_step(self, content: str, metrics: dict[str, Any]) -> Message:
        """A reply that asked for tools ends complete with its text outside the calls (its record
        entry keeps what `note_raw` was given)."""
        return self.finish(MessageStatus.COMPLETE, metrics, text=content)

    def add_tool_call(self, call_id: str, name: str, request: Any) -> Message:
        """The call after the newest row of this turn (the reply that made it, or an earlier call's
        result). `request`: the app.mcp ToolRequest, or None when nothing could run."""
        details: dict[str, Any] = {"call_id": call_id, "name": name}
        if request is not None:
            details.update(
                server=request.server.name, server_identity=request.server.identity, tool=request.tool, arguments=request.arguments
            )
        text = f"{name} {json.dumps(details.get('arguments', {}), ensure_ascii=False, sort_keys=True)}"
        return self._after_last("tool_call", text, details)

    def add_tool_result(self, call_id: str, name: str, outcome: Any, entry: int | None) -> Message:
        """The result the model was given, with who decided and the record's entry number."""
        decision = outcome.decision
        details = {
            "call_id": call_id,
            "name": name,
            "status": outcome.result.status,
            "cut_from": outcome.result.cut_from,
            "record_entry": entry,
            "decision": decision.verdict if decision is not None else None,
            "approved_by": decision.approved_by if decision is not None else None,
        }
        return self._after_last("tool", outcome.result.text, details)

    def record_tool(self, outcome: Any) -> int | None:
        """The call as an entry of the written record; None when nothing could run (no request)."""
        if outcome.request is None or outcome.decision is None:
            return None
        from app.mcp.record import record_tool_call

        return record_tool_call(
            self.history.db, outcome.request, outcome.decision, outcome.result, client=self.client, conversation_id=self.conversation_id
        )

    def next_reply(self) -> Message:
        """The turn's next reply (after the tools' results): a new 'streaming' row, written to from now on."""
        prior = self.final or self.assistant
        parent = self._last_id or prior.id
        self.assistant = self.history.start_assistant_message(
            self.conversation_id,
            parent_id=parent,
            model_name=prior.model_name or "",
            model_sha256=prior.model_sha256,
            model_quant=prior.model_quant,
            params=prior.params,
        )
        self._parts = []
        self._checkpoint = Checkpointer(self.history, self.assistant.id, interval_s=self._interval)
        self.final = None
        self._last_id = None
        return self.assistant

    def _after_last(self, role: str, content: str, details: dict[str, Any]) -> Message:
        parent = self._last_id or self.assistant.id
        message = self.history.add_tool_message(self.conversation_id, parent, role, content, details)
        self._last_id = message.id
        return message

    def retry_finish(self) -> Message:
        """Write the reply that `finish` could not; raises sqlite3.Error if it still cannot."""
        pending = self.unsaved
        assert pending is not None, "nothing is waiting to be saved"
        self.final = self.history.finish_assistant(
            pending.id, pending.content, status=pending.status, metrics=pending.metrics, error=pending.error
        )
        self.unsaved = None
        return self.final


def _as_recorded(messages: list[dict] | None) -> list[dict] | None:
    """The messages as the record keeps them: a message's `passages` (the same text as its content,
    in parts for the engine) left out, and the content as the engine fitted it."""
    if messages is None:
        return None
    return [{k: v for k, v in m.items() if k != "passages"} for m in messages]
