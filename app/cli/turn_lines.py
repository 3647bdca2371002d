"""What a turn shows in the terminal beside its answer: the model's reasoning (on standard error,
apart from the answer on standard output), and each tool call with its result (folded past a few
lines). Everything a model or a tool server wrote goes through the terminal-text rule
(app/cli/terminal_text.py)."""

from __future__ import annotations

import contextlib
import sys

from app.cli.terminal_text import for_terminal, is_terminal, say
from app.turn.events import ToolCallEvent, ToolResultEvent
from app.turn.service import TextSink


def reasoning_apart(on_text: TextSink) -> tuple[TextSink, TextSink]:
    """(on_text, on_reasoning) for one reply: its reasoning on standard error as it arrives, after a
    "Thinking…" line and dim on a terminal, never on standard output (a pipe gets the answer
    alone); a blank line between it and the answer, which goes to `on_text`."""
    state = {"thinking": False}

    def reasoning(text: str) -> None:
        try:
            dim = is_terminal(sys.stderr)
            if not state["thinking"]:
                state["thinking"] = True
                sys.stderr.write("\x1b[2mThinking…\n" if dim else "Thinking…\n")
            elif dim:
                sys.stderr.write("\x1b[2m")
            sys.stderr.write(for_terminal(text, sys.stderr))
            sys.stderr.write("\x1b[0m" if dim else "")
            sys.stderr.flush()
        except BrokenPipeError:
            raise
        except OSError:
            pass  # the terminal is gone: the reasoning is still saved

    def answer(text: str) -> None:
        if state["thinking"] and text:
            state["thinking"] = False
            with contextlib.suppress(OSError):
                sys.stderr.write("\n\n")
                sys.stderr.flush()
        on_text(text)

    return answer, reasoning


RESULT_LINES = 8  # a tool result's lines shown in the terminal before the rest is folded
RESULT_LINE_WIDTH = 200


def folded_result(content: str) -> str:
    """A tool result as the terminal shows it: one line after the label, or its first
    RESULT_LINES lines indented below it (each cut at RESULT_LINE_WIDTH characters) and a count
    of the rest (`cove history show` has it whole). `say` escapes what a terminal would obey."""
    lines = content.strip().splitlines()
    cut = [line if len(line) <= RESULT_LINE_WIDTH else line[:RESULT_LINE_WIDTH] + "…" for line in lines[:RESULT_LINES]]
    if len(lines) <= 1:
        return f" {cut[0]}" if cut else ""
    more = len(lines) - RESULT_LINES
    tail = [f"… {more} more line{'s' if more != 1 else ''} (cove history show has the whole result)"] if more > 0 else []
    return "\n" + "\n".join(f"  {line}" for line in cut + tail) + "\n"


def say_tool(event: ToolCallEvent | ToolResultEvent) -> None:
    """A call on one line and its result (folded past a few lines) on stderr; the history keeps
    them whole."""
    try:
        if isinstance(event, ToolCallEvent):
            say(f"[tool call: {event.server or '?'}/{event.name} {event.arguments}]", sys.stderr)
        else:
            say(f"[tool result ({event.status}):{folded_result(event.content)}]", sys.stderr)
    except BrokenPipeError:
        raise
    except OSError:
        pass
