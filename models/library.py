"""The local model library: which GGUF files Cove knows, where they are, and what they were when checked.

Rows live in the `models` table of the history database (a sqlite_utils.Database the
caller opens and hands in). A file is validated, described and hashed once when it is
imported; before each load `recheck_file` compares what the file's stat says with what was
checked (size and mtime, and what no one can set back: the inode's change time and number) and
hashes the file again when they differ, and `record_recheck` brings the entry up to date.

A vision model is one entry: the text GGUF plus its projector (`mmproj_*` columns; checking and
placing the projector file: models/projector_files.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlite_utils

from models.download.split import part_names, split_name
from models.file_copy import _abspath, _check_still, _copy_with_sha256, _free_path, _stat, sha256_file
from models.gguf_errors import InvalidModelFile
from models.timestamps import parse_utc_timestamp, utc_timestamp
from models.transactions import write_transaction

if TYPE_CHECKING:
    from models.gguf_info import GGUFInfo

TABLE = "models"
SOURCES = ("imported", "copied", "starter", "download")


@dataclass(frozen=True)
class InstalledModel:
    name: str  # unique display name
    path: str  # absolute; symlinks are kept as given (split GGUFs find their siblings by name)
    sha256: str
    size: int
    mtime: float
    quant: str | None
    architecture: str | None
    parameter_count: int | None
    context_length: int | None
    has_chat_template: bool
    source: str  # one of SOURCES
    repo: str | None
    file: str | None
    revision: str | None
    added_at: str  # ISO 8601 UTC, e.g. 2025-05-01T09:30:00.123Z
    last_used_at: str | None
    # What `touch -r` cannot put back: the inode's change time and its number (a file replaced by
    # another). None for an entry an older Cove checked: its size and mtime are trusted once.
    ctime_ns: int | None = None
    inode: int | None = None
    # The vision projector (an mmproj GGUF, general.architecture "clip") that lets the model see
    # images: its absolute path, sha256 and size. None for a text-only model.
    mmproj_path: str | None = None
    mmproj_sha256: str | None = None
    mmproj_size: int | None = None

    @property
    def vision(self) -> bool:
        return bool(self.mmproj_path)


@dataclass(frozen=True)
class FileRecheck:
    """A model file read again because its stat changed since it was checked."""

    path: str
    sha256: str
    size: int
    mtime: float
    info: GGUFInfo
    previous_sha256: str
    ctime_ns: int | None = None
    inode: int | None = None

    @property
    def content_changed(self) -> bool:
        return self.sha256 != self.previous_sha256

    def sentence(self) -> str:
        return (
            f"the file {self.path} changed since it was imported; its new checksum is {self.sha256[:12]}… "
            f"(it was {self.previous_sha256[:12]}…), and replies from now on record the new one"
        )


def recheck_file(model: InstalledModel) -> FileRecheck | None:
    """None when the file's size and mtime are what was checked (a stat: cheap). Otherwise the
    file is validated and hashed again (reads it all). Touches no database, so it may run on
    any thread; `ModelLibrary.record_recheck` then records the result on the database's thread.
    Raises InvalidModelFile if the file is gone or no longer a valid GGUF."""
    from models.gguf_info import info_from_header  # gguf (numpy): imported when a file is read
    from models.gguf_validate import read_gguf_header

    path = Path(model.path)
    before = _stat(path)
    if unchanged(model, before):
        return None
    info = info_from_header(read_gguf_header(path))
    digest = sha256_file(path)
    _check_still(path, before)
    return FileRecheck(str(path), digest, before.st_size, before.st_mtime, info, model.sha256, before.st_ctime_ns, before.st_ino)


def unchanged(model: InstalledModel, st: os.stat_result) -> bool:
    """Whether `st` is the stat the model's file had when it was checked. An entry without the
    inode's change time and number (an older Cove's) goes by size and mtime."""
    if (st.st_size, st.st_mtime) != (model.size, model.mtime):
        return False
    return model.ctime_ns is None or (st.st_ctime_ns, st.st_ino) == (model.ctime_ns, model.inode)


class ModelNotFound(Exception):
    """No installed model matches; str(exc) is one sentence."""


class FileNotOwned(Exception):
    """remove(delete_file=True) on a file Cove did not put in its models folder; nothing was changed."""


def create_models_table(db: sqlite_utils.Database) -> None:
    """Create the `models` table. Disk format: the app's migration list calls this once."""
    with write_transaction(db):
        db.table(TABLE).create(
            {
                "name": str,
                "path": str,
                "sha256": str,
                "size": int,
                "mtime": float,
                "quant": str,
                "architecture": str,
                "parameter_count": int,
                "context_length": int,
                "has_chat_template": int,
                "source": str,
                "repo": str,
                "file": str,
                "revision": str,
                "added_at": str,
                "last_used_at": str,
                "ctime_ns": int,
                "inode": int,
                "mmproj_path": str,
                "mmproj_sha256": str,
                "mmproj_size": int,
            },
            pk="name",
            not_null=["path", "sha256", "size", "mtime", "has_chat_template", "source", "added_at"],
            if_not_exists=True,
        )
        db.table(TABLE).create_index(["path"], unique=True, if_not_exists=True)
    add_stat_columns(db)
    add_projector_columns(db)


