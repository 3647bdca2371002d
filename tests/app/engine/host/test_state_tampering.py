"""Saved KV state files rewritten by someone with write access to the state folder, checksums made
to match as an attacker would: another conversation's cells under this one's name and tokens, NaNs
in the cells, cells at zeroed positions. The engine restores none of them: the file is deleted, the
prompt is evaluated from the start, the reply is the one computed with no saved state at all, the
metrics say why (`state_cache.discarded`), and the state written after that reply is restored
normally again (app/engine/host/state_check.py, state_cache.py)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.client import EngineClient, FinishedEvent
from app.engine.host.state_check import CELL, Fingerprint, cells_in_place, find_cells, mismatch, take
from app.engine.host.state_files import PREFIX, read_meta
from app.engine.request import ReplyRequest, Sampling
from tests.app.engine.host.test_engine_state_files import engine
from tests.conftest import CHATML_TEMPLATE, CHATML_TOKENS
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.timeout(180)

N = 160  # tokens of each conversation's first prompt


@pytest.fixture(scope="module")
def chat_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny-chat.gguf", chat_template=CHATML_TEMPLATE, extra_tokens=CHATML_TOKENS)


def prompt(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(300, 900, n)]


A, B = prompt(1, N), prompt(2, N)
A_NEXT = A + prompt(3, 24)  # A's next turn: its first prompt, then more


def ask(client: EngineClient, tokens: list[int], conversation: str | None, **kw: Any) -> FinishedEvent:
    fin = client.generate(
        ReplyRequest.chat(
            [],
            sampling=Sampling(max_tokens=12, temperature=0.0),
            conversation_id=conversation,
            prompt_tokens=tokens,
            ignore_eos=True,
            speculative="off",
            **kw,
        )
    ).wait()
    assert fin.status == "length", fin.error
    return fin


# ---- the file as an attacker edits it: meta and data, checksums recomputed ----------------------


def split(path: Path) -> tuple[dict[str, Any], bytearray]:
    raw = path.read_bytes()
    _, _, meta_len, _, _, _ = PREFIX.unpack_from(raw)
    meta = json.loads(raw[PREFIX.size : PREFIX.size + meta_len])
    return meta, bytearray(raw[PREFIX.size + meta_len :])


def join(path: Path, meta: dict[str, Any], data: bytes | bytearray) -> None:
    raw = json.dumps(meta, separators=(",", ":")).encode()
    magic, version, *_ = PREFIX.unpack_from(path.read_bytes())
    head = PREFIX.pack(magic, version, len(raw), zlib.crc32(raw), len(data), zlib.crc32(data))
    path.write_bytes(head + raw + bytes(data))


def cell_lists(data: bytearray, n: int) -> list[int]:
    """Offsets of the cell lists (position, sequence count, sequence id per cell) in the data."""
    found = list(find_cells(np.frombuffer(bytes(data), dtype=np.uint8), n))
    assert found, "no cell list 0..n-1 in the state: llama.cpp writes its state in another shape"
    return found


def first_k_rows(data: bytearray, n: int) -> tuple[int, int]:
    """(offset, length) of the first layer's K cells: after the cell list, llama.cpp writes v_trans
    and the layer count (u32 each), then the layer's K type (i32) and row size (u64), then the rows."""
    at = cell_lists(data, n)[0] + n * CELL.itemsize
    _v_trans, n_layer, k_type, row = struct.unpack_from("<IIiQ", data, at)
    assert n_layer == 2 and k_type == 1 and row == 64 * 2  # the tiny model: 2 layers, f16 K, 64 values a row
    return at + 20, row * n


def relabel_b_as_a(a: Path, b: Path) -> None:
    """A's file with B's cells: A's meta kept whole (its tokens, transcript and fingerprint)."""
    meta, _ = split(a)
    _, data = split(b)
    join(a, meta, data)


def relabel_b_file_as_a(a: Path, b: Path) -> None:
    """B's whole file put in A's place, its meta saying A's conversation and A's tokens."""
    a_meta, _ = split(a)
    meta, data = split(b)
    meta.update(conversation_id=a_meta["conversation_id"], tokens=a_meta["tokens"], transcript=a_meta["transcript"])
    join(a, meta, data)


