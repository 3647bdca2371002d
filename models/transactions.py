"""The one way Cove opens a write transaction on a SQLite file (the history and the model library)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlite_utils


@contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One write transaction, committed on success and rolled back on any exception.

    The outermost level uses BEGIN IMMEDIATE, so the write lock is taken up front and
    waits on busy_timeout instead of failing when another process (the CLI) wrote in
    between (a deferred BEGIN, as `db.atomic()` uses, would fail on the lock upgrade).
    Nested inside an open transaction it becomes a savepoint, and then the outer
    transaction decides when the data is durable.
    """
    if db.conn.in_transaction:
        with db.atomic():
            yield db
        return
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.rollback()
        raise
    try:
        db.conn.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
