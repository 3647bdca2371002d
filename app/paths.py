"""Every path Cove reads or writes: data dir, database, models, logs, caches.

All of them come from platformdirs, and all of them move under one folder when
`COVE_HOME` is set (tests point it at a temporary directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "cove"


@dataclass(frozen=True)
class Paths:
    """Resolved locations for one run. Directories are created on first use by `ensure()`."""

    data_dir: Path
    models_dir: Path
    logs_dir: Path
    cache_dir: Path

    @property
    def database(self) -> Path:
        return self.data_dir / "cove.db"

    @property
    def documents_database(self) -> Path:
        """The document index (app/docs): its own file, so a damaged index never touches the history."""
        return self.data_dir / "documents.db"

    @property
    def images_dir(self) -> Path:
        """The conversations' images (app/images/store.py), one file per SHA-256."""
        return self.data_dir / "images"

    @property
    def passing_images_dir(self) -> Path:
        """The API's images while their replies run (app/images/store.py PassingImages), one folder per server process."""
        return self.cache_dir / "passing-images"

    @property
    def tls_dir(self) -> Path:
        """This machine's certificate and its key for `cove serve` off loopback (app/serve/http/tls.py)."""
        return self.data_dir / "tls"

    @property
    def settings_file(self) -> Path:
        return self.data_dir / "settings.json"

    @property
    def partial_downloads_dir(self) -> Path:
        return self.cache_dir / "downloads"

    @property
    def tools_dir(self) -> Path:
        """Where built helper tools (e.g. llama-bench) are kept, outside the repository."""
        return self.cache_dir / "tools"

    @property
    def kv_states_dir(self) -> Path:
        """Conversations' saved KV state (app/engine/host/state_files.py), one folder per conversation."""
        return self.cache_dir / "kv-states"

    @property
    def folders(self) -> tuple[Path, ...]:
        """The folders Cove owns, each kept private (app/private_files.py)."""
        return (self.data_dir, self.models_dir, self.logs_dir, self.cache_dir)

    def ensure(self) -> Paths:
        """Create the folders (0700), closing any that other accounts can open."""
        from app.private_files import make_private

        make_private(self.folders)
        return self


def resolve_paths(environ: os._Environ[str] | dict[str, str] | None = None) -> Paths:
    """Answer every path from platformdirs, or from `COVE_HOME` when it is set."""
    env = os.environ if environ is None else environ
    home = env.get("COVE_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return Paths(
            data_dir=root / "data",
            models_dir=root / "models",
            logs_dir=root / "logs",
            cache_dir=root / "cache",
        )
    data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    return Paths(
        data_dir=data,
        models_dir=data / "models",
        logs_dir=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
        cache_dir=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
    )
