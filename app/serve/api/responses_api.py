"""OpenAI's Responses endpoint, POST /v1/responses, served statelessly: a request (read by
app/serve/api/responses_request.py) runs through Service.reply like a chat completion, and comes
back as a Response object (reasoning, message and function_call output items, usage) or as the
Responses event stream (response.created ... response.completed, each event numbered), in the
shapes the official `openai` client reads. A reply's reasoning (app/reasoning) is a reasoning item
before its message, its text in `content` as reasoning_text (streamed as
response.reasoning_text.delta). Errors take OpenAI's shape."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.serve.api.auto_model import cove_field
from app.serve.api.job import Job, chat_job
from app.serve.api.openai_api import ClosingStream
from app.serve.api.responses_request import ResponsesRequest, read_responses_request
from app.serve.api.running import ReplyEvent, Running
from app.serve.api.service import Service, failure_error
from app.serve.http.errors import ApiError
from app.serve.http.http import CHAT_BODY_BYTES, json_body, sse
from app.statuses import MessageStatus
from app.store.request_log import timings
from app.tools.parsers import Call
from app.tools.reply import ContentGate, ToolReply, argument_pieces, family_named, reply_of
from app.turn.events import EndEvent, ReasoningEvent, TextEvent

# A reply's end as a Response's status; a reply cut by the context or max_output_tokens is incomplete.
STATUS: dict[str, str] = {MessageStatus.COMPLETE: "completed", MessageStatus.LENGTH: "incomplete", MessageStatus.CANCELLED: "cancelled"}


def usage_of(metrics: dict[str, Any]) -> dict[str, Any]:
    """The Responses API's token counts: input_tokens counts the whole prompt, of which the
    engine's cache held cached_tokens."""
    prompt, output = int(metrics.get("prompt_tokens") or 0), int(metrics.get("gen_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(metrics.get("cached_tokens") or 0), "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": int(metrics.get("reasoning_tokens") or 0)},
        "total_tokens": prompt + output,
    }


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [text_part(text)] if status != "in_progress" else [],
    }


def reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "status": status,
        "content": [{"type": "reasoning_text", "text": text}] if status != "in_progress" else [],
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(item_id: str, call: Call, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if status == "completed" else "",
        "status": status,
    }


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class Reply:
    """One Response being answered: its id, its settings repeated back, its output so far."""

    job: Job
    req: ResponsesRequest
    id: str = field(default_factory=lambda: new_id("resp"))
    created: int = field(default_factory=lambda: int(time.time()))
    output: list[dict[str, Any]] = field(default_factory=list)

    def object(self, status: str, end: EndEvent | None = None, **extra: Any) -> dict[str, Any]:
        """The Response object; with the reply's `end`, its usage, timings and why it is incomplete."""
        cut = end is not None and end.status == MessageStatus.LENGTH
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "model": self.job.model.name,
            **cove_field(self.job),
            "output": list(self.output),
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "temperature": self.job.params.temperature,
            "top_p": self.job.params.top_p,
            "store": False,
            "previous_response_id": None,
            "truncation": "disabled",
            "reasoning": {"effort": self.job.reasoning, "summary": None} if self.job.reasoning else None,
            **(self.req.echo or {}),
            "usage": usage_of(end.message.metrics) if end is not None else None,
            **({"timings": timings(end.message.metrics)} if end is not None else {}),
            **extra,
        }

    def calls(self, running: Running, end: EndEvent) -> ToolReply | None:
        """The reply read for tool calls (as the service read it for the record, so the call ids
        match), when the request has tools the model may call. Its calls go out as the model wrote
        them, a call that breaks its schema too (the record keeps its problem)."""
        tools = self.job.tools
        if tools is None or not tools.active:
            return None
        return running.tool_reply or reply_of(tools, end.message.metrics, end.message.content)


