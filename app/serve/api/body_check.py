"""The checks every generating endpoint makes of a request body before reading its fields: no
string in it (key or value) is a lone UTF-16 surrogate, which JSON can carry ("\\ud800") but no
UTF-8 text can hold, and it nests no deeper than MAX_DEPTH. Either gets an ApiError (400)
naming where, before any generation starts: found later, the surrogate failed the reply's
storing or its response after the model had written it, and the depth the schema converter's
recursion.
"""

from __future__ import annotations

from app.serve.http.errors import ApiError

# Arrays and objects inside one another, the body itself counting as 1. A chat request needs
# about 5; a JSON schema adds one or two per level of the data it describes.
MAX_DEPTH = 64


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "the request body"


def _bad_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_body(body: object) -> None:
    """Raise ApiError(400) for a lone surrogate anywhere in `body` or nesting past MAX_DEPTH."""
    stack: list[tuple[object, tuple[str | int, ...], int]] = [(body, (), 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if _bad_text(node):
                raise ApiError(
                    400,
                    f"{_where(path)} holds a lone UTF-16 surrogate (such as \\ud800), which is not text; send valid Unicode",
                    param=str(path[0]) if path else None,
                )
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise ApiError(
                400,
                f"{_where(path)} is nested more than {MAX_DEPTH} levels deep (arrays and objects "
                "inside one another); Cove reads bodies up to that depth",
                param=str(path[0]) if path else None,
            )
        if isinstance(node, dict):
            for key, value in node.items():
                if _bad_text(key):
                    raise ApiError(
                        400,
                        f"a key in {_where(path)} holds a lone UTF-16 surrogate (such as \\ud800), which is not text; send valid Unicode",
                        param=str(path[0]) if path else None,
                    )
                stack.append((value, (*path, key), depth + 1))
        else:
            stack.extend((value, (*path, i), depth + 1) for i, value in enumerate(node))
