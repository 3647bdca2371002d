"""`cove record verify|export`: the written record of requests (app/store/request_log.py)."""

from __future__ import annotations

import argparse
import csv
import json
import sys

from app.core import Core
from app.store.request_log import RequestLog

_COLUMNS = ("seq", "at", "client", "remote", "endpoint", "model_name", "model_sha256", "quant", "params", "messages",
            "reply", "status", "usage", "timings", "ran_on", "erased", "content_hash", "prev_hash", "hash")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="the written record of every request: verify it, export it")
    rsub = p.add_subparsers(dest="record_command", metavar="COMMAND", required=True)
    verify = rsub.add_parser("verify", help="check that no entry was changed (deleted ones are gaps)")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run_verify)
    export = rsub.add_parser("export", help="write the entries out")
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--since", help="from this UTC time on (as the entries write it, e.g. 2026-12-01T10:00)")
    export.add_argument("--until", help="up to this UTC time")
    export.add_argument("--client", help="only this client's entries")
    export.set_defaults(run=run_export)


def run_verify(core: Core, args: argparse.Namespace) -> int:
    verdict = RequestLog(core.db).verify()
    if args.json:
        print(json.dumps({"intact": verdict.intact, "entries": verdict.entries, "tampered": verdict.tampered,
                          "missing": verdict.missing, "erased": verdict.erased}))
    else:
        state = "intact" if verdict.intact else f"CHANGED: entries {', '.join(map(str, verdict.tampered))} do not match"
        print(f"The record holds {verdict.entries} entries: {state}.")
        if verdict.missing:
            print(f"Entries deleted outright (gaps, not changes): {', '.join(map(str, verdict.missing))}.")
        if verdict.erased:
            print(f"Entries whose text was erased by the person: {', '.join(map(str, verdict.erased))}.")
    return 0 if verdict.intact else 1


def run_export(core: Core, args: argparse.Namespace) -> int:
    rows = RequestLog(core.db).entries(since=args.since, until=args.until, client=args.client)
    if args.format == "jsonl":
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    writer = csv.DictWriter(sys.stdout, fieldnames=_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return 0
