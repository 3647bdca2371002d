"""The CJK fallback font the streaming-text tests need: found, or a failure that says how to install it."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFont, QGuiApplication, QRawFont, QTextLayout

CJK_SAMPLE = "灯台守の物語"
INSTALL_HINT = ("install one: on Debian or Ubuntu `apt-get install --no-install-recommends fonts-droid-fallback` "
                "(.ci/run does this before the suite runs)")


def _line(text: str, font: QFont) -> QTextLayout:
    layout = QTextLayout(text, font)
    layout.beginLayout()
    layout.createLine().setLineWidth(10_000.0)
    layout.endLayout()
    return layout


def require_cjk_fallback(font: QFont | None = None) -> str:
    """The family of the font Qt draws CJK_SAMPLE with when `font` (the application's) lacks it,
    which must make a line taller than `font` alone does: the case the streaming tail has to lay
    out as Qt does. Fails (never skips) when there is none, since the tests that call this
    would then check nothing: Qt draws boxes in the primary font."""
    font = QGuiApplication.font() if font is None else font
    primary = QRawFont.fromFont(font)
    if all(primary.supportsCharacter(ord(char)) for char in CJK_SAMPLE):
        pytest.fail(f"{primary.familyName()} has CJK characters itself: no fallback font to test with")
    cjk = _line(CJK_SAMPLE, font)
    families = [run.rawFont().familyName() for run in cjk.glyphRuns()
                if all(run.rawFont().supportsCharacter(ord(char)) for char in CJK_SAMPLE)]
    if not families:
        pytest.fail(f"No font with CJK characters is installed (Qt draws {CJK_SAMPLE!r} as boxes), so the "
                    f"tests of lines drawn with a fallback font would check nothing; {INSTALL_HINT}")
    latin = _line("x", font)  # kept: a QTextLine is a view of its layout
    if cjk.lineAt(0).ascent() <= latin.lineAt(0).ascent():
        pytest.fail(f"The CJK font {families[0]} is no taller than {primary.familyName()}: lines with a fallback "
                    f"font would look like the rest; {INSTALL_HINT}")
    return families[0]
