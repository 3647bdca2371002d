from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "chat_templates"


@pytest.fixture
def chat_templates() -> Callable[[str], str]:
    """A real chat template of tests/data/chat_templates (SOURCES.md says where each came from), by file name."""
    return lambda name: (TEMPLATES / name).read_text()