def add_stat_columns(db: sqlite_utils.Database) -> None:
    """Give a `models` table an older Cove made the inode's change time and number (NULL until
    the file is next checked). Disk format: the app's migration list calls this once."""
    with write_transaction(db):
        have = {c.name for c in db.table(TABLE).columns}
        for column in ("ctime_ns", "inode"):
            if column not in have:
                db.execute(f"ALTER TABLE [{TABLE}] ADD COLUMN {column} INTEGER")
        # A file whose size and mtime are still those checked is taken as checked, stamped now.
        for row in list(db.query(f"SELECT name, path, size, mtime FROM [{TABLE}] WHERE ctime_ns IS NULL")):
            try:
                st = os.stat(row["path"])
            except OSError:
                continue
            if (st.st_size, st.st_mtime) == (row["size"], row["mtime"]):
                db.execute(f"UPDATE [{TABLE}] SET ctime_ns = ?, inode = ? WHERE name = ?", [st.st_ctime_ns, st.st_ino, row["name"]])


def add_projector_columns(db: sqlite_utils.Database) -> None:
    """Give a `models` table an older Cove made the projector's columns (NULL: text only).
    Disk format: the app's migration list calls this once."""
    with write_transaction(db):
        have = {c.name for c in db.table(TABLE).columns}
        for column, kind in (("mmproj_path", "TEXT"), ("mmproj_sha256", "TEXT"), ("mmproj_size", "INTEGER")):
            if column not in have:
                db.execute(f"ALTER TABLE [{TABLE}] ADD COLUMN {column} {kind}")


_Models = list[InstalledModel]  # spelled once here: inside the class, `list` is the method


