"""`cove history list|show|search|export|delete`: the saved conversations from the terminal.

Stored text is untrusted (a model's reply, a pasted prompt): on a terminal its control
characters are shown as escapes (app/cli/terminal_text.py); pipes, files and JSON get it exact.
A reply that ran on one of the person's own servers is marked "on HOST", and so is its conversation.
An export to a file writes the conversation's images beside it (app/store/export_images.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.output import metrics_line
from app.cli.terminal_text import for_terminal, json_for_terminal, print_json_for, say

if TYPE_CHECKING:
    from app.core import Core

_CHUNK = 500  # ids per query, under SQLite's bound-parameter limit


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="list, read, search, export and delete saved conversations")
    hsub = p.add_subparsers(dest="history_command", metavar="COMMAND", required=True)

    ls = hsub.add_parser("list", help="conversations, pinned first, newest first")
    ls.add_argument("--limit", type=int, default=None)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    show = hsub.add_parser("show", help="one conversation with every message and its metrics")
    show.add_argument("id", help="conversation id or a unique prefix (4+ characters)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)

    search = hsub.add_parser("search", help="full-text search over every message")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=50)
    search.add_argument("--json", action="store_true")
    search.set_defaults(run=run_search)

    export = hsub.add_parser("export", help="write a conversation as Markdown or JSON")
    export.add_argument("id")
    export.add_argument("--format", choices=("md", "json"), default="md")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.set_defaults(run=run_export)

    delete = hsub.add_parser("delete", help="delete a conversation and its messages")
    delete.add_argument("id")
    delete.set_defaults(run=run_delete)


def run_list(core: Core, args: argparse.Namespace) -> int:
    conversations = core.history.list_conversations(limit=args.limit)
    if args.json:
        print_json_for(conversations, sys.stdout)
        return 0
    if not conversations:
        print('No conversations yet. Start one with `cove chat "hello"`.')
        return 0
    hosts = _remote_hosts(core, [c.id for c in conversations])
    for c in conversations:
        pin = "📌 " if c.pinned else ""
        via = f"[{c.client} · API] " if c.client else ""
        where = f"[on {hosts[c.id]}] " if c.id in hosts else ""
        say(
            f"{c.id[:8]}  {c.updated_at[:16].replace('T', ' ')}  {c.message_count:>4} msgs  {pin}{via}{where}{c.title or '(untitled)'}",
            sys.stdout,
        )
    return 0


def _remote_hosts(core: Core, conversation_ids: list[str]) -> dict[str, str]:
    """For each conversation with a reply that ran on a server: the host of its latest such reply."""
    hosts: dict[str, str] = {}
    for start in range(0, len(conversation_ids), _CHUNK):
        chunk = conversation_ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        # SQLite takes the bare column from the row that max(seq) picked.
        rows = core.db.conn.execute(
            "SELECT conversation_id, json_extract(metrics, '$.remote.host'), max(seq) FROM messages "
            f"WHERE conversation_id IN ({marks}) AND role = 'assistant' AND json_valid(metrics) "
            "AND json_extract(metrics, '$.remote.host') IS NOT NULL GROUP BY conversation_id",
            chunk,
        )
        hosts.update({row[0]: str(row[1]) for row in rows})
    return hosts


def run_show(core: Core, args: argparse.Namespace) -> int:
    from app.turn.backend import remote_host

    conversation = core.history.get_conversation(args.id)
    messages = core.history.messages(conversation.id)
    if args.json:
        print_json_for({"conversation": conversation, "messages": messages}, sys.stdout)
        return 0
    out = sys.stdout
    say(f"# {conversation.title or '(untitled)'}  [{conversation.id}]", out)
    if conversation.system_prompt:
        say(f"system: {conversation.system_prompt}", out)
    for m in messages:
        print(file=out)
        if m.role == "tool_call":
            say(
                f"tool call: {m.params.get('server') or '?'}/{m.params.get('tool') or m.params.get('name')} "
                f"{json.dumps(m.params.get('arguments') or {}, ensure_ascii=False, sort_keys=True)}",
                out,
            )
            continue
        if m.role == "tool":
            who = f", {m.params['approved_by']}" if m.params.get("approved_by") else ""
            say(f"tool result ({m.params.get('status')}{who}):", out)
            say(m.content, out)
            continue
        say(f"{m.role}:", out)
        for image in m.images:
            say(f"[image: {image.describe()} · sha256 {image.sha256}]", out)
        say(m.content, out)
        if m.role == "assistant":
            extra = f" — {m.error}" if m.error else ""
            host = remote_host(m.metrics)
            shown = f"{m.model_name or '?'} on {host}" if host else m.model_name or "?"
            say(f"[{metrics_line(shown, m.status, m.metrics)}{extra}]", out)
    return 0


def run_search(core: Core, args: argparse.Namespace) -> int:
    from app.store.search import search_messages

    hits = search_messages(core.db, args.query, limit=args.limit)
    if args.json:
        print_json_for(hits, sys.stdout)
        return 0
    if not hits:
        print("No messages match.")
        return 0
    for h in hits:
        say(f"{h.conversation_id[:8]}  {h.role:<9} {h.conversation_title or '(untitled)'}: {h.snippet}", sys.stdout)
    return 0


def run_export(core: Core, args: argparse.Namespace) -> int:
    from app.images.store import ImageStore
    from app.store.export import export_conversation
    from app.store.export_images import export_to_file

    conversation = core.history.get_conversation(args.id)
    if args.output:
        written = export_to_file(core.history, conversation.id, args.format, Path(args.output), ImageStore(core.paths.images_dir))
        also = f", and {_images(written.images_written)} in {written.images_folder}" if written.images_folder else ""
        print(f"Wrote {args.output}{also}.", file=sys.stderr)
        if written.images_missing == 1:
            print("cove: 1 image is no longer in Cove's images folder; the export says so where it was.", file=sys.stderr)
        elif written.images_missing:
            print(
                f"cove: {written.images_missing} images are no longer in Cove's images folder; the export says so where they were.",
                file=sys.stderr,
            )
    else:  # a terminal gets escapes; a pipe gets exactly what the file would hold
        text = export_conversation(core.history, conversation.id, args.format)
        shown = json_for_terminal(text, sys.stdout) if args.format == "json" else for_terminal(text, sys.stdout)
        sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
    return 0


def _images(n: int) -> str:
    return "1 image" if n == 1 else f"{n} images"


def run_delete(core: Core, args: argparse.Namespace) -> int:
    conversation = core.history.get_conversation(args.id)
    core.history.delete_conversation(conversation.id)
    say(f"Deleted conversation {conversation.id[:8]} ({conversation.title or 'untitled'}).", sys.stdout)
    return 0
