"""The suite's own CJK fallback font: a small TrueType font built with fontTools, whose lines are
taller than DejaVu Sans's, and the fontconfig file that makes it the only CJK font Qt finds."""

from __future__ import annotations

import os
from pathlib import Path
from xml.sax.saxutils import escape

from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.ttLib.tables._g_l_y_f import Glyph

FAMILY = "Cove Test CJK"
UNITS_PER_EM = 1000
# Per em, DejaVu Sans has ascent 0.93 and descent 0.24 (Droid Sans Fallback 1.04 and 0.27): a
# line holding one of these characters is clearly taller. No line gap, like both of them (in
# hhea, the one Qt reads for them): the streaming tail's lines (ui PlainTail) leave out a
# fallback font's line gap where the finished document's last line has it, and
# test_ui_fallback_fonts fails with one.
ASCENT = 1200
DESCENT = 320
LINE_GAP = 0
# CJK punctuation, hiragana and katakana; every unified ideograph; full- and halfwidth forms.
RANGES = ((0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xFF00, 0xFFEF))
IDEOGRAPHIC_SPACE = 0x3000
# Languages whose fonts the test processes do not see, so that Qt's fallback for CJK text is
# this font whatever else is installed (fontconfig's own language tags).
CJK_LANGUAGES = ("ja", "ko", "zh-cn", "zh-hk", "zh-mo", "zh-sg", "zh-tw")
SYSTEM_CONFIG = Path("/etc/fonts/fonts.conf")


def _box(left: int, bottom: int, right: int, top: int) -> Glyph:
    pen = TTGlyphPen(None)
    pen.moveTo((left, bottom))
    pen.lineTo((left, top))
    pen.lineTo((right, top))
    pen.lineTo((right, bottom))
    pen.closePath()
    return pen.glyph()


def build_cjk_font(path: Path) -> Path:
    """Write the font to `path`: every character of RANGES is one shared filled box a full em wide
    (the ideographic space is blank), so the file stays small (about 45 kB, mostly the cmap)."""
    glyphs = {".notdef": _box(100, 0, 900, 800), "blank": TTGlyphPen(None).glyph(),
              "box": _box(80, -60, 920, 840)}
    cmap = {code: "box" for first, last in RANGES for code in range(first, last + 1)}
    cmap[IDEOGRAPHIC_SPACE] = "blank"
    builder = FontBuilder(UNITS_PER_EM, isTTF=True)
    builder.setupGlyphOrder(list(glyphs))
    builder.setupCharacterMap(cmap)
    builder.setupGlyf(glyphs)
    # (advance, left side bearing)
    builder.setupHorizontalMetrics({".notdef": (UNITS_PER_EM, 100), "blank": (UNITS_PER_EM, 0),
                                    "box": (UNITS_PER_EM, 80)})
    builder.setupHorizontalHeader(ascent=ASCENT, descent=-DESCENT, lineGap=LINE_GAP)
    builder.setupNameTable({"familyName": FAMILY, "styleName": "Regular",
                            "uniqueFontIdentifier": f"{FAMILY} Regular", "fullName": f"{FAMILY} Regular",
                            "psName": FAMILY.replace(" ", "") + "-Regular", "version": "Version 1.0"})
    # The same metrics in hhea, OS/2 typo (used: USE_TYPO_METRICS) and OS/2 win, so every
    # rasterizer's choice gives the same line.
    builder.setupOS2(version=4, sTypoAscender=ASCENT, sTypoDescender=-DESCENT, sTypoLineGap=LINE_GAP,
                     usWinAscent=ASCENT, usWinDescent=DESCENT, fsSelection=0x40 | 0x80,
                     achVendID="COVE", usWeightClass=400)
    builder.font["OS/2"].recalcUnicodeRanges(builder.font)
    builder.setupPost()
    path.parent.mkdir(parents=True, exist_ok=True)
    builder.save(str(path))
    return path


def _base_config() -> Path:
    """The configuration fontconfig reads without us: FONTCONFIG_FILE when it names a file,
    else the system's."""
    named = os.environ.get("FONTCONFIG_FILE", "")
    return Path(named) if named and Path(named).is_absolute() and Path(named).is_file() else SYSTEM_CONFIG


def write_fontconfig(directory: Path) -> Path:
    """Build the font in `directory`/fonts and write `directory`/fonts.conf: the configuration
    fontconfig would read anyway, plus that font folder, minus every other font that covers a
    CJK language, with its caches in `directory`/cache (none left behind). Point FONTCONFIG_FILE
    at the returned file before Qt starts."""
    fonts = directory / "fonts"
    build_cjk_font(fonts / "CoveTestCJK.ttf")
    rejected = "".join(f'      <pattern><patelt name="lang"><string>{lang}</string></patelt></pattern>\n'
                       for lang in CJK_LANGUAGES)
    conf = directory / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n'
        '<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">\n'
        "<fontconfig>\n"
        f"  <cachedir>{escape(str(directory / 'cache'))}</cachedir>\n"
        f'  <include ignore_missing="yes">{escape(str(_base_config()))}</include>\n'
        f"  <dir>{escape(str(fonts))}</dir>\n"
        "  <selectfont>\n"
        "    <rejectfont>\n"
        f"{rejected}"
        "    </rejectfont>\n"
        "    <acceptfont>\n"
        f'      <pattern><patelt name="family"><string>{FAMILY}</string></patelt></pattern>\n'
        "    </acceptfont>\n"
        "  </selectfont>\n"
        "</fontconfig>\n",
        encoding="utf-8",
    )
    return conf
