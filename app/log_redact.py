"""Keep the Hugging Face token out of every log line: `redact(text)` and `install_redaction()`.

What is redacted: anything shaped like a Hugging Face token (`hf_` + 8 or more letters and
digits), the value of an `Authorization` header (`Authorization: Bearer ...`,
`'authorization': '...'`), and any `Bearer <credential>`.

Where: a filter on a logger only sees records logged *on that logger*, not records that
propagate up to it from child loggers, so a filter on the root logger alone would miss
`huggingface_hub.file_download` or `httpx`. `install_redaction()` therefore
  * adds `RedactingFilter` to the root logger, to the loggers of huggingface_hub, httpx,
    httpcore and urllib3, and to every handler the root logger has now;
  * wraps the log record factory, so every record any logger creates is redacted before
    any handler (including ones added later, such as a file handler) sees it.
Both are idempotent.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from models.hub_errors import redact as _redact_hf_tokens

# `Authorization: <scheme> <credential>` in header dumps, reprs of header dicts and the like.
_AUTH_HEADER = re.compile(r"(?i)(\bauthorization\b['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;}\]]+")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s'\",;}\]]+")

THIRD_PARTY_LOGGERS = ("huggingface_hub", "httpx", "httpcore", "httpx2", "httpcore2", "urllib3")

_lock = threading.Lock()
_installed = False
_previous_factory: Callable[..., logging.LogRecord] | None = None  # the factory install_redaction() wrapped


def redact(text: str) -> str:
    """`text` with tokens, Authorization header values and Bearer credentials replaced."""
    if not text:
        return text
    text = _AUTH_HEADER.sub(r"\1***", text)
    text = _BEARER.sub(r"\1 ***", text)
    return _redact_hf_tokens(text)


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact a record in place: message (with its args merged), exception text, stack.
    Running it twice is harmless (the factory and the filters may both see a record)."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string: logging reports it itself later
        message = None
    if message is not None:
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
    if record.exc_info and not record.exc_text:
        try:
            text = logging.Formatter().formatException(record.exc_info)
        except Exception:  # noqa: BLE001
            text = ""
        cleaned = redact(text)
        if cleaned != text:
            record.exc_text = cleaned  # formatters use exc_text when it is set
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


class RedactingFilter(logging.Filter):
    """Passes every record, with secrets redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_FILTER = RedactingFilter("cove.redact")


def _redacting_factory(*args, **kwargs) -> logging.LogRecord:
    factory = _previous_factory
    assert factory is not None  # set before this factory is installed
    return redact_record(factory(*args, **kwargs))


def _add_filter(target: logging.Filterer) -> None:
    if not any(isinstance(f, RedactingFilter) for f in target.filters):
        target.addFilter(_FILTER)


def install_redaction() -> None:
    """Redact secrets in everything logged from now on (safe to call more than once)."""
    global _installed, _previous_factory
    with _lock:
        root = logging.getLogger()
        _add_filter(root)
        for name in THIRD_PARTY_LOGGERS:
            _add_filter(logging.getLogger(name))
        for handler in list(root.handlers):
            _add_filter(handler)
        if not _installed:
            _previous_factory = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_redacting_factory)
            _installed = True


def uninstall_redaction() -> None:
    """Undo `install_redaction()` (tests use it to leave logging as they found it)."""
    global _installed, _previous_factory
    with _lock:
        targets: list[logging.Filterer] = [logging.getLogger()]
        targets += [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
        targets += list(logging.getLogger().handlers)
        for target in targets:
            for f in [f for f in target.filters if isinstance(f, RedactingFilter)]:
                target.removeFilter(f)
        if _installed:
            # _previous_factory is never None while _installed (both change together, under _lock)
            if _previous_factory is not None and logging.getLogRecordFactory() is _redacting_factory:
                logging.setLogRecordFactory(_previous_factory)
            _installed = False
            _previous_factory = None
