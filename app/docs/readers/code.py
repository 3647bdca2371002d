"""Source code and configuration: the text as written (decoded as plain text is), a new Section
at each top-level definition, whose name is the heading (a Python def or class, a JavaScript
function, a Go func, a Rust fn or impl, a C function, a TOML table, a YAML key, ...), found by a
cheap regular expression per language on lines that start at column 0; None before the first.
No parser: a heading only needs to be roughly right, and a line scanner streams."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from app.docs.readers._base import SectionBuilder
from app.docs.readers.limits import Budget
from app.docs.readers.markdown import lines
from app.docs.readers.text import decoded_text
from app.docs.types import Section

_I = r"[A-Za-z_$][\w$]*"
_PYTHON = [rf"(?:async\s+)?(?:def|class)\s+({_I})"]
_SCRIPT = [  # JavaScript, TypeScript
    rf"(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:async\s+)?function\s*\*?\s*({_I})",
    rf"(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|enum|namespace|type)\s+({_I})",
    rf"(?:export\s+)?(?:const|let|var)\s+({_I})\s*(?::[^=]*)?=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*(?::[^=]*)?=>|{_I}\s*=>)",
]
_C_LIKE = [  # C, C++, Java, C#, PHP: types and top-level functions
    rf"(?:(?:public|private|protected|internal|abstract|final|static|sealed|partial|export|template\s*<[^>]*>)\s+)*"
    rf"(?:typedef\s+)?(?:struct|class|union|enum|namespace|interface|record|trait)\s+({_I})[^;]*$",
    r"(?!(?:if|for|while|switch|return|else|do|case|typedef|struct|enum|union)\b)"
    r"(?:[A-Za-z_][\w:<>,*&\s~]*?[\s*&])?([A-Za-z_~][\w:~]*)\s*\([^;]*$",
    rf"function\s+({_I})",
]
_PATTERNS: dict[str, list[str]] = {
    ".py": _PYTHON,
    ".pyi": _PYTHON,
    ".pyw": _PYTHON,
    ".js": _SCRIPT,
    ".mjs": _SCRIPT,
    ".cjs": _SCRIPT,
    ".jsx": _SCRIPT,
    ".ts": _SCRIPT,
    ".tsx": _SCRIPT,
    ".c": _C_LIKE,
    ".h": _C_LIKE,
    ".cc": _C_LIKE,
    ".cpp": _C_LIKE,
    ".cxx": _C_LIKE,
    ".hpp": _C_LIKE,
    ".hh": _C_LIKE,
    ".java": _C_LIKE,
    ".cs": _C_LIKE,
    ".php": _C_LIKE,
    ".go": [rf"func\s+(?:\([^)]*\)\s*)?({_I})", rf"type\s+({_I})"],
    ".rs": [
        r"(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern(?:\s+\"[^\"]*\")?)\s+)*"
        rf"(?:fn|struct|enum|trait|mod|union|type|macro_rules!)\s+({_I})",
        r"(?:unsafe\s+)?impl(?:<[^{]*?>)?\s+([^{]+?)\s*(?:\{|where\b|$)",
    ],
    ".kt": [
        r"(?:(?:public|private|internal|open|abstract|data|sealed|inline|suspend|enum)\s+)*(?:fun|class|object|interface)"
        r"\s+(?:<[^>]*>\s*)?([\w.]+)"
    ],
    ".swift": [r"(?:(?:public|private|internal|open|final|fileprivate)\s+)*(?:func|class|struct|enum|protocol|extension)\s+([\w.]+)"],
    ".scala": [r"(?:(?:case|abstract|final|sealed|implicit|private|protected)\s+)*(?:def|class|object|trait)\s+(\w+)"],
    ".rb": [r"(?:def|class|module)\s+(?:self\.)?([\w:.?!=]+)"],
    ".lua": [r"(?:local\s+)?function\s+([\w.:]+)"],
    ".pl": [r"sub\s+(\w+)"],
    ".r": [r"([\w.]+)\s*(?:<-|=)\s*function\b"],
    ".sh": [r"(?:function\s+)?([A-Za-z_][\w:-]*)\s*\(\s*\)", r"function\s+([A-Za-z_][\w:-]*)"],
    ".bash": [r"(?:function\s+)?([A-Za-z_][\w:-]*)\s*\(\s*\)", r"function\s+([A-Za-z_][\w:-]*)"],
    ".zsh": [r"(?:function\s+)?([A-Za-z_][\w:-]*)\s*\(\s*\)", r"function\s+([A-Za-z_][\w:-]*)"],
    ".sql": [r"(?i:create\s+(?:or\s+replace\s+)?(?:table|view|function|index|trigger|procedure)\s+(?:if\s+not\s+exists\s+)?([\w.\"]+))"],
    ".toml": [r"\[+\s*([^\]]+?)\s*\]+"],
    ".ini": [r"\[\s*([^\]]+?)\s*\]"],
    ".cfg": [r"\[\s*([^\]]+?)\s*\]"],
    ".yaml": [r"([A-Za-z_][\w.-]*)\s*:"],
    ".yml": [r"([A-Za-z_][\w.-]*)\s*:"],
    ".css": [r"([^\s@}/][^{]*?)\s*\{"],
    ".scss": [r"([^\s@}/][^{]*?)\s*\{"],
    ".less": [r"([^\s@}/][^{]*?)\s*\{"],
    ".json": [],
    ".xml": [],
}
_COMPILED = {suffix: re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None for suffix, patterns in _PATTERNS.items()}
CODE_SUFFIXES = frozenset(_PATTERNS)


def read_code(file: BinaryIO, path: Path, budget: Budget) -> Iterator[Section]:
    """The Sections of a source or configuration file (its language by `path`'s suffix)."""
    return code_sections(lines(decoded_text(file)), path.suffix.lower())


def code_sections(source: Iterator[str], suffix: str) -> Iterator[Section]:
    """Sections of source given line by line, in the language of `suffix`. Decorator or
    annotation lines ("@...") at column 0 go with the definition they precede."""
    pattern = _COMPILED.get(suffix)
    builder = SectionBuilder()
    decorators: list[str] = []
    for line in source:
        if pattern is not None and line[:1] == "@":
            decorators.append(line)
            continue
        if pattern is not None and line[:1].strip() and line[:1] not in "#/*}])'\"":
            found = pattern.match(line)
            name = next((g for g in found.groups() if g), None) if found else None
            if name:
                yield from builder.heading(name.strip()[:80])
        for held in decorators:
            yield from builder.add(held)
        decorators.clear()
        yield from builder.add(line)
    for held in decorators:
        yield from builder.add(held)
    yield from builder.flush()
