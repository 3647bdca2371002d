"""When the window shows the welcome page, and what its buttons do.

The welcome page (ui/shell/welcome_page.py) replaces the conversation on a first run: when no
conversation exists yet, or no model is installed and no server of the person's lists one. It follows the chat controller (the
starter being prepared, a model registered or downloaded) so "Start chatting" is enabled the
moment a model is ready, and it gives way to the conversation as soon as one is opened or a
message is sent.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QStackedWidget

from app.cli import setup_cmd
from models.catalog import CatalogEntry, load_catalog, machine_ram
from models.model_facts import installed_is_base
from ui.shell.welcome_page import WelcomePage, setup_note_text, wheel_model_text


class WelcomeFeature(QObject):
    def __init__(self, window: Any, pages: QStackedWidget) -> None:
        super().__init__(window)
        self._window = window
        self._pages = pages
        self.controller = window.controller
        self.core = window.core
        self.page: WelcomePage | None = None

    def start(self) -> None:
        """At window start: show the welcome page on a first run."""
        first_run = not self.core.history.list_conversations(limit=1) or not (self.core.library.list() or self._remote_models())
        if first_run:
            self._show()

    def _remote_models(self) -> bool:
        """Whether a connection to one of the person's servers lists a model (one they chat with)."""
        from app.remote.remote_model import remote_models

        return any(remote_models(connection) for connection in self.core.connections.list())

    @property
    def shown(self) -> bool:
        return self.page is not None and self._pages.currentWidget() is self.page

    def _show(self) -> None:
        if self.page is None:
            try:
                catalog = load_catalog()
            except ValueError:
                catalog = []  # a damaged catalog file: the page still offers import and search
            self.page = WelcomePage(database=self.core.paths.database, catalog=catalog, total_ram=machine_ram())
            self.page.start_chat_requested.connect(self._start_chat)
            self.page.catalog_entry_chosen.connect(self._open_entry)
            self.page.browse_models_requested.connect(lambda: self._window.open_models("Discover"))
            self.page.import_requested.connect(self._import)
            self._pages.addWidget(self.page)
            c = self.controller
            c.models_changed.connect(self.refresh)
            c.model_loaded.connect(lambda _loaded: self.refresh())
            c.model_load_failed.connect(lambda _sentence: self.refresh())
            c.error_reported.connect(lambda _sentence: self.refresh())
            c.conversation_opened.connect(lambda _cid: self.leave())
            c.messages_appended.connect(lambda _shown: self.leave())  # a message sent to the open conversation
        self.refresh()
        self._pages.setCurrentWidget(self.page)

    def refresh(self) -> None:
        if self.page is None:
            return
        model = self.controller.model
        self.page.set_model_state(
            ready=model is not None,
            name=model.name if model else None,
            preparing=self.controller.preparing_starter,
            error=self.controller.starter_error,
            load_error=self.controller.load_error,
            base=installed_is_base(model),
            about=self._about(model),
        )

    def _about(self, model: object) -> str | None:
        """The instruct starter's origin when it is the model; else why `cove setup` could not fetch it."""
        spec = setup_cmd.INSTRUCT_STARTER
        if getattr(model, "sha256", None) == spec.sha256:
            return wheel_model_text(spec)
        note = setup_cmd.read_setup_note(self.core.paths.data_dir)
        return setup_note_text(spec, note) if note else None

    def leave(self) -> None:
        """Show the conversation (a chat was opened or started)."""
        if self.page is not None:
            self._pages.setCurrentIndex(0)

    def _start_chat(self) -> None:
        self._window.new_chat()
        self.leave()
        self._window.composer.focus_input()

    def _import(self) -> None:
        """The file dialog at once, over the Installed tab where the imported model will show."""
        self._window.open_models("Installed").installed_view.ask_import()

    def _open_entry(self, entry: CatalogEntry) -> None:
        panel = self._window.open_models("Discover")
        panel.choose_repo(entry.repo_id, prefer=entry.filename)
