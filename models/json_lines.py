"""The JSON-lines codec Cove's child processes speak with their parent: the engine host
(app/engine/protocol.py) and the download child (models/download/protocol.py).

Wire format (an invariant shared by parent and child): one JSON object per line, pure ASCII
(ensure_ascii, so no newline or odd code point can split a line), with a tag key naming the
message's dataclass; the other keys are the dataclass's fields. JSON, never pickle: nothing a
child sends can run code in the parent. Unknown keys are ignored on decode, so either side may
add optional fields. A line that is not a valid message raises the protocol's own error class
(a ValueError) with a short sentence, never another exception.

It lives in models/ because the download child does (imports go app -> models only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Generic, TypeVar

M = TypeVar("M")


class LineError(ValueError):
    """A line that is not a valid message (the default error class of a codec)."""


def dump_line(obj: Mapping[str, Any]) -> bytes:
    """One line of compact, ASCII-only JSON, ending in a newline."""
    return json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n"


def load_object(line: bytes | str, error: type[ValueError] = LineError) -> dict[str, Any]:
    """The JSON object on `line`; raises `error` with a sentence for anything else."""
    try:
        obj = json.loads(line)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"not a JSON line: {exc}") from None
    except RecursionError:
        raise error("not a JSON line: nested too deeply") from None
    if not isinstance(obj, dict):
        raise error("a message must be a JSON object")
    return obj


class TaggedCodec(Generic[M]):
    """Encodes the dataclasses of one protocol to lines and decodes lines back.

    `types` maps each tag to its dataclass; `tag_key` is the key that carries the tag ("type",
    "event"); `error` is the protocol's own error class; `tuples` turns JSON arrays in a
    message's top-level fields back into tuples (for dataclasses that declare tuples).
    `encode` and `decode` are meant to be bound once (`decode = codec.decode`): the parent's
    reader calls decode once per streamed token.
    """

    def __init__(
        self,
        tag_key: str,
        types: Mapping[str, type[M]],
        *,
        error: type[ValueError] = LineError,
        tuples: bool = False,
        what: str = "message",
    ) -> None:
        self.tag_key = tag_key
        self.error = error
        self._what = what
        self._types: dict[str, type[M]] = dict(types)
        self._tags: dict[type, str] = {cls: tag for tag, cls in self._types.items()}
        self._fields: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in fields(cls)) for cls in self._types.values()}  # type: ignore[arg-type]
        self._tuples = tuples
        self.decode: Callable[[bytes | str], M] = self._decode

    def encode(self, msg: M) -> bytes:
        """One line of JSON (ending in a newline) for `msg`: the tag first, then each field."""
        cls = type(msg)
        obj: dict[str, Any] = {self.tag_key: self._tags[cls]}
        for name in self._fields[cls]:
            obj[name] = getattr(msg, name)
        return dump_line(obj)

    def _decode(self, line: bytes | str) -> M:
        """Parse one line back into its dataclass (with `tuples`, JSON arrays in top-level fields
        made tuples). Raises the codec's error on anything else."""
        try:
            obj = json.loads(line)
            cls = self._types.get(obj.get(self.tag_key))
        except Exception:  # noqa: BLE001 - not JSON, not an object, an unhashable tag, too deep
            raise self._bad(line) from None
        if cls is None:
            raise self.error(f"unknown {self._what} type {obj.get(self.tag_key)!r}")
        if self._tuples:
            kwargs = {k: tuple(obj[k]) if isinstance(obj[k], list) else obj[k] for k in self._fields[cls] if k in obj}
        else:
            kwargs = {k: obj[k] for k in self._fields[cls] if k in obj}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise self.error(f"bad {obj[self.tag_key]} {self._what}: {exc}") from None

    def _bad(self, line: bytes | str) -> ValueError:
        """The error for a line that is not a tagged JSON object (load_object says why)."""
        try:
            obj = load_object(line, self.error)
        except ValueError as exc:
            return exc
        return self.error(f"the tag {self.tag_key!r} must be a string, not {type(obj.get(self.tag_key)).__name__}")
