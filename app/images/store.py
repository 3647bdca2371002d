"""Images kept by content: one file per image in a private folder, named by the SHA-256 of its bytes,
so an image sent twice is kept once. The history's images live in `Paths.images_dir`; the API's
images, which nothing keeps, pass through a folder of this process's own for as long as their
reply runs (`PassingImages`).

A file is written whole (a temporary name, fsync, rename) and read back only when its bytes still
hash to its name, so a file swapped or cut short under Cove is never sent to a model as the image
it claims to be. The folder is 0700 and its files 0600 (app/private_files.py).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.atomic_file import write_bytes_whole

_SHA256 = re.compile(r"[0-9a-f]{64}")


class ImageMissing(Exception):
    """An image the store should hold is gone or no longer holds its bytes; one sentence."""


@dataclass(frozen=True)
class ImageStore:
    folder: Path

    def put(self, data: bytes, sha256: str | None = None) -> Path:
        """Keep `data` (an image file's bytes) and return its file. `sha256`, when given, must be
        the bytes' digest (app/images/checks.CheckedImage.sha256): it is checked, not trusted."""
        digest = hashlib.sha256(data).hexdigest()
        if sha256 is not None and sha256 != digest:
            raise ValueError(f"the image's bytes hash to {digest[:12]}…, not {sha256[:12]}…")
        path = self.folder / digest
        if path.is_file() and path.stat().st_size == len(data):
            return path
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_bytes_whole(path, data)  # 0600, whole or not at all
        return path

    def path(self, sha256: str) -> Path | None:
        """The file of the image `sha256`, or None when the store does not hold it."""
        if not _SHA256.fullmatch(sha256):
            return None
        path = self.folder / sha256
        return path if path.is_file() else None

    def files(self, shas: Iterable[str]) -> dict[str, str]:
        """The files of the images `shas` the store holds (SHA-256 -> path); those it lacks are left out."""
        out: dict[str, str] = {}
        for sha in shas:
            path = self.path(sha)
            if path is not None:
                out[sha] = str(path)
        return out

    def holds(self) -> set[str]:
        """The SHA-256 of every image the store holds."""
        try:
            return {p.name for p in self.folder.iterdir() if _SHA256.fullmatch(p.name)}
        except FileNotFoundError:
            return set()

    def remove(self, sha256: str) -> bool:
        """Delete the image `sha256`; False when it was not there."""
        path = self.path(sha256)
        if path is None:
            return False
        path.unlink(missing_ok=True)
        return True


def read_image(path: str | Path, sha256: str, *, max_bytes: int) -> bytes:
    """The bytes of the image file `path`, which must hash to `sha256` and hold at most
    `max_bytes`; ImageMissing says why not."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise ImageMissing(f"the image {sha256[:12]}… cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ImageMissing(f"the image {sha256[:12]}… is larger than it was when it was checked")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ImageMissing(f"the image {sha256[:12]}… was changed on disk since it was sent")
    return data


class PassingImages:
    """The API's images: kept in a private folder of this process's own while a request that sent
    them is read and answered, then deleted. A reply holds its images (`hold`, `release`); an image
    no reply holds is deleted once it is older than KEEP_S (a request refused after it was read
    holds nothing, and its images go at the next release). Thread-safe."""

    KEEP_S = 600.0

    def __init__(self, folder: Path) -> None:
        self.store = ImageStore(folder)
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, sha256: str) -> Path:
        """Keep `data` (checked to hash to `sha256`) for a request being read."""
        with self._lock:
            path = self.store.put(data, sha256)
            os.utime(path)  # its age counts from the newest request that sent it
            return path

    def files(self, shas: Iterable[str]) -> dict[str, str]:
        """The files of the images `shas` (SHA-256 -> path), those the folder holds."""
        return self.store.files(shas)

    def hold(self, shas: Iterable[str]) -> None:
        with self._lock:
            for sha in shas:
                self._held[sha] = self._held.get(sha, 0) + 1

    def release(self, shas: Iterable[str]) -> None:
        """Let go of images `hold` took; then delete every image no reply holds that is older than KEEP_S."""
        with self._lock:
            for sha in shas:
                n = self._held.get(sha, 0) - 1
                if n > 0:
                    self._held[sha] = n
                else:
                    self._held.pop(sha, None)
            now = time.time()
            for sha in self.store.holds() - set(self._held):
                path = self.store.folder / sha
                try:
                    if now - path.stat().st_mtime > self.KEEP_S:
                        path.unlink()
                except FileNotFoundError:
                    pass

    def held(self) -> set[str]:
        with self._lock:
            return set(self._held)


def passing_images(root: Path | None = None) -> PassingImages:
    """This process's PassingImages, in a private folder removed when the process ends. The first
    call decides where: `root`/<pid> (Cove's cache folder, where the folders of processes that
    died, killed before they could remove theirs, are removed now), else a new temporary folder."""
    global _passing
    with _passing_lock:
        if _passing is None:
            if root is not None:
                _remove_dead(root)
                folder = root / str(os.getpid())
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            else:
                folder = Path(tempfile.mkdtemp(prefix="cove-images-"))  # 0700, as mkdtemp makes it
            _passing = PassingImages(folder)
            atexit.register(shutil.rmtree, folder, True)
        return _passing


def _remove_dead(root: Path) -> None:
    """Remove the passing folders under `root` whose process is gone."""
    import psutil

    try:
        folders = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit()]
    except FileNotFoundError:
        return
    for folder in folders:
        if int(folder.name) != os.getpid() and not psutil.pid_exists(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)


_passing: PassingImages | None = None
_passing_lock = threading.Lock()
