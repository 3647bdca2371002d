"""The engine host's side of the shared codec: a request line that does not decode, however
it is broken, is answered with Failed(kind="protocol") and a sentence, and the host goes on
reading (no traceback, no dead reader thread)."""

from __future__ import annotations

import io

import pytest

from app.engine.host.main import Host
from app.engine.protocol import Failed, Ready, decode


@pytest.mark.parametrize(
    "line",
    [b"not json\n", b"[1]\n", b'{"type":"exec"}\n', b'{"type":["load"]}\n', b'{"type":"load"}\n', b"[" * 100_000 + b"\n"],
)
def test_a_bad_request_line_gets_a_protocol_failure_and_reading_goes_on(line: bytes) -> None:
    written: list[bytes] = []
    requests = io.BytesIO(line + b'{"type":"shutdown"}\n')
    assert Host(written.append).serve(requests) == 0  # the shutdown after it was still read
    events = [decode(w) for w in written]
    assert any(isinstance(e, Ready) for e in events)  # sent while the reader thread already reads
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and failed[0].kind == "protocol" and failed[0].request_id == ""
    assert failed[0].message.startswith("the engine received a malformed request (")
    assert "Traceback" not in failed[0].message