class ResponsesApi:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def _job(self, req: ResponsesRequest, request: Request) -> Job:
        model, auto = await self.service.model_for(req.model, req)
        return chat_job(request.url.path, model, req, format_field="text_format", reasoning_param="reasoning", auto=auto)

    async def responses(self, request: Request) -> Response:
        try:
            request.scope["cove.client"] = await self.service.client(request)
            req = await self.service.read(read_responses_request, await json_body(request, CHAT_BODY_BYTES))
            job = await self._job(req, request)
        except ApiError as exc:
            return exc.response()
        reply = Reply(job, req)
        if job.stream:
            try:
                running, close, first = await self.service.open_stream(request, job)
            except ApiError as exc:
                return exc.response()
            return ClosingStream(
                _stream(reply, running, first), close, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
            )
        try:
            async with self.service.reply(request, job) as running:
                end = await running.whole()
        except ApiError as exc:
            return exc.response()
        if end.status == MessageStatus.ERROR:
            return failure_error(end, "reasoning").response()
        status = STATUS.get(end.status, "completed")
        item = "incomplete" if status != "completed" else "completed"
        tool_reply = reply.calls(running, end)
        content = end.message.content if tool_reply is None or not tool_reply.calls else tool_reply.content
        if running.reasoning_text:
            reply.output.append(reasoning_item(new_id("rs"), running.reasoning_text, item))
        if content or tool_reply is None or not tool_reply.calls:
            reply.output.append(message_item(new_id("msg"), content, item))
        for call in tool_reply.calls if tool_reply is not None else ():
            reply.output.append(call_item(new_id("fc"), call, "completed"))
        warning = {"warning": running.not_saved} if running.not_saved else {}
        return JSONResponse(reply.object(status, end, **warning))


class _Events:
    """The stream's events, numbered in order (sequence_number), each named by its type."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def __call__(self, kind: str, **data: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(self._numbers), **data}, kind)


class _Message:
    """The stream's message item: opened when its first text is to go out, closed once."""

    def __init__(self, reply: Reply, event: _Events) -> None:
        self.reply, self.event = reply, event
        self.id = new_id("msg")
        self.index: int | None = None
        self.text = ""

    def send(self, text: str) -> list[bytes]:
        out = [] if self.index is not None else self.open()
        if text:
            self.text += text
            out.append(
                self.event("response.output_text.delta", item_id=self.id, output_index=self.index, content_index=0, delta=text, logprobs=[])
            )
        return out

    def open(self) -> list[bytes]:
        self.index = len(self.reply.output)
        self.reply.output.append(message_item(self.id, "", "in_progress"))
        return [
            self.event("response.output_item.added", output_index=self.index, item=message_item(self.id, "", "in_progress")),
            self.event("response.content_part.added", item_id=self.id, output_index=self.index, content_index=0, part=text_part("")),
        ]

    def close(self, status: str) -> list[bytes]:
        if self.index is None:
            return []
        done = message_item(self.id, self.text, status)
        self.reply.output[self.index] = done
        return [
            self.event("response.output_text.done", item_id=self.id, output_index=self.index, content_index=0, text=self.text, logprobs=[]),
            self.event("response.content_part.done", item_id=self.id, output_index=self.index, content_index=0, part=text_part(self.text)),
            self.event("response.output_item.done", output_index=self.index, item=done),
        ]


