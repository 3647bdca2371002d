"""The server-sent event reader: line ends of every kind (also split between chunks), comments,
unreadable lines skipped and counted, the size limit, and JSON payloads."""

from __future__ import annotations

import pytest

from app.remote.sse import DONE, SseEvent, SseReader, StreamTooLarge, json_payloads


def read_all(chunks: list[bytes], **kwargs: int) -> tuple[list[SseEvent], SseReader]:
    reader = SseReader(**kwargs)
    events: list[SseEvent] = []
    for chunk in chunks:
        events += reader.feed(chunk)
    events += reader.end()
    return events, reader


def test_events_split_anywhere_between_chunks_read_the_same() -> None:
    stream = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\n\ndata: [DONE]\r\r'
    whole, _ = read_all([stream])
    assert [e.data for e in whole] == ['{"a": 1}', '{"b": 2}', "[DONE]"]
    for cut in range(1, len(stream)):
        split, reader = read_all([stream[:cut], stream[cut:]])
        assert split == whole, cut
        assert reader.skipped == 0
    bytewise, _ = read_all([bytes([b]) for b in stream])
    assert bytewise == whole


def test_comments_and_known_fields_are_not_counted_but_unreadable_lines_are() -> None:
    stream = (
        b"\xef\xbb\xbf: ping - 2026-01-01\n\nevent: message\nid: 7\nretry: 100\ndata: one\n\n"
        b"data: \xff\xfe\n\nnonsense\n\nweird: field\ndata: two\ndata: lines\n\n"
    )
    events, reader = read_all([stream])
    assert events == [SseEvent("one", "message"), SseEvent("two\nlines")]
    assert reader.skipped == 3  # the line that is not UTF-8, "nonsense", "weird: field"


def test_a_last_event_without_its_blank_line_still_counts() -> None:
    events, _ = read_all([b'data: {"x": 1}\n\ndata: [DONE]'])
    assert [e.data for e in events] == ['{"x": 1}', "[DONE]"]


def test_a_line_over_the_limit_ends_the_stream_even_before_its_line_break() -> None:
    reader = SseReader(max_line_bytes=1000)
    assert reader.feed(b"data: ok\n\n") == [SseEvent("ok")]
    with pytest.raises(StreamTooLarge) as caught:
        for _ in range(20):
            reader.feed(b"x" * 100)  # no line break ever comes
    assert caught.value.limit == 1000 and caught.value.size > 1000
    with pytest.raises(StreamTooLarge):
        SseReader(max_line_bytes=1000).feed(b"data: " + b"y" * 2000 + b"\n\n")
    many = b"".join(b"data: " + b"z" * 300 + b"\n" for _ in range(5))  # one event of short lines, too big in all
    with pytest.raises(StreamTooLarge):
        SseReader(max_line_bytes=1000).feed(many)


def test_json_payloads() -> None:
    assert list(json_payloads(SseEvent('{"a": 1}'))) == [{"a": 1}]
    assert list(json_payloads(SseEvent(" [DONE] "))) == [DONE]
    # a server that left out the blank lines between events: each line is one payload
    assert list(json_payloads(SseEvent('{"a": 1}\n{"b": 2}\n[DONE]'))) == [{"a": 1}, {"b": 2}, DONE]
    for bad in ("{not json", "[1, 2]", '"text"', ""):
        with pytest.raises(ValueError):
            list(json_payloads(SseEvent(bad)))