class ModelLibrary:
    table = TABLE  # (read by models/projector_files.py, which does not import this module)

    def __init__(self, db: sqlite_utils.Database, models_dir: Path) -> None:
        self.db = db
        self.models_dir = Path(models_dir)

    def import_file(
        self,
        path: str | Path,
        *,
        copy: bool = False,
        source: str | None = None,
        name: str | None = None,
        sha256: str | None = None,
        repo: str | None = None,
        file: str | None = None,
        revision: str | None = None,
        mmproj: str | Path | None = None,
        mmproj_sha256: str | None = None,
    ) -> InstalledModel:
        """Validate, describe, hash and register a GGUF file; with copy=True, into models_dir first.

        `sha256` may be passed when the caller has just verified the file's hash (the starter,
        a download checked against its etag), so the file is not read twice. Re-importing a
        registered path returns its entry, refreshed if the file changed. Raises InvalidModelFile
        with nothing registered and no copy left behind.

        `mmproj`: the model's vision projector, checked, hashed (unless `mmproj_sha256` is given)
        and copied or kept in place as the model is, then recorded with the model (replacing any
        projector it had).
        """
        from models.projector_files import discard_projector, prepare_projector

        src = _abspath(path)
        if source is not None and source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
        if mmproj is None:
            return self._import_model(src, copy, source, name, sha256, {"repo": repo, "file": file, "revision": revision})
        _refuse_projector(src)
        projector = prepare_projector(self, mmproj, copy=copy and not self._owns(src), sha256=mmproj_sha256)
        try:
            model = self._import_model(src, copy, source, name, sha256, {"repo": repo, "file": file, "revision": revision})
        except BaseException:
            discard_projector(self, projector)
            raise
        return self._record_projector(model.name, projector.columns())

    def set_projector(self, name: str, path: str | Path | None, *, copy: bool = False, sha256: str | None = None) -> InstalledModel:
        """Pair an installed model with a vision projector (checked, and hashed unless `sha256` is
        given; with copy=True copied into models_dir), or with None unpair it. The file is kept."""
        from models.projector_files import prepare_projector

        model = self.get(name)
        if path is None:
            return self._record_projector(model.name, {"mmproj_path": None, "mmproj_sha256": None, "mmproj_size": None})
        projector = prepare_projector(self, path, copy=copy, sha256=sha256)
        return self._record_projector(model.name, projector.columns())

    def _record_projector(self, name: str, columns: dict[str, Any]) -> InstalledModel:
        with write_transaction(self.db):
            self.db.table(TABLE).update(name, columns)
        return self.get(name)

    def _import_model(
        self, src: Path, copy: bool, source: str | None, name: str | None, sha256: str | None, extra: dict[str, str | None]
    ) -> InstalledModel:
        from models.gguf_info import info_from_header
        from models.gguf_validate import read_gguf_header

        if copy and not self._owns(src):
            return self._import_copy(src, source or "copied", name, extra)
        existing = self._find("path = ?", [str(src)])
        before = _stat(src)
        if existing is not None and unchanged(existing, before):
            return existing
        header = read_gguf_header(src)
        _refuse_projector_header(header, src)
        info = info_from_header(header)
        digest = sha256 or sha256_file(src)
        _check_still(src, before)
        if existing is not None:
            given = {k: v for k, v in {"source": source, **extra}.items() if v is not None}
            row = {**_info_columns(info, digest, before), **given}
            with write_transaction(self.db):
                self.db.table(TABLE).update(existing.name, row)
            return self.get(existing.name)
        return self._insert(src, info, digest, before, source or "imported", name, extra)

    def list(self) -> _Models:
        """Every installed model, by name (case-insensitive)."""
        return [_model(r) for r in self.db.table(TABLE).rows_where(order_by="name COLLATE NOCASE, name")]

    def get(self, name_or_path: str) -> InstalledModel:
        """By exact name, then case-insensitive name, then path (as given, then with symlinks resolved)."""
        found = self._find("name = ?", [name_or_path])
        if found is None:
            rows = [*self.db.table(TABLE).rows_where("name = ? COLLATE NOCASE", [name_or_path], limit=2)]
            found = _model(rows[0]) if len(rows) == 1 else None
        if found is None and name_or_path.strip():
            as_path = _abspath(name_or_path)
            found = self._find("path = ?", [str(as_path)]) or self._find("path = ?", [str(as_path.resolve())])
        if found is None:
            raise ModelNotFound(f"no model named '{name_or_path}'; `cove models list` shows what is installed")
        return found

    def remove(self, name: str, *, delete_file: bool = False) -> InstalledModel:
        """Forget a model. delete_file=True also deletes its file (every part of a split model),
        but only a file inside the models folder or one Cove copied or downloaded; for any
        other file it raises FileNotOwned and changes nothing, because that file belongs to
        the person, not to Cove. Its projector goes too when Cove placed it (inside the models
        folder, or downloaded beside the model) and no other model uses it."""
        from models.projector_files import owned_projector

        model = self.get(name)
        if delete_file and not (self._owns(Path(model.path)) or model.source in ("copied", "download")):
            raise FileNotOwned(
                f"'{model.name}' was registered in place, so its file {model.path} is not Cove's to delete; "
                "remove the model without deleting the file, or delete the file yourself"
            )
        with write_transaction(self.db):
            self.db.table(TABLE).delete(model.name)
            if delete_file:
                # Inside the transaction: if a delete fails, the entry stays.
                for part in model_files(model.path):
                    part.unlink(missing_ok=True)
                projector = owned_projector(self, model)
                if projector is not None:
                    projector.unlink(missing_ok=True)
        if delete_file:
            _remove_own_folder(Path(model.path))
        return model

    def mark_used(self, name: str) -> None:
        model = self.get(name)
        with write_transaction(self.db):
            latest = self.last_used()
            now = datetime.now(UTC)
            if latest is not None and latest.last_used_at is not None and utc_timestamp(now) <= latest.last_used_at:
                # Keep "last used" strictly ordered even for two calls within one millisecond.
                now = parse_utc_timestamp(latest.last_used_at) + timedelta(milliseconds=1)
            self.db.table(TABLE).update(model.name, {"last_used_at": utc_timestamp(now)})

    def last_used(self) -> InstalledModel | None:
        rows = self.db.table(TABLE).rows_where("last_used_at IS NOT NULL", order_by="last_used_at DESC", limit=1)
        return next((_model(r) for r in rows), None)

    def record_recheck(self, name: str, recheck: FileRecheck) -> InstalledModel:
        """Store what `recheck_file` found: the file's new checksum, size, mtime and header facts."""
        with write_transaction(self.db):
            self.db.table(TABLE).update(
                name,
                {
                    **_info_columns(recheck.info, recheck.sha256, None),
                    "size": recheck.size,
                    "mtime": recheck.mtime,
                    "ctime_ns": recheck.ctime_ns,
                    "inode": recheck.inode,
                },
            )
        return self.get(name)

    def check_unchanged(self, model: InstalledModel) -> None:
        """Raise InvalidModelFile if the file is gone or its size or mtime differ from when it was checked."""
        try:
            st = os.stat(model.path)
        except FileNotFoundError:
            raise InvalidModelFile(f"the model file {model.path} is gone; import it again or remove '{model.name}'") from None
        except OSError as exc:
            raise InvalidModelFile(f"cannot read the model file {model.path}: {exc.strerror or exc}") from None
        if not unchanged(model, st):
            raise InvalidModelFile(f"the file changed since it was checked; import it again ({model.path})")

    # -- internals ---------------------------------------------------------------------------

    def _import_copy(self, src: Path, source: str, name: str | None, extra: dict[str, str | None]) -> InstalledModel:
        from models.gguf_info import info_from_header
        from models.gguf_validate import read_gguf_header

        _refuse_projector_header(read_gguf_header(src), src)  # fail before copying gigabytes
        self.models_dir.mkdir(parents=True, exist_ok=True)
        dest = _free_path(self.models_dir, src.name)
        part = dest.with_name(dest.name + ".part")
        try:
            digest = _copy_with_sha256(src, part)  # the one read of the data: copied and hashed together
            info = info_from_header(read_gguf_header(part))  # describe exactly the bytes we keep
            same = [m for m in self._where("sha256 = ?", [digest]) if self._owns(Path(m.path)) and self._intact(m)]
            if same:
                part.unlink()
                return same[0]
            os.replace(part, dest)  # atomic: a crash never leaves a half file under the final name
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        try:
            return self._insert(dest, info, digest, os.stat(dest), source, name, extra)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise

    def _insert(
        self,
        path: Path,
        info: GGUFInfo,
        digest: str,
        st: os.stat_result,
        source: str,
        name: str | None,
        extra: dict[str, str | None],
    ) -> InstalledModel:
        with write_transaction(self.db):
            raced = self._find("path = ?", [str(path)])
            if raced is not None:  # another process registered it meanwhile
                return raced
            unique = self._unique_name((name or "").strip() or _stem(path))
            row = {
                "name": unique,
                "path": str(path),
                **_info_columns(info, digest, st),
                "source": source,
                **extra,
                "added_at": utc_timestamp(),
                "last_used_at": None,
            }
            self.db.table(TABLE).insert(row)
        return self.get(unique)

    def _unique_name(self, base: str) -> str:
        taken = {str(r[0]).lower() for r in self.db.execute(f"SELECT name FROM [{TABLE}]").fetchall()}
        candidate, i = base, 1
        while candidate.lower() in taken:
            i += 1
            candidate = f"{base}-{i}"
        return candidate

    def _owns(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.models_dir.resolve())

    def _intact(self, model: InstalledModel) -> bool:
        try:
            self.check_unchanged(model)
        except InvalidModelFile:
            return False
        return True

    def _where(self, where: str, args: Sequence[Any]) -> _Models:
        return [_model(r) for r in self.db.table(TABLE).rows_where(where, args)]

    def _find(self, where: str, args: Sequence[Any]) -> InstalledModel | None:
        found = self._where(where, args)
        return found[0] if found else None


