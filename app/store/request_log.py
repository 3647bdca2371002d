"""The written record: one entry per request (who asked which model file what, and what came
back). Every field of an entry is covered by its hash, each hash is chained to the entry before
it, and every entry is sealed as it is written (app/store/record_seals.py) with a key that is not
in the database and that evolves, so `verify` finds entries changed, deleted anywhere (the last
ones too), appended without a seal, and a chain re-hashed without the key. The person can erase
an entry's text: the entry stays as a marked gap, and the erasure is an entry of its own, sealed
like the rest, so an erasure nobody made is found too. A turn sent to one of the person's own
servers says where it ran (`ran_on`); an entry without one ran on this machine. An image in a
request is written as its identity (app/store/record_images.py), never its pixels.
docs/record.md says what the record proves and what it cannot.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from app.store.record_images import recorded_messages
from app.store.record_seals import Sealer
from app.store.record_series import KEY_CHANGE, SeriesReport, change_notice, change_params, check_chain
from app.store.seal_keys import SealKeyError, SealKeys, SealState
from models.timestamps import utc_timestamp
from models.transactions import write_transaction

GENESIS = "0" * 64
VERSION = 2  # entries written from now on; 1 (NULL) for those of an older Cove
ERASURE = "erasure"  # the endpoint of an erasure entry; its params list the entries erased
_CHAINED = (
    "seq",
    "at",
    "client",
    "remote",
    "endpoint",
    "model_name",
    "model_sha256",
    "quant",
    "params",
    "status",
    "usage",
    "timings",
    "content_hash",
    "prev_hash",
)
# Invariant of the disk format: `ran_on` joins the hashed fields only when it is set, so the
# entries written before it existed (and every entry of a local turn) keep their hashes.
_CHAINED_REMOTE = (*_CHAINED, "ran_on")
# Version 2 covers every field: all of the above, the conversation, and the version itself. The
# text is covered by content_hash, and `erased` by the erasure entry that must name the entry.
_CHAINED_V2 = ("v", *_CHAINED, "ran_on", "conversation_id")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def content_hash(messages: str, reply: str) -> str:
    return hashlib.sha256(_json([messages, reply]).encode()).hexdigest()


def entry_hash(row: dict[str, Any]) -> str:
    names: tuple[str, ...]
    if row.get("v") == VERSION:
        names = _CHAINED_V2
    else:
        names = _CHAINED_REMOTE if row.get("ran_on") else _CHAINED
    return hashlib.sha256(_json([row.get(name) for name in names]).encode()).hexdigest()


def usage(metrics: dict[str, Any]) -> dict[str, Any]:
    """A reply's token counts, as an entry (and an API response) carries them."""
    prompt, completion = int(metrics.get("prompt_tokens") or 0), int(metrics.get("gen_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": int(metrics.get("cached_tokens") or 0)},
    }


def timings(metrics: dict[str, Any]) -> dict[str, Any]:
    """Cove's own clocks for the reply (the engine's, not the client's); how long it reasoned
    (`reasoning_ms`) when it did; its images' tokens and encoding time when it had images."""
    out = {
        "prompt_ms": metrics.get("prefill_ms"),
        "ttft_ms": metrics.get("ttft_ms"),
        "tokens_per_second": metrics.get("gen_tps"),
        "cached_tokens": metrics.get("cached_tokens"),
    }
    if metrics.get("reasoning_ms") is not None:
        out["reasoning_ms"] = metrics["reasoning_ms"]
    if metrics.get("images"):  # the images read for the reply: tokens and encoding (0 when the cache held them)
        out.update(images=metrics["images"], image_tokens=metrics.get("image_tokens"), image_encode_ms=metrics.get("image_encode_ms"))
    return out


