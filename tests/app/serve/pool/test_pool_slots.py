"""The pool with slots, on fake engine clients: `parallel` is the slots of one engine process per
model, an engine with 4 slots serves 4 requests at once and the 5th waits fairly, an embedding
request has the engine alone, and the window's turn runs beside the API's requests on its own
engine (a slot kept for it) or has it alone to load another model."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from app.serve.pool.machine import Footprint
from app.serve.pool.pool import ModelPool
from models.library import InstalledModel

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]
MIB = 2**20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class FakeLoaded:
    path: str
    slots: int = 1


class FakeEngine:
    """An engine client as far as the pool uses it: load (recorded), loaded, busy, close."""

    pids = itertools.count(1000)

    def __init__(self) -> None:
        self.loads: list[dict[str, Any]] = []
        self.loaded: FakeLoaded | None = None
        self.busy = False
        self.closed = False
        self.host_pid = next(self.pids)

    def load(self, path: str, **kwargs: Any) -> FakeLoaded:
        self.loads.append({"path": path, **kwargs})
        self.loaded = FakeLoaded(path, kwargs.get("parallel", 1))
        return self.loaded

    def close(self) -> None:
        self.closed = True


def _model(name: str) -> InstalledModel:
    return InstalledModel(
        name=name,
        path=f"/models/{name}.gguf",
        sha256="0" * 64,
        size=MIB,
        mtime=0.0,
        quant=None,
        architecture="llama",
        parameter_count=None,
        context_length=2048,
        has_chat_template=True,
        source="imported",
        repo=None,
        file=None,
        revision=None,
        added_at="",
        last_used_at=None,
    )


def _pool(made: list[FakeEngine], **kwargs: Any) -> ModelPool:
    def factory() -> Any:
        made.append(FakeEngine())
        return made[-1]

    return ModelPool(engine_factory=factory, footprint_of=lambda m: Footprint(10 * MIB, 5 * MIB), available_ram=lambda: 2**40, **kwargs)


async def test_parallel_is_the_slots_of_one_engine_process() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=4)
    model = _model("chat")
    async with pool.running():
        leases = [await pool.lease(model, f"client {i}") for i in range(4)]
        assert len(made) == 1 and len(pool.loaded()) == 1  # one process, not four
        assert [(load["path"], load["parallel"]) for load in made[0].loads] == [(model.path, 4)]
        assert {lease.engine for lease in leases} == {pool.loaded()[0]} and pool.loaded()[0].leases == 4
        assert pool.load(pool.loaded()[0]) is made[0].loaded and len(made[0].loads) == 1  # no second load
        for lease in leases:
            pool.release(lease)
        assert not pool.loaded()[0].busy


async def test_four_slots_serve_four_at_once_and_the_fifth_waits_fairly() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=4)
    model = _model("chat")
    order: list[str] = []
    async with pool.running():
        held = [await pool.lease(model, "scripts") for _ in range(3)] + [await pool.lease(model, "agent")]
        assert pool.waiting() == 0

        async def ask(client: str, text: str) -> None:
            lease = await pool.lease(model, client)
            order.append(f"{client}:{text}")
            await anyio.sleep(0.01)
            pool.release(lease)

        async with anyio.create_task_group() as tg:
            for i in range(3):  # the busy client queues three more first...
                tg.start_soon(ask, "scripts", str(i))
                await anyio.sleep(0.01)
            tg.start_soon(ask, "editor", "x")  # ...then the editor asks once
            await anyio.sleep(0.05)
            assert order == [] and pool.waiting() == 4  # every slot is taken: the fifth request waits
            pool.release(held[0])
            await anyio.sleep(0.005)
            assert order == ["editor:x"]  # the client never served goes first
            for lease in held[1:]:
                pool.release(lease)
        assert order == ["editor:x", "scripts:0", "scripts:1", "scripts:2"]
        assert len(made) == 1


async def test_an_embedding_request_has_the_engine_alone() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=4)
    model = _model("embed")
    async with pool.running():
        reply = await pool.lease(model, "a")
        got: list[str] = []

        async def embed() -> None:
            lease = await pool.lease(model, "b", exclusive=True)
            got.append("embed")
            await anyio.sleep(0.05)
            pool.release(lease)

        async with anyio.create_task_group() as tg:
            tg.start_soon(embed)
            await anyio.sleep(0.02)
            assert got == []  # a reply is in flight: the engine embeds once it has ended
            pool.release(reply)
            await anyio.sleep(0.01)
            assert got == ["embed"]
            with anyio.move_on_after(0.02):
                await pool.lease(model, "c")  # nothing else runs beside the embedding
                raise AssertionError("a reply started beside an embedding")


def _window(pool: ModelPool, model: InstalledModel, slots: int) -> FakeEngine:
    window = FakeEngine()
    window.load(model.path, parallel=slots)
    pool.adopt(window)  # type: ignore[arg-type]
    return window


async def test_the_window_shares_its_engine_with_the_api_and_keeps_a_slot_for_its_turn() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=4)
    model = _model("chat")
    window = _window(pool, model, slots=4)
    async with pool.running():
        api = [await pool.lease(model, f"client {i}") for i in range(3)]
        assert all(lease.client is window for lease in api) and made == []  # no second process
        with anyio.move_on_after(0.05):
            await pool.lease(model, "client 4")  # the fourth slot is the window's
            raise AssertionError("the API took the window's slot")
        with anyio.fail_after(1):
            mine = await pool.lease_window(model)  # at once, beside the three API replies
        assert mine.client is window and not mine.exclusive
        pool.release(mine)
        for lease in api:
            pool.release(lease)


async def test_a_window_turn_for_another_model_waits_for_the_api_and_has_the_engine_alone() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=2)
    chat, other = _model("chat"), _model("other")
    window = _window(pool, chat, slots=4)
    async with pool.running():
        api = await pool.lease(chat, "editor")
        got: list[Any] = []

        async def turn() -> None:
            got.append(await pool.lease_window(other))

        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)
            await anyio.sleep(0.02)
            assert got == []  # it loads another model: not while an API reply runs on the engine
            later = await pool.lease(chat, "editor")  # meanwhile the API's requests go to an engine of the pool's
            assert later.client is not window and len(made) == 1 and made[0].loads[0]["parallel"] == 2
            pool.release(api)
        (mine,) = got
        assert mine.client is window and mine.exclusive
        pool.release(mine)
        pool.release(later)


async def test_without_window_first_the_api_may_take_every_slot_of_the_windows_engine() -> None:
    made: list[FakeEngine] = []
    pool = _pool(made, parallel=4)
    model = _model("chat")
    window = FakeEngine()
    window.load(model.path, parallel=2)
    pool.adopt(window, window_first=lambda: False)  # type: ignore[arg-type]
    async with pool.running():
        api = [await pool.lease(model, f"client {i}") for i in range(2)]
        assert all(lease.client is window for lease in api) and made == []
        with anyio.move_on_after(0.05):
            await pool.lease_window(model)  # its turn takes a slot like any request: none is free
            raise AssertionError("the window's turn started with every slot taken")
        pool.release(api[0])
        with anyio.fail_after(1):
            mine = await pool.lease_window(model)
        with anyio.move_on_after(0.05):
            await pool.lease(model, "client 2")  # and an API request waits for the turn's slot
            raise AssertionError("the API took the slot of the window's turn")
        pool.release(mine)
        pool.release(api[1])
