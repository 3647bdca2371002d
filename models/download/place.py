"""Putting verified files into the models folder without overwriting anybody's file."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePath

from models.download.split import split_name
from models.gguf_info import sha256_file
from models.projector import is_projector_name

INCOMING_SUFFIX = ".cove-incoming"  # a cross-disk copy in progress; cleanup deletes leftovers


def _same(path: Path, size: int, sha256: str) -> bool:
    try:
        return path.stat().st_size == size and sha256_file(path) == sha256
    except OSError:
        return False


def _free(path: Path, size: int, sha256: str) -> bool:
    return not path.exists() or _same(path, size, sha256)


def _candidates(base: Path, name: str) -> Iterator[Path]:
    yield base / name
    stem, suffix = (name[:-5], name[-5:]) if name.lower().endswith(".gguf") else (name, "")
    for i in range(2, 10_000):
        yield base / f"{stem}-{i}{suffix}"


def destinations(dest_dir: Path, filenames: Sequence[str], sizes: Sequence[int], sha256s: Sequence[str]) -> list[Path]:
    """Where each file goes: its own repo file name in `dest_dir`.

    A path already holding the very same bytes is reused (a download finished before but
    was never registered); a path holding something else is never overwritten: a single
    file gets `name-2.gguf`, and a split set, whose parts must keep their names, moves to
    its own folder `stem`, `stem-2`, ... A vision model's projector (the last name, mmproj…) goes
    beside its model, under its own name or `name-2.gguf`.
    """
    names = [PurePath(f).name for f in filenames]
    if len(names) > 1 and is_projector_name(names[-1]):  # a vision model's projector goes beside it
        model = destinations(dest_dir, filenames[:-1], sizes[:-1], sha256s[:-1])
        beside = next(p for p in _candidates(model[0].parent, names[-1]) if _free(p, sizes[-1], sha256s[-1]))
        return [*model, beside]
    if len(names) == 1:
        return [next(p for p in _candidates(dest_dir, names[0]) if _free(p, sizes[0], sha256s[0]))]
    info = split_name(names[0])
    folder_name = info.stem if info else PurePath(names[0]).stem
    folders = [dest_dir, *_candidates(dest_dir, folder_name)]
    for folder in folders:
        paths = [folder / n for n in names]
        if all(_free(p, size, sha) for p, size, sha in zip(paths, sizes, sha256s)):
            return paths
    raise FileExistsError(f"no free folder for {names[0]} in {dest_dir}")


def move_into(src: Path, dest: Path) -> None:
    """Move a verified file to `dest`: a rename on one disk, else a durable copy then a rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():  # the same bytes (destinations() checked): keep the one in place
        src.unlink()
        return
    try:
        os.replace(src, dest)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    tmp = dest.with_name(dest.name + INCOMING_SUFFIX)
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 8 << 20)
            fout.flush()
            os.fsync(fout.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    src.unlink()
