"""What an API request's reply runs through app/turn's `Turn` with: `api_request`, the reply's
request as the client asked it; `RequestBackend`, the pool's engine behind the one Backend
interface; and `RequestWriter`, the TurnWriter that hands the reply to the request's RequestStore
(app/serve/api/request_store.py), whose StoreThread does every write. Nothing here touches SQLite,
so the Turn is polled on the server's event loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio

from app.engine.generation import Generation
from app.engine.loaded import LoadedModel
from app.engine.request import ReplyRequest, ToolOffer
from app.serve.api.format_check import format_problem, format_schema
from app.serve.api.request_store import Opened, RequestStore
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.history import Message
from app.tools.reply import ToolReply, record_of, reply_of
from app.tools.spec import ToolSet
from app.turn.backend import Backend, ChatModel
from models.library import FileRecheck, InstalledModel, ModelLibrary


def unsaved_sentence(why: str) -> str:
    """What a client is told of a reply the history file could not take yet."""
    return (
        f"This reply is not in Cove's history yet ({why}); Cove keeps it and writes it, with the request's "
        "record entry, as soon as the file takes it."
    )


def tool_offer(tools: ToolSet | None) -> ToolOffer | None:
    """A request's tools (app/tools/spec.py) as its reply's request offers them: None when it has
    none or its tool_choice is "none" (the model is not told of them)."""
    if tools is None or not tools.active:
        return None
    return ToolOffer(
        tuple(t.openai() for t in tools.tools), choice=tools.choice.mode, name=tools.choice.name, parallel=tools.choice.parallel
    )


def api_request(
    messages: Sequence[Mapping[str, Any]],
    params: SamplingParams,
    *,
    stop: Sequence[str] = (),
    grammar: str | None = None,
    raw_prompt: str | None = None,
    tools: ToolSet | None = None,
    reasoning: str = "",
) -> ReplyRequest:
    """The reply's request for an API request: what the client asked (its sampling, stop strings,
    grammar, a raw prompt for a text completion, its tools, whose calls the client runs, and its
    reasoning switch, app/reasoning/switch.py ASKS), with every turn kept: an API client sends the
    conversation it wants answered, and nothing is dropped to fit. Its images are the files the
    reader kept for them (app/serve/api/image_parts.py)."""
    request = ReplyRequest.chat(
        messages,
        sampling=params.sampling(),
        stop=stop,
        grammar=grammar,
        raw_prompt=raw_prompt,
        tools=tool_offer(tools),
        keep_all_turns=True,
        reasoning=reasoning,
    )
    images = request.images()
    if not images:
        return request
    from app.images.store import passing_images

    return request.but(image_files=passing_images().files(image.sha256 for image in images))


class RequestBackend:
    """`backend` (the LocalBackend of the engine the pool lent), keeping the Generation it
    started, for the event loop to wait on without a thread (Generation.wake_when_ready)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.generation: Generation | None = None  # set by start (on the start thread), read after it returned

    @property
    def model(self) -> ChatModel:
        return self._backend.model

    @property
    def installed(self) -> InstalledModel | None:
        return self._backend.installed

    @property
    def ran_on(self) -> dict[str, Any] | None:
        return self._backend.ran_on

    def start(
        self,
        request: ReplyRequest,
        *,
        on_loaded: Callable[[LoadedModel], None] | None = None,
        on_recheck: Callable[[FileRecheck], None] | None = None,
    ) -> Generation:
        self.generation = self._backend.start(request, on_loaded=on_loaded, on_recheck=on_recheck)
        return self.generation


