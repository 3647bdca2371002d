"""The suite's own CJK fallback font: a small TrueType font built with fontTools, whose lines are
taller than DejaVu Sans's and have a line gap, and the fontconfig file that makes it the only CJK
font Qt finds; beside it a Latin font with a line gap, for tests that need a primary font with one."""

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
# line holding one of these characters is clearly taller. A line gap too, which a QTextDocument
# adds to the height of every line it is on: neither of those has one in hhea (the one Qt reads
# when USE_TYPO_METRICS is off), but a CJK font may, and the streaming tail has to count it as
# Qt does (build_cjk_font's line_gap makes a font without one).
ASCENT = 1200
DESCENT = 320
LINE_GAP = 150
# CJK punctuation, hiragana and katakana; every unified ideograph; full- and halfwidth forms.
RANGES = ((0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xFF00, 0xFFEF))
IDEOGRAPHIC_SPACE = 0x3000
# Languages whose fonts the test processes do not see, so that Qt's fallback for CJK text is
# this font whatever else is installed (fontconfig's own language tags).
CJK_LANGUAGES = ("ja", "ko", "zh-cn", "zh-hk", "zh-mo", "zh-sg", "zh-tw")
SYSTEM_CONFIG = Path("/etc/fonts/fonts.conf")
# A primary font with a line gap (DejaVu Sans has none): printable ASCII as boxes, per em ascent
# 0.9, descent 0.25, line gap 0.2.
LATIN_FAMILY = "Cove Test Latin"
LATIN_METRICS = (900, 250, 200)


def _box(left: int, bottom: int, right: int, top: int) -> Glyph:
    pen = TTGlyphPen(None)
    pen.moveTo((left, bottom))
    pen.lineTo((left, top))
    pen.lineTo((right, top))
    pen.lineTo((right, bottom))
    pen.closePath()
    return pen.glyph()


def build_font(path: Path, family: str, cmap: dict[int, str], metrics: tuple[int, int, int]) -> Path:
    """Write a font named `family` to `path` whose characters (`cmap`) are each a filled box a
    full em wide ("box") or blank ("blank"), with `metrics` (ascent, descent, line gap) per
    UNITS_PER_EM."""
    ascent, descent, line_gap = metrics
    glyphs = {".notdef": _box(100, 0, 900, 800), "blank": TTGlyphPen(None).glyph(), "box": _box(80, -60, 920, 840)}
    builder = FontBuilder(UNITS_PER_EM, isTTF=True)
    builder.setupGlyphOrder(list(glyphs))
    builder.setupCharacterMap(cmap)
    builder.setupGlyf(glyphs)
    # (advance, left side bearing)
    builder.setupHorizontalMetrics({".notdef": (UNITS_PER_EM, 100), "blank": (UNITS_PER_EM, 0), "box": (UNITS_PER_EM, 80)})
    builder.setupHorizontalHeader(ascent=ascent, descent=-descent, lineGap=line_gap)
    builder.setupNameTable(
        {
            "familyName": family,
            "styleName": "Regular",
            "uniqueFontIdentifier": f"{family} Regular",
            "fullName": f"{family} Regular",
            "psName": family.replace(" ", "") + "-Regular",
            "version": "Version 1.0",
        }
    )
    # The same metrics in hhea, OS/2 typo (used: USE_TYPO_METRICS) and OS/2 win, so every
    # rasterizer's choice gives the same line (win has no line gap; hhea and typo have it).
    builder.setupOS2(
        version=4,
        sTypoAscender=ascent,
        sTypoDescender=-descent,
        sTypoLineGap=line_gap,
        usWinAscent=ascent,
        usWinDescent=descent,
        fsSelection=0x40 | 0x80,
        achVendID="COVE",
        usWeightClass=400,
    )
    builder.font["OS/2"].recalcUnicodeRanges(builder.font)
    builder.setupPost()
    path.parent.mkdir(parents=True, exist_ok=True)
    builder.save(str(path))
    return path


def build_cjk_font(path: Path, *, family: str = FAMILY, line_gap: int = LINE_GAP) -> Path:
    """Write the CJK font to `path`: every character of RANGES is one shared box (the
    ideographic space is blank), so the file stays small (about 45 kB, mostly the cmap)."""
    cmap = {code: "box" for first, last in RANGES for code in range(first, last + 1)}
    cmap[IDEOGRAPHIC_SPACE] = "blank"
    return build_font(path, family, cmap, (ASCENT, DESCENT, line_gap))


def build_latin_font(path: Path) -> Path:
    """Write LATIN_FAMILY to `path`: printable ASCII, the space blank."""
    cmap = {code: "box" for code in range(0x21, 0x7F)}
    cmap[0x20] = "blank"
    return build_font(path, LATIN_FAMILY, cmap, LATIN_METRICS)


def _base_config() -> Path:
    """The configuration fontconfig reads without us: FONTCONFIG_FILE when it names a file,
    else the system's."""
    named = os.environ.get("FONTCONFIG_FILE", "")
    return Path(named) if named and Path(named).is_absolute() and Path(named).is_file() else SYSTEM_CONFIG


def write_fontconfig(directory: Path, *, line_gap: int = LINE_GAP) -> Path:
    """Build the fonts in `directory`/fonts (the CJK one with `line_gap`) and write
    `directory`/fonts.conf: the configuration fontconfig would read anyway, plus that font
    folder, minus every other font that covers a CJK language, with its caches in
    `directory`/cache (none left behind). Point FONTCONFIG_FILE at the returned file before Qt
    starts."""
    fonts = directory / "fonts"
    build_cjk_font(fonts / "CoveTestCJK.ttf", line_gap=line_gap)
    build_latin_font(fonts / "CoveTestLatin.ttf")
    rejected = "".join(f'      <pattern><patelt name="lang"><string>{lang}</string></patelt></pattern>\n' for lang in CJK_LANGUAGES)
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
