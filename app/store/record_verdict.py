"""What `RequestLog.verify` found, in sentences: the command line prints them, the window's
Server panel shows them."""

from __future__ import annotations

from app.store.request_log import Verdict


def _numbers(seqs: tuple[int, ...], limit: int = 20) -> str:
    shown = ", ".join(map(str, seqs[:limit]))
    return shown + (f" and {len(seqs) - limit} more" if len(seqs) > limit else "")


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict's headline first, then one sentence per finding."""
    lines = [f"The record holds {verdict.entries} entries: {'intact' if verdict.intact else 'NOT INTACT'}."]
    if verdict.checked_with:
        lines.append(f"Its seals were checked with {verdict.checked_with}.")
    for seqs, what in ((verdict.changed, "Entries changed (their fields, text or links do not match)"),
                       (verdict.missing, "Entries missing (deleted, or cut from the end)"),
                       (verdict.unsealed, "Entries after the last good seal (added or re-hashed without the key)"),
                       (verdict.bad_seals, "Seals that do not match (forged, or over entries that changed)"),
                       (verdict.missing_seals, "Seals missing (deleted, or cut from the end)"),
                       (verdict.erased, "Entries whose text the person erased (marked gaps, each erasure sealed)")):
        if seqs:
            lines.append(f"{what}: {_numbers(seqs)}.")
    if verdict.other_series:
        lines.append(f"{verdict.other_series} seals were made with another key (an earlier one, or another machine's); "
                     "check them with that key's file.")
    if verdict.key_problem:
        lines.append(f"The seals could not be checked: {verdict.key_problem}.")
    return lines
