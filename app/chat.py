"""One chat turn, end to end (DESIGN.md section 3): commit the person's message, stream the
reply from the engine host, checkpoint it, and finish it with its status and metrics.

This is the one code path both `cove chat` and the window use. It is Qt-free and calls back
with text as it arrives; the caller decides how to show it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

from app.engine.client import EngineClient, EngineError
from app.settings import SamplingParams
from app.store.history import Checkpointer, History, Message
from models.library import InstalledModel

# Statuses an assistant row can end with (the disk format; see app/store/migrations.py).
FINAL_STATUSES = ("complete", "cancelled", "length", "error")

# Earlier replies that still belong in the prompt. Error rows carry no model text worth resending.
_RESENDABLE = {"complete", "cancelled", "length", "interrupted"}


class TextSink(Protocol):
    def __call__(self, text: str) -> None: ...


@dataclass(frozen=True)
class TurnResult:
    conversation_id: str
    user_message: Message
    assistant_message: Message
    text: str
    status: str
    metrics: dict
    error: str | None
    interrupted_by_user: bool


def build_prompt_messages(history: History, conversation_id: str, system_prompt: str | None) -> list[dict]:
    """The conversation as the engine should see it: system prompt, then each kept message."""
    out: list[dict] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for m in history.messages(conversation_id):
        if m.role == "system":
            continue
        if m.role == "assistant" and (m.status not in _RESENDABLE or not m.content):
            continue
        out.append({"role": m.role, "content": m.content})
    return out


class ChatService:
    """Runs turns against one engine client and one history store."""

    def __init__(
        self,
        history: History,
        engine: EngineClient,
        *,
        checkpoint_interval_s: float = 1.0,
    ) -> None:
        self._history = history
        self._engine = engine
        self._checkpoint_interval_s = checkpoint_interval_s

    def send(
        self,
        conversation_id: str,
        text: str,
        *,
        model: InstalledModel,
        params: SamplingParams,
        system_prompt: str | None = None,
        on_text: TextSink | None = None,
        on_loaded: Callable[[object], None] | None = None,
    ) -> TurnResult:
        history = self._history
        # Invariant: the person's words are on disk before anything else can fail.
        user = history.add_user_message(conversation_id, text)
        history.update_conversation(conversation_id, model=model.name)
        assistant = history.start_assistant_message(
            conversation_id,
            parent_id=user.id,
            model_name=model.name,
            model_sha256=model.sha256,
            model_quant=model.quant,
            params=params.to_dict(),
        )
        checkpoint = Checkpointer(history, assistant.id, interval_s=self._checkpoint_interval_s)
        parts: list[str] = []
        interrupted = False
        status, metrics, error = "error", {}, None
        t_request = time.perf_counter()
        try:
            try:
                loaded = self._engine.load(model.path, n_ctx=params.n_ctx)
            except EngineError as exc:
                raise _TurnFailed(str(exc)) from None
            if on_loaded is not None:
                on_loaded(loaded)
            generation = self._engine.generate(
                build_prompt_messages(history, conversation_id, system_prompt),
                conversation_id=conversation_id,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k,
                min_p=params.min_p,
                repeat_penalty=params.repeat_penalty,
                seed=params.seed,
            )
            finished = None
            events = iter(generation)
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except KeyboardInterrupt:
                    # Ctrl-C: stop generating, keep what arrived, finish the row as cancelled.
                    interrupted = True
                    generation.cancel()
                    continue
                if hasattr(event, "status"):
                    finished = event
                    break
                parts.append(event.text)
                if on_text is not None:
                    on_text(event.text)
                checkpoint.update("".join(parts))
            if finished is None:
                raise _TurnFailed("the engine ended the reply without a result")
            status = finished.status
            metrics = dict(finished.metrics or {})
            error = finished.error
            final_text = finished.text if finished.text is not None else "".join(parts)
        except _TurnFailed as exc:
            status, error, final_text = "error", str(exc), "".join(parts)
        except KeyboardInterrupt:
            interrupted = True
            status, final_text = "cancelled", "".join(parts)
        except BaseException as exc:  # keep the row consistent, then let the caller report it
            history.finish_assistant(assistant.id, "".join(parts), status="error", metrics={}, error=str(exc) or type(exc).__name__)
            raise
        metrics.setdefault("turn_ms", round((time.perf_counter() - t_request) * 1000, 1))
        done = history.finish_assistant(assistant.id, final_text, status=status, metrics=metrics, error=error)
        return TurnResult(
            conversation_id=conversation_id,
            user_message=user,
            assistant_message=done,
            text=final_text,
            status=status,
            metrics=metrics,
            error=error,
            interrupted_by_user=interrupted,
        )


class _TurnFailed(Exception):
    """A failure that ends the turn with status 'error' and a readable sentence."""
