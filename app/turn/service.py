"""The blocking turn of the command line: `ChatService.send` records the person's message, runs
the reply as an `app.turn.Turn` on this thread (which writes it), streams its text to a sink,
and ends it cancelled or interrupted on Ctrl-C or a terminating signal."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from app.engine.client import EngineClient, LoadedModel
from app.engine.request import ReplyRequest
from app.load_options import LoadOptions
from app.remote.remote_model import RemoteModel
from app.settings import SamplingParams
from app.store.checkpoint import CHECKPOINT_INTERVAL_S
from app.store.history import History, Message
from app.store.message_images import KeptImage
from app.termination import Terminated
from app.turn.backend import Backend, backend_for, on_server
from app.turn.events import ConsentEvent, LoadedEvent, ReasoningEvent, RecheckedEvent, TextEvent, ToolCallEvent, ToolResultEvent
from app.turn.prompt import build_prompt_messages
from app.turn.record import TurnRecord
from app.turn.status import StopCause
from app.turn.tools import ToolLoop
from app.turn.turn import Turn
from models.library import InstalledModel, ModelLibrary

if TYPE_CHECKING:
    from app.docs.turn_sources import TurnDocuments
    from app.remote.engine import RemoteEngine


class TextSink(Protocol):
    def __call__(self, text: str) -> None: ...


@dataclass(frozen=True)
class TurnResult:
    conversation_id: str
    user_message: Message
    assistant_message: Message
    text: str
    status: str
    metrics: dict[str, Any]
    error: str | None
    interrupted_by_user: bool
    terminated_by: int | None = None  # the signal (SIGTERM, SIGHUP) that stopped the reply


class ChatService:
    """Blocking turns for the command line: record, generate, stream, finish."""

    def __init__(
        self,
        history: History,
        engine: EngineClient | None,
        *,
        library: ModelLibrary | None = None,
        checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
        on_notice: Callable[[str], None] | None = None,
        remote_engine: Callable[[RemoteModel], RemoteEngine] | None = None,
    ) -> None:
        self._history = history
        self._engine = engine  # None when every turn goes to a server (`remote_engine`)
        self._remote_engine = remote_engine  # the RemoteEngine for a RemoteModel (its connection, key, gate)
        self._library = library  # where a model file found changed is recorded
        self._interval = checkpoint_interval_s
        self._on_notice = on_notice  # sentences for the person (a model file that changed)
        self.client = "command line"  # who asks, in the written record
        self._signal: int | None = None  # the signal (SIGTERM, SIGHUP) that stopped the turn in progress

    def send(
        self,
        conversation_id: str,
        text: str,
        *,
        model: InstalledModel | RemoteModel,
        params: SamplingParams,
        system_prompt: str | None = None,
        on_text: TextSink | None = None,
        on_loaded: Callable[[LoadedModel], None] | None = None,
        options: LoadOptions | None = None,
        tools: ToolLoop | Callable[[], ToolLoop | None] | None = None,
        on_tool: Callable[[ToolCallEvent | ToolResultEvent], None] | None = None,
        docs: TurnDocuments | None = None,
        on_reasoning: TextSink | None = None,
        images: Sequence[KeptImage] = (),
        auto: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """`auto`: Auto's choice of `model` (AutoChoice.record()), kept with the reply. `tools`: the
        tools the model may call this turn, each call asked first (app/turn/tools.py);
        `on_tool` is told of each call and its result. `docs`: the conversation's documents, whose
        passages for this message go into the prompt (app/docs/turn_sources.py). `on_reasoning`: the
        reply's reasoning as it arrives (app/reasoning), apart from its text. `images`: the message's
        pictures (their files already in the history's images folder)."""
        if self._library is not None and not on_server(model):  # rechecked by an earlier turn?
            model = self._library.get(model.name)
        record = TurnRecord.begin(
            self._history,
            conversation_id,
            text,
            model=model,
            params=params,
            checkpoint_interval_s=self._interval,
            images=images,
            auto=auto,
        )
        record.client = self.client
        record.docs = docs
        self._signal = None

        def prompt() -> list[dict]:
            messages = build_prompt_messages(self._history, conversation_id, system_prompt, upto=record.user.id)
            return docs.apply(messages) if docs is not None else messages

        asked = ReplyRequest(sampling=params.sampling(), conversation_id=conversation_id)  # its messages: `prompt`, on the turn's thread
        turn = Turn(record, asked, messages=prompt, library=self._library, tools=tools, images=self._history.images)

        def backend() -> Backend:  # after the prompt is built; a connection that is gone ends the turn with a sentence
            return backend_for(model, engine=self._engine, remote_engine=self._remote_engine, options=options, n_ctx=params.n_ctx)

        try:
            turn.start(backend)
            self._drive(turn, on_text, on_loaded, on_tool, on_reasoning)
        except KeyboardInterrupt as exc:
            # Interrupted while loading: nothing was generated; the turn ends cancelled
            # (interrupted when a signal ended it).
            if isinstance(exc, Terminated):
                self._signal = exc.signum
            turn.cancel(StopCause.SIGNAL if isinstance(exc, Terminated) else StopCause.PERSON)
            if turn.ended is None:
                turn.cancel_before_start()
        except BaseException as exc:
            if turn.ended is None:
                turn.fail(str(exc) or type(exc).__name__)
            raise
        if turn.ended is None:
            turn.fail("the engine ended the reply without a result")
        end = turn.ended
        assert end is not None
        if end.not_saved is not None:
            raise end.not_saved
        final = end.message
        cause = turn.stop_cause
        terminated = self._signal if cause is StopCause.SIGNAL else None
        return TurnResult(
            conversation_id=conversation_id,
            user_message=record.user,
            assistant_message=final,
            text=final.content,
            status=final.status,
            metrics=final.metrics,
            error=final.error,
            interrupted_by_user=cause is not None,
            terminated_by=terminated,
        )

    def _drive(
        self,
        turn: Turn,
        on_text: TextSink | None,
        on_loaded: Callable[[LoadedModel], None] | None,
        on_tool: Callable[[ToolCallEvent | ToolResultEvent], None] | None = None,
        on_reasoning: TextSink | None = None,
    ) -> None:
        """Read the turn's events to its end, passing text on; Ctrl-C, SIGTERM or SIGHUP while
        waiting for a token or printing one stops the reply, and reading goes on to the end so
        the partial reply is kept with its metrics."""
        while True:
            try:
                event = turn.next_event()
                if event is None:
                    return
                if isinstance(event, TextEvent):
                    if on_text is not None:
                        on_text(event.text)
                elif isinstance(event, ReasoningEvent):
                    if on_reasoning is not None:
                        on_reasoning(event.text)
                elif isinstance(event, (ToolCallEvent, ToolResultEvent)):
                    if on_tool is not None:
                        on_tool(event)
                elif isinstance(event, LoadedEvent):
                    if on_loaded is not None:
                        on_loaded(event.loaded)
                elif isinstance(event, RecheckedEvent):
                    if event.recheck.content_changed and self._on_notice is not None:
                        self._on_notice(event.recheck.sentence())
                elif isinstance(event, ConsentEvent):  # asked before the turn (cove chat): refused now
                    turn.fail(event.sentence)
            except KeyboardInterrupt as exc:
                if isinstance(exc, Terminated):
                    self._signal = exc.signum
                turn.cancel(StopCause.SIGNAL if isinstance(exc, Terminated) else StopCause.PERSON)
                if not turn.started and turn.ended is None:
                    turn.cancel_before_start()
