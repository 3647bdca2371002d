"""The written record: one entry per request (who asked which model file what, and what came
back), each entry's hash chained to the one before it, so `verify` finds an edited entry and
tells a deleted one (a gap) from tampering. The person can erase an entry's text; its hashes
stay, and the entry stays as a marked gap. A turn sent to one of the person's own servers says
where it ran (`ran_on`); an entry without one ran on this machine."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from models.timestamps import utc_timestamp
from models.transactions import write_transaction

GENESIS = "0" * 64
_CHAINED = ("seq", "at", "client", "remote", "endpoint", "model_name", "model_sha256", "quant", "params", "status",
            "usage", "timings", "content_hash", "prev_hash")
# Invariant of the disk format: `ran_on` joins the hashed fields only when it is set, so the
# entries written before it existed (and every entry of a local turn) keep their hashes.
_CHAINED_REMOTE = (*_CHAINED, "ran_on")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def content_hash(messages: str, reply: str) -> str:
    return hashlib.sha256(_json([messages, reply]).encode()).hexdigest()


def entry_hash(row: dict[str, Any]) -> str:
    names = _CHAINED_REMOTE if row.get("ran_on") else _CHAINED
    return hashlib.sha256(_json([row.get(name) for name in names]).encode()).hexdigest()


def usage(metrics: dict[str, Any]) -> dict[str, Any]:
    """A reply's token counts, as an entry (and an API response) carries them."""
    prompt, completion = int(metrics.get("prompt_tokens") or 0), int(metrics.get("gen_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": int(metrics.get("cached_tokens") or 0)}}


def timings(metrics: dict[str, Any]) -> dict[str, Any]:
    """Cove's own clocks for the reply (the engine's, not the client's)."""
    return {"prompt_ms": metrics.get("prefill_ms"), "ttft_ms": metrics.get("ttft_ms"),
            "tokens_per_second": metrics.get("gen_tps"), "cached_tokens": metrics.get("cached_tokens")}


@dataclass(frozen=True)
class Verdict:
    """What verify() found: `intact` when no entry was changed; `tampered` lists the entries
    whose content or link does not match; `missing` the entries deleted outright (gaps);
    `erased` those whose text the person erased."""

    entries: int
    tampered: tuple[int, ...]
    missing: tuple[int, ...]
    erased: tuple[int, ...]

    @property
    def intact(self) -> bool:
        return not self.tampered


class RequestLog:
    """The record in the history database (`record_entries`); on the thread that opened `db`."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def append(self, *, client: str, remote: str, endpoint: str, model_name: str, model_sha256: str | None,
               quant: str | None, params: dict[str, Any], messages: list[dict[str, Any]], reply: str, status: str,
               usage: dict[str, Any], timings: dict[str, Any], conversation_id: str | None = None,
               ran_on: dict[str, Any] | None = None) -> int:
        """Add an entry; returns its number. `ran_on`: where a turn sent to one of the person's
        servers ran ({"connection", "host", "kind", "model_id", "fingerprint"}); None for here."""
        table = self.db.table("record_entries")
        with write_transaction(self.db):
            last = next(self.db.query("SELECT seq, hash FROM record_entries ORDER BY seq DESC LIMIT 1"), None)
            messages_json = _json(messages)
            row: dict[str, Any] = {
                "seq": (last["seq"] + 1) if last else 1, "at": utc_timestamp(), "client": client, "remote": remote,
                "endpoint": endpoint, "model_name": model_name, "model_sha256": model_sha256 or "", "quant": quant or "",
                "params": _json(params), "messages": messages_json, "reply": reply, "status": status,
                "usage": _json(usage), "timings": _json(timings), "erased": 0, "conversation_id": conversation_id,
                "content_hash": content_hash(messages_json, reply), "prev_hash": last["hash"] if last else GENESIS,
            }
            if ran_on:
                row["ran_on"] = _json(ran_on)
            row["hash"] = entry_hash(row)
            table.insert(row)
        return int(row["seq"])

    def entries(self, *, since: str | None = None, until: str | None = None, client: str | None = None) -> list[dict[str, Any]]:
        where, args = [], []
        for clause, value in (("at >= ?", since), ("at <= ?", until), ("client = ?", client)):
            if value is not None:
                where.append(clause)
                args.append(value)
        sql = "SELECT * FROM record_entries" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq"
        return [dict(row) for row in self.db.query(sql, args)]

    def erase(self, seq: int) -> None:
        """Remove an entry's messages and reply (the person deleted them); its hashes stay."""
        with write_transaction(self.db):
            self.db.execute("UPDATE record_entries SET messages = NULL, reply = NULL, erased = 1 WHERE seq = ?", [seq])

    def verify(self) -> Verdict:
        rows = self.entries()
        tampered: list[int] = []
        missing: list[int] = []
        erased: list[int] = []
        previous: dict[str, Any] | None = None
        for row in rows:
            if row["erased"]:
                erased.append(row["seq"])
            elif row["messages"] is None or content_hash(row["messages"], row["reply"] or "") != row["content_hash"]:
                tampered.append(row["seq"])
            if entry_hash(row) != row["hash"]:
                tampered.append(row["seq"])
            expected_seq = previous["seq"] + 1 if previous else 1
            if row["seq"] > expected_seq:
                missing.extend(range(expected_seq, row["seq"]))  # a gap: the chain resumes after it
            elif row["prev_hash"] != (previous["hash"] if previous else GENESIS):
                tampered.append(row["seq"])
            previous = row
        return Verdict(len(rows), tuple(sorted(set(tampered))), tuple(missing), tuple(erased))
