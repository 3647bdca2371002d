"""Reading the desktop build's lock files (packaging/requirements.lock, llama-source.lock):
entries, their markers and hashes, and which lines this Linux x86-64 CPython build installs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.paths import REPO_ROOT

LOCK = REPO_ROOT / "packaging" / "requirements.lock"
LLAMA_LOCK = REPO_ROOT / "packaging" / "llama-source.lock"


@dataclass(frozen=True)
class Locked:
    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]


def read_lock(text: str) -> list[Locked]:
    """The entries of a `pip install --require-hashes` file: `name==version [; marker] \\` and
    its `--hash=sha256:...` continuation lines."""
    entries: list[Locked] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        first = block.splitlines()[0]
        if first.startswith("#"):
            continue
        head = first.rstrip(" \\")
        spec, _, marker = head.partition(";")
        name, _, version = spec.strip().partition("==")
        assert version, f"not an exact pin: {first!r}"
        hashes = tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
        entries.append(Locked(canonicalize_name(name), Version(version.strip()), Marker(marker) if marker.strip() else None, hashes))
    return entries


def applies(entry: Locked, python: str) -> bool:
    """Whether a lock line is installed on Linux x86-64 with CPython `python` (the build here)."""
    if entry.marker is None:
        return True
    return entry.marker.evaluate(
        {
            "python_version": python,
            "python_full_version": f"{python}.0",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": "x86_64",
            "platform_python_implementation": "CPython",
            "implementation_name": "cpython",
        }
    )
