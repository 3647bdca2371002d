"""One reply's request, typed: what a front end (the window's turn, the terminal, an API endpoint, a
benchmark) asks the model for, built once and passed unchanged through the Turn, the backends and
`EngineClient.generate(request)`; `generate_message` is the one function that turns it into the
engine pipe's message (protocol.Generate).

A message's content is a tuple of typed parts: text, and images by identity (ImagePart: the
file's SHA-256, its type and its size in pixels; the pixels are never in a part, nor in any dict
made of one). Messages still arrive as the dicts the history and the APIs read
(`ChatMessage.from_dict`), and code that reads them as dicts asks `ReplyRequest.message_dicts()`.

To add a field to every reply's request (say, a per-request seed of its own): add it here, set it
where each front end builds its request, and write it in `generate_message`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.engine import protocol


@dataclass(frozen=True)
class TextPart:
    """A run of text in a message."""

    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image in a message, by identity: the SHA-256 of its file (hex), its MIME type as its
    content says (app/images/checks.py), and its width and height in pixels. Its pixels are not
    here: a part, and every dict made of one, is small enough to keep and to log."""

    sha256: str
    mime: str
    width: int
    height: int

    def to_dict(self) -> dict[str, Any]:
        """The part as a message's content lists it: {"type": "image", "sha256", "mime", "width", "height"}."""
        return {"type": "image", "sha256": self.sha256, "mime": self.mime, "width": self.width, "height": self.height}

    @classmethod
    def from_dict(cls, p: Mapping[str, Any]) -> ImagePart:
        """The part `to_dict` wrote."""
        return cls(str(p.get("sha256") or ""), str(p.get("mime") or ""), int(p.get("width") or 0), int(p.get("height") or 0))


Part = TextPart | ImagePart


def sees_images(model: object) -> bool:
    """Whether `model` (an installed model, or one on a server) can be sent images: a text model
    with a vision projector (mmproj) paired with it in the library."""
    return bool(getattr(model, "mmproj_path", None))


def cannot_see_images(name: str) -> str:
    """The sentence that refuses images for the model `name`, which cannot see them."""
    return f"{name} cannot see images: it has no vision projector (mmproj); send text only, or use a vision model"


