"""Whether the X11 libraries Qt's xcb platform plugin needs are installed, checked before Qt
starts: without one of them Qt aborts with its own message and a core dump. This module does
not import Qt, so the check runs (and can say what to install) even when Qt cannot."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SystemLibrary:
    soname: str  # the file the dynamic loader looks for
    debian: str  # the package that installs it on Debian and Ubuntu
    fedora: str  # and on Fedora


# The xcb-util family and xkbcommon-x11: needed by PySide6's xcb plugin (6.5+), and the ones a
# desktop may lack (the core libxcb libraries come with any X11 installation).
XCB_LIBRARIES: tuple[SystemLibrary, ...] = (
    SystemLibrary("libxcb-cursor.so.0", "libxcb-cursor0", "xcb-util-cursor"),
    SystemLibrary("libxcb-icccm.so.4", "libxcb-icccm4", "xcb-util-wm"),
    SystemLibrary("libxcb-keysyms.so.1", "libxcb-keysyms1", "xcb-util-keysyms"),
    SystemLibrary("libxcb-image.so.0", "libxcb-image0", "xcb-util-image"),
    SystemLibrary("libxcb-render-util.so.0", "libxcb-render-util0", "xcb-util-renderutil"),
    SystemLibrary("libxcb-util.so.1", "libxcb-util1", "xcb-util"),
    SystemLibrary("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", "libxkbcommon-x11"),
)


def load_library(soname: str) -> object:
    """Load a shared library the way Qt's plugin will (raises OSError when it cannot be found)."""
    return ctypes.CDLL(soname)


def uses_xcb(environ: Mapping[str, str], platform: str | None = None) -> bool:
    """True when Qt would start on its X11 (xcb) plugin: Linux, and QT_QPA_PLATFORM asks for
    xcb, or it is unset, DISPLAY is set and this is not a Wayland session (Qt prefers Wayland there)."""
    if not (platform or sys.platform).startswith("linux"):
        return False
    requested = environ.get("QT_QPA_PLATFORM", "").strip()
    if requested:
        return requested.startswith("xcb")
    if not environ.get("DISPLAY"):
        return False
    wayland_session = bool(environ.get("WAYLAND_DISPLAY")) and environ.get("XDG_SESSION_TYPE", "").lower() == "wayland"
    return not wayland_session


def missing_libraries(
    libraries: Sequence[SystemLibrary] = XCB_LIBRARIES, load: Callable[[str], object] | None = None
) -> list[SystemLibrary]:
    """The libraries that cannot be loaded (`load` defaults to load_library)."""
    load = load or load_library
    missing: list[SystemLibrary] = []
    for library in libraries:
        try:
            load(library.soname)
        except OSError:
            missing.append(library)
    return missing


def missing_libraries_sentence(missing: Sequence[SystemLibrary]) -> str:
    """One sentence naming the missing libraries and the command that installs them."""
    names = ", ".join(library.soname for library in missing)
    debian = " ".join(library.debian for library in missing)
    fedora = " ".join(library.fedora for library in missing)
    return (
        f"Cove's window needs system libraries that are not installed ({names}): install them with "
        f"`sudo apt-get install {debian}` on Debian or Ubuntu, or `sudo dnf install {fedora}` on Fedora; "
        "`cove chat` works without them."
    )


def window_library_problem(
    environ: Mapping[str, str] = os.environ, platform: str | None = None, load: Callable[[str], object] | None = None
) -> str | None:
    """The sentence to print instead of starting Qt, or None when the window can start."""
    if not uses_xcb(environ, platform):
        return None
    missing = missing_libraries(load=load)
    return missing_libraries_sentence(missing) if missing else None
