"""The person's installed models as Auto's candidates (`installed_candidates`), for the API server,
the command line and the window: the library's entries, each file's chat template and memory estimate (read
once per entry), and the speeds measured in the history. Blocking: call it on the thread that owns
the database."""

from __future__ import annotations

import functools
from typing import Any

from app.routing.candidates import Candidate, Speed, history_speeds, local_candidate
from models.library import InstalledModel


def installed_candidates(
    library: Any, db: Any, loaded: set[str], n_ctx: int | None = None, speeds: dict[str, Speed] | None = None
) -> list[Candidate]:
    """Every installed model of `library` (models.library.ModelLibrary) as a candidate, with the
    speeds measured in the history of `db` (sqlite_utils.Database). `loaded`: the model paths
    loaded now; `n_ctx`: the context asked for (None: Cove's default), for the memory estimate;
    `speeds`: history_speeds(db) when the caller has read them already."""
    import psutil

    speeds = history_speeds(db) if speeds is None else speeds
    total = int(psutil.virtual_memory().total)  # the pool unloads other models to make room
    found = []
    for model in library.list():
        try:
            template, needed = _file_facts(model, n_ctx)
        except Exception:  # noqa: BLE001 - a file moved or damaged since it was added is no candidate
            continue
        speed = speeds.get(model.name)
        found.append(local_candidate(model, template, loaded=model.path in loaded, speed=speed, memory_needed=needed, memory_free=total))
    return found


@functools.lru_cache(maxsize=256)
def _file_facts(model: InstalledModel, n_ctx: int | None) -> tuple[str | None, int]:
    """(its chat template, the memory it needs at `n_ctx`): read from the file once per library
    entry (a file changed since is another entry: its sha256 and times differ). Reading a header
    with its vocabulary takes about 125 ms for Qwen 2.5: too long for every request."""
    from app.serve.pool.machine import estimated_footprint
    from models.gguf_info import read_gguf_info

    template = read_gguf_info(model.path).chat_template if model.has_chat_template else None
    footprint = estimated_footprint(model, n_ctx)
    return template, footprint.weights + footprint.per_engine
