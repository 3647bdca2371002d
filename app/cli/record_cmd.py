"""`cove record verify|export|key`: the written record of requests (app/store/request_log.py) and its
sealing key (app/store/record_seals.py)."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import asdict
from pathlib import Path

from app.cli import moments
from app.core import Core
from app.store.record_key import ALREADY_GIVEN, give_out, parse_key_text, sealing_state
from app.store.record_verdict import verdict_lines
from app.store.request_log import RequestLog

# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), +cmd|...):
# such a text cell is written with a leading apostrophe, which spreadsheets show as text (OWASP's
# advice for CSV injection). JSON exports are written as they are.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_COLUMNS = (
    "seq",
    "at",
    "client",
    "remote",
    "endpoint",
    "model_name",
    "model_sha256",
    "quant",
    "params",
    "messages",
    "reply",
    "status",
    "usage",
    "timings",
    "ran_on",
    "erased",
    "content_hash",
    "prev_hash",
    "hash",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="the written record of every request: verify it, export it, its sealing key")
    rsub = p.add_subparsers(dest="record_command", metavar="COMMAND", required=True)
    verify = rsub.add_parser("verify", help="check that no entry was changed, deleted, added or re-sealed")
    verify.add_argument(
        "--key",
        metavar="FILE",
        action="append",
        help="a verification key (cove record key --export): check every seal of its key; give it "
        "once per key the record was sealed with (a key lost and replaced began another)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run_verify)
    export = rsub.add_parser("export", help="write the entries out")
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument(
        "--since", type=moments.since, metavar="WHEN", help=f"from this moment on (a date: from its start); {moments.ACCEPTED}"
    )
    export.add_argument(
        "--until",
        type=moments.until,
        metavar="WHEN",
        help="up to and including this moment (a date: to its end); the same forms as --since",
    )
    export.add_argument("--client", help="only this client's entries")
    export.set_defaults(run=run_export)
    key = rsub.add_parser("key", help="the sealing key: where it is kept; --export gives the verification key, once")
    key.add_argument("--export", action="store_true", help="print the verification key (once) to keep elsewhere")
    key.set_defaults(run=run_key)


def run_verify(core: Core, args: argparse.Namespace) -> int:
    keys = [read_key_file(Path(path), core) for path in args.key or ()]
    verdict = RequestLog(core.db).verify(*keys)
    if args.json:
        print(
            json.dumps(
                {
                    "intact": verdict.intact,
                    "entries": verdict.entries,
                    "changed": verdict.changed,
                    "missing": verdict.missing,
                    "erased": verdict.erased,
                    "unsealed": verdict.unsealed,
                    "bad_seals": verdict.bad_seals,
                    "missing_seals": verdict.missing_seals,
                    "unchecked": verdict.unchecked,
                    "why_unchecked": verdict.why_unchecked,
                    "key_findings": verdict.key_findings,
                    "keys": [asdict(r) for r in verdict.series],
                    "other_series": verdict.other_series,
                    "checked_with": verdict.checked_with,
                    "key_problem": verdict.key_problem,
                }
            )
        )
        return 0 if verdict.intact else 1
    for line in verdict_lines(verdict):
        print(line)
    return 0 if verdict.intact else 1


def read_key_file(path: Path, core: Core) -> tuple[str, bytes]:
    """(key id, verification key) from a file `cove record key --export` wrote. Raises ValueError
    with one sentence."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"the key file {path} cannot be read ({exc.strerror or exc})") from None
    return parse_key_text(text, RequestLog(core.db).keys.record_id, str(path))


def run_key(core: Core, args: argparse.Namespace) -> int:
    if not args.export:
        keys = RequestLog(core.db).keys
        state = sealing_state(core.db)
        given = "not given out yet (cove record key --export)" if state.verification else "given out once already"
        print(f"The record's sealing key {state.key_id} is kept in {keys.where}, at epoch {state.epoch}; its verification key is {given}.")
        return 0
    if not give_out(core.db, lambda text: print(text, flush=True)):
        raise ValueError(ALREADY_GIVEN)
    print(
        "Keep this elsewhere (another machine, a password manager, paper): Cove has forgotten it. "
        "cove record verify --key FILE checks every seal with it.",
        file=sys.stderr,
    )
    return 0


def run_export(core: Core, args: argparse.Namespace) -> int:
    if args.since and args.until and args.since > args.until:
        print(f"cove: --since ({args.since}) is after --until ({args.until}): no moment is in both", file=sys.stderr)
        return 2
    rows = RequestLog(core.db).entries(since=args.since, until=args.until, client=args.client)
    if args.format == "jsonl":
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    writer = csv.DictWriter(sys.stdout, fieldnames=_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({name: spreadsheet_safe(value) for name, value in row.items()} for row in rows)
    return 0


def spreadsheet_safe(value: object) -> object:
    """`value` as a CSV cell a spreadsheet shows and never runs."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_STARTS) else value
