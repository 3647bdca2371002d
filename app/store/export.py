"""Exporting one conversation as Markdown or JSON: the current branch, with each reply's
model, status and metrics, so the file is a record of what was asked and answered. A message's
images are linked where the export wrote them (app/store/export_images.py), or named by their
identity where it did not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from app.statuses import MessageStatus
from app.store.history import History, Message
from app.store.message_images import KeptImage
from app.store.sources import Source, sources_for

FORMATS = ("md", "json")


def export_conversation(history: History, conversation_id: str, fmt: str, *, image_links: Mapping[str, str | None] | None = None) -> str:
    """The conversation as text in `fmt` ('md' or 'json'). `image_links`: for each image (by
    SHA-256) the relative path the export wrote it to, or None where the images folder no longer
    has it; without them (standard output) each image is named, not linked."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format '{fmt}'; use md or json")
    conversation = history.get_conversation(conversation_id)
    messages = history.messages(conversation.id)
    sources = sources_for(history.db, [m.id for m in messages if m.role == "assistant"])
    if fmt == "json":
        return json.dumps(
            {
                "conversation": asdict(conversation),
                "messages": [
                    {
                        **asdict(message),
                        **({"images": _image_entries(message.images, image_links)} if message.images else {}),
                        **({"sources": [asdict(s) for s in sources[message.id]]} if message.id in sources else {}),
                    }
                    for message in messages
                ],
            },
            ensure_ascii=False,
            indent=2,
        )
    lines = [f"# {conversation.title or 'Untitled conversation'}", ""]
    about = [f"Started {conversation.created_at}"]
    if conversation.model:
        about.append(f"model {conversation.model}")
    lines += ["*" + ", ".join(about) + "*", ""]
    if conversation.system_prompt:
        lines += ["## System prompt", "", conversation.system_prompt, ""]
    for message in messages:
        if message.role in ("tool_call", "tool"):
            lines += _tool_lines(message)
            continue
        lines += [_heading(message), ""]
        lines += _image_lines(message.images, image_links)
        if message.content or not message.images:
            lines += [message.content if message.content else "*(no text)*", ""]
        if message.error:
            lines += [f"> Error: {message.error}", ""]
        if message.metrics:
            lines += [f"*{format_metrics(message.metrics)}*", ""]
        if message.id in sources:
            lines += _source_lines(sources[message.id])
    return "\n".join(lines).rstrip() + "\n"


def _image_entries(images: tuple[KeptImage, ...], links: Mapping[str, str | None] | None) -> list[dict[str, Any]]:
    """The images of a message for the JSON export: their identity, and the file each was written
    to (None: not in the images folder any more) when the export wrote them."""
    return [{**asdict(i), **({"file": links.get(i.sha256)} if links is not None else {})} for i in images]


def _image_lines(images: tuple[KeptImage, ...], links: Mapping[str, str | None] | None) -> list[str]:
    """Each image as a Markdown image beside the export, or a sentence where it cannot be one."""
    lines: list[str] = []
    for n, image in enumerate(images, 1):
        about = f"{image.describe()}, sha256 {image.sha256}"
        link = links.get(image.sha256) if links is not None else None
        if link:
            lines.append(f"![image {n}: {image.describe()}]({link})")
        elif links is not None:
            lines.append(f"*(Image {n} ({about}) is no longer in Cove's images folder, so this export does not have it.)*")
        else:
            lines.append(f"*(Image {n}: {about}. Export to a file with -o to write it beside the Markdown.)*")
        lines.append("")
    return lines


def _source_lines(sources: list[Source]) -> list[str]:
    """The passages a reply was given: those it cites, or all of them said as such."""
    cited = [s for s in sources if s.cited]
    lines = ["Sources:" if cited else "Passages the model was given (the reply cites none of them):", ""]
    for s in cited or sources:
        lines.append(f"- [{s.n}] {s.path}" + (f", {s.where}" if s.where else ""))
    return [*lines, ""]


def _heading(message: Message) -> str:
    parts = [message.role.capitalize()]
    if message.role == "assistant" and message.model_name:
        parts.append(message.model_name)
    if message.status != MessageStatus.COMPLETE:
        parts.append(message.status)
    return "## " + " · ".join(parts)


def _tool_lines(message: Message) -> list[str]:
    """A tool call (server, tool, arguments) or its result (status, who decided) as Markdown."""
    d = message.params
    if message.role == "tool_call":
        where = f"{d.get('server')}/{d.get('tool')}" if d.get("server") else str(d.get("name"))
        arguments = json.dumps(d.get("arguments") or {}, ensure_ascii=False, indent=2, sort_keys=True)
        return [f"## Tool call · {where}", "", "```json", arguments, "```", ""]
    about = [str(d.get("name")), str(d.get("status"))]
    if d.get("approved_by"):
        about.append(f"decided by {d['approved_by']}")
    if d.get("record_entry") is not None:
        about.append(f"record entry {d['record_entry']}")
    fence = "````" if "```" in message.content else "```"
    return ["## Tool result · " + " · ".join(about), "", fence, message.content, fence, ""]


def format_metrics(metrics: dict[str, Any]) -> str:
    """One line, `key value · key value`, numbers rounded for reading."""
    return " · ".join(f"{key} {_number(value)}" for key, value in metrics.items())


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
