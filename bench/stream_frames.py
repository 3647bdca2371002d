"""CPU time of the conversation view's streaming frames, without an engine or a window around it.

The starter's tg through the window loses what the window spends per token, and
bench/ui_cpu.py measures that for the whole window (about +-8% between runs). This isolates
the conversation view: a ConversationView with the starter's prompt streams the recorded
starter reply (bench/data/starter_reply_pieces.json), two tokens a frame as the frame pacer
gives at 55 tok/s, with the frame's gap slept between frames so its code runs on cold caches
as it does in the app. It prints the UI thread's CPU time per frame (thread_time around the
text update and the paint it causes), median of the replies.

--without-text disconnects the view from the streamed text (what the rest costs: the model
update, the event loop), so the difference is the view's text path.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/stream_frames.py [--replies 10] [--tokens 128] [--without-text]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

from ui.conversation.item_model import MessageItem  # noqa: E402
from ui.conversation.view import ConversationView  # noqa: E402

PIECES = ROOT / "bench" / "data" / "starter_reply_pieces.json"
PROMPT = "Write a long story about a lighthouse keeper and the sea."
FRAME_GAP_S = 0.036  # two tokens at 55 tok/s


def one_reply(app: QApplication, view: ConversationView, pieces: list[str], n: int) -> float:
    """Microseconds of UI-thread CPU per frame for one reply of `n` tokens."""
    model = view.conversation_model()
    model.set_messages([MessageItem("prompt", "user", PROMPT, "complete", None)])
    model.append_message(MessageItem("reply", "assistant", "", "streaming", "starter"))
    for _ in range(5):
        app.processEvents()
        time.sleep(0.01)
    spent, frames = 0.0, 0
    for i in range(0, min(n, len(pieces)), 2):
        started = time.thread_time()
        model.append_text("reply", "".join(pieces[i : i + 2]))
        app.processEvents()  # the paint the update asked for
        spent += time.thread_time() - started
        frames += 1
        time.sleep(FRAME_GAP_S)
        started = time.thread_time()
        app.processEvents()  # timers that came due in the gap (markdown renders of the tail)
        spent += time.thread_time() - started
    final = model.item(model.row_of("reply"))
    model.update_message(MessageItem("reply", "assistant", final.content, "complete", "starter"))
    app.processEvents()
    return spent / frames * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=128, help="tokens a reply (the starter bench's reply is 128)")
    parser.add_argument("--without-text", action="store_true", help="the view ignores streamed text (diagnosis)")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    view = ConversationView()
    view.resize(900, 700)
    view.show()
    app.processEvents()
    if args.without_text:
        view.conversation_model().text_appended.disconnect(view._on_text_appended)
    pieces = json.loads(PIECES.read_text(encoding="utf-8"))
    per_frame = [one_reply(app, view, pieces, args.tokens) for _ in range(args.replies)]
    label = " (view ignores the text)" if args.without_text else ""
    print(
        f"UI-thread CPU per frame{label}: median {statistics.median(per_frame):.0f} us over {args.replies} replies "
        f"(each: {', '.join(f'{v:.0f}' for v in per_frame)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
