"""Conversations and messages: commit order of a turn, atomic finish, checkpoint rate
limiting, start-up repair, listing, id prefixes, deletes, titles, branches and export."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils

from app.store.database import close_database, open_database
from app.store.export import export_conversation
from app.store.history import Checkpointer, ConversationNotFound, History, Message, MessageNotFound


class FakeClock:
    """Stands in for time.monotonic() and for the wall clock of timestamps."""

    def __init__(self) -> None:
        self.t = 100.0
        self.wall = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> float:
        return self.t

    def now(self) -> datetime:
        self.wall += timedelta(seconds=1)
        return self.wall


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "cove.db"


@pytest.fixture
def db(path: Path) -> Iterator[sqlite_utils.Database]:
    opened = open_database(path)
    yield opened.db
    close_database(opened.db)


@pytest.fixture
def history(db: sqlite_utils.Database) -> History:
    return History(db, now=FakeClock().now)


def _start_turn(history: History, text: str = "hello") -> tuple[str, Message, Message]:
    conversation = history.create_conversation()
    user = history.add_user_message(conversation.id, text)
    reply = history.start_assistant_message(
        conversation.id,
        parent_id=user.id,
        model_name="gemma-3-270m",
        model_sha256="ab" * 32,
        model_quant="Q4_K_M",
        params={"temperature": 0.7, "top_p": 0.95},
    )
    return conversation.id, user, reply


def test_user_message_is_committed_before_returning(path: Path, history: History) -> None:
    conversation = history.create_conversation()
    user = history.add_user_message(conversation.id, "Is this saved already?")
    assert history.db.conn.in_transaction is False
    other = sqlite3.connect(path)
    try:
        row = other.execute("SELECT role, content, status, conversation_id FROM messages WHERE id = ?", (user.id,)).fetchone()
        title = other.execute("SELECT title FROM conversations WHERE id = ?", (conversation.id,)).fetchone()[0]
    finally:
        other.close()
    assert row == ("user", "Is this saved already?", "complete", conversation.id)
    assert title == "Is this saved already?"


def test_assistant_row_exists_as_streaming_before_first_token(path: Path, history: History) -> None:
    _, _, reply = _start_turn(history)
    assert (reply.status, reply.content, reply.model_quant) == ("streaming", "", "Q4_K_M")
    other = sqlite3.connect(path)
    try:
        assert other.execute("SELECT status FROM messages WHERE id = ?", (reply.id,)).fetchone() == ("streaming",)
    finally:
        other.close()


def test_finish_writes_text_status_and_metrics_in_one_transaction(history: History) -> None:
    conversation_id, _, reply = _start_turn(history)
    history.checkpoint_assistant(reply.id, "Hel")
    metrics = {
        "ttft_s": 0.125,
        "prompt_tokens_per_s": 812.5,
        "tokens": 42,
        "offload": {"gpu_layers": 0, "device": "CPU"},
        "note": "naïve ✓",
    }
    statements: list[str] = []
    history.db.conn.set_trace_callback(statements.append)
    try:
        done = history.finish_assistant(reply.id, "Hello there!", status="complete", metrics=metrics)
    finally:
        history.db.conn.set_trace_callback(None)
    writes = [i for i, s in enumerate(statements) if s.lstrip().upper().startswith("UPDATE")]
    begins = [i for i, s in enumerate(statements) if s.strip().upper().startswith("BEGIN")]
    commits = [i for i, s in enumerate(statements) if s.strip().upper().startswith("COMMIT")]
    assert len(begins) == 1 and len(commits) == 1
    assert writes and all(begins[0] < i < commits[0] for i in writes)

    assert (done.content, done.status, done.error) == ("Hello there!", "complete", None)
    assert done.metrics == metrics
    assert done.params == {"temperature": 0.7, "top_p": 0.95}
    assert history.get_message(reply.id) == done
    assert history.get_conversation(conversation_id).model == "gemma-3-270m"


def test_failed_finish_changes_nothing(history: History) -> None:
    _, _, reply = _start_turn(history)
    history.checkpoint_assistant(reply.id, "partial")
    with pytest.raises(TypeError):
        history.finish_assistant(reply.id, "final", status="complete", metrics={"bad": object()})
    with pytest.raises(ValueError, match="unknown final status"):
        history.finish_assistant(reply.id, "final", status="streaming", metrics={})
    kept = history.get_message(reply.id)
    assert (kept.content, kept.status, kept.metrics) == ("partial", "streaming", {})


def test_error_status_keeps_the_error_and_late_checkpoints_are_ignored(history: History) -> None:
    _, _, reply = _start_turn(history)
    history.finish_assistant(reply.id, "partial", status="error", metrics={}, error="The engine stopped.")
    history.checkpoint_assistant(reply.id, "a late checkpoint")
    kept = history.get_message(reply.id)
    assert (kept.content, kept.status, kept.error) == ("partial", "error", "The engine stopped.")


def test_checkpointer_rate_limits_with_a_fake_clock(history: History) -> None:
    _, _, reply = _start_turn(history)
    clock = FakeClock()
    checkpointer = Checkpointer(history, reply.id, interval_s=1.0, clock=clock)

    clock.t += 0.5
    assert checkpointer.update("a") is False
    assert history.get_message(reply.id).content == ""
    clock.t += 0.5
    assert checkpointer.update("ab") is True
    assert history.get_message(reply.id).content == "ab"
    clock.t += 0.99
    assert checkpointer.update("abc") is False
    clock.t += 0.01
    assert checkpointer.update("abc") is True
    clock.t += 5
    assert checkpointer.update("abc") is False  # nothing new to write
    assert checkpointer.flush("abcd") is True
    assert history.get_message(reply.id).content == "abcd"
    assert checkpointer.flush("abcd") is False


def test_checkpointer_keeps_text_and_retries_after_a_failed_write(history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, reply = _start_turn(history)
    clock = FakeClock()
    checkpointer = Checkpointer(history, reply.id, interval_s=1.0, clock=clock)
    real = history.checkpoint_assistant

    def full_disk(message_id: str, content: str) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(history, "checkpoint_assistant", full_disk)
    clock.t += 1
    assert checkpointer.update("one") is False
    assert isinstance(checkpointer.last_error, sqlite3.OperationalError)
    monkeypatch.setattr(history, "checkpoint_assistant", real)
    clock.t += 0.5
    assert checkpointer.update("one two") is False  # waits for the next interval
    clock.t += 0.5
    assert checkpointer.update("one two") is True
    assert checkpointer.last_error is None
    assert history.get_message(reply.id).content == "one two"


def _gone_writer() -> tuple[int, float]:
    """The pid and start time of a process that has exited."""
    import subprocess
    import sys

    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = psutil.Process(proc.pid).create_time()
    proc.kill()
    proc.wait()
    return proc.pid, started


def test_repair_interrupted_keeps_text_and_only_touches_replies_whose_writer_is_gone(history: History) -> None:
    _, user, streaming_a = _start_turn(history, "first")
    _, _, streaming_b = _start_turn(history, "second")
    _, _, finished = _start_turn(history, "third")
    _, _, live = _start_turn(history, "fourth")  # streamed by this process, which is running
    history.checkpoint_assistant(streaming_a.id, "half an answer")
    history.checkpoint_assistant(live.id, "still coming")
    history.finish_assistant(finished.id, "done", status="complete", metrics={})
    pid, started = _gone_writer()
    history.db.execute("UPDATE messages SET writer_pid = ?, writer_started = ? WHERE id = ?", [pid, started, streaming_a.id])
    # A row from before writers were recorded has no writer to wait for.
    history.db.execute("UPDATE messages SET writer_pid = NULL, writer_started = NULL WHERE id = ?", [streaming_b.id])
    history.db.conn.commit()

    assert history.repair_interrupted() == 2
    a = history.get_message(streaming_a.id)
    assert (a.status, a.content) == ("interrupted", "half an answer")
    assert history.get_message(streaming_b.id).status == "interrupted"
    assert history.get_message(finished.id).status == "complete"
    assert (history.get_message(live.id).status, history.get_message(live.id).content) == ("streaming", "still coming")
    assert history.get_message(user.id).content == "first"
    assert history.repair_interrupted() == 0


def test_a_checkpoint_of_a_live_reply_marked_interrupted_elsewhere_is_not_dropped(history: History) -> None:
    """An older or mistaken repair marked this process's live reply interrupted: the next
    checkpoint still lands and the reply is streaming again (a finished one stays finished)."""
    _, _, reply = _start_turn(history)
    history.checkpoint_assistant(reply.id, "one")
    history.db.execute("UPDATE messages SET status = 'interrupted' WHERE id = ?", [reply.id])
    history.db.conn.commit()
    assert history.checkpoint_assistant(reply.id, "one two") is True
    kept = history.get_message(reply.id)
    assert (kept.status, kept.content) == ("streaming", "one two")
    history.finish_assistant(reply.id, "one two three", status="complete", metrics={})
    assert history.checkpoint_assistant(reply.id, "late") is False
    assert history.get_message(reply.id).content == "one two three"


def test_list_order_pinned_first_then_newest_activity(history: History) -> None:
    a = history.create_conversation(title="a")
    b = history.create_conversation(title="b")
    c = history.create_conversation(title="c")
    assert [x.title for x in history.list_conversations()] == ["c", "b", "a"]

    history.add_user_message(a.id, "bump a")
    assert [x.title for x in history.list_conversations()] == ["a", "c", "b"]

    pinned = history.set_pinned(b.id, True)
    assert pinned.pinned is True
    listed = history.list_conversations()
    assert [x.title for x in listed] == ["b", "a", "c"]
    assert [x.message_count for x in listed] == [0, 1, 0]
    assert [x.title for x in history.list_conversations(limit=2)] == ["b", "a"]
    assert history.last_conversation() == history.get_conversation(a.id)

    history.set_pinned(b.id, False)
    assert [x.title for x in history.list_conversations()] == ["a", "c", "b"]
    renamed = history.rename_conversation(c.id, "  sea  ")
    assert renamed.title == "sea"
    assert [x.title for x in history.list_conversations()] == ["a", "sea", "b"]


def test_empty_history(history: History) -> None:
    assert history.list_conversations() == []
    assert history.last_conversation() is None


def test_id_prefix_lookup(history: History) -> None:
    conversation = history.create_conversation(title="prefixed")
    assert history.get_conversation(conversation.id[:4]).id == conversation.id
    assert history.get_conversation(conversation.id[:8].upper()).id == conversation.id
    with pytest.raises(ConversationNotFound) as missing:
        history.get_conversation(conversation.id[:3])
    assert str(missing.value) == f"no conversation '{conversation.id[:3]}'; `cove history list` shows them"
    with pytest.raises(ConversationNotFound, match="`cove history list` shows them"):
        history.get_conversation("zzzz")

    stamp = conversation.created_at
    for cid in ("abcd1111" + "0" * 24, "abcd2222" + "0" * 24):
        history.db["conversations"].insert({"id": cid, "created_at": stamp, "updated_at": stamp, "params": "{}", "pinned": 0})
    with pytest.raises(ConversationNotFound, match="more than one"):
        history.get_conversation("abcd")
    assert history.get_conversation("abcd2").id.startswith("abcd2222")


def test_delete_cascades_to_messages_and_search_index(history: History) -> None:
    keep_id, _, keep_reply = _start_turn(history, "keep the zebra")
    gone_id, gone_user, gone_reply = _start_turn(history, "forget the platypus")
    history.finish_assistant(gone_reply.id, "platypus facts", status="complete", metrics={})
    history.finish_assistant(keep_reply.id, "zebra facts", status="complete", metrics={})

    history.delete_conversation(gone_id[:6])
    db = history.db
    with pytest.raises(ConversationNotFound):
        history.get_conversation(gone_id)
    assert db.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", [gone_id]).fetchone()[0] == 0
    with pytest.raises(MessageNotFound):
        history.get_message(gone_user.id)
    assert db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'platypus'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'zebra'").fetchone()[0] == 2
    assert (
        db.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0]
        == db.execute("SELECT count(*) FROM messages").fetchone()[0]
        == 2
    )
    db.execute("INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')")
    assert [m.content for m in history.messages(keep_id)] == ["keep the zebra", "zebra facts"]


def test_title_from_the_first_user_message(history: History) -> None:
    long_first_line = "  Explain   how a " + "very " * 30 + "long sentence ends  "
    conversation = history.create_conversation()
    assert conversation.title is None
    history.add_user_message(conversation.id, "\n\n" + long_first_line + "\nsecond line here")
    title = history.get_conversation(conversation.id).title
    assert title is not None
    assert title.startswith("Explain how a very very")
    assert "\n" not in title and "  " not in title
    assert len(title) <= 61

    history.add_user_message(conversation.id, "a different question")
    assert history.get_conversation(conversation.id).title == title

    named = history.create_conversation(title="My name")
    history.add_user_message(named.id, "this does not rename it")
    assert history.get_conversation(named.id).title == "My name"


def test_current_branch_follows_the_newest_child(history: History) -> None:
    conversation_id, user, first = _start_turn(history, "question")
    history.finish_assistant(first.id, "first answer", status="complete", metrics={})
    retry = history.start_assistant_message(
        conversation_id, parent_id=user.id, model_name="m", model_sha256=None, model_quant=None, params={}
    )
    history.finish_assistant(retry.id, "second answer", status="cancelled", metrics={})
    follow_up = history.add_user_message(conversation_id, "and then?")
    assert follow_up.parent_id == retry.id
    branch = history.messages(conversation_id)
    assert [m.content for m in branch] == ["question", "second answer", "and then?"]
    assert [m.seq for m in branch] == [0, 2, 3]
    assert history.get_conversation(conversation_id).message_count == 4

    other_id, other_user, _ = _start_turn(history, "elsewhere")
    with pytest.raises(MessageNotFound):
        history.add_user_message(conversation_id, "cross-linked", parent_id=other_user.id)
    assert history.messages(other_id)[0].content == "elsewhere"


def test_update_conversation_changes_only_given_fields(history: History) -> None:
    conversation = history.create_conversation(model="m1", system_prompt="Be brief.", params={"temperature": 0.2})
    updated = history.update_conversation(conversation.id, params={"temperature": 0.9, "seed": 7})
    assert (updated.model, updated.system_prompt) == ("m1", "Be brief.")
    assert updated.params == {"temperature": 0.9, "seed": 7}
    cleared = history.update_conversation(conversation.id, system_prompt=None, model="m2")
    assert (cleared.model, cleared.system_prompt) == ("m2", None)
    assert cleared.params == {"temperature": 0.9, "seed": 7}


def test_unknown_ids_raise_readable_errors(history: History) -> None:
    with pytest.raises(ConversationNotFound):
        history.add_user_message("nope-nope", "hi")
    with pytest.raises(MessageNotFound, match="no message 'missing'"):
        history.get_message("missing")
    with pytest.raises(MessageNotFound):
        history.finish_assistant("missing", "x", status="complete", metrics={})


def test_export_markdown(history: History) -> None:
    conversation = history.create_conversation(system_prompt="You are terse.")
    user = history.add_user_message(conversation.id, "What is WAL?")
    reply = history.start_assistant_message(
        conversation.id,
        parent_id=user.id,
        model_name="gemma-3-270m",
        model_sha256=None,
        model_quant="Q4_K_M",
        params={},
    )
    history.finish_assistant(reply.id, "Write-ahead logging.", status="cancelled", metrics={"ttft_s": 0.1234, "tokens": 5})
    text = export_conversation(history, conversation.id, "md")
    assert text.startswith("# What is WAL?\n")
    assert "You are terse." in text
    assert "## User\n\nWhat is WAL?" in text
    assert "## Assistant · gemma-3-270m · cancelled" in text
    assert "Write-ahead logging." in text
    assert "ttft_s 0.12 · tokens 5" in text


def test_export_json_round_trips(history: History) -> None:
    conversation_id, _, reply = _start_turn(history, "json please")
    history.finish_assistant(reply.id, "ok", status="complete", metrics={"tokens": 1, "ttft_s": 0.5})
    data = json.loads(export_conversation(history, conversation_id, "json"))
    assert data["conversation"]["id"] == conversation_id
    assert data["conversation"]["title"] == "json please"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assistant = data["messages"][1]
    assert assistant["params"] == {"temperature": 0.7, "top_p": 0.95}
    assert assistant["metrics"] == {"tokens": 1, "ttft_s": 0.5}
    assert assistant["model_name"] == "gemma-3-270m"


def test_export_unknown_format(history: History) -> None:
    conversation = history.create_conversation()
    with pytest.raises(ValueError) as error:
        export_conversation(history, conversation.id, "pdf")
    assert str(error.value) == "unknown format 'pdf'; use md or json"


def test_branches_keep_every_version_and_switch(tmp_path) -> None:
    from app.store.database import open_database
    from app.store.history import History

    history = History(open_database(tmp_path / "b.db").db)
    c = history.create_conversation()
    u1 = history.add_user_message(c.id, "first question")
    a1 = history.start_assistant_message(c.id, parent_id=u1.id, model_name="m", model_sha256=None, model_quant=None, params={})
    history.finish_assistant(a1.id, "answer one", status="complete", metrics={})
    # Regenerate: a second reply to the same question.
    a2 = history.start_assistant_message(c.id, parent_id=u1.id, model_name="m", model_sha256=None, model_quant=None, params={})
    history.finish_assistant(a2.id, "answer two", status="complete", metrics={})
    assert [m.content for m in history.messages(c.id)] == ["first question", "answer two"]
    assert [m.id for m in history.siblings(a2.id)] == [a1.id, a2.id]
    # Switch back to version one; a follow-up continues that version.
    assert [m.content for m in history.select_branch(a1.id)] == ["first question", "answer one"]
    u2 = history.add_user_message(c.id, "follow-up")
    assert u2.parent_id == a1.id
    assert [m.content for m in history.messages(c.id)] == ["first question", "answer one", "follow-up"]
    # Edit the first question: a new root beside the old one; nothing is destroyed.
    edited = history.add_user_message(c.id, "first question, edited", parent_id=None)
    assert [m.content for m in history.messages(c.id)] == ["first question, edited"]
    assert [m.id for m in history.siblings(edited.id)] == [u1.id, edited.id]
    # Selecting the old question shows its newest path, including the follow-up.
    assert [m.content for m in history.select_branch(u1.id)] == ["first question", "answer one", "follow-up"]
    assert history.get_conversation(c.id).message_count == 5
