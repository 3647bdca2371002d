"""`cove serve`: the OpenAI-compatible API of Cove's engine on this computer (loopback only)."""

from __future__ import annotations

import argparse
import sys

from app.cli.output import positive_int
from app.core import Core

DEFAULT_PORT = 8642


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the installed models over the OpenAI API on 127.0.0.1")
    p.add_argument("--port", type=positive_int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.set_defaults(run=run)


def run(core: Core, args: argparse.Namespace) -> int:
    import uvicorn

    from app.engine.client import EngineClient
    from app.serve.server import create_app

    with EngineClient() as engine:
        app = create_app(core, engine)
        print(f"cove serve: http://127.0.0.1:{args.port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
        # One process, the event loop on this thread: the history's SQLite connection stays on the
        # thread that opened it. Loopback only: no request comes from another machine.
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    return 0
