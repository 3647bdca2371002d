"""A GBNF rule body without rule references (literals, classes, groups, alternatives and
repetitions) as a Python regular expression, so a test can ask whether a grammar takes a text
without sampling a model. Rule references are refused: the bodies translated here are regular."""

from __future__ import annotations

import re

_TOKEN = re.compile(r'\s+|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[()|?*+]|\{\d*(?:,\d*)?\}')


def gbnf_to_regex(body: str) -> str:
    out = []
    pos = 0
    while pos < len(body):
        match = _TOKEN.match(body, pos)
        if match is None:
            raise ValueError(f"not a regular GBNF body at {body[pos : pos + 20]!r}")
        token = match.group(0)
        pos = match.end()
        if token.isspace():
            continue
        if token.startswith('"'):
            out.append("(?:" + re.escape(token[1:-1].encode().decode("unicode_escape")) + ")")
        elif token.startswith("["):
            out.append(token)
        elif token == "(":
            out.append("(?:")
        else:
            out.append(token)
    return "".join(out)


def gbnf_matcher(body: str) -> re.Pattern[str]:
    return re.compile(gbnf_to_regex(body))
