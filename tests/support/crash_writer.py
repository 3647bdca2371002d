"""Crash-test helper, run as a subprocess: stream an assistant reply into the history
file forever, checkpointing through Checkpointer, until the test SIGKILLs it.

Usage: crash_writer.py DB_PATH [INTERVAL_S] [--log-checkpoints]. Prints the assistant message
id, then the user message id, one per line, as soon as both rows are committed; with
--log-checkpoints also the length of the text each checkpoint committed, one per line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.store.database import open_database  # noqa: E402
from app.store.history import Checkpointer, History  # noqa: E402

USER_TEXT = "Tell me a very long story about a lighthouse keeper."


def main(argv: list[str]) -> None:
    path = Path(argv[1])
    interval_s = float(argv[2]) if len(argv) > 2 else 0.01
    log_checkpoints = "--log-checkpoints" in argv[3:]
    opened = open_database(path)
    history = History(opened.db)
    conversation = history.create_conversation(model="fake-model")
    user = history.add_user_message(conversation.id, USER_TEXT)
    reply = history.start_assistant_message(
        conversation.id,
        parent_id=user.id,
        model_name="fake-model",
        model_sha256="0" * 64,
        model_quant="Q4_K_M",
        params={"temperature": 0.7},
    )
    print(reply.id, flush=True)
    print(user.id, flush=True)
    checkpointer = Checkpointer(history, reply.id, interval_s=interval_s)
    text = ""
    i = 0
    while True:
        text += f"lighthouse{i % 7} keeper{i} "
        i += 1
        if checkpointer.update(text) and log_checkpoints:
            print(len(text), flush=True)
        time.sleep(0.001)


if __name__ == "__main__":
    main(sys.argv)
