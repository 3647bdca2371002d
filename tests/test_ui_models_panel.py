"""The Models panel against the local fake Hub (pytest-qt, offscreen): catalog fit marks, Hub
search, a repo's files with quant labels, the fit estimate from a remote header read, a real
download child ending in the library, cancel, resume of a download an earlier run left,
offline refusal with zero requests, installed models (import, delete), the measured memory
beside the estimate, the token field, and the window's Models button, Ctrl+M and quit path."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import psutil  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QLabel, QLineEdit  # noqa: E402

from app.downloads import DownloadManager, resumable  # noqa: E402
from app.secrets import MemoryToken, TokenStore  # noqa: E402
from models.catalog import load_catalog  # noqa: E402
from models.download.protocol import TransferPolicy  # noqa: E402
from tests.support.fake_hub import VALID_TOKEN, Fault  # noqa: E402
from tests.support.keyrings import InMemoryKeyring, PlaintextKeyring  # noqa: E402
from tests.support.tiny_model import write_tiny_gguf  # noqa: E402
from ui.download_bridge import DownloadBridge  # noqa: E402
from ui.hub_settings import HubSettingsPage  # noqa: E402
from ui.hub_worker import HubWorker  # noqa: E402
from ui.models_panel import ModelsPanel  # noqa: E402

REPO = "org/tiny-GGUF"
FILE = "tiny-Q8_0.gguf"
WAIT_MS = 60_000
FAST = TransferPolicy(stall_timeout=1.0, connect_timeout=5.0, max_attempts=4, backoff_base=0.05, backoff_max=0.2, progress_interval=0.05)
PATIENT = TransferPolicy(stall_timeout=60.0, connect_timeout=5.0, max_attempts=4, backoff_base=0.05, backoff_max=0.2, progress_interval=0.05)


@pytest.fixture(scope="session")
def served_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real tiny GGUF (about 1.5 MB with its extra tokens) for the fake Hub to serve."""
    path = tmp_path_factory.mktemp("served") / "tiny.gguf"
    return write_tiny_gguf(path, extra_tokens=[f"<x{i}>" for i in range(2000)]).read_bytes()


