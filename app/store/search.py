"""Full-text search over message text (FTS5). A person's query is never passed to FTS5
as syntax: each word becomes a quoted phrase, so any input is safe and none raises."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import sqlite_utils

SNIPPET_TOKENS = 12
MAX_QUERY_TOKENS = 64  # bounds the work a pasted wall of text can cause


@dataclass(frozen=True)
class SearchHit:
    message_id: str
    conversation_id: str
    conversation_title: str | None
    role: str
    snippet: str  # matched words wrapped in [ and ]
    created_at: str


def quote_query(query: str) -> str:
    """Each whitespace-separated token as an FTS5 string ("..." with " doubled), ANDed.

    Returns '' when there is nothing to search for.
    """
    # Lone surrogates cannot be encoded for SQLite; NUL ends strings in the C API.
    clean = query.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")
    tokens = clean.split()[:MAX_QUERY_TOKENS]
    return " ".join('"' + token.replace('"', '""') + '"' for token in tokens)


_SEARCH_SQL = """
SELECT m.id AS message_id, m.conversation_id, c.title AS conversation_title, m.role,
       snippet(messages_fts, 0, '[', ']', '…', :tokens) AS snippet, m.created_at
FROM messages_fts
JOIN messages m ON m.rowid = messages_fts.rowid
JOIN conversations c ON c.id = m.conversation_id
WHERE messages_fts MATCH :match
ORDER BY messages_fts.rank, m.created_at DESC
LIMIT :limit
"""


def search_messages(db: sqlite_utils.Database, query: str, limit: int = 50) -> list[SearchHit]:
    """Messages containing every word of `query`, best match first. Never raises on input."""
    match = quote_query(query)
    if not match or limit <= 0:
        return []
    try:
        rows = db.conn.execute(_SEARCH_SQL, {"match": match, "limit": int(limit), "tokens": SNIPPET_TOKENS}).fetchall()
    except sqlite3.OperationalError as exc:
        # Quoting makes syntax errors impossible in principle; if FTS5 still rejects
        # the query, the honest answer to the person is "no results", not a crash.
        if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
            return []
        raise
    return [
        SearchHit(
            message_id=row[0],
            conversation_id=row[1],
            conversation_title=row[2],
            role=row[3],
            snippet=row[4] or "",
            created_at=row[5],
        )
        for row in rows
    ]
