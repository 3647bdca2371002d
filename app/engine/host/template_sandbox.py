"""The jinja2 sandbox chat templates are rendered in, with the size of every value it can
build bounded before the value is built.

ImmutableSandboxedEnvironment stops attribute tricks; this adds size limits, because a
template that builds one huge string (`'x'.ljust(10**9)`, `s ~ s` doubled in a loop) takes
the engine host's memory in one step, before any output cap or time limit can act. Refused
with SecurityError ("unsafe" for the caller):

- `*` of a string or list beyond `max_value` items, `**` with an exponent above 256;
- `+` and `~` whose result passes `max_chars`;
- a call or filter given a number above `max_chars` (a width: ljust, center, indent ...);
- `join` and `replace` (method or filter) whose result would pass `max_chars`;
- `%` and `format` with a number above `max_chars` or a width of 7+ digits in the format.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import jinja2.ext
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

_LONG_NUMBER = re.compile(r"\d{7,}")  # a width or precision of a million or more
_SIZED_FILTERS = ("center", "indent", "format", "join", "replace", "wordwrap", "truncate")


def _too_large() -> SecurityError:
    return SecurityError("the template builds a value that is too large")


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple)) else 0


class _CheckedConcat(CodeGenerator):
    """`a ~ b` compiled to `environment.checked_concat(...)` instead of a bare join."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class TemplateSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with the size limits listed in the module docstring."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])
    code_generator_class = _CheckedConcat

    def __init__(self, *, max_value: int, max_chars: int, **options: Any) -> None:
        super().__init__(**options)
        self.max_value = max_value
        self.max_chars = max_chars
        for name in _SIZED_FILTERS:
            self.filters[name] = self._checked(self.filters[name], name)

    # -- operators ---------------------------------------------------------------------------

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > self.max_value:
                    raise _too_large()
        elif operator == "**":
            if isinstance(right, (int, float)) and abs(right) > 256:
                raise SecurityError("the template computes a power that is too large")
        elif operator == "+":
            if _size(left) + _size(right) > self.max_chars:
                raise _too_large()
        elif operator == "%" and isinstance(left, str):
            self._check_format(left, right if isinstance(right, tuple) else (right,))
        return super().call_binop(context, operator, left, right)

    def checked_concat(self, parts: Iterable[Any]) -> str:
        strings = [str(p) for p in parts]
        if sum(map(len, strings)) > self.max_chars:
            raise _too_large()
        return "".join(strings)

    # -- calls and filters -------------------------------------------------------------------

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's signature
        __self._check_numbers(args, kwargs)
        target = getattr(__obj, "__self__", None)
        if isinstance(target, str):
            __self._check_str_method(target, getattr(__obj, "__name__", ""), args)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        formatter = super().wrap_str_format(value)
        if formatter is None:
            return None
        fmt = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            self._check_format(fmt, (*args, *kwargs.values()))
            return formatter(*args, **kwargs)

        return checked

    def _checked(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def checked(*args: Any, **kwargs: Any) -> Any:
            self._check_numbers(args, kwargs)
            # A filter's first argument is the value it filters (after eval context/env, if any).
            value = next((a for a in args if isinstance(a, (str, list, tuple))), None)
            if name == "join" and value is not None:
                sep = args[args.index(value) + 1] if len(args) > args.index(value) + 1 else kwargs.get("d", "")
                self._check_join(str(sep), value)
            elif name == "replace" and isinstance(value, str) and len(args) >= args.index(value) + 3:
                i = args.index(value)
                self._check_replace(value, str(args[i + 1]), str(args[i + 2]))
            elif name == "format" and isinstance(value, str):
                self._check_format(value, args[args.index(value) + 1 :])
            elif name == "indent" and isinstance(value, str):
                width = args[args.index(value) + 1] if len(args) > args.index(value) + 1 else kwargs.get("width", 4)
                pad = width if isinstance(width, int) else len(str(width))
                if len(value) + pad * (value.count("\n") + 1) > self.max_chars:
                    raise _too_large()
            return fn(*args, **kwargs)

        return functools.wraps(fn)(checked)  # keeps jinja's pass_context / pass_environment mark

    def _check_numbers(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and value > self.max_chars:
                raise _too_large()

    def _check_str_method(self, text: str, name: str, args: tuple[Any, ...]) -> None:
        if name == "join" and args:
            self._check_join(text, args[0])
        elif name == "replace" and len(args) >= 2:
            self._check_replace(text, str(args[0]), str(args[1]))
        elif name == "expandtabs" and args and isinstance(args[0], int) and text.count("\t") * args[0] + len(text) > self.max_chars:
            raise _too_large()

    def _check_join(self, sep: str, items: Any) -> None:
        if isinstance(items, (list, tuple)):
            total = sum(len(x) if isinstance(x, str) else 0 for x in items) + len(sep) * max(len(items) - 1, 0)
            if total > self.max_chars:
                raise _too_large()

    def _check_replace(self, text: str, old: str, new: str) -> None:
        count = text.count(old) if old else len(text) + 1
        if len(text) + count * (len(new) - len(old)) > self.max_chars:
            raise _too_large()

    def _check_format(self, fmt: str, values: Iterable[Any]) -> None:
        if _LONG_NUMBER.search(fmt) or any(isinstance(v, int) and not isinstance(v, bool) and v > self.max_chars for v in values):
            raise _too_large()


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def template_environment(*, max_value: int, max_chars: int) -> TemplateSandbox:
    """The environment Hugging Face renders chat templates in (trim_blocks, lstrip_blocks,
    loopcontrols, a `tojson` that keeps non-ASCII), with the size limits above."""
    env = TemplateSandbox(
        max_value=max_value,
        max_chars=max_chars,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    return env
