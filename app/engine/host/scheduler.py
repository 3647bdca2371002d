"""Continuous batching in the engine host: the replies in the slots advance together, one token each
per llama_decode, new replies join between steps, a long prompt is read in chunks between other
replies' steps, and a reply that ends frees its slot at once.

The window's reply comes first (protocol.Generate.priority "window"): it is in every step, and API
replies join a step only as far as the window's own token rate stays within WINDOW_SHARE of its rate
alone (measured as it goes). A reply that is alone drafts tokens as before (speculative.py); with
several, each reply whose drafts come from the conversation (prompt lookup, which costs nothing to
ask) adds them to its row of the shared step; a draft model steps aside (it holds one sequence).

Host-internal, main thread only; `cancel` may be called from the request reader thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import llama_cpp

from app.context_policy import ContextOverflow
from app.engine.grammar import GrammarError
from app.engine.host.image_prompt import ImageRefusal
from app.engine.host.reply import Reply
from app.engine.host.templates import TemplateHung
from app.engine.host.vision import VisionError
from app.engine.protocol import Failed, Finished, Generate, Serving, encode
from app.reasoning.switch import ReasoningRefused

# Prompt tokens one reply reads per step while other replies are decoding: small enough that their
# tokens keep coming (a 4,000-token paste is read over ~30 steps), large enough to keep the batch full.
SHARED_CHUNK = 128
# With the window's reply in progress, the time API replies may add to its steps, as a share of its
# step time alone: its tokens come at least 1 / (1 + WINDOW_SHARE) as fast as they would alone.
WINDOW_SHARE = 0.15
RATE_WINDOW_S = 2.0
SERVING_EVERY_S = 0.5  # a Serving event at least this often while replies run, and at once when their number changes

End = Callable[[Finished | Failed], None]


class WindowFirst:
    """How much API work the window's steps can carry: credit accrues WINDOW_SHARE of a step alone
    per step and is spent by each shared step's extra time."""

    def __init__(self) -> None:
        self.alone_s: float | None = None
        self.credit = 0.0

    def allow(self) -> bool:
        return self.alone_s is not None and self.credit > 0.0

    def record(self, seconds: float, shared: bool, plain: bool = True) -> None:
        """A step of the window's: `shared` with API replies; `plain`: the window's tokens were
        decoded one each (no drafts), so a step alone measures what the window's step costs."""
        if not shared and plain:
            self.alone_s = seconds if self.alone_s is None else 0.8 * self.alone_s + 0.2 * seconds
        if self.alone_s is None:
            return
        self.credit += WINDOW_SHARE * self.alone_s
        if shared:
            self.credit -= max(0.0, seconds - self.alone_s)
        self.credit = min(self.credit, 2 * self.alone_s)  # no burst of shared steps after a quiet spell


