"""Documents in the history: which collections a conversation is attached to, and for each reply
that was given passages, the passages themselves as the model saw them (collection, file path,
character offsets, chunk hash, page or heading, the text) and whether the reply cited each one.
Used on the history's thread only, like app/store/history.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlite_utils

from models.timestamps import utc_timestamp
from models.transactions import write_transaction


@dataclass(frozen=True)
class Source:
    """One passage a reply was given, numbered as the prompt numbered it ([n])."""

    n: int
    collection: str
    path: str
    start: int
    end: int
    hash: str
    excerpt: str  # the passage's text as the model was shown it
    cited: bool
    page: int | None = None
    heading: str | None = None

    @property
    def where(self) -> str:
        """Where in its file, for a person: "page 3", "Install > From source", or ""."""
        if self.page is not None:
            return f"page {self.page}" + (f", {self.heading}" if self.heading else "")
        return self.heading or ""

    def provenance(self) -> dict[str, object]:
        """What the record keeps of it: where the text came from and its hash, not the text."""
        return {
            "n": self.n,
            "collection": self.collection,
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "hash": self.hash,
            "page": self.page,
            "heading": self.heading,
            "cited": self.cited,
        }


def attached_collections(db: sqlite_utils.Database, conversation_id: str) -> list[str]:
    """The collections attached to a conversation, in the order they were attached."""
    rows = db.execute(
        "SELECT collection FROM conversation_collections WHERE conversation_id = ? ORDER BY rowid", [conversation_id]
    ).fetchall()
    return [row[0] for row in rows]


def attach_collections(db: sqlite_utils.Database, conversation_id: str, names: Sequence[str]) -> None:
    """Make `names` the conversation's collections, in this order (those not named are detached)."""
    with write_transaction(db):
        db.execute("DELETE FROM conversation_collections WHERE conversation_id = ?", [conversation_id])
        stamp = utc_timestamp()
        for name in dict.fromkeys(names):
            db.execute(
                "INSERT INTO conversation_collections (conversation_id, collection, attached_at) VALUES (?, ?, ?)",
                [conversation_id, name, stamp],
            )


def write_sources(db: sqlite_utils.Database, message_id: str, sources: Sequence[Source]) -> None:
    """The passages a reply was given (replacing any written for it before)."""
    with write_transaction(db):
        db.execute("DELETE FROM message_sources WHERE message_id = ?", [message_id])
        for s in sources:
            db.execute(
                'INSERT INTO message_sources (message_id, n, collection, path, start, "end", hash, page, heading, excerpt, cited) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [message_id, s.n, s.collection, s.path, s.start, s.end, s.hash, s.page, s.heading, s.excerpt, int(s.cited)],
            )


def sources_of(db: sqlite_utils.Database, message_id: str) -> list[Source]:
    """The passages a reply was given, by number; [] for a reply given none."""
    rows = db.execute(
        'SELECT n, collection, path, start, "end", hash, excerpt, cited, page, heading FROM message_sources '
        "WHERE message_id = ? ORDER BY n",
        [message_id],
    ).fetchall()
    return [
        Source(n=r[0], collection=r[1], path=r[2], start=r[3], end=r[4], hash=r[5], excerpt=r[6], cited=bool(r[7]), page=r[8], heading=r[9])
        for r in rows
    ]


def sources_for(db: sqlite_utils.Database, message_ids: Sequence[str]) -> dict[str, list[Source]]:
    """`sources_of` for many replies at once (a conversation being shown); replies given none are absent."""
    out: dict[str, list[Source]] = {}
    ids = list(message_ids)
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        marks = ",".join("?" * len(part))
        rows = db.execute(
            f'SELECT message_id, n, collection, path, start, "end", hash, excerpt, cited, page, heading '
            f"FROM message_sources WHERE message_id IN ({marks}) ORDER BY message_id, n",
            part,
        ).fetchall()
        for r in rows:
            out.setdefault(r[0], []).append(
                Source(
                    n=r[1],
                    collection=r[2],
                    path=r[3],
                    start=r[4],
                    end=r[5],
                    hash=r[6],
                    excerpt=r[7],
                    cited=bool(r[8]),
                    page=r[9],
                    heading=r[10],
                )
            )
    return out