@dataclass(frozen=True)
class Verdict:
    """What verify() found. `changed`: entries whose fields, text or link do not match (an
    erased entry that still has text, or that no erasure entry names, is changed too);
    `missing`: entries deleted outright; `erased`: those the person erased; `unsealed`: entries
    after the last good seal; `bad_seals` and `missing_seals`: epochs of the sealing key whose
    seal does not match, or is gone (cut from the end when the key went further); `unchecked`:
    entries sealed only with a key this check could not use (`why_unchecked` says which and why);
    `key_findings`: how the keys follow one another, where they do not as Cove makes them;
    `series`: each key's part of the record; `checked_with`: the key the seals were checked with
    ("" when none was at hand)."""

    entries: int
    changed: tuple[int, ...]
    missing: tuple[int, ...]
    erased: tuple[int, ...]
    unsealed: tuple[int, ...] = ()
    bad_seals: tuple[int, ...] = ()
    missing_seals: tuple[int, ...] = ()
    other_series: int = 0
    checked_with: str = ""
    key_problem: str | None = None  # why the seals could not be checked, if they could not
    unchecked: tuple[int, ...] = ()
    why_unchecked: tuple[str, ...] = ()
    key_findings: tuple[str, ...] = ()
    series: tuple[SeriesReport, ...] = ()

    @property
    def tampered(self) -> tuple[int, ...]:
        return self.changed

    @property
    def intact(self) -> bool:
        return not (
            self.changed
            or self.missing
            or self.unsealed
            or self.bad_seals
            or self.missing_seals
            or self.key_problem
            or self.unchecked
            or self.key_findings
        )