class Scheduler:
    def __init__(self, session: Any, send: Callable[[bytes], None], on_end: End | None = None) -> None:
        """`session`: the loaded ModelSession (not imported here: it runs replies through this)."""
        self.session = session
        # Lines of a step go out together, in one write after it: one wake-up of the parent's reader
        # per step rather than one per reply (on a machine with few cores, every wake-up of
        # another process takes a core from llama.cpp's threads, which wait on each other).
        self._pipe = send
        self._lines: list[bytes] = []
        self._send = self._lines.append
        self._on_end = on_end if on_end is not None else (lambda result: self._send(encode(result)))
        self.active: list[Reply] = []
        self.waiting: deque[Generate] = deque()
        self._cancel_lock = threading.Lock()
        self._cancelled: set[str] = set()
        self.window_first = WindowFirst()
        self.equal = False  # True: the window's reply is one among others
        self._rates: deque[tuple[float, int]] = deque()
        self._last_serving = 0.0
        self._counts = (0, 0)  # (decoding, waiting) as last said in a Serving event
        self.hung = ""  # the request whose chat template did not stop rendering

    @property
    def busy(self) -> bool:
        return bool(self.active or self.waiting)

    def submit(self, req: Generate) -> None:
        if req.priority == "window":
            self.waiting.appendleft(req)
        else:
            self.waiting.append(req)

    def cancel(self, request_id: str) -> None:
        with self._cancel_lock:
            self._cancelled.add(request_id)

    def _ended(self, request_id: str) -> None:
        with self._cancel_lock:
            self._cancelled.discard(request_id)
            if len(self._cancelled) > 1000:  # cancels of replies that had ended before they came
                self._cancelled.clear()

    def fail_all(self, message: str) -> None:
        """End every reply here as an error (the host hit something it did not expect)."""
        for r in list(self.active):
            assert r.slot is not None
            r.slot.clear()
            r.slot.transcript = None
            self._release(r, Failed(r.rid, message, "internal"))
        while self.waiting:
            req = self.waiting.popleft()
            self._end(Failed(req.request_id, message, "internal"))

    def _end(self, result: Finished | Failed) -> None:
        self._ended(result.request_id)
        self._on_end(result)

    # ---- one step ---------------------------------------------------------------------------

    def step(self) -> None:
        try:
            self._step()
        finally:
            self.flush()

    def flush(self) -> None:
        """Send what the step wrote; the write's time is shared out over the replies in progress."""
        if self._lines:
            data = b"".join(self._lines)
            self._lines.clear()
            t0 = time.perf_counter()
            self._pipe(data)
            if self.active:
                share = (time.perf_counter() - t0) / len(self.active)
                for r in self.active:
                    r.send_s += share

    def _step(self) -> None:
        self._apply_cancels()
        self._admit()
        self._report()
        if not self.active:
            return
        alone = self.active[0] if len(self.active) == 1 else None
        if alone is not None and not alone.prefilling:
            t0 = time.perf_counter()
            drafts = alone.drafts()
            if drafts:
                alone.sequences_seen.append(1)
                self._guarded([alone], lambda: self._finish_if(alone, alone.verify(self.session.batch, drafts, t0)))
                return
        self._batched_step()
        self._report()

    def _batched_step(self) -> None:
        batch = self.session.batch
        windows = [r for r in self.active if r.window] if not self.equal else []
        others_in = not windows or self.window_first.allow()
        chosen = [r for r in self.active if r.window or others_in or not windows]
        # In sequence order: llama.cpp splits a batch for KV streams of their own into micro-batches
        # of consecutive sequences, so a batch out of order costs several graph runs instead of one.
        chosen.sort(key=lambda r: r.slot.seq if r.slot is not None else 0)
        decoding = [r for r in chosen if not r.prefilling]
        prefilling = sorted((r for r in chosen if r.prefilling), key=lambda r: not r.window)
        batch.clear()
        rows: list[tuple[Reply, int]] = []
        runs: list[tuple[Reply, list[int]]] = []
        for r in decoding:
            drafts = r.drafts() if r.drafter is not None and r.drafter.cheap else []
            if drafts:
                runs.append((r, r.add_run(batch, drafts)))
            else:
                rows.append((r, r.add_next(batch)))
        plain = [r for r, _ in rows]
        read: list[Reply] = []
        for r in prefilling:
            if batch.room <= 0:
                break
            if r.places and not self._guarded([r], r.read_images):
                continue  # (ended: its Failed is sent)
            chunk = batch.room if len(self.active) == 1 else min(batch.room, SHARED_CHUNK)
            _, row = r.add_prompt(batch, chunk)
            read.append(r)
            if row is not None:
                rows.append((r, row))
        taking = decoding + [r for r in read if r not in decoding]
        sampled = [(r, r.n_sampled) for r in taking]
        t0 = time.perf_counter()

        def run() -> None:
            batch.decode()
            for r in read:
                r.prompt_evaluated()
            for r in plain:
                r.next_evaluated()
            for r, _ in runs:
                r.run_evaluated()

        if not self._guarded(taking, run):
            return
        seconds = time.perf_counter() - t0
        for r in taking:
            r.sequences_seen.append(len(taking))
        # Every reply takes its token from this batch's logits first; the ones that ended are let
        # go afterwards (saving a reply's state decodes a batch of its own, and that replaces the logits).
        ended: list[Reply] = []
        for r, row in rows:
            self._guarded([r], lambda r=r, row=row: ended.append(r) if r.take(row) else None)  # type: ignore[misc]
        for r, run_rows in runs:
            self._guarded([r], lambda r=r, run_rows=run_rows: ended.append(r) if r.take_run(run_rows) else None)  # type: ignore[misc]
        for r in ended:
            if not r.done:
                self._release(r, r.finish())
        if windows and not read:
            # A step that read a prompt is left out; one that checked the window's drafts spends
            # credit when shared but says nothing of what a plain step of the window's costs alone.
            self.window_first.record(seconds, shared=len(taking) > len(windows), plain=all(r in plain for r in windows))
        if len(taking) == 1 and plain and plain[0].policy is not None:
            plain[0].policy.plain_step(seconds)
        self._rates.append((time.perf_counter(), sum(r.n_sampled - n for r, n in sampled)))

    def _guarded(self, replies: list[Reply], work: Callable[[], None]) -> bool:
        """Run `work`; a llama.cpp failure ends `replies` as errors (or, for a reply whose cells came
        from a state file and that has sent nothing, reads its prompt again from the start)."""
        try:
            work()
            return True
        except Exception as exc:  # a decode error leaves these sequences' cells in an unknown state
            for r in replies:
                if r.done:
                    continue
                assert r.slot is not None
                state = self.session.state
                if not r.sent and state.failed_after_restore(r.slot, r.restored, str(exc), retry=True):
                    r.restart()
                    continue
                r.slot.clear()
                r.slot.transcript = None
                self._release(r, Failed(r.rid, f"llama.cpp failed while generating: {exc}", "generate"))
            return False

    def _finish_if(self, reply: Reply, ended: bool) -> None:
        if ended:
            self._release(reply, reply.finish())

    def _release(self, reply: Reply, result: Finished | Failed) -> None:
        reply.done = True
        self.active.remove(reply)
        self._end(result)
        self.flush()  # its Finished goes out before its state is saved
        slot = reply.slot
        assert slot is not None
        if isinstance(result, Finished) and not reply.req.no_cache:
            self.session.state.after_reply(slot, slot.transcript, reply.req.conversation_id)
        self.session.slots.give_back(slot)

    # ---- joining and leaving ------------------------------------------------------------------

    def _apply_cancels(self) -> None:
        with self._cancel_lock:
            cancelled = set(self._cancelled)
        if not cancelled:
            return
        for req in [g for g in self.waiting if g.request_id in cancelled]:
            self.waiting.remove(req)
            self._end(Finished(req.request_id, "", "cancelled", {"stop_reason": "cancelled", "gen_tokens": 0}))
        for r in [r for r in self.active if r.rid in cancelled]:
            r.cancelled = True
            r.stop_reason = "cancelled"
            self._release(r, r.finish())

    def _admit(self) -> None:
        slots = self.session.slots
        while self.waiting and slots.free():
            req = self.waiting.popleft()
            reply = self._prepared(req)
            if reply is None:
                continue
            slot = slots.choose(reply.tokens)
            assert slot is not None
            slots.take(slot)
            if not self.active:
                llama_cpp.llama_perf_context_reset(self.session.llm.ctx)  # its counters are this reply's
            try:
                reply.attach(slot)
            except Exception as exc:
                slot.clear()
                slots.give_back(slot)
                self._end(Failed(req.request_id, f"llama.cpp failed while generating: {exc}", "generate"))
                continue
            self.active.append(reply)

    def _prepared(self, req: Generate) -> Reply | None:
        """The reply planned, or None after its Failed was sent."""
        s = self.session
        if not s.writes_text:
            self._end(
                Failed(
                    req.request_id,
                    f"{s.name} is an embedding model: it turns text into vectors for "
                    "searching documents and does not write replies; choose a chat model",
                    "generate",
                )
            )
            return None
        try:
            return Reply(s, req, self._send)
        except ContextOverflow as exc:
            self._end(
                Failed(
                    req.request_id,
                    str(exc),
                    "context",
                    prompt_tokens=exc.needed,
                    n_ctx=exc.n_ctx,
                    reserve=exc.reserve,
                    at_least=exc.at_least,
                )
            )
        except GrammarError as exc:
            self._end(Failed(req.request_id, str(exc), "grammar"))
        except ReasoningRefused as exc:  # the template cannot do what the reasoning switch asks
            self._end(Failed(req.request_id, str(exc), "reasoning"))
        except (ImageRefusal, VisionError) as exc:  # an image gone, changed or refused; a model that cannot see
            self._end(Failed(req.request_id, str(exc), "image"))
        except ValueError as exc:
            self._end(Failed(req.request_id, f"llama.cpp failed while generating: {exc}", "generate"))
        except TemplateHung:
            self.hung = req.request_id  # the host reports it and exits (the render thread cannot be stopped)
            raise
        return None

    # ---- what the engine is doing, for the window's performance panel ----------------------

    def _report(self) -> None:
        now = time.perf_counter()
        counts = (len(self.active), len(self.waiting))
        if counts == self._counts and (not counts[0] or now - self._last_serving < SERVING_EVERY_S):
            return  # said already (a change of replies is said at once, the rate every SERVING_EVERY_S)
        self._counts = counts
        self._last_serving = now
        busy = self.busy
        while self._rates and self._rates[0][0] < now - RATE_WINDOW_S:
            self._rates.popleft()
        span = now - self._rates[0][0] if len(self._rates) > 1 else 0.0
        tokens = sum(n for _, n in self._rates)
        rate = tokens / span if busy and span > 0.2 else 0.0
        self._send(encode(Serving("", len(self.active), len(self.waiting), round(rate, 1), len(self.session.slots))))
