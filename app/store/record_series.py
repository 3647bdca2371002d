"""How the record's series of seals follow one another. A series is the seals made with one key
(app/store/record_seals.py); a record begins with one, and a new one begins only when Cove finds no
sealing key for a record it has sealed before (a wiped keyring, a new machine, a key file deleted).
A key that vanished is evidence in itself: deleting the key is how someone would hide an edit from
this machine's check. So the new key's first seal is over an entry of its own, the key change,
which names the key before it and that key's last seal (epoch, entry, MAC). `check_chain` then
holds the record to that chain:

- seals of a key the record never announced (a series that starts over in the middle) vouch for
  nothing and are a finding;
- a key that was replaced cannot seal again, and cannot be cut back from where the change found it;
- entries sealed only with a key this check cannot use (lost from this machine, or not among the
  verification keys given) are reported as not checked: a vanished key is never taken on trust.

docs/record.md says what a person must keep for which guarantee.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from app.store.record_seals import check_series
from app.store.seal_keys import SealState

KEY_CHANGE = "key change"  # the endpoint and status of an entry that announces a new key


def change_params(latest_seal: dict[str, Any] | None, state: SealState, where: str) -> dict[str, Any]:
    """What the entry that announces `state`'s key says: the key before it and how far that one
    sealed (`latest_seal`: the record's newest seal, None when no seal was found)."""
    before = latest_seal or {}
    return {
        "key_id": state.key_id,
        "follows": before.get("key_id"),
        "follows_epoch": before.get("epoch"),
        "follows_seq": before.get("seq"),
        "follows_mac": before.get("mac"),
        "no_key_in": where,
    }


def change_notice(seq: int, where: str) -> str:
    return (
        f"no sealing key of this record was found in {where}, so a new key seals it from entry {seq} on. "
        "cove record verify reports the entries before it as not checked here: check them with the verification "
        "key you kept (cove record verify --key FILE), and keep the new one too (cove record key --export)"
    )


@dataclass(frozen=True)
class SeriesReport:
    """One key's part of the record."""

    key_id: str
    first: int  # the first entry of its part (1, or the entry that announced it)
    last: int  # the last entry one of its seals covers (0: none)
    seals: int
    checked_with: str  # "the verification key", "this machine's key", or "" (not checked)
    began_at: int | None  # the entry that announced it; None for the record's first key
    began: str = ""  # when that entry was written
    no_key_in: str = ""  # where Cove found no key when it began this one
    bad: tuple[int, ...] = ()  # its epochs whose seal does not match
    missing: tuple[int, ...] = ()  # its epochs absent (deleted, or cut from the end)


@dataclass(frozen=True)
class ChainFindings:
    covered: frozenset[int]  # entries a good seal of a key this check could use covers
    unchecked: tuple[int, ...]  # entries sealed only with a key this check could not use
    series: tuple[SeriesReport, ...]
    problems: tuple[str, ...]  # sentences: each makes the record fail
    why_unchecked: tuple[str, ...]  # sentences: which key, and what can check it
    other_series: int  # seals this check could not use
    checked_with: str  # "the verification key", "this machine's key", or ""


def _announcements(rows: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """key id -> (the entry that announced it, its params); the first such entry of each key."""
    found: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for row in rows:
        if row["endpoint"] != KEY_CHANGE or row["status"] != KEY_CHANGE or row["params"] is None:
            continue
        try:
            params = json.loads(row["params"])
        except ValueError:
            continue
        if isinstance(params, dict) and isinstance(params.get("key_id"), str):
            found.setdefault(params["key_id"], (row, params))
    return found


def check_chain(db: sqlite_utils.Database, rows: list[dict[str, Any]], state: SealState | None, keys: dict[str, bytes]) -> ChainFindings:
    """Check every series of seals and how they follow one another. `keys`: the verification keys
    given (key id -> epoch 0's key); none given, the series of this machine's `state` is checked with
    its local check key. Only a series checked with a key this check may use covers entries."""
    heads = {int(r["seq"]): r["hash"] for r in rows}
    by_key: dict[str, list[dict[str, Any]]] = {}
    for seal in db.query("SELECT * FROM record_seals ORDER BY key_id, epoch"):
        by_key.setdefault(seal["key_id"], []).append(dict(seal))
    announced = _announcements(rows)
    problems: list[str] = []
    chain: list[tuple[str, int]] = []  # (key id, the first entry of its part), in the record's order
    for key_id in sorted(by_key, key=lambda k: min(int(s["seq"]) for s in by_key[k])):
        seals, first_seq = by_key[key_id], min(int(s["seq"]) for s in by_key[key_id])
        if key_id not in announced:
            if not chain:
                chain.append((key_id, 1))
            else:
                problems.append(
                    f"{len(seals)} seals were made with key {key_id}, which this record never announced: "
                    f"it starts over at entry {first_seq}, in the middle of the record, so they vouch for "
                    "nothing"
                )
            continue
        entry, params = announced[key_id]
        before = chain[-1][0] if chain else None
        if first_seq != entry["seq"]:
            problems.append(f"key {key_id} sealed entry {first_seq}, before the entry that announced it ({entry['seq']})")
        if params.get("follows") != before:
            problems.append(
                f"the key change at entry {entry['seq']} says it follows key {params.get('follows')}, "
                f"but the seals before it were made with {f'key {before}' if before else 'no key'}"
            )
        chain.append((key_id, int(entry["seq"])))

    state_key = state.key_id if state is not None else None
    covered: set[int] = set()
    unchecked: list[int] = []
    reports: list[SeriesReport] = []
    why: list[str] = []
    other = sum(len(by_key[k]) for k in by_key if k not in dict(chain))
    for i, (key_id, first) in enumerate(chain):
        seals = by_key[key_id]
        nxt = chain[i + 1] if i + 1 < len(chain) else None
        end = nxt[1] - 1 if nxt else max(heads, default=0)
        verification = keys.get(key_id)
        check_key = bytes.fromhex(state.check) if state is not None and state_key == key_id else None
        found = check_series(seals, heads, verification=verification, check_key=check_key)
        bad, missing = list(found.bad), list(found.missing)
        if state is not None and state_key == key_id and state.epoch > found.last_epoch + 1:
            missing.extend(range(found.last_epoch + 1, state.epoch))  # cut from the end: the key went further
        if nxt is not None:
            params = announced[nxt[0]][1]
            bad_tail, late = _after_the_change(seals, found.last_epoch, nxt[1], params, missing)
            bad.extend(bad_tail)
            if late:
                problems.append(
                    f"key {key_id} went on sealing after it was replaced at entry {nxt[1]} (epochs "
                    f"{', '.join(map(str, late))}): a key that was replaced cannot come back"
                )
        usable = verification is not None if keys else check_key is not None
        how = "the verification key" if verification is not None else "this machine's key" if check_key else ""
        own = [int(s["seq"]) for s in seals if first <= int(s["seq"]) <= end]
        top = max((s for s in found.good if first <= s <= end), default=0) if usable else max(own, default=0)
        span = [s for s in heads if first <= s <= min(top, end)]
        if usable:
            covered.update(span)
        else:
            other += len(seals)
            unchecked.extend(span)
            if span:
                why.append(_why_not_checked(key_id, span, announced, nxt, bool(keys), state_key))
        change_row = announced[key_id][0] if key_id in announced else None
        reports.append(
            SeriesReport(
                key_id,
                first,
                top,
                len(seals),
                how if usable else "",
                int(change_row["seq"]) if change_row else None,
                change_row["at"] if change_row else "",
                str(announced[key_id][1].get("no_key_in") or "") if change_row else "",
                tuple(sorted(set(bad))),
                tuple(sorted(set(missing))),
            )
        )
    for key_id in sorted(keys.keys() - by_key.keys()) if heads else ():
        problems.append(
            f"no seal of key {key_id}, whose verification key was given, is in this record: the seals it made were deleted or replaced"
        )
    if state is not None and state_key not in by_key and state.epoch > 0:
        # This machine's key sealed before, and none of its seals is left.
        reports.append(SeriesReport(state_key or "", 0, 0, 0, "", None, missing=tuple(range(state.epoch))))
    checked = "the verification key" if keys else "this machine's key" if state is not None else ""
    return ChainFindings(frozenset(covered), tuple(sorted(unchecked)), tuple(reports), tuple(problems), tuple(why), other, checked)


def _after_the_change(
    seals: list[dict[str, Any]], last_epoch: int, change_seq: int, params: dict[str, Any], missing: list[int]
) -> tuple[list[int], list[int]]:
    """Hold a replaced key to what the key change found: its seals cut back since are added to
    `missing`; returns (its epochs whose seal differs from the one the change named, its epochs
    sealed after the change)."""
    epoch, mac = params.get("follows_epoch"), params.get("follows_mac")
    if not isinstance(epoch, int):
        return [], [int(s["epoch"]) for s in seals if int(s["seq"]) >= change_seq]
    missing.extend(range(last_epoch + 1, epoch + 1))
    named = next((s for s in seals if int(s["epoch"]) == epoch), None)
    bad = [epoch] if named is not None and named["mac"] != mac else []
    late = [int(s["epoch"]) for s in seals if int(s["epoch"]) > epoch or int(s["seq"]) >= change_seq]
    return bad, sorted(set(late))


def _why_not_checked(
    key_id: str,
    span: list[int],
    announced: dict[str, tuple[dict[str, Any], dict[str, Any]]],
    nxt: tuple[str, int] | None,
    keys_given: bool,
    state_key: str | None,
) -> str:
    entries = f"entries {span[0]} to {span[-1]}" if len(span) > 1 else f"entry {span[0]}"
    if keys_given:
        began = ""
        if key_id in announced:
            row, params = announced[key_id]
            began = (
                f" (it began at entry {row['seq']} on {row['at']}, when Cove found no sealing key in "
                f"{params.get('no_key_in') or 'its place'})"
            )
        return (
            f"Key {key_id} sealed {entries} and is not among the verification keys given{began}: those entries "
            "are proven only by its verification key (cove record key --export gives it out once)"
        )
    if nxt is not None and nxt[0] in announced:
        row, params = announced[nxt[0]]
        gone = (
            f"it vanished, and at entry {row['seq']}, on {row['at']}, Cove found no sealing key in "
            f"{params.get('no_key_in') or 'its place'} and began key {nxt[0]}"
        )
    elif state_key is None:
        gone = "no sealing key of this record is on this machine"
    else:
        gone = f"the sealing key on this machine is key {state_key}"
    return (
        f"Key {key_id} sealed {entries} and is not on this machine: {gone}. A key that vanished cannot be told "
        "from one deleted to hide an edit: only its verification key, kept elsewhere, can check these entries "
        "(cove record verify --key FILE)"
    )
