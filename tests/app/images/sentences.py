"""The sentence an image is refused with, checked to be one line and one sentence."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def refused_with(kind: type[Exception], call: Callable[[], object]) -> str:
    """The message of the `kind` that `call` raises: one line, one sentence, no traceback."""
    with pytest.raises(kind) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message and ". " not in message
    return message
