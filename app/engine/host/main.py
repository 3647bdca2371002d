"""The engine host process: owns one llama.cpp model and answers requests from the parent.

Run as `python -m app.engine.host.main --in-fd N --out-fd M`. Requests arrive as JSON lines on
fd N and events leave on fd M (see protocol.py); stdout and stderr are left to native
code, which may print. A reader thread takes requests off the pipe so that Cancel is seen
while the main thread is generating; everything else runs on the main thread, which takes new
requests between the steps of the replies in progress (scheduler.py: several replies at once,
one per slot, in one batch).

Cross-process invariants:
- Every request gets exactly one final answer (Loaded/Unloaded/Finished/Failed) with its
  id, and nothing on the pipe is ever a traceback.
- If a chat template will not stop rendering, the host reports Failed(kind="template")
  and exits; the parent starts a new host (a Python thread cannot be killed).
- End of input (the parent closed the pipe, or died, even of SIGKILL) ends the host: the
  replies in progress are cancelled, and if the main thread has not returned
  PARENT_GONE_EXIT_S later (a load or a prefill llama.cpp cannot interrupt) the process
  exits anyway.
- The host runs in a session of its own (process.py), so signals sent to the parent's
  process group never reach it; SIGINT is ignored as well, for platforms without sessions.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from app.engine.environment import scrub_environment
from app.engine.protocol import (
    Cancel,
    Devices,
    Embed,
    Failed,
    Generate,
    ListDevices,
    Load,
    Loaded,
    ProtocolError,
    Ready,
    Request,
    Shutdown,
    Unload,
    Unloaded,
    decode,
    encode,
)

if TYPE_CHECKING:
    from app.engine.host.scheduler import Scheduler
    from app.engine.host.session import ModelSession

TEMPLATE_HUNG_EXIT = 70
PARENT_GONE_EXIT_S = 10.0


class _Writer:
    """Thread-safe, unbuffered writes of whole lines to the event pipe."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]


