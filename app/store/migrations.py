"""The history file's disk format: the append-only list of named schema migrations and the
runner that applies each one atomically (writes go through models.transactions.write_transaction,
timestamps are models.timestamps.utc_timestamp)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

import sqlite_utils
from sqlite_utils.db import ForeignKey

from models.timestamps import utc_timestamp
from models.transactions import write_transaction

Migration = tuple[str, Callable[[sqlite_utils.Database], None]]

MIGRATIONS_TABLE = "_migrations"


class MigrationError(Exception):
    """A migration failed; its transaction was rolled back and the schema is unchanged."""


# ---------------------------------------------------------------------------
# The migrations. Disk-format invariant: names are recorded in `_migrations` and
# PRAGMA user_version counts them, so this list is append-only. Never rename, reorder,
# edit or remove an entry once released; change the schema by appending a new one.
# ---------------------------------------------------------------------------


def _m0001_conversations(db: sqlite_utils.Database) -> None:
    db.table("conversations").create(
        {
            "id": str,  # uuid4 hex
            "title": str,
            "created_at": str,  # utc_timestamp()
            "updated_at": str,  # utc_timestamp(); last activity (a message added or finished)
            "model": str,  # name of the last model used
            "system_prompt": str,
            "params": str,  # JSON object of sampling parameters
            "pinned": int,
        },
        pk="id",
        not_null={"created_at", "updated_at", "pinned"},
        defaults={"pinned": 0},
    )
    db.table("conversations").create_index(["pinned", "updated_at"])


def _m0002_messages(db: sqlite_utils.Database) -> None:
    # Disk-format invariant: messages is an ordinary rowid table (never WITHOUT ROWID);
    # its implicit rowid keys the external-content index messages_fts. Anything that
    # could renumber rowids must be followed by a messages_fts 'rebuild'.
    db.table("messages").create(
        {
            "id": str,  # uuid4 hex
            "conversation_id": str,
            "parent_id": str,  # NULL for a root; branches share a parent
            "role": str,  # 'system' | 'user' | 'assistant'
            "content": str,
            # a MessageStatus (app/statuses.py): 'complete' | 'streaming' | 'cancelled' | 'length' | 'error' | 'interrupted'
            "status": str,
            "error": str,
            "created_at": str,
            "updated_at": str,
            "model_name": str,
            "model_sha256": str,
            "model_quant": str,
            "params": str,  # JSON object
            "metrics": str,  # JSON object
            "seq": int,  # order of creation within the conversation, from 0
        },
        pk="id",
        not_null={"conversation_id", "role", "content", "status", "created_at", "updated_at", "seq"},
        defaults={"content": "", "status": "complete"},
        foreign_keys=[
            ForeignKey("messages", "conversation_id", "conversations", "id", on_delete="CASCADE"),
            ForeignKey("messages", "parent_id", "messages", "id", on_delete="CASCADE"),
        ],
    )
    db.table("messages").create_index(["conversation_id", "seq"])
    db.table("messages").create_index(["parent_id"])
    db.table("messages").create_index(["status"])


def _m0003_messages_fts(db: sqlite_utils.Database) -> None:
    # External-content FTS5 over messages.content, kept in step by triggers.
    db.table("messages").enable_fts(["content"], create_triggers=True)


def _m0004_models(db: sqlite_utils.Database) -> None:
    # Imported here: models.library is owned by the models package, and importing it
    # lazily keeps `import app.store` light.
    from models.library import create_models_table

    create_models_table(db)


def _m0005_current_leaf(db: sqlite_utils.Database) -> None:
    # Which branch a conversation shows: the last message of the version the person chose
    # (or wrote last). NULL means "follow the newest child from the newest root".
    db.execute("ALTER TABLE conversations ADD COLUMN current_leaf_id TEXT")


def _m0006_reply_writer(db: sqlite_utils.Database) -> None:
    # Which process streams into a 'streaming' row: its pid and start time (app/store/writer.py).
    # Start-up repair marks a row interrupted only when that process is gone.
    db.execute("ALTER TABLE messages ADD COLUMN writer_pid INTEGER")
    db.execute("ALTER TABLE messages ADD COLUMN writer_started REAL")


def _m0007_record(db: sqlite_utils.Database) -> None:
    # The written record (app/store/request_log.py): one entry per request, each hash-chained to
    # the one before it. Erasing an entry's text keeps its content_hash, so the chain still holds.
    db.table("record_entries").create(
        {
            "seq": int,
            "at": str,  # utc_timestamp()
            "client": str,  # the API key's name, or "this window"
            "remote": str,  # the client's address
            "endpoint": str,  # e.g. "/v1/chat/completions"
            "model_name": str,
            "model_sha256": str,
            "quant": str,
            "params": str,  # JSON
            "messages": str,  # JSON; NULL once erased
            "reply": str,  # NULL once erased
            "status": str,
            "usage": str,  # JSON
            "timings": str,  # JSON
            "erased": int,  # 1: the person deleted the text; the entry stays as a marked gap
            "content_hash": str,  # sha256 of the messages and the reply
            "prev_hash": str,
            "hash": str,
        },
        pk="seq",
        not_null={"at", "client", "endpoint", "content_hash", "prev_hash", "hash"},
        defaults={"erased": 0},
    )


def _m0008_api_keys(db: sqlite_utils.Database) -> None:
    # Keys of cove serve's clients (app/serve/http/keys.py): a name and the key's sha256, never the key.
    db.table("api_keys").create({"name": str, "key_sha256": str, "created_at": str}, pk="name", not_null={"key_sha256", "created_at"})


def _m0009_api_conversations(db: sqlite_utils.Database) -> None:
    # Conversations an API client had (app/serve/api_history.py): the client's name (NULL: this
    # window or the command line) and the hash of the messages so far, which the client's next
    # request repeats, so a multi-turn API chat stays one conversation.
    db.execute("ALTER TABLE conversations ADD COLUMN client TEXT")
    db.execute("ALTER TABLE conversations ADD COLUMN thread_hash TEXT")
    db.table("conversations").create_index(["client", "thread_hash"])
    # The conversation an entry of the record belongs to (not part of its hashes): deleting the
    # conversation erases the entries' text and leaves them as marked gaps.
    db.execute("ALTER TABLE record_entries ADD COLUMN conversation_id TEXT")
    db.table("record_entries").create_index(["conversation_id"])


def _m0010_connections(db: sqlite_utils.Database) -> None:
    # The person's own servers (app/remote/connections.py): a name, the API root, an extra CA file,
    # what the server said of itself at the last probe (JSON), and whether the person agreed that
    # messages go to a host outside their private network. Never the key (that is in the keyring).
    db.table("connections").create(
        {"name": str, "base_url": str, "ca_file": str, "server": str, "public_ok": int, "created_at": str},
        pk="name",
        not_null={"base_url", "public_ok", "created_at"},
        defaults={"public_ok": 0},
    )
    # Where an entry of the record ran: JSON {"connection", "host", "kind", "model_id", "fingerprint"};
    # NULL or "" for this machine. Part of an entry's hash only when non-empty, so older entries verify.
    db.execute("ALTER TABLE record_entries ADD COLUMN ran_on TEXT")


def _m0011_record_seals(db: sqlite_utils.Database) -> None:
    # Sealing the record (app/store/record_seals.py). `record_meta` names the record (its sealing
    # key is kept under that name outside the database); `v` is an entry's format (2 covers every
    # field; NULL for the entries written before); `record_seals` holds one seal per entry.
    import uuid

    db.table("record_meta").create({"name": str, "value": str}, pk="name", not_null={"value"})
    db.table("record_meta").insert({"name": "record_id", "value": uuid.uuid4().hex})
    db.execute("ALTER TABLE record_entries ADD COLUMN v INTEGER")
    db.table("record_seals").create(
        {"key_id": str, "epoch": int, "seq": int, "head": str, "at": str, "mac": str, "check_mac": str},
        pk=("key_id", "epoch"),
        not_null={"seq", "head", "at", "mac", "check_mac"},
    )


def _m0012_model_stat(db: sqlite_utils.Database) -> None:
    # A model file's inode change time and number (models/library.py): what `touch -r` cannot put
    # back, so an edit in place at the same size is noticed and the file hashed again.
    from models.library import add_stat_columns

    add_stat_columns(db)


def _m0013_record_open(db: sqlite_utils.Database) -> None:
    # Requests of the record still open (app/store/record_requests.py): an entry is opened when a
    # request is accepted and closed by a later entry when it ends. This table only finds the open
    # ones fast at start-up (to close them as interrupted); the record's proof is its entries.
    db.table("record_open").create({"seq": int, "message_id": str, "writer_pid": int, "writer_started": float}, pk="seq")


def _m0014_tool_servers(db: sqlite_utils.Database) -> None:
    # Tool servers the person added (app/mcp/store.py): a stdio command (argv as JSON) or a URL.
    # An "always allow" rule is kept per tool and bound to the server's exact command line or URL
    # (`identity`): a rule whose server's command or URL changed no longer applies.
    db.table("tool_servers").create({"name": str, "command": str, "url": str, "added_at": str}, pk="name", not_null={"added_at"})
    db.table("tool_rules").create(
        {"server": str, "tool": str, "identity": str, "created_at": str}, pk=("server", "tool"), not_null={"identity", "created_at"}
    )


def _m0015_documents(db: sqlite_utils.Database) -> None:
    # Documents in conversations (app/store/sources.py): the collections attached to a conversation
    # (by name; the index itself is documents.db, app/docs), and for each reply that was given
    # passages, which ones, where they came from and whether the reply cited them. The chunk's
    # hash and offsets say exactly what the model was shown, even after the file changes.
    db.table("conversation_collections").create(
        {"conversation_id": str, "collection": str, "attached_at": str},
        pk=("conversation_id", "collection"),
        not_null={"attached_at"},
        foreign_keys=[ForeignKey("conversation_collections", "conversation_id", "conversations", "id", on_delete="CASCADE")],
    )
    db.table("message_sources").create(
        {
            "message_id": str,
            "n": int,
            "collection": str,
            "path": str,
            "start": int,
            "end": int,
            "hash": str,
            "page": int,
            "heading": str,
            "excerpt": str,
            "cited": int,
        },
        pk=("message_id", "n"),
        not_null={"collection", "path", "start", "end", "hash", "excerpt", "cited"},
        foreign_keys=[ForeignKey("message_sources", "message_id", "messages", "id", on_delete="CASCADE")],
    )


def _m0016_reasoning(db: sqlite_utils.Database) -> None:
    # A reply's reasoning (a template that thinks: <think>, gpt-oss's analysis channel), kept apart
    # from its text: never the answer, shown collapsed above it (app/reasoning). "" when none.
    db.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''")


def _m0017_tool_rule_files(db: sqlite_utils.Database) -> None:
    # An "always allow" rule is also tied to what its server runs (app/mcp/identity.py `WhatRuns`:
    # the program and script as absolute paths, each with its SHA-256), as JSON. A rule kept before
    # (NULL) no longer applies: the person is asked once again, and "always" then keeps one.
    db.execute("ALTER TABLE tool_rules ADD COLUMN what_runs TEXT")


def _m0018_message_images(db: sqlite_utils.Database) -> None:
    # A person's images in their messages (app/store/message_images.py): each by the SHA-256 of its
    # file (its name in the images folder, app/images/store.py), in order, with its type, its size
    # in pixels and in bytes. The file goes when the last row naming its hash does, after the commit.
    db.table("message_images").create(
        {"message_id": str, "position": int, "sha256": str, "mime": str, "width": int, "height": int, "bytes": int},
        pk=("message_id", "position"),
        not_null={"sha256", "mime", "width", "height", "bytes"},
        foreign_keys=[ForeignKey("message_images", "message_id", "messages", "id", on_delete="CASCADE")],
    )
    db.table("message_images").create_index(["sha256"])


def _m0019_model_projector(db: sqlite_utils.Database) -> None:
    # A vision model's projector file (models/library.py): its path, sha256 and size beside the
    # model's own; NULL for a text-only model.
    from models.library import add_projector_columns

    add_projector_columns(db)


def _m0020_pairing(db: sqlite_utils.Database) -> None:
    # Pairing codes of `cove serve pair` (app/serve/http/pairing_codes.py): the SHA-256 of each
    # code's secret (never the secret), when it ends and was used, the key it made, and the wrong
    # secrets tried while it was open.
    db.table("pairing_codes").create(
        {
            "id": int,
            "secret_sha256": str,
            "created_at": str,
            "expires_at": str,
            "used_at": str,
            "key_name": str,
            "failures": int,
        },
        pk="id",
        not_null={"secret_sha256", "created_at", "expires_at", "failures"},
        defaults={"failures": 0},
    )


def _m0021_reply_speeds(db: sqlite_utils.Database) -> None:
    # Auto reads the newest replies' measured speeds before each message it chooses a model for
    # (app/routing/candidates.py `history_speeds`): the newest assistant rows, without sorting them all.
    db.table("messages").create_index(["role", "created_at"])


MIGRATIONS: tuple[Migration, ...] = (
    ("0001_conversations", _m0001_conversations),
    ("0002_messages", _m0002_messages),
    ("0003_messages_fts", _m0003_messages_fts),
    ("0004_models", _m0004_models),
    ("0005_current_leaf", _m0005_current_leaf),
    ("0006_reply_writer", _m0006_reply_writer),
    ("0007_record", _m0007_record),
    ("0008_api_keys", _m0008_api_keys),
    ("0009_api_conversations", _m0009_api_conversations),
    ("0010_connections", _m0010_connections),
    ("0011_record_seals", _m0011_record_seals),
    ("0012_model_stat", _m0012_model_stat),
    ("0013_record_open", _m0013_record_open),
    ("0014_tool_servers", _m0014_tool_servers),
    ("0015_documents", _m0015_documents),
    ("0016_reasoning", _m0016_reasoning),
    ("0017_tool_rule_files", _m0017_tool_rule_files),
    ("0018_message_images", _m0018_message_images),
    ("0019_model_projector", _m0019_model_projector),
    ("0020_pairing", _m0020_pairing),
    ("0021_reply_speeds", _m0021_reply_speeds),
)


# ---------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------


def schema_version(db: sqlite_utils.Database) -> int:
    """PRAGMA user_version: how many migrations this file has had applied."""
    return int(db.conn.execute("PRAGMA user_version").fetchone()[0])


def applied_migrations(db: sqlite_utils.Database) -> list[str]:
    """Names recorded in `_migrations`, in the order they were applied."""
    if not db[MIGRATIONS_TABLE].exists():
        return []
    rows = db.conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid").fetchall()
    return [str(row[0]) for row in rows]


def _ensure_migrations_table(db: sqlite_utils.Database) -> None:
    with write_transaction(db):
        db.conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")


def apply_migrations(db: sqlite_utils.Database, migrations: Sequence[Migration]) -> list[str]:
    """Apply the pending migrations in order; return the names applied now.

    Each migration, its `_migrations` row and the user_version bump share ONE
    transaction: a crash or an exception leaves the file entirely before or entirely
    after that migration. Foreign keys are switched off around the run (PRAGMA
    foreign_keys is a no-op inside a transaction, and table rebuilds need it off) and
    checked with foreign_key_check before each commit. Must be called outside a
    transaction.
    """
    names = [name for name, _ in migrations]
    if len(set(names)) != len(names):
        raise ValueError("migration names must be unique")
    _ensure_migrations_table(db)
    applied_now: list[str] = []
    db.conn.execute("PRAGMA foreign_keys=OFF")
    try:
        for name, migrate in migrations:
            with write_transaction(db):
                # Re-read inside the write lock: another process may have just applied it.
                if name in applied_migrations(db):
                    continue
                try:
                    migrate(db)
                except Exception as exc:
                    raise MigrationError(f"migration '{name}' failed: {exc}") from exc
                violations = db.conn.execute("PRAGMA foreign_key_check").fetchall()
                if violations:
                    raise MigrationError(f"migration '{name}' left {len(violations)} broken foreign key(s)")
                db.conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                    (name, utc_timestamp()),
                )
                count = db.conn.execute(f"SELECT count(*) FROM {MIGRATIONS_TABLE}").fetchone()[0]
                # PRAGMA user_version is transactional: it commits or rolls back with the rest.
                db.conn.execute(f"PRAGMA user_version = {int(count)}")
                applied_now.append(name)
    except sqlite3.Error as exc:
        raise MigrationError(f"could not update the history schema: {exc}") from exc
    finally:
        db.conn.execute("PRAGMA foreign_keys=ON")
    return applied_now