def seal_keys_for(db: sqlite_utils.Database) -> SealKeys:
    """The sealing state of the record in `db`: named by the record's id, kept in the keyring, or
    in a file beside the database where no secure keyring exists."""
    row = next(db.query("SELECT value FROM record_meta WHERE name = 'record_id'"), None)
    record_id = row["value"] if row else "unnamed"
    path = next((r[2] for r in db.conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    return SealKeys(record_id, Path(path).with_name(f"record-key-{record_id}.json") if path else None)


class RequestLog:
    """The record in the history database (`record_entries`, `record_seals`); on the thread that
    opened `db`. `keys`: where the sealing key lives (default: `seal_keys_for(db)`)."""

    def __init__(self, db: sqlite_utils.Database, keys: SealKeys | None = None) -> None:
        self.db = db
        self._keys = keys

    @property
    def keys(self) -> SealKeys:
        if self._keys is None:
            self._keys = seal_keys_for(self.db)
        return self._keys

    def append(
        self,
        *,
        client: str,
        remote: str,
        endpoint: str,
        model_name: str,
        model_sha256: str | None,
        quant: str | None,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        reply: str,
        status: str,
        usage: dict[str, Any],
        timings: dict[str, Any],
        conversation_id: str | None = None,
        ran_on: dict[str, Any] | None = None,
    ) -> int:
        """Add an entry, sealed; returns its number. `ran_on`: where a turn sent to one of the
        person's servers ran ({"connection", "host", "kind", "model_id", "fingerprint"}); None for
        here. When the sealing key cannot be used (a locked keyring), the entry is written unsealed,
        which `verify` reports, and a line on stderr says why: a reply is never lost to it. When the
        record was sealed before and its key is gone, a new key begins with an entry that says so
        (app/store/record_series.py), and a line on stderr tells the person."""
        with write_transaction(self.db):
            sealer = Sealer(self.db, self.keys)
            try:
                state: SealState | None = sealer.prepare()
            except SealKeyError as exc:
                print(f"cove: this entry of the record is not sealed: {exc}", file=sys.stderr)
                state = None
            if state is not None and self._key_is_new_here(sealer, state):
                params_of_change = change_params(sealer.latest_seal(), state, self.keys.where)
                seq = self._write(
                    sealer,
                    state,
                    client="Cove",
                    remote="",
                    endpoint=KEY_CHANGE,
                    model_name="",
                    model_sha256=None,
                    quant=None,
                    params=params_of_change,
                    messages=[],
                    reply="",
                    status=KEY_CHANGE,
                    usage={},
                    timings={},
                )
                print(f"cove: {change_notice(seq, self.keys.where)}.", file=sys.stderr)
                state = sealer.then(state, seq)
            return self._write(
                sealer,
                state,
                client=client,
                remote=remote,
                endpoint=endpoint,
                model_name=model_name,
                model_sha256=model_sha256,
                quant=quant,
                params=params,
                messages=messages,
                reply=reply,
                status=status,
                usage=usage,
                timings=timings,
                conversation_id=conversation_id,
                ran_on=ran_on,
            )

    def _key_is_new_here(self, sealer: Sealer, state: SealState) -> bool:
        """Whether `state` is a new key (it has sealed nothing) in a record a key sealed before (one of
        its seals is here, or an entry of the format only a sealing Cove writes): then that key vanished."""
        if state.epoch > 0 or sealer.has_sealed(state):
            return False
        return (
            next(self.db.query("SELECT 1 FROM record_seals LIMIT 1"), None) is not None
            or next(self.db.query("SELECT 1 FROM record_entries WHERE v = ? LIMIT 1", [VERSION]), None) is not None
        )

    def _write(
        self,
        sealer: Sealer,
        state: SealState | None,
        *,
        client: str,
        remote: str,
        endpoint: str,
        model_name: str,
        model_sha256: str | None,
        quant: str | None,
        params: dict[str, Any],
        messages: list[dict[str, Any]],
        reply: str,
        status: str,
        usage: dict[str, Any],
        timings: dict[str, Any],
        conversation_id: str | None = None,
        ran_on: dict[str, Any] | None = None,
    ) -> int:
        """Insert one entry, chained to the last, and seal it with `state` (None: unsealed)."""
        last = next(self.db.query("SELECT seq, hash FROM record_entries ORDER BY seq DESC LIMIT 1"), None)
        seq = max(last["seq"] if last else 0, state.last_seq if state else 0) + 1
        messages_json = _json(recorded_messages(self.db, messages))  # images by identity only
        row: dict[str, Any] = {
            "v": VERSION,
            "seq": seq,
            "at": utc_timestamp(),
            "client": client,
            "remote": remote,
            "endpoint": endpoint,
            "model_name": model_name,
            "model_sha256": model_sha256 or "",
            "quant": quant or "",
            "params": _json(params),
            "messages": messages_json,
            "reply": reply,
            "status": status,
            "usage": _json(usage),
            "timings": _json(timings),
            "erased": 0,
            "conversation_id": conversation_id,
            "content_hash": content_hash(messages_json, reply),
            "prev_hash": last["hash"] if last else GENESIS,
            "ran_on": _json(ran_on) if ran_on else None,
        }
        row["hash"] = entry_hash(row)
        self.db.table("record_entries").insert(row)
        if state is not None:
            sealer.seal(state, seq, row["hash"])
        return seq

    def entries(self, *, since: str | None = None, until: str | None = None, client: str | None = None) -> list[dict[str, Any]]:
        where, args = [], []
        for clause, value in (("at >= ?", since), ("at <= ?", until), ("client = ?", client)):
            if value is not None:
                where.append(clause)
                args.append(value)
        sql = "SELECT * FROM record_entries" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq"
        return [dict(row) for row in self.db.query(sql, args)]

    def erase(self, seqs: list[int], client: str = "the person") -> int | None:
        """Remove the messages and replies of entries `seqs` (the person deleted them): they stay
        as marked gaps, and the erasure is an entry of its own (returned; None when nothing was
        left to erase)."""
        with write_transaction(self.db):
            wanted = sorted({int(s) for s in seqs})
            marks = ",".join("?" * len(wanted))
            still = (
                [r["seq"] for r in self.db.query(f"SELECT seq FROM record_entries WHERE erased = 0 AND seq IN ({marks})", wanted)]
                if wanted
                else []
            )
            if not still:
                return None
            self.db.execute(
                f"UPDATE record_entries SET messages = NULL, reply = NULL, erased = 1 WHERE seq IN ({','.join('?' * len(still))})", still
            )
            return self.append(
                client=client,
                remote="",
                endpoint=ERASURE,
                model_name="",
                model_sha256=None,
                quant=None,
                params={"erases": still},
                messages=[],
                reply="",
                status=ERASURE,
                usage={},
                timings={},
            )

    def erase_conversation(self, conversation_id: str, client: str = "the person") -> int | None:
        """Erase every entry of a conversation (it was deleted)."""
        seqs = [r["seq"] for r in self.db.query("SELECT seq FROM record_entries WHERE conversation_id = ?", [conversation_id])]
        return self.erase(seqs, client)

    def begin_sealing(self) -> None:
        """Seal a record an older Cove wrote (entries, no seals, no sealing key yet): its erasures
        become an erasure entry, and the newest entry is sealed. Nothing to do once a seal or a key
        exists, or an entry only a sealing Cove writes: seals deleted from a sealed record stay
        missing, and a record whose seals and key are both gone is not sealed as found (its next
        entry begins a key that says so)."""
        if next(self.db.query("SELECT 1 FROM record_seals LIMIT 1"), None) is not None:
            return
        if next(self.db.query("SELECT 1 FROM record_entries LIMIT 1"), None) is None:
            return
        if next(self.db.query("SELECT 1 FROM record_entries WHERE v = ? LIMIT 1", [VERSION]), None) is not None:
            return
        try:
            if self.keys.load() is not None:
                return
        except SealKeyError:
            return  # the key cannot be read now: verify says so
        erased = [r["seq"] for r in self.db.query("SELECT seq FROM record_entries WHERE erased = 1 ORDER BY seq")]
        with write_transaction(self.db):
            if erased:
                self.append(
                    client="Cove",
                    remote="",
                    endpoint=ERASURE,
                    model_name="",
                    model_sha256=None,
                    quant=None,
                    params={"erases": erased, "before_sealing": True},
                    messages=[],
                    reply="",
                    status=ERASURE,
                    usage={},
                    timings={},
                )
                return
            sealer = Sealer(self.db, self.keys)
            state = sealer.prepare()
            last = next(self.db.query("SELECT seq, hash FROM record_entries ORDER BY seq DESC LIMIT 1"))
            sealer.seal(state, int(last["seq"]), last["hash"])

    def verify(self, *verification: tuple[str, bytes] | None) -> Verdict:
        """Check every entry, and the seals: with `verification` keys (key id, verification key) every
        seal of their series with its own MAC, and the entries no given key covers are reported as
        not checked; with none, this machine's local check, the count of seals made, and the entries
        sealed with a key that is not on this machine as not checked."""
        keys = {key_id: key for key_id, key in (v for v in verification if v is not None)}
        rows = self.entries()
        changed: list[int] = []
        missing: list[int] = []
        erased: list[int] = []
        erasures: set[int] = set()
        for row in rows:
            if row["endpoint"] == ERASURE and row["status"] == ERASURE:
                try:
                    erasures.update(int(s) for s in json.loads(row["params"]).get("erases", []))
                except (ValueError, TypeError, AttributeError):
                    changed.append(row["seq"])
        previous: dict[str, Any] | None = None
        for row in rows:
            seq = row["seq"]
            if row["erased"]:
                if row["messages"] is not None or row["reply"] is not None or seq not in erasures:
                    changed.append(seq)  # text under an erasure mark, or an erasure no one made
                else:
                    erased.append(seq)
            elif row["messages"] is None or content_hash(row["messages"], row["reply"] or "") != row["content_hash"]:
                changed.append(seq)
            if entry_hash(row) != row["hash"]:
                changed.append(seq)
            expected_seq = previous["seq"] + 1 if previous else 1
            if seq > expected_seq:
                missing.extend(range(expected_seq, seq))  # deleted outright
            elif row["prev_hash"] != (previous["hash"] if previous else GENESIS):
                changed.append(seq)
            previous = row
        heads = {int(r["seq"]): r["hash"] for r in rows}
        key_problem = None
        try:
            state = self.keys.load()
        except SealKeyError as exc:
            state, key_problem = None, str(exc)
        found = check_chain(self.db, rows, state, keys)
        if not found.checked_with and key_problem is None and (rows or found.other_series):
            key_problem = (
                "the record's sealing key is not on this machine, so its seals cannot be checked here; "
                "check it with the verification key: cove record verify --key FILE"
            )
        last_seq = max(heads, default=0)
        if state is not None and (not keys or state.key_id in keys) and state.last_seq > last_seq:
            missing.extend(range(last_seq + 1, state.last_seq + 1))  # entries cut from the end
        unsealed = tuple(s for s in heads if s not in found.covered and s not in found.unchecked) if found.checked_with else ()
        bad = tuple(sorted({e for r in found.series for e in r.bad}))
        missing_seals = tuple(sorted({e for r in found.series for e in r.missing}))
        return Verdict(
            len(rows),
            tuple(sorted(set(changed))),
            tuple(sorted(set(missing))),
            tuple(erased),
            unsealed,
            bad,
            missing_seals,
            found.other_series,
            found.checked_with,
            key_problem,
            found.unchecked,
            found.why_unchecked,
            found.problems,
            found.series,
        )
