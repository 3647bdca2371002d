"""Which link addresses from model output may be opened (after confirmation) and which never.

Pure functions, no Qt: only plain http and https addresses with a real host are offered to
the person (who then sees the full URL before anything opens). Everything else is refused:
file:, javascript:, data:, ftp:, mailto:, custom schemes, our own cove-* schemes, and the
known tricks that turn into file or UNC paths (`http:////host`, backslashes, `%5c`, control
characters that a browser would strip, `FILE:`).
"""

from __future__ import annotations

import re
from typing import Literal

Decision = Literal["confirm", "refuse"]

_HTTP = re.compile(r"^(?P<scheme>https?)://(?P<authority>[^/?#]*)(?P<rest>[/?#].*)?$", re.IGNORECASE | re.DOTALL)
_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[^\s:@\[\]%\\/]+)$")
_MAX_URL = 8192


def classify_url(url: str) -> Decision:
    """'confirm' for an http(s) address with a plain host, else 'refuse'."""
    if not url or len(url) > _MAX_URL:
        return "refuse"
    # Whitespace, control characters and backslashes are refused anywhere: browsers strip or
    # rewrite them (java\nscript:, http:\\host), so what the person reads would not be what opens.
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url) or "\\" in url:
        return "refuse"
    if "%5c" in url.lower():
        return "refuse"
    match = _HTTP.match(url)
    if match is None:
        return "refuse"
    host = host_of(url)
    if host is None:
        return "refuse"
    return "confirm"


def host_of(url: str) -> str | None:
    """The host an http(s) address goes to, or None when there is no plain host."""
    match = _HTTP.match(url)
    if match is None:
        return None
    authority = match.group("authority")
    hostport = authority.rsplit("@", 1)[-1]
    if hostport.startswith("["):
        end = hostport.find("]")
        host, port = hostport[: end + 1], hostport[end + 1 :]
    else:
        host, _, port = hostport.partition(":")
        port = ":" + port if port else ""
    if port and not re.fullmatch(r":\d{1,5}", port):
        return None
    if not host or _HOST.match(host) is None:
        return None
    return host.lower()
