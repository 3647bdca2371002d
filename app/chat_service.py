"""The blocking turn of the command line: `ChatService.send` records the person's message,
starts the reply (app.chat's `start_generation`), streams it to a sink and finishes the record,
ending cancelled or interrupted on Ctrl-C or a terminating signal."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from app.chat import TurnRecord, build_prompt_messages, start_generation
from app.engine.client import EngineClient, EngineError, Generation, LoadedModel, TokenEvent
from app.load_options import LoadOptions
from app.remote.connections import ConnectionProblem
from app.remote.errors import RemoteProblem
from app.remote.privacy import ConsentNeeded
from app.remote.remote_model import RemoteModel
from app.settings import SamplingParams
from app.store.checkpoint import CHECKPOINT_INTERVAL_S
from app.store.history import History, Message
from app.store.save_errors import ReplyNotSaved
from app.store.statuses import MessageStatus
from app.termination import Terminated
from models.library import FileRecheck, InstalledModel, ModelLibrary
from models.network import NetworkRefused

if TYPE_CHECKING:
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
    ) -> TurnResult:
        if self._library is not None and not isinstance(model, RemoteModel):  # rechecked by an earlier turn?
            model = self._library.get(model.name)
        record = TurnRecord.begin(self._history, conversation_id, text, model=model, params=params, checkpoint_interval_s=self._interval)
        record.client = self.client
        t0 = time.perf_counter()
        interrupted = False
        terminated: int | None = None
        generation: Generation | None = None
        try:
            messages = build_prompt_messages(self._history, conversation_id, system_prompt, upto=record.user.id)
            record.sent = messages

            def recheck_seen(recheck: FileRecheck) -> None:
                if self._library is not None:
                    record.record_recheck(self._library, model.name, recheck)
                if recheck.content_changed and self._on_notice is not None:
                    self._on_notice(recheck.sentence())

            remote = self._remote_engine(model) if isinstance(model, RemoteModel) and self._remote_engine else None
            generation = start_generation(self._engine, messages, model=model, params=params, conversation_id=conversation_id,
                                          options=options, on_loaded=on_loaded, on_recheck=recheck_seen, remote=remote)
            events = iter(generation)
            while True:
                try:
                    event = next(events)
                    if isinstance(event, TokenEvent):
                        record.append(event.text)
                        if on_text is not None:
                            on_text(event.text)
                        continue
                except StopIteration:
                    break
                except KeyboardInterrupt as exc:
                    # Ctrl-C, SIGTERM or SIGHUP, while waiting for a token or printing one:
                    # stop generating, keep reading to the end so the partial reply is kept
                    # with its metrics.
                    interrupted = True
                    if isinstance(exc, Terminated):
                        terminated = exc.signum
                    generation.cancel()
                    continue
                metrics = dict(event.metrics)
                metrics.setdefault("turn_ms", round((time.perf_counter() - t0) * 1000, 1))
                # Stopped by a signal the person did not send from the keyboard: the reply
                # was cut off, as when the window quits mid-reply.
                status = MessageStatus.INTERRUPTED if terminated is not None and event.status == MessageStatus.CANCELLED else event.status
                record.finish(status, metrics, event.error, text=event.text)
                break
        except (EngineError, RemoteProblem, ConsentNeeded, NetworkRefused, ConnectionProblem) as exc:
            # Nothing was generated: the person's message stays, the reply says why.
            record.finish(MessageStatus.ERROR, {}, str(exc))
        except KeyboardInterrupt as exc:
            # Interrupted while loading: nothing was generated; the turn ends cancelled
            # (interrupted when a signal ended it).
            interrupted = True
            if isinstance(exc, Terminated):
                terminated = exc.signum
            if generation is not None:
                generation.cancel()
            record.finish(MessageStatus.INTERRUPTED if terminated is not None else MessageStatus.CANCELLED, {}, None)
        except ReplyNotSaved:
            raise
        except BaseException as exc:
            if record.final is None:
                record.finish(MessageStatus.ERROR, {}, str(exc) or type(exc).__name__)
            raise
        if record.final is None:
            record.finish(MessageStatus.ERROR, {}, "the engine ended the reply without a result")
        final = record.final
        assert final is not None
        return TurnResult(conversation_id=conversation_id, user_message=record.user, assistant_message=final, text=final.content,
                          status=final.status, metrics=final.metrics, error=final.error, interrupted_by_user=interrupted,
                          terminated_by=terminated)