class _Reasoning:
    """The stream's reasoning item: opened at the reply's first reasoning, closed before its text."""

    def __init__(self, reply: Reply, event: _Events) -> None:
        self.reply, self.event = reply, event
        self.id = new_id("rs")
        self.index: int | None = None
        self.text = ""
        self.done = False

    def send(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self.index is None:
            self.index = len(self.reply.output)
            self.reply.output.append(reasoning_item(self.id, "", "in_progress"))
            out.append(self.event("response.output_item.added", output_index=self.index, item=reasoning_item(self.id, "", "in_progress")))
        self.text += text
        out.append(self.event("response.reasoning_text.delta", item_id=self.id, output_index=self.index, content_index=0, delta=text))
        return out

    def close(self, status: str, whole: str | None = None) -> list[bytes]:
        if self.done or (self.index is None and not whole):
            return []
        out = self.send(whole[len(self.text) :]) if whole and whole.startswith(self.text) and whole != self.text else []
        self.done = True
        assert self.index is not None
        item = reasoning_item(self.id, self.text, status)
        self.reply.output[self.index] = item
        return [
            *out,
            self.event("response.reasoning_text.done", item_id=self.id, output_index=self.index, content_index=0, text=self.text),
            self.event("response.output_item.done", output_index=self.index, item=item),
        ]


def _call_events(reply: Reply, event: _Events, call: Call) -> list[bytes]:
    item_id, index = new_id("fc"), len(reply.output)
    reply.output.append(call_item(item_id, call, "completed"))
    out = [event("response.output_item.added", output_index=index, item=call_item(item_id, call, "in_progress"))]
    out += [
        event("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
        for piece in argument_pieces(call.arguments)
    ]
    out.append(
        event("response.function_call_arguments.done", item_id=item_id, output_index=index, name=call.name, arguments=call.arguments)
    )
    out.append(event("response.output_item.done", output_index=index, item=call_item(item_id, call, "completed")))
    return out


async def _stream(reply: Reply, running: Running, first: ReplyEvent | None) -> AsyncIterator[bytes]:
    """The Responses event stream. With tools, text goes out only up to where a call may begin
    (ContentGate); the calls go out whole once the reply is read, as chat's stream sends them."""
    event = _Events()
    yield event("response.created", response=reply.object("in_progress"))
    yield event("response.in_progress", response=reply.object("in_progress"))
    message = _Message(reply, event)
    thinking = _Reasoning(reply, event)
    tools = reply.job.tools if reply.job.tools is not None and reply.job.tools.active else None
    gate: ContentGate | None = None
    step = first
    while step is not None:
        if isinstance(step, ReasoningEvent):
            for chunk in thinking.send(step.text) if not thinking.done else ():
                yield chunk
            step = await running.next()
            continue
        if isinstance(step, TextEvent):
            if step.text:  # the reasoning is over once the text begins
                for chunk in thinking.close("completed"):
                    yield chunk
            if tools is None:
                text = step.text
            else:
                if gate is None:
                    started = running.generation.started
                    gate = ContentGate(family_named(started.tool_format if started else ""), tools.names())
                text = gate.more("".join(running.text))
            for chunk in message.send(text) if text else ():
                yield chunk
            step = await running.next()
            continue
        written = step.message
        if step.status == MessageStatus.ERROR:  # after some text: the stream has begun
            yield _failed(reply, event, written.error or "the engine stopped without a reply")
            return
        status = STATUS.get(step.status, "completed")
        for chunk in thinking.close("completed" if status == "completed" else "incomplete", running.reasoning_text):
            yield chunk
        tool_reply = reply.calls(running, step)
        calls: tuple[Call, ...] = ()
        if tool_reply is not None:
            calls = tool_reply.calls  # as written, even one that breaks its schema (the record keeps the problem)
            gate = gate or ContentGate(
                family_named(str(written.metrics.get("tool_format") or "")), tools.names() if tools is not None else ()
            )
            rest = gate.rest(tool_reply) if calls else written.content[len(gate.sent) :]
        else:
            rest = written.content[len(message.text) :]
        if rest or not calls:
            for chunk in message.send(rest):
                yield chunk
        for chunk in message.close("completed" if status == "completed" else "incomplete"):
            yield chunk
        for call in calls:
            for chunk in _call_events(reply, event, call):
                yield chunk
        # What the history could not take yet is said in the last event, as the whole reply's warning is.
        warning = {"warning": running.not_saved} if running.not_saved else {}
        end = "response.completed" if status == "completed" else "response.incomplete"
        yield event(end, response=reply.object(status, step, **warning))
        return


def _failed(reply: Reply, event: _Events, message: str) -> bytes:
    return event("response.failed", response={**reply.object("failed"), "error": {"code": "server_error", "message": message}})