class Confirmations:
    """Stands in for the confirmation dialog: records each question and answers `answer`."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def __call__(self, title: str, question: str) -> bool:
        self.asked.append((title, question))
        return self.answer


def make_panel(qtbot, core, policy: TransferPolicy = FAST, keyring=None, confirm=None):
    store = TokenStore(keyring or InMemoryKeyring(), MemoryToken())
    worker = HubWorker(core.network, store.get)
    bridge = DownloadBridge(DownloadManager.for_core(core, policy=policy), store.get)
    panel = ModelsPanel(core, worker, bridge, store, confirm=confirm or Confirmations())
    qtbot.addWidget(panel)
    panel.show()
    return panel


@pytest.fixture
def hub(fake_hub, served_bytes):
    fake_hub.add_repo(REPO, {FILE: served_bytes, "tiny-Q4_K_M.gguf": served_bytes[:-1] + b"\0", "README.md": b"hi"},
                      downloads=500, likes=7, license="mit")
    return fake_hub


@pytest.fixture
def panel(qtbot, cove_core, hub):
    p = make_panel(qtbot, cove_core)
    yield p
    p.downloads.shutdown()


def list_repo(qtbot, panel: ModelsPanel, repo: str = REPO) -> None:
    panel.choose_repo(repo)
    qtbot.waitUntil(lambda: panel.files_view.listing() is not None and panel.files_view.listing().repo_id == repo, timeout=WAIT_MS)


def choose_file(qtbot, panel: ModelsPanel, name: str) -> None:
    row = [r[0] for r in panel.files_view.rows()].index(name)
    panel.files_view.choose(row)
    qtbot.waitUntil(lambda: panel.files_view.fit_text().lower().startswith(("fits", "too large")), timeout=WAIT_MS)


# ---- discover ---------------------------------------------------------------------------


def test_catalog_shows_every_entry_with_a_fit_mark_for_this_machine(qtbot, cove_core, monkeypatch):
    import models.memory_estimate as memory_estimate
    import ui.models_discover as models_discover

    # A 2 GB machine without a GPU: the smallest model fits, the 32B one does not.
    monkeypatch.setattr(models_discover, "machine_ram", lambda: 2_000_000_000)
    monkeypatch.setattr(memory_estimate, "machine_memory",
                        lambda: memory_estimate.MachineMemory(2_000_000_000, 1_000_000_000, None))
    panel = make_panel(qtbot, cove_core)
    rows = dict(panel.catalog_view.rows())
    entries = load_catalog()
    assert len(rows) == len(entries) >= 10
    assert set(rows.values()) <= {"Fits", "Tight", "Too large"}
    assert rows["Qwen2.5 0.5B Instruct"] == "Fits"
    assert rows["Qwen2.5 32B Instruct"] == "Too large"
    assert panel.catalog_view.isVisibleTo(panel)


def test_search_shows_results_with_author_counts_licence_and_gated_mark(qtbot, panel, hub):
    hub.add_repo("other/alpha-small-GGUF", {"a-Q4_0.gguf": b"x"}, gated=True, downloads=12, likes=40, license=None)
    hub.add_repo("org/alpha-big-GGUF", {"b-Q4_0.gguf": b"x"}, downloads=2500, likes=3, license="apache-2.0",
                 last_modified="2020-03-04T00:00:00.000Z")
    panel.search("alpha", "downloads")
    qtbot.waitUntil(lambda: len(panel.search_view.rows()) == 2, timeout=WAIT_MS)
    first, second = panel.search_view.rows()
    assert first[:4] == ("org/alpha-big-GGUF", "org", "2.5k", "3")
    assert first[4] == "2020-03-04" and first[5] == "apache-2.0" and first[6] == "Open"
    assert second[0] == "other/alpha-small-GGUF" and second[5] == "–" and second[6] == "Gated"
    assert not panel.catalog_view.isVisibleTo(panel)  # results replace the catalog
    assert "2 GGUF repositories" in panel.search_view.status_text()

    panel.search("alpha", "likes")
    qtbot.waitUntil(lambda: [r[0] for r in panel.search_view.rows()][:1] == ["other/alpha-small-GGUF"], timeout=WAIT_MS)

    panel.search_view.query_box.setText("")
    panel.search_view.request_search()  # an empty box brings the catalog back
    assert panel.catalog_view.isVisibleTo(panel) and panel.search_view.rows() == []


def test_an_older_search_answering_late_is_dropped(qtbot, panel, hub):
    hub.add_repo("org/beta-GGUF", {"b-Q4_0.gguf": b"x"})
    shown: list[str] = []
    panel.worker.searched.connect(lambda reply: shown.append(reply.request.query))
    panel.search("tiny", "downloads")
    panel.search("beta", "downloads")  # before the event loop delivers anything: "tiny" is stale
    qtbot.waitUntil(lambda: panel.worker.dropped == 1 and shown == ["beta"], timeout=WAIT_MS)
    assert [r[0] for r in panel.search_view.rows()] == ["org/beta-GGUF"]


def test_listing_a_repo_shows_gguf_files_with_quant_labels_and_split_models_as_one(qtbot, panel, hub):
    hub.add_repo("org/split-GGUF", {
        "m-Q2_K-00001-of-00002.gguf": b"a" * 3000, "m-Q2_K-00002-of-00002.gguf": b"b" * 2000,
        "m-IQ4_XS.gguf": b"c" * 1000, "notes.txt": b"x",
    })
    list_repo(qtbot, panel, "org/split-GGUF")
    rows = panel.files_view.rows()
    assert [(r[1], r[2]) for r in rows] == [("IQ4_XS", "1.0 KB"), ("Q2_K", "5.0 KB")]
    assert rows[1][0] == "m-Q2_K.gguf · 2 parts"
    assert panel.files_view.title.text() == "org/split-GGUF"


def test_choosing_a_file_shows_its_fit_from_a_header_read_of_a_small_prefix(qtbot, panel, hub, served_bytes):
    list_repo(qtbot, panel)
    assert {r[1] for r in panel.files_view.rows()} == {"Q8_0", "Q4_K_M"}
    choose_file(qtbot, panel, FILE)
    assert panel.files_view.fit_text() == "Fits in RAM"
    assert "Estimated need at 4,096 tokens: RAM" in panel.files_view.figures.text()
    gets = hub.requests_for(FILE, "GET")
    assert gets and all(r.headers.get("range", "").startswith("bytes=") for r in gets)
    assert panel.files_view.download_button.isEnabled()

    # Another context size is estimated again from the header already read: no new request.
    before = len(hub.requests)
    panel.files_view.context_box.setCurrentIndex(panel.files_view.context_box.findData(8192))
    panel.files_view.fit_settings_changed.emit()
    qtbot.waitUntil(lambda: "8,192 tokens" in panel.files_view.figures.text(), timeout=WAIT_MS)
    assert len(hub.requests) == before


def test_a_gated_file_needs_the_token_saved_in_settings(qtbot, panel, hub, served_bytes):
    hub.add_repo("meta/gated-GGUF", {"g-Q8_0.gguf": served_bytes}, gated=True)
    list_repo(qtbot, panel, "meta/gated-GGUF")
    panel.files_view.choose(0)
    qtbot.waitUntil(lambda: "gated" in panel.files_view.figures.text(), timeout=WAIT_MS)
    assert panel.files_view.fit_text() == ""
    panel.settings_page.save_token(VALID_TOKEN)
    panel.files_view.fit_settings_changed.emit()  # estimate again, now with the token
    qtbot.waitUntil(lambda: panel.files_view.fit_text() == "Fits in RAM", timeout=WAIT_MS)


# ---- downloads --------------------------------------------------------------------------


def test_download_ends_in_the_installed_list_the_library_and_can_be_chosen(qtbot, panel, hub, cove_core, served_bytes):
    list_repo(qtbot, panel)
    choose_file(qtbot, panel, FILE)
    chosen: list[str] = []
    panel.model_chosen.connect(chosen.append)
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(panel.files_view.download_button, Qt.MouseButton.LeftButton)
    (row,) = panel.downloads.rows()
    assert row.state == "finished" and row.bytes_done == row.total == len(served_bytes)
    model = cove_core.library.get(row.model_name)
    assert (model.repo, model.file, model.source) == (REPO, FILE, "download")
    assert Path(model.path).read_bytes() == served_bytes
    assert model.name in panel.installed_view.names()
    assert "Installed" in panel.downloads_view.lines()[0]
    assert dict((r[0], r[3]) for r in panel.files_view.rows())[FILE] == "Installed"
    assert not panel.files_view.download_button.isEnabled()
    panel.downloads_view.row_buttons(row.key)["Use for next turn"].click()
    assert chosen == [model.name]


def test_a_download_that_is_not_a_usable_model_says_so_in_one_sentence(qtbot, panel, hub, cove_core):
    hub.add_repo("org/odd-GGUF", {"odd-Q4_0.gguf": b"GGUF" + bytes(5000)})  # verifies, but is no model
    before = [m.name for m in cove_core.library.list()]
    key = panel.downloads.start("org/odd-GGUF", ["odd-Q4_0.gguf"], None)
    qtbot.waitUntil(lambda: panel.downloads.row(key).state == "unusable", timeout=WAIT_MS)
    line = panel.downloads_view.lines()[0]
    assert line.startswith("Downloaded, not added") and "could not be added to the models list" in line
    assert "Traceback" not in line and line.count("\n") == 0
    assert list(panel.downloads_view.row_buttons(key)) == ["Clear"]
    assert [m.name for m in cove_core.library.list()] == before
    assert (cove_core.models_dir / "odd-Q4_0.gguf").exists()  # what was downloaded is not thrown away


def test_cancel_stops_the_download_and_registers_nothing(qtbot, cove_core, hub):
    panel = make_panel(qtbot, cove_core, policy=PATIENT)
    before = [m.name for m in cove_core.library.list()]
    list_repo(qtbot, panel)
    choose_file(qtbot, panel, FILE)
    hub.set_fault(REPO, FILE, Fault(stall_after=200_000, stall_s=30))  # after the header read
    panel.files_view.download_button.click()
    qtbot.waitUntil(lambda: panel.downloads.rows()[0].bytes_done >= 200_000, timeout=WAIT_MS)
    key = panel.downloads.rows()[0].key
    assert panel.tabs.tabText(2) == "Downloads (1)"
    assert dict((r[0], r[3]) for r in panel.files_view.rows())[FILE] == "Downloading"
    panel.downloads_view.row_buttons(key)["Cancel"].click()
    qtbot.waitUntil(lambda: panel.downloads.rows() == [], timeout=WAIT_MS)
    hub.release_stalls()
    assert [m.name for m in cove_core.library.list()] == before
    assert not any(cove_core.paths.partial_downloads_dir.glob("*.part"))
    assert not (cove_core.models_dir / FILE).exists()
    assert panel.downloads_view.lines() == [] and panel.tabs.tabText(2) == "Downloads"
    panel.downloads.shutdown()


def test_a_download_left_by_an_earlier_run_is_offered_and_resumes(qtbot, cove_core, hub, served_bytes):
    hub.set_fault(REPO, FILE, Fault(stall_after=300_000, stall_s=30, times=1))
    earlier = DownloadBridge(DownloadManager.for_core(cove_core, policy=PATIENT), lambda: None)
    key = earlier.start(REPO, [FILE], None)
    qtbot.waitUntil(lambda: earlier.row(key).bytes_done >= 300_000, timeout=WAIT_MS)
    earlier.shutdown()  # the window of the earlier run quit: the partial file stays
    hub.release_stalls()

    panel = make_panel(qtbot, cove_core)
    assert panel.downloads_view.left_count() == 1
    assert "Left unfinished by an earlier session" in panel.downloads_view.lines()[0]
    assert panel.tabs.tabText(2) == "Downloads (1)"
    with qtbot.waitSignal(panel.downloads.model_installed, timeout=WAIT_MS):
        panel.downloads_view.left_buttons(0)["Resume"].click()
    resumed = [r.range_start for r in hub.requests_for(FILE, "GET")][-1]
    assert resumed is not None and resumed >= 300_000  # continued from the partial file
    assert Path(cove_core.library.get(panel.downloads.rows()[0].model_name).path).read_bytes() == served_bytes
    assert panel.downloads_view.left_count() == 0
    panel.downloads.shutdown()


def test_offline_refuses_every_network_action_with_zero_requests(qtbot, panel, hub):
    panel.settings_page.offline_box.setChecked(True)  # the Settings tab's checkbox
    assert panel.core.network.offline
    assert "Cove is offline" in panel.offline_line.text() and panel.offline_line.isVisibleTo(panel)
    assert not panel.search_view.search_button.isEnabled()
    panel.search("tiny", "downloads")
    qtbot.waitUntil(lambda: "offline" in panel.search_view.status_text(), timeout=WAIT_MS)
    panel.choose_repo(REPO)
    qtbot.waitUntil(lambda: "offline" in panel.files_view.status_text(), timeout=WAIT_MS)
    assert hub.requests == []
    assert panel.core.settings.offline is True  # kept for the next start

    panel.settings_page.offline_box.setChecked(False)
    list_repo(qtbot, panel)
    choose_file(qtbot, panel, FILE)
    panel.settings_page.set_offline(True)
    before = len(hub.requests)
    assert not panel.files_view.download_button.isEnabled()
    panel.download(panel.files_view.listing(), panel.files_view.chosen())
    assert "offline" in panel.message_text() and panel.downloads.rows() == []
    assert len(hub.requests) == before


# ---- installed models -------------------------------------------------------------------


def test_installed_models_show_their_facts_and_import_adds_a_file(qtbot, panel, cove_core, tmp_path):
    (row,) = panel.installed_view.rows()
    assert row[0] == "tiny-llama" and row[3] == "llama" and row[5].startswith("Imported: ")
    extra = write_tiny_gguf(tmp_path / "dropped-Q8_0.gguf", seed=3)
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        panel.import_files([str(extra)])
    assert "dropped-Q8_0" in panel.installed_view.names()
    assert cove_core.library.get("dropped-Q8_0").path == str(extra)

    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with qtbot.waitSignal(panel.importer.failed, timeout=WAIT_MS):
        panel.import_files([str(junk)])
    assert panel.message_text().startswith("junk.gguf was not imported")
    assert "junk" not in panel.installed_view.names()


def test_delete_asks_first_refuses_the_model_in_use_and_keeps_a_file_cove_does_not_own(qtbot, cove_core, hub, tmp_path):
    confirm = Confirmations(answer=False)
    panel = make_panel(qtbot, cove_core, confirm=confirm)
    other = cove_core.library.import_file(write_tiny_gguf(tmp_path / "other.gguf", seed=5))
    panel.refresh_installed()
    panel.set_current_model("tiny-llama")
    panel.delete_model("tiny-llama")
    assert "in use" in panel.message_text() and confirm.asked == []

    panel.delete_model(other.name)  # answered No: nothing happens
    assert confirm.asked and "The file stays where it is" in confirm.asked[0][1]
    assert other.name in panel.installed_view.names()
    confirm.answer = True
    panel.installed_view.select(other.name)
    panel.installed_view.delete_button.click()
    assert other.name not in panel.installed_view.names()
    assert Path(other.path).exists()  # registered in place: the person's file stays


def test_after_a_model_loads_its_measured_memory_shows_beside_the_estimate(qtbot, panel, cove_core):
    model = cove_core.library.get("tiny-llama")
    panel.set_loaded(model, os.getpid(), 512)  # this process stands in for the engine
    qtbot.waitUntil(lambda: "measured" in panel.installed_view.memory_text(), timeout=WAIT_MS)
    text = panel.installed_view.memory_text()
    assert text.startswith("Memory of tiny-llama at 512 tokens: estimated ")
    assert "with the context full" in text and "mapped model" in text


# ---- the token field ----------------------------------------------------------------------


def _all_text(widget) -> str:
    return "\n".join([w.text() for w in widget.findChildren(QLineEdit)] + [w.text() for w in widget.findChildren(QLabel)]
                     + [w.toolTip() for w in widget.findChildren(QLabel)])


def test_token_field_saves_to_the_keyring_and_never_shows_the_token(qtbot, cove_core):
    keyring = InMemoryKeyring()
    store = TokenStore(keyring, MemoryToken())
    page = HubSettingsPage(cove_core, store)
    qtbot.addWidget(page)
    assert page.token_field.echoMode() == QLineEdit.EchoMode.Password
    qtbot.keyClicks(page.token_field, VALID_TOKEN)
    qtbot.mouseClick(page.save_token_button, Qt.MouseButton.LeftButton)
    assert keyring.passwords == {("cove", "huggingface"): VALID_TOKEN}
    assert page.token_field.text() == ""
    assert VALID_TOKEN not in _all_text(page)
    assert page.token_status.text().startswith("A token is saved in the ")

    again = HubSettingsPage(cove_core, TokenStore(keyring, MemoryToken()))  # the next time Settings opens
    qtbot.addWidget(again)
    assert again.token_field.text() == "" and VALID_TOKEN not in _all_text(again)
    assert again.remove_token_button.isEnabled()
    again.remove_token()
    assert keyring.passwords == {} and again.token_status.text().startswith("No token saved")


def test_token_without_a_secure_keyring_is_kept_in_memory_and_says_so(qtbot, cove_core):
    keyring = PlaintextKeyring()
    store = TokenStore(keyring, MemoryToken())
    page = HubSettingsPage(cove_core, store)
    qtbot.addWidget(page)
    note = page.save_token(VALID_TOKEN)
    assert "kept in memory for this run only" in note and note == page.token_note_text()
    assert keyring.passwords == {} and store.get() == VALID_TOKEN
    assert VALID_TOKEN not in _all_text(page)
    bad = page.save_token("not a token")
    assert bad.startswith("That is not a Hugging Face") and "not a token" not in bad


def test_models_folder_setting_moves_new_downloads(qtbot, panel, cove_core, tmp_path):
    page = panel.settings_page
    assert page.set_models_dir(tmp_path / "elsewhere")
    assert cove_core.models_dir == (tmp_path / "elsewhere").resolve()
    assert page.folder_field.text() == str((tmp_path / "elsewhere").resolve())
    assert page.set_models_dir(None) and cove_core.settings.models_dir is None


# ---- the window -------------------------------------------------------------------------


def test_window_opens_the_panel_with_ctrl_m_and_quitting_stops_a_download(qtbot, cove_core, fake_engine, hub):
    from ui.chat_controller import ChatController
    from ui.main_window import MainWindow

    hub.set_fault(REPO, FILE, Fault(stall_after=200_000, stall_s=30))
    window = MainWindow(ChatController(cove_core, fake_engine), state_file=cove_core.paths.data_dir / "w.ini",
                        presets_file=cove_core.paths.data_dir / "p.json",
                        token_store=TokenStore(InMemoryKeyring(), MemoryToken()))
    qtbot.addWidget(window)
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    assert window.models_panel is None
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    panel = window.models_panel
    assert panel is not None and panel.isVisible()
    assert window.models_button.accessibleName() == "Models"
    with qtbot.waitSignal(window.downloads.model_installed, timeout=WAIT_MS):
        window.downloads.start(REPO, ["tiny-Q4_K_M.gguf"], None)
    assert "tiny-Q4_K_M" in window.picker._names  # a finished download is in the model picker at once

    key = window.downloads.start(REPO, [FILE], None)
    qtbot.waitUntil(lambda: window.downloads.row(key).bytes_done >= 200_000, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "downloading" in window.network_indicator.text_shown(), timeout=WAIT_MS)
    handle = window.downloads._handles[key]
    assert handle.pid is not None and psutil.pid_exists(handle.pid)
    window.close()
    hub.release_stalls()
    assert not psutil.pid_exists(handle.pid)  # the download child is gone (reaped) when close returns
    assert handle.state == "paused"  # its partial file stays for the next start
    assert [d.filenames for d in resumable(cove_core.paths)] == [(FILE,)]  # offered at the next start


def test_switching_from_the_panel_loads_and_a_failed_load_keeps_the_previous_model(qtbot, cove_core, fake_engine, tmp_path):
    from ui.chat_controller import ChatController
    from ui.main_window import MainWindow

    broken = cove_core.library.import_file(write_tiny_gguf(tmp_path / "broken-Q8_0.gguf", seed=9))
    window = MainWindow(ChatController(cove_core, fake_engine), state_file=cove_core.paths.data_dir / "w.ini",
                        presets_file=cove_core.paths.data_dir / "p.json",
                        token_store=TokenStore(InMemoryKeyring(), MemoryToken()))
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.controller.model_loaded, timeout=WAIT_MS):
        window.start()
    panel = window.open_models("Installed")
    assert panel.tabs.tabText(panel.tabs.currentIndex()) == "Installed"
    # The loaded model's estimate beside what its engine process holds.
    qtbot.waitUntil(lambda: "measured" in panel.installed_view.memory_text(), timeout=WAIT_MS)
    assert panel.installed_view.memory_text().startswith("Memory of tiny-llama at ")

    panel.installed_view.select(broken.name)
    assert panel.installed_view.use_button.isEnabled()
    with qtbot.waitSignal(window.controller.model_load_failed, timeout=WAIT_MS) as failed:
        panel.installed_view.use_button.click()
    assert failed.args[0] and panel.message_text() == failed.args[0]
    assert window.controller.model.name == "tiny-llama"  # the model that worked is still the one used
    assert window.picker.status_text() == failed.args[0]
    rows = {r[0]: r for r in panel.installed_view.rows()}
    assert set(rows) == {"tiny-llama", broken.name}
    window.close()


def test_dropping_gguf_files_on_the_installed_list_imports_them(qtbot, panel, cove_core, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    dropped = write_tiny_gguf(tmp_path / "dragged.gguf", seed=11)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(dropped)), QUrl.fromLocalFile(str(tmp_path / "notes.txt"))])
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(panel.models_changed, timeout=WAIT_MS):
        panel.installed_view.tree.dropEvent(event)
    assert event.isAccepted()
    assert "dragged" in panel.installed_view.names() and cove_core.library.get("dragged").path == str(dropped)
