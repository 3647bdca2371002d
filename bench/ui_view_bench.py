"""Conversation view costs: showing a long chat, and one streaming update (append_text + paint).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/ui_view_bench.py [--messages 1000] [--show 10000]
Prints medians. Everything runs from QTimer callbacks inside the event loop (no processEvents loop).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from ui.conversation.item_model import MessageItem  # noqa: E402
from ui.conversation.view import ConversationView  # noqa: E402

PARAGRAPH = (
    "Here is a **paragraph** with `inline code`, a [link](https://example.com/a?b=c) and enough words "
    "to wrap over a couple of lines in a normal window.\n\n"
)
CODE = "```python\ndef f(x):\n    return x * 2  # double\n```\n\n"
TOKENS = (
    "The ",
    "sea ",
    "is ",
    "**vast** ",
    "and ",
    "deep; ",
    "it ",
    "covers ",
    "most ",
    "of ",
    "the ",
    "planet.\n\n",
    "```python\n",
    "print(",
    "'hi'",
    ")\n",
    "```\n\n",
    "- a ",
    "list ",
    "item\n",
)


def conversation(n: int) -> list[MessageItem]:
    items = []
    for i in range(n):
        if i % 2 == 0:
            items.append(MessageItem(f"m{i}", "user", f"Question {i}: what about item {i}?", "complete", None, {}))
        else:
            body = PARAGRAPH * (1 + i % 3) + (CODE if i % 4 == 1 else "")
            items.append(
                MessageItem(
                    f"m{i}",
                    "assistant",
                    body,
                    "complete",
                    "bench-model",
                    {"ttft_ms": 90, "gen_tokens": 120, "gen_tps": 60.0, "stop_reason": "stop"},
                )
            )
    return items


def run_in_loop(app: QApplication, steps: list, gap_ms: int = 0) -> None:
    """Call each step from the event loop, one per timer tick, then quit."""
    it = iter(steps)

    def tick() -> None:
        step = next(it, None)
        if step is None:
            app.quit()
            return
        step()
        QTimer.singleShot(gap_ms, tick)

    QTimer.singleShot(0, tick)
    app.exec()


def bench_show(app: QApplication, n: int) -> dict:
    view = ConversationView()
    view.resize(800, 900)
    view.show()
    items = conversation(n)
    out: dict = {}
    t: dict = {"last": 0.0}
    original_layout = view.doItemsLayout
    original_paint = view.viewport().paintEvent

    def layout() -> None:
        original_layout()
        t["last"] = time.perf_counter()

    def paint(event: object) -> None:
        original_paint(event)
        t["last"] = time.perf_counter()

    view.doItemsLayout = layout  # type: ignore[method-assign]
    view.viewport().paintEvent = paint  # type: ignore[method-assign]

    def start() -> None:
        t["0"] = time.perf_counter()
        view.conversation_model().set_messages(items)
        out["set_messages_ms"] = (time.perf_counter() - t["0"]) * 1000

    def settled() -> None:
        # The last relayout or paint that followed set_messages (the view has settled by now).
        out["shown_and_settled_ms"] = (t["last"] - t["0"]) * 1000
        out["renders"] = view.message_delegate().render_count
        out["at_bottom"] = view.is_at_bottom()

    run_in_loop(app, [lambda: None] * 5 + [start] + [lambda: None] * 40 + [settled], gap_ms=5)
    # One relayout of all rows (what a changed row height costs).
    samples = []
    for _ in range(10):
        t0 = time.perf_counter()
        original_layout()
        samples.append((time.perf_counter() - t0) * 1000)
    out["full_relayout_ms"] = statistics.median(samples)
    view.close()
    view.deleteLater()
    return out


def bench_stream(app: QApplication, n: int, updates: int) -> dict:
    view = ConversationView()
    view.resize(800, 900)
    view.show()
    model = view.conversation_model()
    model.set_messages(conversation(n))
    model.append_message(MessageItem("live", "assistant", "", "streaming", "bench-model", {}))
    times: list[float] = []
    relayouts = {"n": 0}
    original = view.doItemsLayout

    def counted() -> None:
        relayouts["n"] += 1
        original()

    view.doItemsLayout = counted  # type: ignore[method-assign]

    row = model.row_of("live")

    def update(i: int) -> None:
        # What one frame of streaming costs: append the coalesced text, then paint the row
        # (synchronously here; the view itself only marks the row's rectangle dirty).
        t0 = time.perf_counter()
        model.append_text("live", TOKENS[i % len(TOKENS)] + TOKENS[(i + 3) % len(TOKENS)])
        view.viewport().repaint(view.visualRect(model.index(row, 0)).intersected(view.viewport().rect()))
        times.append((time.perf_counter() - t0) * 1000)

    wall = {}

    def begin() -> None:
        relayouts["n"] = 0
        wall["t0"] = time.perf_counter()

    def end() -> None:
        wall["ms"] = (time.perf_counter() - wall["t0"]) * 1000

    warm = [lambda: None] * 10
    run_in_loop(app, warm + [begin] + [lambda i=i: update(i) for i in range(updates)] + [end])
    ordered = sorted(times)
    result = {
        "median_ms": statistics.median(times),
        "p95_ms": ordered[int(len(ordered) * 0.95)],
        "max_ms": ordered[-1],
        "wall_per_update_ms": wall["ms"] / updates,
        "full_relayouts": relayouts["n"],
        "chars": len(model.item(model.row_of("live")).content),
        "markdown_renders": view.message_delegate().render_count,
    }
    view.close()
    view.deleteLater()
    return result


def bench_scroll(app: QApplication, n: int, steps: int) -> dict:
    """Scroll up from the newest message, 120 px per frame, through rows never laid out before."""
    view = ConversationView()
    view.resize(800, 900)
    view.show()
    view.conversation_model().set_messages(conversation(n))
    bar = view.verticalScrollBar()
    times: list[float] = []
    tops: list[int] = []

    def step() -> None:
        t0 = time.perf_counter()
        bar.setValue(bar.value() - 120)
        view.viewport().repaint()
        times.append((time.perf_counter() - t0) * 1000)
        tops.append(view.indexAt(view.viewport().rect().topLeft()).row())

    run_in_loop(app, [lambda: None] * 10 + [step] * steps)
    ordered = sorted(times)
    backwards = sum(1 for a, b in zip(tops, tops[1:], strict=False) if b > a)  # the top row should only go up
    result = {
        "median_ms": statistics.median(times),
        "p95_ms": ordered[int(len(ordered) * 0.95)],
        "max_ms": ordered[-1],
        "rows_passed": tops[0] - tops[-1],
        "jumps_back": backwards,
        "renders": view.message_delegate().render_count,
    }
    view.close()
    view.deleteLater()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--show", type=int, default=10000)
    parser.add_argument("--updates", type=int, default=500)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication(sys.argv)
    print(f"show {args.show} messages:", bench_show(app, args.show))
    print(f"stream {args.updates} updates into a {args.messages}-message chat:", bench_stream(app, args.messages, args.updates))
    print(f"scroll up 300 frames of 120 px in a {args.show}-message chat:", bench_scroll(app, args.show, 300))


if __name__ == "__main__":
    main()
