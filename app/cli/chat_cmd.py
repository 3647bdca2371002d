"""`cove chat`: stream a reply to stdout and keep both messages in the history.

`--model MODEL_ID@CONNECTION` chats with a model on one of the person's own servers
(app/remote/) the same way. Messages go to a host outside this machine and its private
network only once the person has agreed to it: asked once on a terminal, or `--allow-host HOST`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from app.cli.chat_auto import auto_line, chosen_for_message, for_each_message, servers_now
from app.cli.chat_docs import chat_documents, print_sources, sources_json
from app.cli.chat_remote import agree_to_send, isatty, placed, resolve_chat_model
from app.cli.models_place_cmd import gpu_layers
from app.cli.output import metrics_line, positive_int
from app.cli.terminal_text import for_terminal, say
from app.cli.tools_cmd import LOG_NAME
from app.cli.tools_cmd import _ask_on_terminal as ask_on_terminal
from app.cli.turn_lines import reasoning_apart, say_tool
from app.core import Core
from app.engine.client import LoadedModel
from app.load_options import load_options
from app.mcp.approval import DENY, Approver, ToolRequest, allow_without_asking
from app.mcp.failures import ToolServerError
from app.mcp.host import McpHost
from app.mcp.store import ToolServerStore
from app.remote.remote_model import RemoteModel
from app.routing.auto import AutoChoice, is_auto
from app.settings import SamplingParams
from app.statuses import MessageStatus
from app.store.sources import sources_of
from app.termination import Terminated
from app.turn.backend import installed_model, remote_host, server_connection, server_host
from app.turn.service import ChatService, TurnResult
from app.turn.tools import DEFAULT_MAX_STEPS, ToolLoop, offer
from app.unreadable_text import from_os
from models.library import InstalledModel

EXIT_INTERRUPTED = 130
EXIT_USAGE = 2  # input the command cannot take (as argparse's own)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a local model; the reply streams to stdout")
    p.add_argument("prompt", nargs="?", help="your message (omit it to read standard input, or to chat interactively in a terminal)")
    p.add_argument(
        "--model",
        "-m",
        help="model name from `cove models list`, a path to a .gguf file, "
        "MODEL_ID@CONNECTION for a model on one of your servers (`cove remote models NAME`), "
        "or auto: the installed model that suits the message, said on stderr",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--conversation", "-c", help="continue this conversation (id or a unique prefix of it)")
    which.add_argument("--new", action="store_true", help="start a new conversation (default: continue the last one)")
    p.add_argument("--system", help="system prompt for this conversation")
    p.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="send this picture (PNG, JPEG, WebP or GIF) with the message, to a model that can see images; repeatable",
    )
    p.add_argument("--max-tokens", type=positive_int, help="longest reply in tokens (default 512)")
    p.add_argument("--temperature", type=_non_negative_float, help="sampling temperature (0 = always the likeliest token)")
    p.add_argument("--seed", type=int, help="random seed, for a repeatable reply")
    p.add_argument("--ctx", type=positive_int, help="context size in tokens (default: the model's, at most 8192)")
    p.add_argument(
        "--gpu-layers",
        type=gpu_layers,
        metavar="auto|all|N",
        default=argparse.SUPPRESS,
        help="layers on the GPU for this run (default: the model's setting, `cove models place`)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object at the end instead of streaming text")
    p.add_argument(
        "--allow-host",
        metavar="HOST",
        help="agree that your messages go to HOST, a connection's server "
        "outside this machine and your private network (asked once on a terminal otherwise)",
    )
    p.add_argument(
        "--tools",
        metavar="NAME[,NAME]",
        help="let the model call the tools of these tool servers (`cove tools list`); each call is asked on the terminal first",
    )
    p.add_argument(
        "--allow-tools",
        action="store_true",
        help="with --tools: run the model's calls without asking (for scripts; you allow every call of this run up front)",
    )
    p.add_argument(
        "--tool-choice",
        choices=("auto", "required"),
        default="auto",
        help="with --tools: 'required' makes the first reply call a tool (default: the model chooses)",
    )
    p.add_argument(
        "--allow-offline-once",
        action="store_true",
        help="with --tools: start the tool servers this once while Cove is offline (Cove cannot see what they do on the network)",
    )
    p.add_argument(
        "--max-tool-steps",
        type=positive_int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"with --tools: most rounds of calls in one turn (default {DEFAULT_MAX_STEPS})",
    )
    p.add_argument(
        "--docs",
        metavar="NAME[,NAME]",
        help="answer from these document collections (`cove docs list`), "
        "citing the passages used; attached to the conversation for its later turns",
    )
    p.set_defaults(run=run)


def _read_stdin_leniently() -> None:
    """Bytes on standard input that are not text in its encoding come through as escapes
    (surrogateescape) that `_readable` turns into U+FFFD, instead of failing the read."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="surrogateescape")