class Host:
    def __init__(self, write: Callable[[bytes], None], on_input_closed: Callable[[], None] | None = None) -> None:
        self._write = write
        self._on_input_closed = on_input_closed  # called once, on the reader thread, at end of input
        self._requests: queue.Queue[Request | None] = queue.Queue()
        self._lock = threading.Lock()
        self._session: ModelSession | None = None  # imported lazily: llama_cpp loads native code
        self._scheduler: Scheduler | None = None
        self._early_cancels: set[str] = set()  # Cancel that arrived before there was a scheduler
        self._held: list[Request] = []  # loads and unloads that wait for the replies in progress

    def send(self, msg: object) -> None:
        try:
            self._write(encode(msg))  # type: ignore[arg-type]
        except OSError:
            pass  # the parent is gone; the reader will see end of input

    def serve(self, reader: BinaryIO) -> int:
        threading.Thread(target=self._read, args=(reader,), name="requests", daemon=True).start()
        self.send(Ready(pid=os.getpid()))
        while True:
            scheduler = self._scheduler
            busy = scheduler is not None and scheduler.busy
            if not busy and self._held:
                req: Request | None = self._held.pop(0)
            elif busy:
                try:
                    req = self._requests.get_nowait()
                except queue.Empty:
                    assert scheduler is not None
                    self._step(scheduler)
                    continue
            else:
                req = self._requests.get()
            if req is None or isinstance(req, Shutdown):
                break
            if busy and isinstance(req, (Load, Unload)):
                self._held.append(req)  # after the replies in progress end
                continue
            self._dispatch(req)
        if self._scheduler is not None:
            for rid in [r.rid for r in self._scheduler.active] + [g.request_id for g in self._scheduler.waiting]:
                self._scheduler.cancel(rid)
            self._step(self._scheduler)  # the replies end as cancelled, with their text
        self._close_session()
        return 0

    def _step(self, scheduler: Scheduler) -> None:
        from app.engine.host.templates import TemplateHung

        try:
            scheduler.step()
        except TemplateHung as exc:
            self._template_hung(scheduler.hung, str(exc))
        except Exception as exc:  # last resort: sentences, never a traceback on the pipe
            import traceback

            traceback.print_exc(file=sys.stderr)
            scheduler.fail_all(f"the engine hit an unexpected error: {type(exc).__name__}: {exc}")

    def _read(self, reader: BinaryIO) -> None:
        for line in reader:
            if not line.strip():
                continue
            try:
                req = decode(line)
            except ProtocolError as exc:
                self.send(Failed("", f"the engine received a malformed request ({exc})", "protocol"))
                continue
            if isinstance(req, Cancel):
                with self._lock:
                    scheduler = self._scheduler
                    if scheduler is None:
                        self._early_cancels.add(req.request_id)
                if scheduler is not None:
                    scheduler.cancel(req.request_id)
                continue
            self._requests.put(req)  # type: ignore[arg-type]
        self._requests.put(None)
        if self._on_input_closed is not None:
            self._on_input_closed()

    def _dispatch(self, req: Request) -> None:
        try:
            if isinstance(req, Load):
                self._load(req)
            elif isinstance(req, Generate):
                self._generate(req)
            elif isinstance(req, Unload):
                self._close_session()
                self.send(Unloaded(req.request_id))
            elif isinstance(req, ListDevices):
                self._list_devices(req)
            elif isinstance(req, Embed):
                if self._session is None:
                    self.send(Failed(req.request_id, "no model is loaded in the engine", "embed"))
                else:
                    self.send(self._session.embed(req))
            else:
                self.send(Failed(req.request_id, f"the engine cannot handle {type(req).__name__}", "protocol"))
        except Exception as exc:  # last resort: a sentence, never a traceback on the pipe
            import traceback

            traceback.print_exc(file=sys.stderr)
            self.send(Failed(req.request_id, f"the engine hit an unexpected error: {type(exc).__name__}: {exc}", "internal"))

    def _list_devices(self, req: ListDevices) -> None:
        try:
            from app.engine.host.backends import NoBackend, devices, load_backends
        except ImportError as exc:
            self.send(Failed(req.request_id, f"the engine cannot start llama.cpp ({exc})", "load"))
            return
        try:
            load_backends()
        except NoBackend as exc:
            self.send(Failed(req.request_id, str(exc), "load"))
            return
        self.send(Devices(req.request_id, [d.to_dict() for d in devices()]))

    def _close_session(self) -> None:
        with self._lock:
            self._scheduler = None
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _template_hung(self, request_id: str, message: str) -> None:
        self.send(Failed(request_id, message, "template"))
        os._exit(TEMPLATE_HUNG_EXIT)  # the render thread cannot be stopped; the parent respawns us

    def _load(self, req: Load) -> None:
        self._close_session()
        try:
            from app.engine.host.session import LoadError, ModelSession
            from app.engine.host.templates import TemplateHung
        except ImportError as exc:
            self.send(Failed(req.request_id, f"the engine cannot start llama.cpp ({exc})", "load"))
            return
        try:
            session = ModelSession(req)
        except LoadError as exc:
            self.send(Failed(req.request_id, str(exc), "load"))
            return
        except TemplateHung as exc:
            self._template_hung(req.request_id, str(exc))
            return
        from app.engine.host.scheduler import Scheduler

        self._session = session
        scheduler = Scheduler(session, self._write)
        with self._lock:
            self._scheduler = scheduler
            early, self._early_cancels = self._early_cancels, set()
        for rid in early:
            scheduler.cancel(rid)
        self.send(
            Loaded(
                request_id=req.request_id,
                model_path=req.model_path,
                n_ctx=session.n_ctx,
                n_ctx_train=session.n_ctx_train,
                n_threads=session.n_threads,
                n_gpu_layers=session.n_gpu_layers,
                backend=session.backend,
                template_source=session.format.source,
                template_note=session.format.note,
                load_ms=round(session.load_ms, 3),
                n_batch=session.n_batch,
                n_ubatch=session.n_ubatch,
                flash_attn=session.flash_attn,
                architecture=session.architecture,
                n_vocab=session.n_vocab,
                placement=session.placement.to_dict(),
                embeddings=session.pooling is not None,
                type_k=session.type_k,
                type_v=session.type_v,
                kv_bytes=session.kv_bytes,
                compute_bytes=session.compute_bytes,
                draft_model=session.draft_model_name,
                draft_note=session.draft_note,
                slots=session.n_slots,
                vision=session.images is not None,
                projector=session.images.projector.name if session.images is not None else "",
            )
        )

    def _generate(self, req: Generate) -> None:
        scheduler = self._scheduler
        if scheduler is None:
            self.send(Failed(req.request_id, "no model is loaded in the engine", "generate"))
            return
        scheduler.submit(req)


def _open_fd(value: int, mode: str) -> int:
    if sys.platform == "win32":  # the parent passes inheritable handles, not C runtime fds
        import msvcrt

        return msvcrt.open_osfhandle(value, os.O_RDONLY if mode == "r" else os.O_WRONLY)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.engine.host.main", description=__doc__.splitlines()[0])
    parser.add_argument("--in-fd", type=int, required=True, help="pipe to read requests from")
    parser.add_argument("--out-fd", type=int, required=True, help="pipe to write events to")
    parser.add_argument("--nice", type=int, default=0, help="lower the host's priority by this much (work that yields)")
    args = parser.parse_args(argv)
    if args.nice > 0 and hasattr(os, "nice"):
        os.nice(args.nice)  # before llama.cpp starts a thread: every one it starts inherits it
    # Ctrl-C in a terminal reaches the whole process group; the parent decides what a
    # Ctrl-C means (usually: cancel the reply), so the host must not die of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    scrub_environment(os.environ)
    in_fd, out_fd = _open_fd(args.in_fd, "r"), _open_fd(args.out_fd, "w")
    with os.fdopen(in_fd, "rb") as reader:
        return Host(_Writer(out_fd), on_input_closed=_exit_soon).serve(reader)


def _exit_soon() -> None:
    """The parent is gone: whatever the main thread is stuck in, the process ends."""
    timer = threading.Timer(PARENT_GONE_EXIT_S, os._exit, args=(0,))
    timer.daemon = True
    timer.start()


if __name__ == "__main__":
    sys.exit(main())
