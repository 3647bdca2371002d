"""`cove serve`: the OpenAI-compatible API of Cove's engines on this computer (loopback only
unless told otherwise, and then only with keys, over HTTPS with this machine's certificate)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from app.cli.output import positive_int
from app.core import Core

if TYPE_CHECKING:
    import ssl

    from app.serve.pool.pool import ModelPool

DEFAULT_PORT = 8642
DEFAULT_TTL_MINUTES = 10.0
ROUTING_REMOVED = (
    "cove serve: --routing is no longer used and will be refused in a later version: each model runs in "
    "one engine whose slots serve requests at once, and the engine gives each request the slot whose "
    "cache shares the longest prefix with it."
)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes (give one such as 10, or 0 to unload at once)")
    if value < 0:
        raise argparse.ArgumentTypeError("the idle time cannot be negative")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the installed models over the OpenAI API on 127.0.0.1")
    p.add_argument("--port", type=positive_int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other but ::1 and localhost needs keys and is served over HTTPS)",
    )
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="off loopback, serve plain HTTP instead of HTTPS: the keys and every prompt cross the network readable",
    )
    p.add_argument(
        "--parallel",
        type=positive_int,
        default=None,
        metavar="N",
        help="slots of each model's engine: replies it decodes at once, in one process, each with a "
        "KV cache of its own (default: as many as fit in memory, at most 4 on a CPU)",
    )
    # Removed: one engine per model picks the slot for each request itself. Still accepted, with a sentence.
    p.add_argument("--routing", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--cache-ram",
        type=int,
        default=256,
        metavar="MB",
        help="RAM each engine keeps earlier conversations' state in, so a client's next turn is not evaluated again (default 256; 0: none)",
    )
    p.add_argument(
        "--ttl",
        type=_minutes,
        default=DEFAULT_TTL_MINUTES,
        metavar="MINUTES",
        help=f"unload a model idle this long (default {DEFAULT_TTL_MINUTES:g})",
    )
    p.set_defaults(run=run)
    ssub = p.add_subparsers(dest="serve_command", metavar="{keys,pair}")
    keys = ssub.add_parser("keys", help="the clients' API keys: add NAME (shown once), list, remove NAME")
    keys.add_argument("action", choices=("add", "list", "remove"))
    keys.add_argument("name", nargs="?")
    keys.set_defaults(run=run_keys)
    pair = ssub.add_parser(
        "pair",
        help="a one-time code (10 minutes, one use) with which another Cove pairs with this one: cove remote pair NAME URL CODE",
    )
    pair.add_argument(
        "--host",
        dest="pair_host",
        default=None,
        metavar="ADDRESS",
        help="the address `cove serve --host` listens on, when this machine's certificate must first be made for it",
    )
    pair.add_argument("--port", dest="pair_port", type=positive_int, default=DEFAULT_PORT, help="the port it listens on, for the hint")
    pair.set_defaults(run=run_pair)


def run_keys(core: Core, args: argparse.Namespace) -> int:
    from app.serve.http.keys import ApiKeys, KeyRefused

    keys = ApiKeys(core.db)
    if args.action == "list":
        for name in keys.names():
            print(name)
        return 0
    if not args.name:
        raise ValueError(f"cove serve keys {args.action} needs the key's name")
    if args.action == "remove":
        if not keys.remove(args.name):
            raise ValueError(f"there is no key named {args.name!r}")
        print(f"Removed the key {args.name!r}; requests with it are refused from now on.")
        return 0
    try:
        key = keys.add(args.name)
    except KeyRefused as exc:
        raise ValueError(str(exc)) from None
    print(f"The key for {args.name!r} (shown this once; Cove keeps only its hash):", file=sys.stderr)
    print(key)
    return 0


def run_pair(core: Core, args: argparse.Namespace) -> int:
    """Make a pairing code for this machine's certificate (app/serve/http/pairing_codes.py) and
    print it on stdout, with what to type on the other machine on stderr."""
    from app.serve.http.pairing_codes import VALID, PairingCodes, served_certificate
    from app.serve.http.serving import url_host
    from app.serve.http.tls import TlsUnavailable

    if core.read_only:
        raise RuntimeError(core.notice or "the history is open read-only, so a pairing code cannot be kept")
    try:
        cert, der = served_certificate(core.paths.tls_dir, args.pair_host)
    except TlsUnavailable as exc:
        raise ValueError(f"cannot make a pairing code without this machine's certificate: {exc}") from None
    code, ends = PairingCodes(core.db).make(der)
    for notice in cert.notices:
        renewed = " A `cove serve` running now still serves the old one: restart it." if "new certificate" in notice else ""
        print(f"cove serve pair: {notice}{renewed}", file=sys.stderr)
    minutes = int(VALID.total_seconds() // 60)
    print(
        f"A pairing code for one machine, valid for {minutes} minutes (until {ends.astimezone():%H:%M}) and once:",
        file=sys.stderr,
        flush=True,
    )
    print(code, flush=True)
    address = args.pair_host if args.pair_host not in (None, "0.0.0.0", "::") else "THIS-MACHINE"
    names = ", ".join([*cert.dns_names, *cert.ip_addresses])
    print(
        f"With `cove serve --host ADDRESS --port {args.pair_port}` running here, type on the other machine:\n"
        f"  cove remote pair NAME https://{url_host(address)}:{args.pair_port} {code}\n"
        f"NAME is what that machine will call this one; the address must be one the certificate names: {names}.\n"
        f"This machine's certificate has the SHA-256 fingerprint {cert.fingerprint}; the code carries its start, so the "
        "other machine sends its secret to this certificate only.",
        file=sys.stderr,
    )
    return 0


def make_pool(core: Core, args: argparse.Namespace) -> ModelPool:
    """The engines behind the server: one process per model with `--parallel` slots (None: as
    many as fit); a `--routing` still given is said to be unused."""
    from app.serve.pool.pool import ModelPool

    if args.routing is not None:
        print(ROUTING_REMOVED, file=sys.stderr, flush=True)
    return ModelPool(parallel=args.parallel, ttl_s=args.ttl * 60, n_ctx=core.settings.sampling.n_ctx, cache_ram_mb=max(0, args.cache_ram))


def run(core: Core, args: argparse.Namespace) -> int:
    from app.serve.api.service import Service
    from app.serve.http.keys import ApiKeys
    from app.serve.http.server import LOOPBACK_NAMES, create_app
    from app.serve.http.serving import ListenError, listen_socket, make_server, url_host

    loopback = args.host in LOOPBACK_NAMES
    tls, banner = _tls(core, args, loopback)
    if not loopback and not ApiKeys(core.db).names():
        banner.append(
            "No API key yet: other machines can only pair (`cove serve pair` makes a code) until one exists; "
            "every other request from them is refused."
        )
    try:
        sock = listen_socket(args.host, args.port)
    except ListenError as exc:
        raise ValueError(str(exc)) from None
    try:
        pool = make_pool(core, args)
        # The service gives the pool each model's load settings, read off the event loop.
        service = Service(core, pool)
        # Another address answers to any Host name (requests need a key there); loopback only to its own.
        app = create_app(core, pool, host_names=LOOPBACK_NAMES if loopback else None, service=service)
        server = make_server(app, service.stop_all, tls=tls)
        scheme = "https" if tls is not None else "http"
        print(f"cove serve: {scheme}://{url_host(args.host)}:{args.port}/v1 (Ctrl-C stops)", file=sys.stderr, flush=True)
        for line in banner:
            print(f"cove serve: {line}", file=sys.stderr, flush=True)
        # One process, the event loop on this thread; every read and write of the history runs on the
        # service's store thread (app/serve/api/request_store.py), never on the loop. A signal stops the
        # replies in progress, keeping what they wrote (app/serve/http/serving.py), and is raised again
        # once the server is down (exit 130, 143).
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _tls(core: Core, args: argparse.Namespace, loopback: bool) -> tuple[ssl.SSLContext | None, list[str]]:
    """The TLS context to serve with (None: plain HTTP) and the lines that follow the address:
    off loopback, this machine's certificate (made or renewed as needed, app/serve/http/tls.py) and
    its fingerprint, unless --insecure-http; a certificate that cannot be had refuses the start."""
    from app.serve.http.tls import TlsUnavailable, serving_context

    if loopback:
        return None, []
    if args.insecure_http:
        return None, [f"plain HTTP on {args.host} (--insecure-http): the keys and every prompt cross the network readable."]
    try:
        context, cert = serving_context(core.paths.tls_dir, args.host)
    except TlsUnavailable as exc:
        raise ValueError(
            f"cannot serve HTTPS on {args.host}: {exc}. Plain HTTP there would send the keys and every prompt readable "
            "across the network; make that folder writable, or pass --insecure-http to serve plain HTTP anyway."
        ) from None
    lines = [*cert.notices, f"the certificate's SHA-256 fingerprint: {cert.fingerprint}"]
    lines.append(f"the certificate, for clients to trust (cove remote add … --ca-file): {cert.cert_file}")
    return context, lines
