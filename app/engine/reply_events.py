"""What the parent does with the host's messages about one reply: each goes to its Generation as
text, its start, its end (with the figures the parent adds: time to first token, the engine's
memory) or its failure."""

from __future__ import annotations

from app.engine.generation import Failure, Generation, StartedInfo
from app.engine.process import process_memory
from app.engine.protocol import Failed, Finished, Message, Started, Token
from app.statuses import MessageStatus

# The host's stop reason -> the reply's status.
STATUS = {"stop": MessageStatus.COMPLETE, "length": MessageStatus.LENGTH, "cancelled": MessageStatus.CANCELLED}


def deliver(gen: Generation, msg: Message, pid: int) -> None:
    """Pass one of the host's messages about `gen` on to it (`pid`: the host's process)."""
    if isinstance(msg, Token):
        gen.add_token(msg.text)
    elif isinstance(msg, Started):
        gen.set_started(
            StartedInfo(
                msg.prompt_tokens, msg.cached_tokens, msg.dropped_turns, msg.prefill_ms, msg.template_source, msg.tool_format, msg.reasoning
            )
        )
    elif isinstance(msg, Finished):
        metrics = dict(msg.metrics)
        metrics["ttft_ms"] = round(gen.ttft_ms, 3) if gen.ttft_ms is not None else None
        metrics.update(process_memory(pid))
        gen.end(msg.text, STATUS.get(msg.stop_reason, MessageStatus.COMPLETE), metrics, None)
    elif isinstance(msg, Failed):
        failure = Failure(msg.kind, msg.prompt_tokens, msg.n_ctx, msg.reserve, msg.at_least)
        gen.end(None, MessageStatus.ERROR, {"error_kind": msg.kind}, msg.message, failure)


def host_gone(gen: Generation, cause: str, *, expected: bool) -> None:
    """The host process ended under `gen`: cancelled when that was asked for, else an error."""
    if expected:
        gen.end(None, MessageStatus.CANCELLED, {"stop_reason": "cancelled", "engine_restarted": True}, None)
    else:
        gen.end(
            None,
            MessageStatus.ERROR,
            {"error_kind": "crash"},
            f"the engine stopped unexpectedly ({cause}) while generating",
            Failure("crash"),
        )