def _refuse_projector(src: Path) -> None:
    from models.gguf_validate import read_gguf_header

    _refuse_projector_header(read_gguf_header(src), src)


def _refuse_projector_header(header: Any, src: Path) -> None:
    from models.projector import refuse_projector_as_model

    refuse_projector_as_model(header, src)


def model_files(path: str | Path) -> list[Path]:
    """The files a model is made of: the file itself, or for part 1 of a split GGUF every
    part (llama.cpp finds parts 2..N beside part 1 by name, so the name is the record)."""
    path = Path(path)
    return [path.with_name(name) for name in part_names(path.name)]


def _remove_own_folder(path: Path) -> None:
    """A split model placed in a folder of its own (named after the set, see
    models.download.place) leaves that folder empty once its parts are deleted."""
    info = split_name(path.name)
    if info is not None and re.fullmatch(re.escape(info.stem) + r"(-\d+)?", path.parent.name):
        try:
            path.parent.rmdir()  # only succeeds when empty
        except OSError:
            pass


def _model(row: dict[str, Any]) -> InstalledModel:
    # Only the known columns: a later migration may add more.
    values: dict[str, Any] = {f.name: row.get(f.name) for f in fields(InstalledModel)}
    values["has_chat_template"] = bool(values["has_chat_template"])
    return InstalledModel(**values)


def _info_columns(info: GGUFInfo, digest: str, st: os.stat_result | None) -> dict[str, Any]:
    """The columns a check of the file sets: its header's facts, its checksum and (given `st`) its stat."""
    stat = {} if st is None else {"size": st.st_size, "mtime": st.st_mtime, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}
    return {
        "sha256": digest,
        **stat,
        "quant": info.quant,
        "architecture": info.architecture,
        "parameter_count": info.parameter_count,
        "context_length": info.context_length,
        "has_chat_template": int(info.has_chat_template),
    }


def _stem(path: Path) -> str:
    return path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.stem or path.name
