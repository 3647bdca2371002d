"""The parent's handle on the engine: load a model, generate replies, cancel, survive crashes.

Used by the command line and (through a thin Qt bridge) by the window, so it has no Qt:
every method is thread-safe, events reach the caller through each Generation's queue, and
the reader thread never waits on the consumer.

Cross-process invariants:
- One host process at a time. Replies may be in flight together (the host runs `slots` of them at
  once in one batch and queues the rest); a load, an unload or an embedding waits for none and
  is refused while a reply is in flight.
- A host that dies is noticed at once (its event pipe closes): the reply in progress ends
  as 'error' with the text so far and a sentence, a pending load raises EngineError, and
  the next load()/generate() starts a new host, reloading the last model for generate().
- cancel() asks the host to stop between tokens; if it has not stopped after
  `cancel_grace_s` (e.g. a long prompt evaluation, which llama.cpp cannot interrupt),
  the host is killed and replaced on the next request.
- A chat template that hangs the host is remembered per model file; the model is then
  loaded with its architecture's fallback format.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.child_command import child_command
from app.engine.generation import Failure, FinishedEvent, Generation, Serving, StartedInfo, TokenEvent
from app.engine.loaded import Embeddings, LoadedModel, LoadSettings, file_stamp, loaded_model
from app.engine.process import HostGone, HostProcess, host_environment
from app.engine.protocol import Cancel, Devices, Embed, Embedded, Failed, Generate, ListDevices, Load, Loaded, Message, Shutdown, Unload
from app.engine.protocol import Serving as ServingEvent
from app.engine.reply_events import deliver, host_gone
from app.engine.request import ReplyRequest, generate_message
from app.statuses import MessageStatus

__all__ = [
    "Embeddings",
    "EngineClient",
    "EngineError",
    "Failure",
    "FinishedEvent",
    "Generation",
    "LoadedModel",
    "Serving",
    "StartedInfo",
    "TokenEvent",
]


class EngineError(Exception):
    """Something the person can read: one sentence, no traceback."""


@dataclass(frozen=True)
class _Exited:
    cause: str


class EngineClient:
    def __init__(
        self,
        *,
        python: str | None = None,
        host_argv: list[str] | None = None,
        cancel_grace_s: float = 2.0,
        load_timeout_s: float = 300.0,
        state_dir: str | os.PathLike[str] | None = None,
        state_disk_mb: int = 0,
        nice: int = 0,
    ) -> None:
        """`state_dir`: the folder the host saves conversations' KV state in (at most
        `state_disk_mb` of files; None or 0: nothing is saved to disk). `nice`: how much lower
        the host runs than the window (work that yields, such as embedding documents)."""
        if host_argv:
            self._argv = list(host_argv)
        elif python:
            self._argv = [python, "-m", "app.engine.host.main"]
        else:  # `python -m app.engine.host.main`, or the frozen app's own executable (app/child_command.py)
            self._argv = child_command("app.engine.host.main")
        if nice > 0:
            self._argv += ["--nice", str(nice)]
        self._cancel_grace_s = cancel_grace_s
        self._load_timeout_s = load_timeout_s
        self._state_dir = os.fspath(state_dir) if state_dir is not None and state_disk_mb > 0 else None
        self._state_disk_mb = max(0, int(state_disk_mb))
        self._lock = threading.RLock()  # guards the fields below; never held while waiting
        self._op_lock = threading.Lock()  # serializes spawn + load sequences
        self._ids = itertools.count(1)
        self._proc: HostProcess | None = None
        self._loaded: LoadedModel | None = None
        self._settings: LoadSettings | None = None  # what load() was last asked for
        self._template_fallback: dict[str, str] = {}  # model path -> why its template is skipped
        self._pending: dict[str, tuple[HostProcess, queue.SimpleQueue[Message | _Exited]]] = {}
        self._gens: dict[str, Generation] = {}  # replies sent or being sent, until they end
        self._serving = Serving()
        self._last_exit = ""
        self._aborting = False  # set by abort(): the host's exit is the person's doing
        self._closed = False

    # ---- public API ---------------------------------------------------------------------

    @property
    def loaded(self) -> LoadedModel | None:
        return self._loaded

    @property
    def busy(self) -> bool:
        """A reply is being generated, or a model loaded or embedded, right now."""
        return self._in_flight() or self._op_lock.locked()

    def _in_flight(self) -> bool:
        with self._lock:
            for rid in [rid for rid, g in self._gens.items() if g.done]:
                del self._gens[rid]
            return bool(self._gens)

    def _active(self) -> list[Generation]:
        with self._lock:
            return [g for g in self._gens.values() if not g.done]

    def serving(self) -> Serving:
        """What the engine is doing now (zeros when nothing is in flight); cheap, any thread."""
        loaded = self._loaded
        if not self._in_flight():
            return Serving(slots=loaded.slots if loaded is not None else 0)
        return self._serving

    @property
    def host_pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def load(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        flash_attn: bool | None = None,
        kv_on_gpu: bool | None = None,
        state_cache_mb: int = 256,
        type_k: str = "f16",
        type_v: str = "f16",
        draft_model_path: str | os.PathLike[str] | None = None,
        parallel: int = 1,
        mmproj_path: str | os.PathLike[str] | None = None,
    ) -> LoadedModel:
        """Load a model (blocking). Returns at once if it is already loaded with these settings.
        `n_gpu_layers` None: as many as fit on the GPU (-1: all); `kv_on_gpu` None: with its layers;
        `state_cache_mb`: RAM the host keeps earlier conversations' KV state in (0: none);
        `type_k`/`type_v`: the KV cache's types (protocol.KV_CACHE_CHOICES); `draft_model_path`: a
        small model with the same vocabulary that drafts tokens for the loaded one; `parallel`: the
        slots, replies the engine decodes together (each with a context of `n_ctx`); `mmproj_path`:
        the model's vision projector, opened with it so that replies may hold images."""
        path = os.path.abspath(os.fspath(model_path))
        draft = os.path.abspath(os.fspath(draft_model_path)) if draft_model_path is not None else None
        settings = LoadSettings(
            path,
            n_ctx,
            n_threads,
            n_gpu_layers,
            flash_attn,
            kv_on_gpu,
            int(state_cache_mb),
            type_k,
            type_v,
            draft,
            max(1, int(parallel)),
            os.path.abspath(os.fspath(mmproj_path)) if mmproj_path is not None else None,
            file_stamp(path),
        )
        with self._op_lock:
            with self._lock:
                self._check_open()
                proc, loaded, current = self._proc, self._loaded, self._settings
                alive = loaded is not None and proc is not None and proc.alive
                if alive and current == settings:
                    assert loaded is not None
                    return loaded  # (also while replies are in flight: they share it)
                if any(not g.done for g in self._gens.values()):
                    if alive and current is not None and replace(current, parallel=settings.parallel) == settings:
                        assert loaded is not None
                        return loaded  # the same model with other slots: changed once no reply is in flight
                    raise EngineError("a reply is still being generated; cancel it before loading a model")
                self._settings = settings
            try:
                return self._load_locked(settings)
            except EngineError:
                with self._lock:
                    if self._settings == settings:
                        self._settings = None  # nothing to reload automatically
                raise

    def generate(self, request: ReplyRequest) -> Generation:
        """Start the reply `request` asks for (its fields: ReplyRequest) and return at once; iterate
        the Generation for its events. Several replies may be in flight at once."""
        rid = f"g{next(self._ids)}"
        req = generate_message(request, rid)
        gen = Generation(rid, self._cancel_generation)
        with self._lock:
            self._check_open()
            if self._settings is None:
                raise EngineError("no model is loaded; load one before generating")
            self._gens[rid] = gen
            proc = self._proc
            ready = proc is not None and proc.alive and self._loaded is not None and not self._op_lock.locked()
            if ready:
                gen.host = proc  # bound before sending, so a crash from here on ends this reply
        if ready:
            assert proc is not None
            try:
                proc.send(req)
                return gen
            except HostGone:  # died before it got the request: restart below, as after any crash
                with self._lock:
                    gen.host = None
        threading.Thread(target=self._restart_and_send, args=(gen, req), name="engine-restart", daemon=True).start()
        return gen

    def cancel(self) -> None:
        """Cancel every reply in flight (one reply: Generation.cancel())."""
        for gen in self._active():
            gen.cancel()

    def abort(self) -> None:
        """Stop whatever the engine is doing right now (e.g. a load the person cancelled):
        the host is killed, a pending load raises EngineError("loading was cancelled"), a
        reply ends 'cancelled' with its text. The next request starts a new host."""
        with self._lock:
            proc = self._proc
            self._aborting = proc is not None
        for gen in self._active():
            gen.end(None, MessageStatus.CANCELLED, {"stop_reason": "cancelled", "engine_restarted": True}, None)
        if proc is not None:
            proc.expected_exit = True
            self._drop_proc(proc)

    def devices(self) -> list[dict[str, Any]]:
        """The devices llama.cpp sees on this machine (app/engine/host/backends.py: Device.to_dict()),
        asked of the engine process (started if needed), which keeps native code out of this one.
        Raises EngineError with a sentence when it cannot tell."""
        with self._op_lock:
            proc = self._ensure_proc()
            reply = self._request(proc, ListDevices(f"d{next(self._ids)}"), 60.0)
        if isinstance(reply, Devices):
            return list(reply.devices)
        if isinstance(reply, Failed):
            raise EngineError(reply.message)
        raise EngineError("the engine did not say which devices it sees")

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Pooled unit vectors of `texts` from the loaded model (blocking), between replies.
        Raises EngineError with a sentence: a reply in progress, no model, a model that is not an
        embedding model (LoadedModel.embeddings), a text too long or empty."""
        texts = [str(t) for t in texts]
        with self._op_lock:
            with self._lock:
                self._check_open()
                if any(not g.done for g in self._gens.values()):
                    raise EngineError("a reply is still being generated; wait for it or cancel it before embedding")
                settings, loaded, proc = self._settings, self._loaded, self._proc
            if settings is None:
                raise EngineError("no model is loaded; load one before embedding")
            if loaded is None or proc is None or not proc.alive:  # the host stopped since: start it again
                loaded = self._load_locked(settings)
                proc = self._proc
            if not loaded.embeddings:
                raise EngineError(f"{Path(loaded.path).name} is not an embedding model: its file declares no pooling type")
            assert proc is not None
            reply = self._request(proc, Embed(f"e{next(self._ids)}", texts), self._load_timeout_s)
            if reply is None:
                self._drop_proc(proc)
                raise EngineError(f"embedding took longer than {self._load_timeout_s:g} s; the engine was stopped")
        if isinstance(reply, Embedded):
            return Embeddings([list(v) for v in reply.vectors], int(reply.prompt_tokens))
        raise EngineError(
            reply.message
            if isinstance(reply, Failed)
            else f"the engine stopped unexpectedly ({reply.cause}) while embedding"
            if isinstance(reply, _Exited)
            else "the engine gave no embeddings"
        )

    def unload(self) -> None:
        """Free the model (the host process stays up)."""
        with self._op_lock:
            with self._lock:
                proc = self._proc
                self._loaded = None
                self._settings = None
            if proc is not None and proc.alive:
                self._request(proc, Unload(f"u{next(self._ids)}"), 30.0)

    def close(self) -> None:
        """Stop the host (politely, then by force). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            proc, self._proc, self._loaded = self._proc, None, None
            gens = [g for g in self._gens.values() if not g.done]
        for gen in gens:
            gen.end(None, MessageStatus.CANCELLED, {"stop_reason": "cancelled"}, None)
        if proc is not None:
            proc.expected_exit = True
            try:
                proc.send(Shutdown())
            except HostGone:
                pass
            proc.stop(timeout_s=self._cancel_grace_s)

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- loading ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError("the engine has been shut down")

    def _ensure_proc(self) -> HostProcess:
        with self._lock:
            self._check_open()
            if self._proc is not None and self._proc.alive:
                return self._proc
            self._loaded = None
            try:
                self._proc = HostProcess(self._argv, on_message=self._on_message, on_exit=self._on_exit, env=host_environment())
            except OSError as exc:
                raise EngineError(f"the engine could not be started ({exc})") from None
            return self._proc

    def _load_locked(self, s: LoadSettings) -> LoadedModel:
        """Spawn if needed and load; the caller holds _op_lock."""
        name = Path(s.path).name
        for attempt in range(2):
            proc = self._ensure_proc()
            reason = self._template_fallback.get(s.path)
            req = Load(
                f"l{next(self._ids)}",
                s.path,
                s.n_ctx,
                s.n_threads,
                s.n_gpu_layers,
                s.flash_attn,
                kv_on_gpu=s.kv_on_gpu,
                use_model_template=reason is None,
                fallback_reason=reason,
                state_cache_mb=s.state_cache_mb,
                type_k=s.type_k,
                type_v=s.type_v,
                state_dir=self._state_dir,
                state_disk_mb=self._state_disk_mb if self._state_dir else 0,
                draft_model_path=s.draft_model_path,
                parallel=s.parallel,
                mmproj_path=s.mmproj_path,
            )
            reply = self._request(proc, req, self._load_timeout_s)
            if isinstance(reply, Loaded):
                loaded = loaded_model(s.path, reply)
                with self._lock:
                    if self._proc is proc:
                        self._loaded = loaded
                return loaded
            if isinstance(reply, Failed) and reply.kind == "template" and attempt == 0:
                # The host exits after a hung template; start afresh without the template.
                self._template_fallback[s.path] = reply.message
                self._drop_proc(proc)
                continue
            if isinstance(reply, Failed):
                raise EngineError(reply.message)
            if isinstance(reply, _Exited):
                with self._lock:
                    aborted, self._aborting = self._aborting, False
                if aborted:
                    raise EngineError(f"loading {name} was cancelled")
                raise EngineError(f"the engine stopped unexpectedly ({reply.cause}) while loading {name}")
            self._drop_proc(proc)
            raise EngineError(f"loading {name} took longer than {self._load_timeout_s:g} s; the engine was stopped")
        raise EngineError(f"could not load {name}")

    def _request(self, proc: HostProcess, req: Load | Unload | ListDevices | Embed, timeout_s: float) -> Message | _Exited | None:
        box: queue.SimpleQueue[Message | _Exited] = queue.SimpleQueue()
        with self._lock:
            if proc is not self._proc:
                return _Exited(self._last_exit or "it had already stopped")
            self._pending[req.request_id] = (proc, box)
        try:
            try:
                proc.send(req)
            except HostGone:
                timeout_s = 10.0  # on_exit is about to deliver the cause
            return box.get(timeout=timeout_s)
        except queue.Empty:
            return None
        finally:
            with self._lock:
                self._pending.pop(req.request_id, None)

    def _drop_proc(self, proc: HostProcess) -> None:
        proc.kill()
        with self._lock:
            if self._proc is proc:
                self._proc, self._loaded = None, None

    def _restart_and_send(self, gen: Generation, req: Generate) -> None:
        """Background path of generate(): (re)start the host and reload the model first."""
        try:
            with self._op_lock:
                if gen.done:
                    return
                with self._lock:
                    settings = self._settings
                    ready = self._proc is not None and self._proc.alive and self._loaded is not None
                if not ready:
                    if settings is None:
                        raise EngineError("no model is loaded")
                    self._load_locked(settings)
                with self._lock:
                    proc = self._proc
                    if gen.done or proc is None:
                        return
                    gen.host = proc
                proc.send(req)
        except EngineError as exc:
            gen.end(None, MessageStatus.ERROR, {"error_kind": "restart"}, f"the engine could not be restarted: {exc}", Failure("restart"))
        except HostGone:
            gen.end(
                None,
                MessageStatus.ERROR,
                {"error_kind": "crash"},
                "the engine stopped unexpectedly before the reply started",
                Failure("crash"),
            )

    # ---- cancel -------------------------------------------------------------------------

    def _cancel_generation(self, gen: Generation) -> None:
        proc = gen.host
        if not isinstance(proc, HostProcess):  # not sent yet (a restart is under way)
            gen.end(None, MessageStatus.CANCELLED, {"stop_reason": "cancelled"}, None)
            return
        try:
            proc.send(Cancel(gen.request_id))
        except HostGone:
            return  # on_exit ends the reply
        timer = threading.Timer(self._cancel_grace_s, self._cancel_overdue, args=(gen, proc))
        timer.daemon = True
        timer.start()

    def _cancel_overdue(self, gen: Generation, proc: HostProcess) -> None:
        if gen.done:
            return
        # The host did not stop in time (llama.cpp cannot interrupt a prompt evaluation):
        # replace it. The model is reloaded on the next request.
        self._drop_proc(proc)
        gen.end(None, MessageStatus.CANCELLED, {"stop_reason": "cancelled", "engine_restarted": True}, None)

    # ---- events (reader thread) -----------------------------------------------------------

    def _on_message(self, proc: HostProcess, msg: Message) -> None:
        rid = getattr(msg, "request_id", "")
        if isinstance(msg, ServingEvent):
            self._serving = Serving(msg.sequences, msg.waiting, msg.tokens_per_s, msg.slots)
            return
        with self._lock:
            gen = self._gens.get(rid)
            gen = gen if gen is not None and gen.host is proc else None
            pending = self._pending.get(rid)
        if gen is not None:
            if isinstance(msg, Failed) and msg.kind == "template" and self._settings is not None:
                self._template_fallback[self._settings.path] = msg.message
            deliver(gen, msg, proc.pid)
        elif pending is not None and pending[0] is proc:
            pending[1].put(msg)
        # anything else is a late event of an old request: dropped

    def _on_exit(self, proc: HostProcess, cause: str) -> None:
        with self._lock:
            if self._proc is proc:
                self._proc, self._loaded = None, None
            self._last_exit = cause
            gens = [g for g in self._gens.values() if g.host is proc and not g.done]
            pendings = [box for p, box in self._pending.values() if p is proc]
        for box in pendings:
            box.put(_Exited(cause))
        for gen in gens:
            host_gone(gen, cause, expected=proc.expected_exit)
