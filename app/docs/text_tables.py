"""Each collection's full-text table: an FTS5 index over its own passages only, so BM25's statistics
(how many passages, their average length, how many hold a word) are the collection's own and its
ranking never changes because another collection was added. The table's content is a view of the
collection's rows of `chunks` (`chunks.text_id`), kept in step by triggers on `chunks` that fire
only for that collection's rows. A passage's heading path is a column of its own, weighted above
its text (HEADING_WEIGHT; figures in docs/decisions/documents-bench.md).

FTS5 has no per-subset statistics: one table over every collection ranks a collection's passages
with numbers taken from all of them (adding the R manuals moved 5 of 30 rankings in the Python
docs), hence a table per collection.
"""

from __future__ import annotations

import sqlite3

TOKENIZE = "porter unicode61 remove_diacritics 2"
HEADING_WEIGHT = 8.0  # a word in a passage's heading path counts this many times one in its text (BM25 weights)


def text_table(text_id: int) -> str:
    return f"text_c{int(text_id)}"


def create_text_table(conn: sqlite3.Connection, text_id: int) -> None:
    """The collection's view, FTS5 table and triggers, filled from the passages it has (none for a
    new collection). Inside the caller's transaction."""
    t = int(text_id)
    table, view = text_table(t), f"chunks_c{t}"
    conn.execute(f"CREATE VIEW {view} AS SELECT id, text, coalesce(heading, '') AS heading FROM chunks WHERE text_id = {t}")
    conn.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(text, heading, content='{view}', content_rowid='id', tokenize='{TOKENIZE}')")
    old_row = "old.id, old.text, coalesce(old.heading, '')"
    new_row = "new.id, new.text, coalesce(new.heading, '')"
    conn.execute(
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON chunks WHEN new.text_id = {t} BEGIN "
        f"INSERT INTO {table}(rowid, text, heading) VALUES ({new_row}); END"
    )
    conn.execute(
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON chunks WHEN old.text_id = {t} BEGIN "
        f"INSERT INTO {table}({table}, rowid, text, heading) VALUES ('delete', {old_row}); END"
    )
    conn.execute(
        f"CREATE TRIGGER {table}_au AFTER UPDATE OF text, heading ON chunks WHEN old.text_id = {t} BEGIN "
        f"INSERT INTO {table}({table}, rowid, text, heading) VALUES ('delete', {old_row}); "
        f"INSERT INTO {table}(rowid, text, heading) VALUES ({new_row}); END"
    )
    conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")


def drop_text_table(conn: sqlite3.Connection, text_id: int) -> None:
    """The collection's triggers, table and view gone (first, before its passages are deleted, so
    no trigger writes to a table about to go). Inside the caller's transaction."""
    t = int(text_id)
    table = text_table(t)
    for suffix in ("ai", "ad", "au"):
        conn.execute(f"DROP TRIGGER IF EXISTS {table}_{suffix}")
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"DROP VIEW IF EXISTS chunks_c{t}")
