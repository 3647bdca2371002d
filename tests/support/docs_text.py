"""The document index's full-text tables checked by the tests: FTS5's own integrity check of each
collection's table, and its count of indexed passages (its docsize rows) against `chunks`."""

from __future__ import annotations

from app.docs.index_db import DocumentIndex


def text_rows(index: DocumentIndex, name: str) -> int:
    """Passages in collection `name`'s full-text table, after FTS5 checked it against its content."""
    table = index.text_table(name)
    was_open = index.conn.in_transaction
    index.conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")  # raises when the two differ
    if not was_open and index.conn.in_transaction:
        index.conn.rollback()  # the check's INSERT opened a transaction (it writes nothing)
    return int(index.conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0])


def texts_in_step(index: DocumentIndex) -> None:
    """Every collection's table checked, holding exactly its passages, and every passage in one."""
    total = 0
    for name in index.names():
        n = text_rows(index, name)
        assert n == index.status(name).chunks, (name, n)
        total += n
    assert total == int(index.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
