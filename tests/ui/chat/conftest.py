"""Fixtures the chat window's tests share: two tiny models Auto tells apart by size (tests/support/auto_window.py)."""

from tests.support.auto_window import two_sizes  # noqa: F401 - a fixture