def _stdin_encoding() -> str:
    return getattr(sys.stdin, "encoding", None) or "utf-8"


def _readable(text: str, what: str, encoding: str | None = None) -> str:
    """`text` (an argument or what was read) with what is not valid text replaced by U+FFFD,
    said once on stderr; the rest is sent and kept as it is."""
    fixed, replaced = from_os(text, encoding or sys.getfilesystemencoding())
    if replaced:
        say(
            f"cove: {what} is not valid {encoding or sys.getfilesystemencoding()} text in places; each such place "
            "is sent and kept as U+FFFD (\ufffd)",
            sys.stderr,
        )
    return fixed


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def _params(core: Core, args: argparse.Namespace) -> SamplingParams:
    params = core.settings.sampling
    changes = {}
    if args.max_tokens is not None:
        changes["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        changes["temperature"] = args.temperature
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.ctx is not None:
        changes["n_ctx"] = args.ctx
    return replace(params, **changes)


def run(core: Core, args: argparse.Namespace) -> int:
    if args.allow_tools and not args.tools:
        raise ValueError("--allow-tools goes with --tools NAME[,NAME]: it allows the calls of those servers")
    if core.read_only:
        raise RuntimeError(core.notice or "the history is open read-only, so a new chat cannot be saved")
    pictures: list[Any] = []  # (bytes, CheckedImage) of each --image
    if args.image:  # before anything is read or written; app/images (Pillow) is imported only here
        from app.cli.chat_images import ImagesRefused, read_images, refuse_unseeing

        try:
            pictures = read_images(args.image)
            if not is_auto(args.model):  # Auto chooses a model that sees them
                refuse_unseeing(resolve_chat_model(core, args.model))
        except ImagesRefused as exc:
            say(f"cove: {exc}", sys.stderr)
            return EXIT_USAGE
    interactive = args.prompt is None and sys.stdin.isatty() and not args.json
    if interactive and pictures:
        say(
            'cove: --image sends the picture with one message; give the message too, as in: cove chat --image receipt.png "total?"',
            sys.stderr,
        )
        return EXIT_USAGE
    _read_stdin_leniently()
    prompt = _readable(args.prompt, "your message") if args.prompt is not None else None
    if args.system is not None:
        args.system = _readable(args.system, "the system prompt")
    if prompt is None and not interactive:
        prompt = _readable(sys.stdin.read(), "your message on standard input", _stdin_encoding())
    if prompt is not None and not prompt.strip() and not pictures:
        raise ValueError("the message is empty; type something to send")

    params = _params(core, args)
    chosen: AutoChoice | None = None
    model: InstalledModel | RemoteModel
    if is_auto(args.model) and interactive:
        model = core.resolve_model(None)  # each message chooses its own (app/cli/chat_auto.py)
    elif is_auto(args.model):
        model, chosen = chosen_for_message(core, args, prompt, params, images=bool(pictures))
        say(auto_line(chosen), sys.stderr)
    else:
        model = resolve_chat_model(core, args.model)
    options = None
    local = installed_model(model)
    connection = server_connection(model)
    if connection is not None:  # a server's model, before anything is saved: may refuse, or ask
        agree_to_send(core, core.connections.get(connection), args.allow_host)
    elif local is not None:
        placement = core.settings.placement_for(local.name)
        if hasattr(args, "gpu_layers"):
            placement = replace(placement, gpu_layers=args.gpu_layers)
        options = load_options(core.library, local, placement)
        if options.notice:  # a draft model that is gone: said once, and the chat goes on without it
            say(f"cove: {options.notice}", sys.stderr)
    if args.conversation:
        conversation = core.history.get_conversation(args.conversation)
    else:
        last = None if args.new else core.history.last_conversation()
        conversation = last or core.history.create_conversation(model=model.name, system_prompt=args.system)
    if args.system is not None and args.system != conversation.system_prompt:
        core.history.update_conversation(conversation.id, system_prompt=args.system)
    system_prompt = args.system if args.system is not None else conversation.system_prompt
    model = placed(core, model, conversation.id)  # the same model file on another of the person's machines

    tool_names = [n.strip() for n in (args.tools or "").split(",") if n.strip()]

    # A server needs no engine here; this machine's saves conversations' KV state beside the window's.
    wanted_docs = [n.strip() for n in (args.docs or "").split(",") if n.strip()]
    with (
        core.engine_client() if local is not None else contextlib.nullcontext(None) as engine,
        chat_tools(core, tool_names, args) as tools,
        chat_documents(core, conversation.id, wanted_docs, model, params) as docs,
    ):
        service = ChatService(core.history, engine, library=core.library, remote_engine=core.remote_engine, on_notice=_notice)
        if local is not None:  # `cove chat` without --model stays on this machine
            core.remember_model(local)
        if interactive:
            each = is_auto(args.model)
            return _interactive(core, service, conversation.id, model, params, system_prompt, _template_notes(), options, tools, docs, each)
        stream, thinking = (None, None) if args.json else reasoning_apart(stream_to_stdout)
        assert prompt is not None  # read from stdin above when not interactive
        result = service.send(
            conversation.id,
            prompt,
            model=model,
            params=params,
            system_prompt=system_prompt,
            on_text=stream,
            on_loaded=None if args.json else _template_notes(),
            options=options,
            tools=tools,
            on_tool=None if args.json else say_tool,
            docs=docs,
            on_reasoning=thinking,
            images=_kept_images(core, pictures),
            auto=chosen.record() if chosen is not None else None,
        )
    sources = sources_of(core.db, result.assistant_message.id)
    if args.json:
        print(json.dumps({**_result_json(result), "sources": sources_json(sources)}, ensure_ascii=False, indent=2))
    else:
        _print_footer(model.name, result)
        print_sources(sources, docs)
    return _exit_code(result)


def _kept_images(core: Core, pictures: list[Any]) -> list[Any]:
    """The --image pictures put in the history's images folder, as the message keeps them."""
    if not pictures:
        return []
    from app.cli.chat_images import keep_images

    return keep_images(core.history.images, pictures)


def _exit_code(result: TurnResult) -> int:
    if result.terminated_by is not None:
        return 128 + result.terminated_by  # 143 for SIGTERM, 129 for SIGHUP
    if result.interrupted_by_user:
        return EXIT_INTERRUPTED
    return 1 if result.status == MessageStatus.ERROR else 0


def _template_notes() -> Callable[[LoadedModel], None]:
    """Say once per model, as the window's status bar does, that its own chat template is not used."""
    said: set[str] = set()

    def note(loaded: LoadedModel) -> None:
        if loaded.template_source.startswith("fallback") and loaded.path not in said:
            said.add(loaded.path)
            say(f"cove: {loaded.template_note}", sys.stderr)

    return note


def _interactive(
    core, service, conversation_id, model, params, system_prompt, on_loaded, options, tools=None, docs=None, auto=False
) -> int:
    """`auto`: Auto chooses the model for each message."""
    host = server_host(model)
    where = f" on {host}" if host else ""
    who = "Auto (each message goes to the model that suits it)" if auto else model.name
    print(f"Chatting with {who}{where} in conversation {conversation_id[:8]}. Ctrl-D to leave, Ctrl-C stops a reply.", file=sys.stderr)
    servers = servers_now(core) if auto else ([], {})
    while True:
        try:
            line = input("you> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt as exc:
            print(file=sys.stderr)
            return exc.exit_code if isinstance(exc, Terminated) else EXIT_INTERRUPTED
        line = _readable(line, "your message", _stdin_encoding())
        if not line.strip():
            continue
        chosen = None
        if auto:
            model, chosen, options = for_each_message(core, conversation_id, line, params, tools=tools is not None, servers=servers)
            say(auto_line(chosen), sys.stderr)
        shown, thinking = reasoning_apart(stream_to_stdout)
        result = service.send(
            conversation_id,
            line,
            model=model,
            auto=chosen.record() if chosen is not None else None,
            params=params,
            system_prompt=system_prompt,
            on_text=shown,
            on_loaded=on_loaded,
            options=options,
            tools=tools,
            on_tool=say_tool,
            docs=docs,
            on_reasoning=thinking,
        )
        _print_footer(model.name, result)
        print_sources(sources_of(core.db, result.assistant_message.id), docs)
        if result.terminated_by is not None:
            return 128 + result.terminated_by


def stream_to_stdout(text: str) -> None:
    """A piece of the reply on standard output as it arrives: escaped for a terminal, exact for a pipe."""
    try:
        sys.stdout.write(for_terminal(text, sys.stdout))  # a reply's escape sequences never reach a terminal raw
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError:
        pass  # the terminal is gone (SIGHUP follows): the reply is still saved


def _print_footer(model_name: str, result: TurnResult) -> None:
    try:
        sys.stdout.write("\n")
        sys.stdout.flush()
        if result.error:
            say(f"cove: {result.error}", sys.stderr)
        if result.metrics.get("template_note"):  # this turn's render fell back to a plain format
            say(f"cove: {result.metrics['template_note']}", sys.stderr)
        if result.metrics.get("tool_note"):  # the turn's rounds of tool calls reached their limit
            say(f"cove: {result.metrics['tool_note']}", sys.stderr)
        if result.metrics.get("text_note"):  # characters a server sent that no text file can hold
            say(f"cove: {result.metrics['text_note']}", sys.stderr)
        host = remote_host(result.metrics)
        shown = f"{model_name} on {host}" if host else model_name
        say(f"[{metrics_line(shown, result.status, result.metrics)}]", sys.stderr)
    except BrokenPipeError:
        raise
    except OSError:
        pass  # no terminal left to print to


def _result_json(result: TurnResult) -> dict:
    return {
        "text": result.text,
        "reasoning": result.assistant_message.reasoning,  # apart from the text: never the answer
        "conversation_id": result.conversation_id,
        "message_ids": {"user": result.user_message.id, "assistant": result.assistant_message.id},
        "status": result.status,
        "error": result.error,
        "model": result.assistant_message.model_name,
        "metrics": result.metrics,
    }


@contextlib.contextmanager
def chat_tools(core: Core, names: list[str], args: argparse.Namespace) -> Iterator[Callable[[], ToolLoop] | None]:
    """The tools of the servers named by --tools, as a function the turn calls once it has saved the
    person's message (the servers start then), with who answers for each call: the terminal, or
    --allow-tools. Stops the servers at the end."""
    if not names:
        yield None
        return
    store = ToolServerStore(core.db)
    servers = [store.get(name) for name in dict.fromkeys(names)]
    if core.network.offline and not args.allow_offline_once:
        raise ValueError(
            "Cove is offline, so the tool servers were not started (Cove cannot see what they do on the "
            "network): add --allow-offline-once to start them this once, or leave out --tools"
        )
    core.paths.logs_dir.mkdir(parents=True, exist_ok=True)
    approver: Approver
    if args.allow_tools:
        approver, who = allow_without_asking, "the person (--allow-tools)"
    elif isatty(sys.stdin) and isatty(sys.stderr):
        approver, who = ask_on_terminal, "the person"
    else:
        approver, who = _no_terminal, "the person"
    with McpHost(core.paths.logs_dir / LOG_NAME, core.tool_limits()) as host:
        made: list[ToolLoop] = []

        def loop() -> ToolLoop:
            """Listed by the first turn, after it saved the person's message (a signal while the
            servers start loses nothing), then kept for the session's later turns."""
            if not made:
                listed = []
                for server in servers:
                    try:
                        listed.append((server, host.list_tools(server)))
                    except ToolServerError as exc:
                        raise ValueError(str(exc)) from None
                offered = offer(listed)
                for sentence in offered.refused:
                    say(f"cove: {sentence}", sys.stderr)
                if not offered.tools:
                    raise ValueError(f"the tool servers {', '.join(names)} offer no tools")
                made.append(
                    ToolLoop(host, offered.tools, approver, store, who=who, first_choice=args.tool_choice, max_steps=args.max_tool_steps)
                )
            return made[0]

        yield loop


def _notice(sentence: str) -> None:
    """A sentence from the service (it may quote a model file or a server): at once, escaped on a terminal."""
    say(f"cove: {sentence}", sys.stderr)
    sys.stderr.flush()


def _no_terminal(request: ToolRequest) -> str:
    say(
        f"cove: the model called '{request.tool}' on '{request.server.name}'; there is no terminal to ask, so it "
        "was denied (run with --allow-tools to allow the calls of this run)",
        sys.stderr,
    )
    return DENY
