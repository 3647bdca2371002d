"""The document index's disk format (documents.db): its append-only list of named migrations,
applied by app.store.migrations.apply_migrations like the history's.

Disk-format invariants: chunks is an ordinary rowid table whose `id INTEGER PRIMARY KEY` keys the
external-content FTS5 table of its collection (`text_c<text_id>`, app/docs/text_tables.py; from
0004, before it one `chunks_fts` for every collection), kept in step by triggers that fire on the
rows whose `chunks.text_id` is the collection's `collections.text_id` (also on the foreign keys'
cascading deletes: the row carries its collection). Vectors are float32 little-endian BLOBs of `dim` values, one per chunk
and model. `index_state.generation` grows with every write that changes chunks or vectors, so a
reader can tell that a matrix it loaded earlier is still current.

files.path is text that can be stored and printed; a name that is not UTF-8 has its bytes shown
as \\xNN there and its exact bytes in raw_path (NULL for every other file). A file is written a
batch of passages at a time: while it is, its status is 'reading' and `claim` names the run
writing it; a batch is written only while the claim is still that run's.
"""

from __future__ import annotations

import sqlite_utils

from app.store.migrations import Migration

_SCHEMA = (
    """
    CREATE TABLE collections (
        name TEXT PRIMARY KEY,
        created TEXT NOT NULL,
        embedding_model TEXT
    );
    """,
    """
    CREATE TABLE roots (
        collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
        path TEXT NOT NULL,
        PRIMARY KEY (collection, path)
    );
    """,
    """
    CREATE TABLE files (
        id INTEGER PRIMARY KEY,
        collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
        path TEXT NOT NULL,
        size INTEGER,
        mtime_ns INTEGER,
        sha256 TEXT,
        status TEXT NOT NULL,          -- 'indexed' | 'problem' | 'pending'
        problem TEXT,                  -- the sentence, for status 'problem' (or an embedding failure)
        indexed_at TEXT,
        UNIQUE (collection, path)
    );
    """,
    """
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
        ord INTEGER NOT NULL,
        text TEXT NOT NULL,
        start INTEGER NOT NULL,
        "end" INTEGER NOT NULL,
        page INTEGER,
        heading TEXT,
        hash TEXT NOT NULL
    );
    """,
    """
    CREATE INDEX chunks_file ON chunks(file_id, ord);
    """,
    """
    CREATE INDEX chunks_hash ON chunks(hash);
    """,
    """
    CREATE TABLE vectors (
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (chunk_id, model)
    );
    """,
    """
    CREATE INDEX vectors_model ON vectors(model);
    """,
    """
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        text, content='chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
    );
    """,
    """
    CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
        INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
    END;
    """,
    """
    CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
        INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    """,
    """
    CREATE TRIGGER chunks_au AFTER UPDATE OF text ON chunks BEGIN
        INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
    END;
    """,
    """
    CREATE TABLE index_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation INTEGER NOT NULL
    );
    """,
    """
    INSERT INTO index_state (id, generation) VALUES (1, 0);
    """,
)


def _m0001_documents(db: sqlite_utils.Database) -> None:
    # One statement at a time: executescript would commit the migration's transaction.
    for statement in _SCHEMA:
        db.execute(statement)


def _m0002_raw_paths_and_claims(db: sqlite_utils.Database) -> None:
    db.execute("ALTER TABLE files ADD COLUMN raw_path BLOB")  # the name's bytes when `path` shows them escaped
    db.execute("ALTER TABLE files ADD COLUMN claim TEXT")  # the run writing the file's passages ('reading')


def _m0003_patterns_and_left_out(db: sqlite_utils.Database) -> None:
    # The person's include and exclude patterns (JSON lists of glob patterns); NULL: the defaults.
    db.execute("ALTER TABLE collections ADD COLUMN include_patterns TEXT")
    db.execute("ALTER TABLE collections ADD COLUMN exclude_patterns TEXT")
    # The files the last walk left out without reading them (by pattern or type), with why.
    db.execute(
        """
        CREATE TABLE left_out (
            collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
            path TEXT NOT NULL,
            reason TEXT NOT NULL,
            PRIMARY KEY (collection, path)
        )
        """
    )


def _m0004_a_text_table_per_collection(db: sqlite_utils.Database) -> None:
    # Each collection's passages get a full-text table of their own (app/docs/text_tables.py), so
    # BM25's statistics are the collection's; the one table over every collection goes.
    from app.docs.text_tables import create_text_table

    db.execute("ALTER TABLE collections ADD COLUMN text_id INTEGER")
    db.execute("ALTER TABLE chunks ADD COLUMN text_id INTEGER")  # the collection's text_id
    db.execute("CREATE INDEX chunks_text ON chunks(text_id)")
    names = [str(r[0]) for r in db.execute("SELECT name FROM collections ORDER BY created, name").fetchall()]
    for text_id, name in enumerate(names, start=1):
        db.execute("UPDATE collections SET text_id = ? WHERE name = ?", (text_id, name))
    db.execute(
        "UPDATE chunks SET text_id = "
        "(SELECT c.text_id FROM files f JOIN collections c ON c.name = f.collection WHERE f.id = chunks.file_id)"
    )
    for trigger in ("chunks_ai", "chunks_ad", "chunks_au"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP TABLE chunks_fts")
    for text_id in range(1, len(names) + 1):
        create_text_table(db.conn, text_id)


# Append-only: never rename, reorder, edit or remove an entry once released.
MIGRATIONS: tuple[Migration, ...] = (
    ("0001_documents", _m0001_documents),
    ("0002_raw_paths_and_claims", _m0002_raw_paths_and_claims),
    ("0003_patterns_and_left_out", _m0003_patterns_and_left_out),
    ("0004_a_text_table_per_collection", _m0004_a_text_table_per_collection),
)