class RequestWriter:
    """The history side of an API request's Turn. The reply's row and the record's entry are
    opened as the request is accepted (RequestStore.open, while the engine reads the prompt;
    `opened_as` gives them to the writer before the reply's first event); text is checkpointed into the row as
    it arrives (written in order on the store's thread, not awaited); `finish` keeps the end, and
    `close` writes it, awaited by the event loop once the engine went back to the pool. With
    `tools` (the request's), `finish` reads the reply's calls once, for the record and the
    endpoint. With `reply_format` (a JSON format the grammar kept the reply to), `finish` checks
    the reply against it: how it breaks it goes to the record, the reply to the client as it is.
    Called only on the server's event loop."""

    sent: list[dict] | None = None
    ran_on: dict[str, Any] | None = None  # an API request runs on this machine
    unsaved: Message | None = None  # never set: a write that fails waits in the RequestStore instead
    reasoning: str = ""  # the reply's reasoning, set by the Turn before `finish` (app/reasoning)

    def __init__(
        self,
        store: RequestStore,
        opened: Opened | None,
        *,
        tools: ToolSet | None = None,
        call_id_prefix: str = "call_",
        reply_format: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.entered = False  # whether the store has entered the request (`opened_as`): before, there is no row to write
        if opened is not None:
            self.opened_as(opened)
        self.ended: Message | None = None  # the end `finish` kept, for `close`
        self.tool_reply: ToolReply | None = None  # the reply's calls, read by `finish` (with tools)
        self.not_saved: str | None = None  # set by `close`: what a client is told when the file did not take it
        self.format_problem: str | None = None  # how the reply breaks `reply_format`, set by `finish`
        self._schema = format_schema(reply_format)
        self._tools, self._prefix = tools, call_id_prefix
        self._parts: list[str] = []

    def opened_as(self, opened: Opened) -> None:
        """The request as the store entered it: its record entry and reply row."""
        self.opened: Opened = opened
        self.entered = True
        self.model = opened.model  # the file that runs: the new bytes when a recheck found it changed
        self.assistant = _reply_row(opened)

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self.store.checkpoint(self.opened, self._parts)  # cheap unless a checkpoint is due

    def finish(self, status: str, metrics: dict[str, Any], error: str | None = None, text: str | None = None) -> Message:
        final = self.text if text is None else text
        tools = self._tools
        if tools is not None and tools.active and status != MessageStatus.ERROR:
            self.tool_reply = reply_of(tools, metrics, final, self._prefix)
        if self._schema is not None and status in (MessageStatus.COMPLETE, MessageStatus.LENGTH):
            self.format_problem = format_problem(self._schema, final)
        self.ended = replace(self.assistant, content=final, status=status, error=error, metrics=metrics, reasoning=self.reasoning)
        return self.ended

    def record_recheck(self, library: ModelLibrary, model_name: str, recheck: FileRecheck) -> InstalledModel:
        """The model file changed: its entry names the new bytes, and so will the request's closing
        entry and reply row. Run on the store's thread, whose library it is (a request's Turn is
        given no library: the service calls this there)."""
        self.model = library.record_recheck(model_name, recheck)
        return self.model

    async def close(self) -> None:
        """Write the end `finish` kept: the closing entry and the finished row, in one transaction
        on the store's thread, whatever cancels the caller meanwhile."""
        end = self.ended
        assert end is not None, "close follows the turn's end"
        extra = record_of(self.tool_reply) if self.tool_reply else {}
        if self.format_problem:
            extra = {**extra, "response_format_problem": self.format_problem}
        if end.reasoning:  # the record keeps the reply's reasoning beside its text
            extra = {**extra, "reasoning": end.reasoning}
        with anyio.CancelScope(shield=True):
            await self.store.close(
                self.opened,
                reply=end.content,
                status=end.status,
                metrics=end.metrics,
                error=end.error,
                model=self.model,
                extra=extra or None,
                reasoning=end.reasoning,
            )
        why = self.opened.not_saved
        self.not_saved = unsaved_sentence(why) if why else None


def _reply_row(opened: Opened) -> Message:
    """The reply's row as opened ('streaming'); its ids are empty while the file has not taken it."""
    exchange = opened.exchange
    model = opened.model
    return Message(
        id=exchange.message_id if exchange else "",
        conversation_id=exchange.conversation_id if exchange else "",
        parent_id=None,
        role="assistant",
        content="",
        status=MessageStatus.STREAMING,
        error=None,
        created_at="",
        updated_at="",
        model_name=model.name,
        model_sha256=model.sha256,
        model_quant=model.quant,
        params=opened.params,
        metrics={},
        seq=0,
    )
