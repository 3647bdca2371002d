"""Renders assets/icons/cove.svg into the PNGs, the Windows .ico and the macOS .icns that the
build and the Linux desktop entry use. Needs only PySide6 (QtSvg ships in PySide6-Essentials).

    .venv/bin/python packaging/render_icons.py        # rewrites assets/icons/{png/,cove.ico,cove.icns}

The outputs are committed, so a build never needs this; run it after editing the SVG.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parents[1] / "assets" / "icons"
SVG = ICONS / "cove.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # 256 is the largest an .ico entry can be
# .icns entry types holding PNG data (macOS 10.7+), by pixel size; ic10 is 512@2x.
ICNS_TYPES = ((b"icp4", 16), (b"icp5", 32), (b"icp6", 64), (b"ic07", 128), (b"ic08", 256), (b"ic09", 512), (b"ic10", 1024))


def render_png(size: int) -> bytes:
    """The SVG drawn at size x size pixels, as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"render_icons: {SVG} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An .ico whose entries are PNG-compressed images (Windows Vista and later)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    offset = 6 + 16 * len(pngs)
    entries, blobs = b"", b""
    for size, png in sorted(pngs.items()):
        dim = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An .icns whose entries are PNG images (what iconutil writes for an .iconset)."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(["render_icons", "-platform", "offscreen"])
    sizes = sorted(set(PNG_SIZES) | set(ICO_SIZES) | {s for _, s in ICNS_TYPES})
    pngs = {size: render_png(size) for size in sizes}
    (ICONS / "png").mkdir(exist_ok=True)
    for size in PNG_SIZES:
        (ICONS / "png" / f"cove-{size}.png").write_bytes(pngs[size])
    (ICONS / "cove.ico").write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    (ICONS / "cove.icns").write_bytes(icns_bytes(pngs))
    del app
    print(f"render_icons: wrote {len(PNG_SIZES)} PNGs, cove.ico and cove.icns in {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
