"""Well-formed UTF-8 under a grammar (app/engine/host/utf8_guard.py): the byte-by-byte check agrees
with Python's strict decoder on every short byte string, as a whole text and as a prefix, and a
guard over a vocabulary lets a byte token continue a character only where the form allows."""

from __future__ import annotations

import itertools

import numpy as np

from app.engine.host.utf8_guard import CLEAN, Utf8Guard, advance

SAMPLE = [
    0x00,
    0x41,
    0x7F,
    0x80,
    0x8F,
    0x90,
    0x9F,
    0xA0,
    0xBF,
    0xC0,
    0xC1,
    0xC2,
    0xDF,
    0xE0,
    0xE1,
    0xED,
    0xEE,
    0xEF,
    0xF0,
    0xF1,
    0xF4,
    0xF5,
    0xFF,
]


def decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_prefix(data: bytes) -> bool:
    """Whether up to three continuation bytes after `data` make it decode (those at the edges of
    the ranges table 3-7 allows stand for all)."""
    edges = (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF)
    return any(decodes(data + bytes(tail)) for n in range(4) for tail in itertools.product(edges, repeat=n))


def test_the_check_agrees_with_pythons_decoder() -> None:
    four = [
        bytes([lead, *tail])
        for lead in (0xF0, 0xF1, 0xF4, 0xF5)
        for tail in itertools.product((0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0), repeat=3)
    ]
    for data in [*(bytes(t) for n in (1, 2, 3) for t in itertools.product(SAMPLE, repeat=n)), *four]:
        state = advance(CLEAN, data)
        assert (state == CLEAN) == decodes(data), data.hex()
        if state is None:
            assert not is_prefix(data), data.hex()
        elif state != CLEAN:
            assert is_prefix(data), data.hex()


class Vocab:
    """A vocabulary of three whole tokens and the byte tokens C1, A1, E3, 81, 82."""

    def __init__(self) -> None:
        texts = [b"a", b"\xe3\x81\x82", b"<eos>", b"\xc1", b"\xa1", b"\xe3", b"\x81", b"\x82"]
        self.whole = np.array([advance(CLEAN, t) == CLEAN for t in texts])
        self.pieces = {i: t for i, t in enumerate(texts) if advance(CLEAN, t) != CLEAN}
        self.piece_ids = np.array(sorted(self.pieces), dtype=np.intc)


def test_a_guard_lets_byte_tokens_in_only_where_the_form_allows() -> None:
    guard = Utf8Guard(Vocab())  # type: ignore[arg-type]
    everything = np.arange(8, dtype=np.intc)
    assert guard.allowed_of(everything).tolist() == [0, 1, 2, 5]  # no overlong C1, no stray continuation byte
    guard.accept(5)  # E3: two continuation bytes are due
    assert guard.allowed_of(everything).tolist() == [4, 6, 7]  # A1, 81, 82 continue it
    assert guard.refused_mask().tolist() == [True, True, True, True, False, True, False, False]
    guard.accept(6)
    guard.accept(7)
    assert guard.allowed_of(everything).tolist() == [0, 1, 2, 5]