@dataclass(frozen=True)
class ChatMessage:
    """One message of the conversation as the model is sent it. `tool_calls`: a reply's calls
    (OpenAI's shape); `tool_call_id`, `name`: a tool result's; `reasoning`, `as_written`: a reply's
    reasoning and the text it was written as (app/reasoning); `passages`: the person's document
    passages the host may fit with fewer of (app/engine/passage_fit.py)."""

    role: str
    parts: tuple[Part, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    as_written: str | None = None
    passages: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """The message's text: its text parts, joined (its images left out)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        """The message's image parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, ImagePart))

    @classmethod
    def from_dict(cls, m: Mapping[str, Any]) -> ChatMessage:
        """A message from the dict the history and the APIs read ({"role", "content", ...});
        content may be a string or a list of {"type": "text", "text"} and {"type": "image", ...}
        (ImagePart.to_dict) parts; parts of other types are left out."""
        content = m.get("content")
        if isinstance(content, list):
            parts: tuple[Part, ...] = tuple(
                _part(p) for p in content if isinstance(p, Mapping) and p.get("type", "text") in ("text", "image")
            )
        else:
            text = "" if content is None else str(content)
            parts = (TextPart(text),) if text else ()
        calls = m.get("tool_calls")
        return cls(
            role=str(m.get("role", "")),
            parts=parts,
            tool_calls=None if calls is None else tuple(calls),
            tool_call_id=m.get("tool_call_id"),
            name=m.get("name"),
            reasoning=m.get("reasoning"),
            as_written=m.get("as_written"),
            passages=m.get("passages"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The message as the engine pipe carries it: role and content, and the fields it has. The
        content is the text, or, in a message with an image, the list of its parts ({"type":
        "text", "text"} and ImagePart.to_dict: the images' identities, never their pixels)."""
        content: Any = [_part_dict(p) for p in self.parts] if self.images else self.text
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls is not None:
            out["tool_calls"] = list(self.tool_calls)
        for key in ("tool_call_id", "name", "passages", "reasoning", "as_written"):
            value = getattr(self, key)
            if value is not None:
                out[key] = dict(value) if key == "passages" else value
        return out


def _part(p: Mapping[str, Any]) -> Part:
    return ImagePart.from_dict(p) if p.get("type") == "image" else TextPart(str(p.get("text") or ""))


def _part_dict(p: Part) -> dict[str, Any]:
    return p.to_dict() if isinstance(p, ImagePart) else {"type": "text", "text": p.text}


def chat_messages(messages: Iterable[Mapping[str, Any] | ChatMessage]) -> tuple[ChatMessage, ...]:
    """Messages as ChatMessages (dicts converted, ChatMessages kept)."""
    return tuple(m if isinstance(m, ChatMessage) else ChatMessage.from_dict(m) for m in messages)


@dataclass(frozen=True)
class Sampling:
    """How the reply's tokens are picked, and how many at most (None: until the model ends or the
    context is full). `logit_bias`: (token id, added to its logit) pairs."""

    max_tokens: int | None = None
    temperature: float = protocol.TEMPERATURE
    top_p: float = protocol.TOP_P
    top_k: int = protocol.TOP_K
    min_p: float = protocol.MIN_P
    repeat_penalty: float = protocol.REPEAT_PENALTY
    seed: int | None = None
    presence_penalty: float = protocol.PRESENCE_PENALTY
    frequency_penalty: float = protocol.FREQUENCY_PENALTY
    logit_bias: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class ToolOffer:
    """The tools the model may call (OpenAI's shape: {"type": "function", "function": {name,
    description, parameters}}) and how: `choice` "auto" (a call may begin at the family's opener)
    or "required" (from the first token); `name`: the one tool it must call with a named choice;
    `parallel`: whether it may call several at once."""

    tools: tuple[dict[str, Any], ...]
    choice: str = "auto"
    name: str | None = None
    parallel: bool = True


@dataclass(frozen=True)
class ReplyRequest:
    """One reply, as asked. `messages`: the conversation the chat template renders; `raw_prompt`:
    complete this text as it is instead (no template); `prompt_tokens`: these token ids as they are
    (benchmarks). `conversation_id`: the conversation whose saved state the engine may reuse.
    `grammar`: GBNF text the reply must match (app/engine/grammar.py). `tools`: what the model may
    call. `keep_all_turns`: never drop old turns; a prompt that does not fit ends as an error with
    the numbers (API requests). `ignore_eos`: run to max_tokens (benchmarks; `stop` still applies).
    `no_cache`: clear the KV cache first (benchmarks). `speculative`: "auto" drafts where it pays,
    "off" never (protocol.SPECULATIVE_MODES). `priority`: "window" for the window's own reply,
    served first while API replies share the engine (protocol.PRIORITIES). `reasoning`: the
    reasoning switch (app/reasoning/switch.py ASKS; "" the template's default). `image_files`:
    (SHA-256, file) of every image the messages hold (app/images/store.py), for the host to read."""

    messages: tuple[ChatMessage, ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    conversation_id: str | None = None
    stop: tuple[str, ...] = ()
    grammar: str | None = None
    tools: ToolOffer | None = None
    raw_prompt: str | None = None
    prompt_tokens: tuple[int, ...] | None = None
    keep_all_turns: bool = False
    ignore_eos: bool = False
    no_cache: bool = False
    speculative: str = "auto"
    priority: str = "normal"
    reasoning: str = ""
    image_files: tuple[tuple[str, str], ...] = ()

    @classmethod
    def chat(cls, messages: Iterable[Mapping[str, Any] | ChatMessage], **fields: Any) -> ReplyRequest:
        """A request for a reply to `messages` (dicts or ChatMessages); `fields` as the class's."""
        if "stop" in fields:
            fields["stop"] = tuple(fields["stop"])
        if fields.get("prompt_tokens") is not None:
            fields["prompt_tokens"] = tuple(int(t) for t in fields["prompt_tokens"])
        if isinstance(fields.get("image_files"), Mapping):
            fields["image_files"] = tuple(sorted(fields["image_files"].items()))
        return cls(messages=chat_messages(messages), **fields)

    def but(self, **changes: Any) -> ReplyRequest:
        """This request with some fields changed (messages may be dicts)."""
        if "messages" in changes:
            changes["messages"] = chat_messages(changes["messages"])
        if "stop" in changes:
            changes["stop"] = tuple(changes["stop"])
        if isinstance(changes.get("image_files"), Mapping):
            changes["image_files"] = tuple(sorted(changes["image_files"].items()))
        return replace(self, **changes)

    def images(self) -> tuple[ImagePart, ...]:
        """Every image of the messages, in order."""
        return tuple(image for m in self.messages for image in m.images)

    def message_dicts(self) -> list[dict[str, Any]]:
        """The messages as dicts, as the pipe carries them (for code that reads dicts)."""
        return [m.to_dict() for m in self.messages]


def generate_message(request: ReplyRequest, request_id: str) -> protocol.Generate:
    """The engine pipe's message for `request` (the only place a request becomes one)."""
    s = request.sampling
    offer = request.tools
    return protocol.Generate(
        request_id,
        request.conversation_id,
        request.message_dicts(),
        max_tokens=s.max_tokens,
        temperature=float(s.temperature),
        top_p=float(s.top_p),
        top_k=int(s.top_k),
        min_p=float(s.min_p),
        repeat_penalty=float(s.repeat_penalty),
        seed=s.seed,
        presence_penalty=float(s.presence_penalty),
        frequency_penalty=float(s.frequency_penalty),
        logit_bias=[[int(t), float(b)] for t, b in s.logit_bias],
        stop=list(request.stop),
        ignore_eos=request.ignore_eos,
        prompt_tokens=None if request.prompt_tokens is None else [int(t) for t in request.prompt_tokens],
        raw_prompt=request.raw_prompt,
        no_cache=request.no_cache,
        grammar=request.grammar,
        keep_all_turns=request.keep_all_turns,
        speculative=request.speculative,
        tools=None if offer is None else list(offer.tools),
        tool_choice="auto" if offer is None else offer.choice,
        tool_name=None if offer is None else offer.name,
        parallel_tool_calls=True if offer is None else offer.parallel,
        priority=request.priority,
        reasoning=request.reasoning,
        images=dict(request.image_files),
    )
