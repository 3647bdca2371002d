"""`cove models download REPO FILE`: fetch a GGUF (every part of a split one, and a vision
model's projector) from the Hub into the models folder, verified, and add it to the library.

Progress goes to stderr; Ctrl-C pauses (the partial file stays, and running the same
command again continues from it); `--json` prints the installed model on stdout.
"""

from __future__ import annotations

import argparse
import queue
import sys
import time
from pathlib import PurePosixPath
from typing import TextIO

from app import hub_token
from app.cli.model_json import model_dict
from app.cli.output import human_size
from app.cli.terminal_text import print_json_for, say
from app.core import Core
from app.downloads import DownloadManager
from models.download.protocol import Cancelled, DownloadEvent, Failed, Finished, Paused, Progress, Retrying, Started
from models.download.register import register_finished
from models.hub_errors import HubError
from models.hub_files import GGUFEntry, RepoListing, check_repo_path, list_gguf_files
from models.units import format_duration

EXIT_PAUSED = 130  # as for any Ctrl-C


def add_subcommands(msub: argparse._SubParsersAction) -> None:
    """Register `cove models download`."""
    p = msub.add_parser(
        "download",
        help="download a GGUF model from the Hugging Face Hub (Ctrl-C pauses; run again to resume)",
    )
    p.add_argument("repo", metavar="REPO", help="repository id, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    p.add_argument("file", metavar="FILE", help="the .gguf file; for a split model its first part or its name without -0000k-of-0000N")
    p.add_argument("--revision", default=None, help="branch, tag or commit (default: the main branch)")
    p.add_argument("--json", action="store_true", help="print the installed model as JSON on stdout")
    p.set_defaults(run=run_download)


def run_download(core: Core, args: argparse.Namespace) -> int:
    check_repo_path(_typed_name(args.file))  # before any request: `..` would leave the pinned URL
    token = hub_token.load_token()
    listing = list_gguf_files(core.network, args.repo, token=token, revision=args.revision)
    entry = find_entry(listing, args.file)
    filenames = list(entry.filenames)  # every part, then the projector of a vision model
    manager = DownloadManager.for_core(core)
    model = manager.find_installed(listing.repo_id, filenames[0], listing.commit, sha256=entry.parts[0].sha256)
    if model is None or (entry.projector is not None and not model.vision):
        wanted = filenames if model is None else [filenames[-1]]  # installed without its projector: that alone
        finished = _download(manager, listing, wanted, token, sys.stderr)
        if finished is None:
            return EXIT_PAUSED
        model = register_finished(core.library, finished, model)
        sees = f", with its vision projector ({human_size(model.mmproj_size or 0)})" if model.vision else ""
        done = f"Downloaded {model.name} ({model.quant or '?'}, {human_size(model.size)}){sees} to {model.path}."
    else:
        done = f"{model.name} is already installed ({model.path})."
    if args.json:
        print_json_for({**model_dict(model, core.settings.last_model), "revision": model.revision}, sys.stdout)
    else:
        say(done, sys.stdout)
    return 0


def find_entry(listing: RepoListing, wanted: str) -> GGUFEntry:
    """The listing entry `wanted` names: a display name, any part's path, or a bare file name."""
    wanted = check_repo_path(_typed_name(wanted))
    for entry in listing.entries:
        if wanted == entry.name or any(wanted == p.filename for p in entry.parts):
            return _complete(entry, listing)
    by_name = [
        e
        for e in listing.entries
        if PurePosixPath(wanted).name in {PurePosixPath(e.name).name, *(PurePosixPath(p.filename).name for p in e.parts)}
    ]
    if len(by_name) == 1:
        return _complete(by_name[0], listing)
    raise HubError(f"{listing.repo_id} has no GGUF file called {wanted}; `cove models files {listing.repo_id}` lists them.")


def _typed_name(text: str) -> str:
    """A file name as typed, without surrounding spaces or a leading "/" (the repo's root)."""
    return text.strip().lstrip("/")


def _complete(entry: GGUFEntry, listing: RepoListing) -> GGUFEntry:
    if not entry.complete:
        raise HubError(
            f"{entry.name} in {listing.repo_id} is split into {entry.expected_parts} parts but only "
            f"{len(entry.parts)} are on the Hub, so it cannot be loaded."
        )
    return entry


def _download(manager: DownloadManager, listing: RepoListing, filenames: list[str], token: str | None, err: TextIO) -> Finished | None:
    """Run one download to its end, drawing progress on `err`; None when Ctrl-C paused it."""
    events: queue.Queue[DownloadEvent] = queue.Queue()
    handle = manager.start(listing.repo_id, filenames, listing.commit, token, events.put)
    line = _ProgressLine(err)
    try:
        while True:
            try:
                event = events.get(timeout=0.5)  # a timeout keeps Ctrl-C prompt on every platform
            except queue.Empty:
                continue
            if isinstance(event, (Finished, Failed, Paused, Cancelled)):
                break
            line.show(event)
    except KeyboardInterrupt:
        handle.pause()
        event = handle.wait(10.0) or Paused(0, 0)
        line.end()
        if isinstance(event, Finished):  # it completed just as Ctrl-C came
            return event
        done = f" at {human_size(event.bytes_done)} of {human_size(event.total)}" if isinstance(event, Paused) and event.total else ""
        print(
            f"cove: paused{done}; the partial download is kept. To resume, run the same command again: "
            f"cove models download {listing.repo_id} {filenames[0]}",
            file=err,
        )
        return None
    line.end()
    if isinstance(event, Failed):
        raise HubError(event.message)
    if isinstance(event, Finished):
        return event
    return None


class _ProgressLine:
    """One line on stderr redrawn in place on a terminal; elsewhere a line every few seconds."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._last = 0.0
        self._open = False

    def show(self, event: DownloadEvent) -> None:
        if isinstance(event, Started):
            resumed = f", resuming at {human_size(event.resumed_from)}" if event.resumed_from else ""
            self._say(f"Downloading {human_size(event.total)}{resumed}.")
        elif isinstance(event, Retrying):
            self._say(f"Retrying ({event.reason}) in {event.wait:g} s, attempt {event.attempt + 1}.")
        elif isinstance(event, Progress):
            now = time.monotonic()
            if not self.tty and now - self._last < 5.0 and event.bytes_done < event.total:
                return
            self._last = now
            text = progress_text(event)
            if self.tty:
                self.out.write("\r" + text.ljust(72))
                self._open = True
            else:
                self.out.write(text + "\n")
            self.out.flush()

    def _say(self, text: str) -> None:
        self.end()
        self.out.write(text + "\n")
        self.out.flush()

    def end(self) -> None:
        if self._open:
            self.out.write("\n")
            self.out.flush()
            self._open = False


def progress_text(p: Progress) -> str:
    """'  42% 1.2 GB of 2.9 GB · 35.2 MB/s · 48 s left'"""
    pct = f"{100 * p.fraction:5.1f}%"
    speed = f"{human_size(int(p.speed))}/s" if p.speed else "waiting for data"
    parts = [f"{pct} {human_size(p.bytes_done)} of {human_size(p.total)}", speed]
    if p.eta is not None and p.bytes_done < p.total:
        parts.append(f"{format_duration(p.eta)} left")
    return " · ".join(parts)
