"""The one way Cove opens a write transaction on a SQLite file (the history and the model library)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
        _AFTER_COMMIT.pop(id(db.conn), None)
        db.rollback()
        raise
    try:
        db.conn.execute("COMMIT")
    except BaseException:
        _AFTER_COMMIT.pop(id(db.conn), None)
        db.rollback()
        raise
    for callback in _AFTER_COMMIT.pop(id(db.conn), []):
        callback()


# What runs once the outermost write transaction of a connection has committed (dropped when it
# rolls back). sqlite3 has no commit hook of its own; a connection belongs to one thread, so a
# plain dict keyed by the connection is enough.
_AFTER_COMMIT: dict[int, list[Callable[[], None]]] = {}


def after_commit(db: sqlite_utils.Database, callback: Callable[[], None]) -> None:
    """Run `callback` once the write transaction open on `db` has committed; never if it rolls
    back. Must be called inside `write_transaction`."""
    if not db.conn.in_transaction:
        raise RuntimeError("after_commit needs an open write transaction")
    _AFTER_COMMIT.setdefault(id(db.conn), []).append(callback)
