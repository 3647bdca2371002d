"""The body of a streamed chat completion sent to one of the person's servers: the messages as
OpenAI's shape has them, the tools offered (app/remote/remote_tools.py), `max_tokens`, `stop` and
the sampler's settings each server reads (vLLM names the repeat penalty its own way). Another Cove
is also sent the presence and frequency penalties and the logit bias, which it reads as a local
engine does; other servers are not."""

from __future__ import annotations

from typing import Any

from app.engine.request import ReplyRequest, Sampling
from app.remote.remote_model import RemoteModel
from app.remote.remote_tools import tools_body

# A message's `passages` is for this machine's engine (app/engine/passage_fit.py; its content has
# them all); `as_written` is a reply's raw text, for this machine's chat templates.
_NOT_SENT = frozenset({"passages", "as_written"})


def chat_body(request: ReplyRequest, model: RemoteModel) -> dict[str, Any]:
    s = request.sampling
    sent = [{k: v for k, v in m.items() if k not in _NOT_SENT} for m in request.message_dicts()]
    body: dict[str, Any] = {"model": model.model_id, "messages": sent, "stream": True, "stream_options": {"include_usage": True}}
    if request.tools is not None and request.tools.tools:
        body.update(tools_body(request.tools))
    if s.max_tokens is not None:
        body["max_tokens"] = s.max_tokens
    if request.stop:
        body["stop"] = list(request.stop)
    penalty = "repetition_penalty" if model.kind == "vllm" else "repeat_penalty"
    for name, value in (
        ("temperature", s.temperature),
        ("top_p", s.top_p),
        ("top_k", s.top_k),
        ("min_p", s.min_p),
        (penalty, s.repeat_penalty),
        ("seed", s.seed),
    ):
        if value is not None:
            body[name] = value
    if model.kind == "cove":
        body.update(_cove_sampling(s))
    return body


def _cove_sampling(s: Sampling) -> dict[str, Any]:
    """The settings only another Cove is sent, when they are not the defaults."""
    extra: dict[str, Any] = {}
    if s.presence_penalty:
        extra["presence_penalty"] = s.presence_penalty
    if s.frequency_penalty:
        extra["frequency_penalty"] = s.frequency_penalty
    if s.logit_bias:
        extra["logit_bias"] = {str(token): bias for token, bias in s.logit_bias}
    return extra
