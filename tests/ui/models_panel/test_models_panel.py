"""The Models panel against the local fake Hub (pytest-qt, offscreen): catalog fit marks, Hub
search, a repo's files with quant labels, the fit estimate from a remote header read, a real
download child ending in the library, cancel, resume of a download an earlier run left,
offline refusal with zero requests, installed models (import, delete), the measured memory
beside the estimate, the token field, and the window's Models button, Ctrl+M and quit path."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.downloads import DownloadManager
from models.catalog import load_catalog
from tests.support.fake_hub import VALID_TOKEN, Fault
from tests.support.models_panel import FILE, PATIENT, REPO, WAIT_MS, choose_file, list_repo, make_panel
from ui.models_panel.download_bridge import DownloadBridge

# ---- discover ---------------------------------------------------------------------------


def test_catalog_shows_every_entry_with_a_fit_mark_for_this_machine(qtbot, cove_core, monkeypatch):
    import models.memory_estimate as memory_estimate
    import ui.models_panel.discover as models_discover

    # A 2 GB machine without a GPU: the smallest model fits, the 32B one does not.
    monkeypatch.setattr(models_discover, "machine_ram", lambda: 2_000_000_000)
    monkeypatch.setattr(memory_estimate, "machine_memory", lambda: memory_estimate.MachineMemory(2_000_000_000, 1_000_000_000, None))
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
    hub.add_repo(
        "org/alpha-big-GGUF", {"b-Q4_0.gguf": b"x"}, downloads=2500, likes=3, license="apache-2.0", last_modified="2020-03-04T00:00:00.000Z"
    )
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
    hub.add_repo(
        "org/split-GGUF",
        {
            "m-Q2_K-00001-of-00002.gguf": b"a" * 3000,
            "m-Q2_K-00002-of-00002.gguf": b"b" * 2000,
            "m-IQ4_XS.gguf": b"c" * 1000,
            "notes.txt": b"x",
        },
    )
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