def nans(a: Path, _b: Path) -> None:
    """NaN (f16 0x7E00) in the K values of the first layer's cells 20..59."""
    meta, data = split(a)
    at, length = first_k_rows(data, len(meta["tokens"]))
    row = length // len(meta["tokens"])
    data[at + 20 * row : at + 60 * row] = b"\x00\x7e" * (40 * row // 2)
    join(a, meta, data)


def zero_positions(a: Path, _b: Path, cells: slice = slice(None)) -> None:
    meta, data = split(a)
    n = len(meta["tokens"])
    for at in cell_lists(data, n):
        listed = np.frombuffer(bytes(data[at : at + n * CELL.itemsize]), dtype=CELL).copy()
        listed["pos"][cells] = 0
        data[at : at + n * CELL.itemsize] = listed.tobytes()
    join(a, meta, data)


def zero_some_positions(a: Path, b: Path) -> None:
    """Cells after the prompt's own at position 0: a cut back to the prompt would leave them in."""
    zero_positions(a, b, slice(N + 1, N + 9))


ATTACKS: dict[str, Callable[[Path, Path], None]] = {
    "b-cells-in-a-file": relabel_b_as_a,
    "b-file-relabelled-a": relabel_b_file_as_a,
    "nan-cells": nans,
    "zeroed-positions": zero_positions,
    "some-zeroed-positions": zero_some_positions,
}


@pytest.fixture(scope="module")
def saved(chat_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The two conversations' files as saved, and A's next reply computed with no saved state."""
    states = tmp_path_factory.mktemp("saved")
    with engine(chat_gguf, states) as client:
        ask(client, A, "a")
        ask(client, B, "b")
    with engine(chat_gguf, None) as client:
        fresh = ask(client, A_NEXT, None, no_cache=True)
    assert fresh.metrics["cached_tokens"] == 0
    [a], [b] = list((states / "a").glob("*.kvstate")), list((states / "b").glob("*.kvstate"))
    return {"a": a.read_bytes(), "b": b.read_bytes(), "name": a.name, "fresh": fresh.text}


def files_of(saved: dict[str, Any], root: Path) -> tuple[Path, Path]:
    paths = []
    for conversation in ("a", "b"):
        path = root / conversation / saved["name"]
        path.parent.mkdir(parents=True)
        path.write_bytes(saved[conversation])
        paths.append(path)
    return paths[0], paths[1]


def test_an_untouched_file_is_restored_and_gives_the_fresh_reply(chat_gguf: Path, saved: dict[str, Any], tmp_path: Path) -> None:
    a, _ = files_of(saved, tmp_path)
    with engine(chat_gguf, tmp_path) as client:
        two = ask(client, A_NEXT, "a")
    sc = two.metrics["state_cache"]
    assert sc["disk_hit"] and two.metrics["cached_tokens"] == N and "discarded" not in sc
    assert sc["check_ms"] > 0 and sc["restore_ms"] >= sc["check_ms"]
    assert two.text == saved["fresh"]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_tampered_file_is_discarded_and_the_reply_is_the_fresh_one(
    chat_gguf: Path, saved: dict[str, Any], tmp_path: Path, attack: str
) -> None:
    a, b = files_of(saved, tmp_path)
    ATTACKS[attack](a, b)
    tampered = a.read_bytes()
    assert read_meta(a, a.stem).conversation_id == "a"  # the checksums and meta pass as they are
    with engine(chat_gguf, tmp_path) as client:
        two = ask(client, A_NEXT, "a")
        three = ask(client, A_NEXT, "a")  # the live cells, now the right ones
    sc = two.metrics["state_cache"]
    assert two.text == saved["fresh"], sc
    assert not sc["disk_hit"] and not sc["hit"] and two.metrics["cached_tokens"] == 0
    assert sc["discarded"]
    assert three.text == saved["fresh"] and three.metrics["cached_tokens"] > 0
    # The tampered file went and the reply's own state took its place: restored in a new engine.
    assert a.read_bytes() != tampered
    with engine(chat_gguf, tmp_path) as client:
        four = ask(client, A_NEXT, "a")
    assert four.metrics["state_cache"]["disk_hit"] and four.text == saved["fresh"]
    assert "discarded" not in four.metrics["state_cache"]


def test_a_file_without_a_fingerprint_is_not_restored(chat_gguf: Path, saved: dict[str, Any], tmp_path: Path) -> None:
    a, _ = files_of(saved, tmp_path)
    meta, data = split(a)
    meta["check"] = None
    join(a, meta, data)
    with engine(chat_gguf, tmp_path) as client:
        two = ask(client, A_NEXT, "a")
    sc = two.metrics["state_cache"]
    assert not sc["disk_hit"] and sc["discarded"] == "it has no fingerprint" and two.text == saved["fresh"]


# ---- the comparisons themselves (no engine) ----------------------------------------------------


def test_the_fingerprint_keeps_the_top_logits_and_a_spread_and_tolerates_rounding_only() -> None:
    logits = np.random.default_rng(0).normal(0, 2, 1000).astype(np.float32)
    tokens = np.arange(5, dtype=np.intc)
    data = np.frombuffer(
        b"\x00" * 8 + (5).to_bytes(4, "little") + b"".join(struct.pack("<iIi", i, 1, 0) for i in range(5)) + b"\x01" * 40, dtype=np.uint8
    )
    fp = take(tokens, logits, data)
    assert fp is not None and fp.cells == (12,) and cells_in_place(data, 5, fp.cells)
    assert int(np.argmax(logits)) in fp.ids and len(fp.ids) <= 64
    assert Fingerprint.from_json(json.loads(json.dumps(fp.to_json()))) == fp
    assert mismatch(fp, logits) is None
    assert mismatch(fp, logits + np.float32(1e-4)) is None  # float sums in another order
    assert mismatch(fp, np.random.default_rng(1).normal(0, 2, 1000).astype(np.float32)) is not None
    nan = logits.copy()
    nan[3] = np.nan
    assert mismatch(fp, nan) == "its cells give non-finite logits"
    assert take(tokens, nan, data) is None
    moved = data.copy()
    moved[12 + 12 * 2] = 0  # the third cell's position
    assert not cells_in_place(moved, 5, fp.cells) and not cells_in_place(data, 4, fp.cells)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"ids": [1], "logits": [], "cells": []},
        {"ids": [1], "logits": [float("nan")], "cells": []},
        {"ids": [-1], "logits": [1.0], "cells": []},
        {"ids": [1], "logits": [1], "cells": []},
    ],
)
def test_a_malformed_fingerprint_is_refused(bad: Any) -> None:
    assert Fingerprint.from_json(bad) is None
