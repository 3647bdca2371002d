"""What `RequestLog.verify` found, in sentences: the command line prints them, the window's
Server panel shows them. The last sentence says what the check was able to prove (docs/record.md
says it at length)."""

from __future__ import annotations

from app.store.record_series import SeriesReport
from app.store.request_log import Verdict

# What each kind of check proves, and against whom.
PROVEN_HERE = (
    "This machine's key finds an edit made without it, but whoever can write this account's files can "
    "rewrite that key too: only the verification key kept elsewhere proves the record against them "
    "(cove record verify --key FILE)."
)
PROVEN_WITH_KEY = (
    "The verification key proves each entry its seals cover is as Cove wrote it; only entries cut "
    "from the end together with the sealing key cannot be told."
)


def _numbers(seqs: tuple[int, ...], limit: int = 20) -> str:
    shown = ", ".join(map(str, seqs[:limit]))
    return shown + (f" and {len(seqs) - limit} more" if len(seqs) > limit else "")


def _part(report: SeriesReport) -> str:
    began = (
        f"begun at entry {report.began_at} on {report.began}, when Cove found no sealing key in {report.no_key_in}"
        if report.began_at is not None
        else "the record's first key"
    )
    covers = f"entries {report.first} to {report.last}" if report.last else "no entry"
    checked = f"checked with {report.checked_with}" if report.checked_with else "not checked"
    return f"key {report.key_id} sealed {covers} ({began}; {checked})"


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict's headline first, then one sentence per finding, then what the check proves."""
    lines = [f"The record holds {verdict.entries} entries: {'intact' if verdict.intact else 'NOT INTACT'}."]
    if verdict.checked_with:
        lines.append(f"Its seals were checked with {verdict.checked_with}.")
    several = [r for r in verdict.series if r.seals]
    if len(several) > 1:
        lines.append(f"It was sealed with {len(several)} keys, one after the other: " + "; ".join(_part(r) for r in several) + ".")
    for seqs, what in (
        (verdict.changed, "Entries changed (their fields, text or links do not match)"),
        (verdict.missing, "Entries missing (deleted, or cut from the end)"),
        (verdict.unsealed, "Entries after the last good seal (added or re-hashed without the key)"),
        (verdict.unchecked, "Entries sealed with a key this check could not use"),
    ):
        if seqs:
            lines.append(f"{what}: {_numbers(seqs)}.")
    lines.extend(f"{why}." for why in verdict.why_unchecked)
    if len(verdict.series) > 1:
        for report in verdict.series:
            for epochs, what in (
                (report.bad, "do not match (forged, or over entries that changed)"),
                (report.missing, "are missing (deleted, or cut from the end)"),
            ):
                if epochs:
                    lines.append(f"Seals of key {report.key_id} that {what}: epochs {_numbers(epochs)}.")
    else:
        for seqs, what in (
            (verdict.bad_seals, "Seals that do not match (forged, or over entries that changed)"),
            (verdict.missing_seals, "Seals missing (deleted, or cut from the end)"),
        ):
            if seqs:
                lines.append(f"{what}: {_numbers(seqs)}.")
    if verdict.erased:
        lines.append(f"Entries whose text the person erased (marked gaps, each erasure sealed): {_numbers(verdict.erased)}.")
    lines.extend(f"{finding[0].upper()}{finding[1:]}." for finding in verdict.key_findings)
    if verdict.key_problem:
        lines.append(f"The seals could not be checked: {verdict.key_problem}.")
    if verdict.checked_with == "this machine's key":
        lines.append(PROVEN_HERE)
    elif verdict.checked_with:
        lines.append(PROVEN_WITH_KEY)
    return lines
