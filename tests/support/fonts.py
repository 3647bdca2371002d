"""The CJK fallback font the streaming-text tests need: the suite's own (tests/support/cjk_font.py),
found where Qt draws CJK text, or a failure that says what went wrong."""

from __future__ import annotations

import os

import pytest
from PySide6.QtGui import QFont, QGuiApplication, QRawFont, QTextLayout

from tests.support.cjk_font import FAMILY

CJK_SAMPLE = "灯台守の物語"


def setup_hint() -> str:
    """What to check when Qt does not draw CJK text with the suite's own font."""
    return (
        f"the suite brings its own, {FAMILY!r}: tests/conftest.py builds it (tests/support/cjk_font.py) into a "
        "temporary folder and, before Qt starts, points FONTCONFIG_FILE at a fontconfig file that adds it "
        "and hides every other CJK font; check that nothing started Qt earlier (the application is "
        "pytest-qt's qapp) or changed FONTCONFIG_FILE (now "
        f"{os.environ.get('FONTCONFIG_FILE')!r}; `fc-list :lang=ja family` with it should list only {FAMILY!r})"
    )


def _line(text: str, font: QFont) -> QTextLayout:
    layout = QTextLayout(text, font)
    layout.beginLayout()
    layout.createLine().setLineWidth(10_000.0)
    layout.endLayout()
    return layout


def require_cjk_fallback(font: QFont | None = None) -> str:
    """The family of the font Qt draws CJK_SAMPLE with when `font` (the application's) lacks it:
    the suite's generated font, whose lines are taller than `font`'s, the case the streaming
    tail has to lay out as Qt does. Fails (never skips) when Qt finds no CJK font, or one that
    is not taller, since the tests that call this would then check nothing: Qt would draw boxes
    in the primary font, or lines as tall as the rest."""
    font = QGuiApplication.font() if font is None else font
    primary = QRawFont.fromFont(font)
    if all(primary.supportsCharacter(ord(char)) for char in CJK_SAMPLE):
        pytest.fail(f"{primary.familyName()} has CJK characters itself: no fallback font to test with")
    cjk = _line(CJK_SAMPLE, font)
    families = [
        run.rawFont().familyName() for run in cjk.glyphRuns() if all(run.rawFont().supportsCharacter(ord(char)) for char in CJK_SAMPLE)
    ]
    if not families:
        pytest.fail(
            f"Qt finds no font with CJK characters (it draws {CJK_SAMPLE!r} as boxes), so the "
            f"tests of lines drawn with a fallback font would check nothing; {setup_hint()}"
        )
    latin = _line("x", font)  # kept: a QTextLine is a view of its layout
    if cjk.lineAt(0).ascent() <= latin.lineAt(0).ascent():
        pytest.fail(
            f"The CJK font {families[0]} is no taller than {primary.familyName()}: lines with a fallback "
            f"font would look like the rest; {setup_hint()}"
        )
    return families[0]
