"""Reading a server-sent event stream from raw bytes, robustly: lines end in LF, CRLF or CR
(also when split between chunks), comments and keep-alives are ignored, lines that are not
UTF-8 or name no known field are skipped and counted, and a line (or an event) longer than
`max_line_bytes` ends the stream with `StreamTooLarge` instead of growing without bound.

JSON can carry what no UTF-8 file or terminal can hold: a lone UTF-16 surrogate written as an
escape ("\\ud800"; json.loads joins escaped pairs, so any surrogate left is alone).
`storable_json` replaces each with U+FFFD (app/unreadable_text.py) and counts them, so a
caller can keep the text and say so once.

The stall timeout is not here: the bytes come from a response whose every read waits at
most that long (app/remote/http_client.py), so a silent server raises there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.unreadable_text import storable

MAX_LINE_BYTES = 1 << 20  # 1 MiB: far beyond any one chunk of a streamed reply
DONE = "[DONE]"

_EOL = re.compile(rb"\r\n|\n|\r")
_FIELDS = frozenset({"data", "event", "id", "retry"})


class StreamTooLarge(Exception):
    """A line or an event passed the size limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a line of more than {limit} bytes ({size} so far)")
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class SseEvent:
    data: str
    event: str = ""  # the event's type ("" for the default, "message")


class SseReader:
    """Feed it chunks; it returns the events they complete. `skipped` counts unreadable lines."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.skipped = 0
        self.bytes_read = 0
        self._buffer = bytearray()
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._first_line = True

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self.bytes_read += len(chunk)
        buffer = self._buffer
        buffer += chunk
        events: list[SseEvent] = []
        start = 0
        while True:
            match = _EOL.search(buffer, start)
            if match is None:
                break
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # maybe the first half of a CRLF split between chunks: wait for the next byte
            self._line(bytes(buffer[start : match.start()]), events)
            start = match.end()
        del buffer[:start]
        if len(buffer) > self.max_line_bytes:
            raise StreamTooLarge(len(buffer), self.max_line_bytes)
        return events

    def end(self) -> list[SseEvent]:
        """At the end of the stream: the last line and event, even without their line breaks."""
        events: list[SseEvent] = []
        if self._buffer:
            rest = bytes(self._buffer).rstrip(b"\r")
            self._buffer.clear()
            self._line(rest, events)
        self._dispatch(events)
        return events

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if len(raw) > self.max_line_bytes:
            raise StreamTooLarge(len(raw), self.max_line_bytes)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.skipped += 1
            return
        if self._first_line:
            self._first_line = False
            line = line.removeprefix("\ufeff")
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return  # a comment: keep-alives (": ping") are sent this way
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name not in _FIELDS:
            self.skipped += 1
            return
        if name == "data":
            self._data_bytes += len(raw)
            if self._data_bytes > self.max_line_bytes:
                raise StreamTooLarge(self._data_bytes, self.max_line_bytes)
            self._data.append(value)
        elif name == "event":
            self._event = value

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(SseEvent("\n".join(self._data), self._event))
        self._data, self._data_bytes, self._event = [], 0, ""


def json_payloads(event: SseEvent) -> Iterator[dict[str, Any] | str]:
    """What an event carries: its JSON object(s), or the string "[DONE]". An event whose data is
    several JSON lines (a server that left out the blank lines between events) gives each one.
    Raises ValueError when nothing in it is a JSON object."""
    data = event.data.strip()
    if data == DONE:
        yield DONE
        return
    try:
        value = json.loads(data)
    except ValueError:
        value = None
    if isinstance(value, dict):
        yield value
        return
    parts = [p.strip() for p in data.split("\n") if p.strip()]
    found: list[dict[str, Any] | str] = []
    if len(parts) > 1:
        for part in parts:
            if part == DONE:
                found.append(DONE)
                continue
            try:
                item = json.loads(part)
            except ValueError:
                continue
            if isinstance(item, dict):
                found.append(item)
    if not found:
        raise ValueError("not a JSON object")
    yield from found


def storable_json(value: Any) -> tuple[Any, int]:
    """A decoded JSON value with `storable` applied to every string in it (keys too), and the
    number of characters replaced."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        total = 0
        items = []
        for item in value:
            clean, n = storable_json(item)
            items.append(clean)
            total += n
        return items, total
    if isinstance(value, dict):
        total = 0
        result = {}
        for key, item in value.items():
            clean_key, n_key = storable_json(key)
            clean, n = storable_json(item)
            result[clean_key] = clean
            total += n_key + n
        return result, total
    return value, 0
