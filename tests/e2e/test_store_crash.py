"""SIGKILL of a process mid-stream: on reopen the file is intact, the user message is
complete, and the reply becomes 'interrupted' with every checkpointed character kept."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.store.database import close_database, open_database
from app.store.history import History
from app.store.search import search_messages
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
WRITER = ROOT / "tests" / "support" / "crash_writer.py"
USER_TEXT = "Tell me a very long story about a lighthouse keeper."
WAIT_S = 20.0


def _read_content(path: Path, message_id: str) -> str:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT content FROM messages WHERE id = ?", (message_id,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else ""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkill_mid_stream_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "cove.db"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), "0.005"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        reply_id = proc.stdout.readline().strip()
        user_id = proc.stdout.readline().strip()
        assert reply_id and user_id, proc.stderr.read() if proc.stderr else ""

        deadline = time.monotonic() + WAIT_S
        seen = ""
        while time.monotonic() < deadline:
            seen = _read_content(path, reply_id)
            if len(seen) > 500:  # several checkpoints in: the kill lands mid-stream
                break
            assert proc.poll() is None, "the writer exited early"
            time.sleep(0.01)
        assert len(seen) > 0, "no checkpoint was written in time"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    opened = open_database(path)
    try:
        assert opened.notice is None and opened.read_only is False
        db = opened.db
        history = History(db)
        assert history.repair_interrupted() == 1

        reply = history.get_message(reply_id)
        assert reply.status == "interrupted"
        assert reply.content.startswith(seen)  # everything seen committed is still there
        assert reply.content.startswith("lighthouse0 keeper0 ")
        assert reply.model_quant == "Q4_K_M"

        user = history.get_message(user_id)
        assert (user.content, user.status, user.role) == (USER_TEXT, "complete", "user")
        assert [m.id for m in history.messages(reply.conversation_id)] == [user_id, reply_id]

        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.execute("INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')")
        assert any(hit.message_id == reply_id for hit in search_messages(db, "keeper0"))
        assert history.repair_interrupted() == 0
    finally:
        close_database(opened.db)


REPAIR_ONCE = """
import sys
from app.store.database import close_database, open_database
from app.store.history import History
opened = open_database(__import__("pathlib").Path(sys.argv[1]))
print(History(opened.db).repair_interrupted())
close_database(opened.db)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_another_process_starting_mid_reply_leaves_it_streaming_and_every_checkpoint_lands(tmp_path: Path) -> None:
    """Another `cove` starting mid-reply (its start-up repair) must not mark the live reply
    interrupted, and every checkpoint after it still reaches the file: after a kill -9 the
    file holds at least the text of the last checkpoint the writer reported."""
    path = tmp_path / "cove.db"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), "0.02", "--log-checkpoints"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        reply_id = proc.stdout.readline().strip()
        proc.stdout.readline()
        assert reply_id, proc.stderr.read() if proc.stderr else ""
        assert int(proc.stdout.readline()) > 0  # a first checkpoint landed
        other = subprocess.run([sys.executable, "-c", REPAIR_ONCE, str(path)], env=env, capture_output=True, text=True, timeout=60)
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "0"  # the live reply is not "cut off last time"
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5)
        try:
            status = conn.execute("SELECT status FROM messages WHERE id = ?", (reply_id,)).fetchone()[0]
        finally:
            conn.close()
        assert status == "streaming"
        after_repair = [int(proc.stdout.readline()) for _ in range(10)]  # ten more checkpoints
        last_reported = after_repair[-1]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    opened = open_database(path)
    try:
        history = History(opened.db)
        reply = history.get_message(reply_id)
        assert reply.status == "streaming"
        assert len(reply.content) >= last_reported  # no checkpoint after the other start was dropped
        assert history.repair_interrupted() == 1  # now its writer is gone
        assert history.get_message(reply_id).status == "interrupted"
    finally:
        close_database(opened.db)
