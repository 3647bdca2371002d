"""The engine pool behind cove serve, with real engines on the tiny model: models load on
demand, a model that does not fit unloads the least recently used one, idle models unload
after the TTL, requests queue fairly across clients, and the window's engine serves the API for
its model. (Slots, with fake engines: tests/app/serve/pool/test_pool_slots.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from app.serve.http.errors import ApiError
from app.serve.pool.machine import Footprint
from app.serve.pool.pool import ModelPool
from tests.support.tiny_model import write_tiny_gguf

pytestmark = pytest.mark.anyio

MIB = 2**20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def models(cove_core, tmp_path: Path):
    library = cove_core.library
    first = library.list()[0]
    second = library.import_file(write_tiny_gguf(tmp_path / "other.gguf", seed=7), name="other")
    return first, second


def _ram_left(total: int, pool_of) -> Callable[[], int]:
    """A machine with `total` bytes available before the pool loads anything: what the pool's
    engines take (by their footprints) is gone from it, as the OS would report."""

    def available() -> int:
        engines = [e for e in pool_of().loaded() if not e.loading]  # a loading engine has not taken it yet
        used = sum(e.footprint.per_engine for e in engines)
        used += sum(next(e for e in engines if e.model.path == m).footprint.weights for m in {e.model.path for e in engines})
        return total - used

    return available


async def _use(pool: ModelPool, model, client: str) -> None:
    pool.release(await pool.lease(model, client))


async def test_a_model_is_loaded_on_demand_and_reused(models) -> None:
    tiny, _ = models
    pool = ModelPool()
    async with pool.running():
        assert pool.loaded() == []
        lease = await pool.lease(tiny, "a")
        assert lease.engine.loaded is not None and lease.client.loaded is not None
        pid = lease.client.host_pid
        pool.release(lease)
        again = await pool.lease(tiny, "a")
        assert again.client.host_pid == pid  # the same engine process, not a second load
        pool.release(again)
        assert len(pool.loaded()) == 1
    assert pool.loaded() == []


async def test_a_model_that_does_not_fit_unloads_the_least_recently_used(models) -> None:
    tiny, other = models
    # Room for one model at a time: each "needs" 60 MiB of the 100 the pool may use.
    pool = ModelPool(footprint_of=lambda m: Footprint(50 * MIB, 10 * MIB), available_ram=_ram_left(100 * MIB, lambda: pool))
    async with pool.running():
        await _use(pool, tiny, "a")
        first_pid = pool.loaded()[0].client.host_pid
        await _use(pool, other, "a")
        assert [e.model.name for e in pool.loaded()] == ["other"]
        assert any("unloaded tiny-llama" in event for event in pool.events)
        assert first_pid not in [e.client.host_pid for e in pool.loaded()]


async def test_two_models_that_fit_stay_loaded_together(models) -> None:
    tiny, other = models
    pool = ModelPool(footprint_of=lambda m: Footprint(20 * MIB, 5 * MIB), available_ram=_ram_left(100 * MIB, lambda: pool))
    async with pool.running():
        await _use(pool, tiny, "a")
        await _use(pool, other, "a")
        assert sorted(e.model.name for e in pool.loaded()) == ["other", "tiny-llama"]


async def test_a_model_larger_than_memory_is_refused_with_the_numbers(models) -> None:
    tiny, _ = models
    pool = ModelPool(footprint_of=lambda m: Footprint(200 * MIB, 10 * MIB), available_ram=lambda: 100 * MIB)
    async with pool.running():
        with pytest.raises(ApiError) as caught:
            await pool.lease(tiny, "a")
        assert caught.value.status == 507 and "0.2 GiB" in caught.value.message and "0.1 GiB" in caught.value.message
        assert pool.loaded() == [] and pool.waiting() == 0


async def test_an_idle_model_unloads_after_the_ttl(models) -> None:
    tiny, _ = models
    pool = ModelPool(ttl_s=0.2)
    async with pool.running():
        await _use(pool, tiny, "a")
        assert len(pool.loaded()) == 1
        with anyio.fail_after(30):
            while pool.loaded():
                await anyio.sleep(0.05)
        assert any("idle" in event for event in pool.events)
        await _use(pool, tiny, "a")  # and it loads again when asked for
        assert len(pool.loaded()) == 1


async def test_waiting_requests_are_served_fairly_across_clients(models) -> None:
    tiny, _ = models
    pool = ModelPool(parallel=1)
    order: list[str] = []
    async with pool.running():
        held = await pool.lease(tiny, "scripts")

        async def ask(client: str, text: str) -> None:
            lease = await pool.lease(tiny, client)
            order.append(f"{client}:{text}")
            pool.release(lease)

        async with anyio.create_task_group() as tg:
            for i in range(3):  # the busy client queues three requests first...
                tg.start_soon(ask, "scripts", str(i))
                await anyio.sleep(0.01)
            tg.start_soon(ask, "editor", "x")  # ...then the editor asks once
            await anyio.sleep(0.05)
            pool.release(held)
        # The editor does not wait behind all of the scripts' requests: scripts was served last.
        assert order[0] == "editor:x"
        assert order[1:] == ["scripts:0", "scripts:1", "scripts:2"]


async def test_a_request_that_goes_away_while_waiting_leaves_no_trace(models) -> None:
    tiny, _ = models
    pool = ModelPool(parallel=1)
    async with pool.running():
        held = await pool.lease(tiny, "a")
        with anyio.move_on_after(0.1):
            await pool.lease(tiny, "b")
        assert pool.waiting() == 0
        pool.release(held)
        assert not pool.loaded()[0].busy


async def test_the_windows_engine_serves_api_requests_for_its_model_while_the_window_is_idle(models) -> None:
    from app.engine.client import EngineClient

    tiny, _ = models
    with EngineClient() as window:
        window.load(tiny.path)
        pool = ModelPool()
        pool.adopt(window)
        async with pool.running():
            lease = await pool.lease(tiny, "editor")
            assert lease.client is window and pool.loaded() == []  # no second process for the same model
            pool.release(lease)
        assert window.loaded is not None  # the pool never unloads the window's engine


async def test_the_window_gets_its_engine_back_before_waiting_api_requests(models) -> None:
    from app.engine.client import EngineClient

    tiny, _ = models
    with EngineClient() as window:
        window.load(tiny.path)
        pool = ModelPool(parallel=1)
        pool.adopt(window)
        order: list[str] = []
        async with pool.running():
            api = await pool.lease(tiny, "editor")
            assert api.client is window

            async def window_turn() -> None:
                lease = await pool.lease_window(tiny)
                order.append("window")
                assert lease.client is window
                pool.release(lease)

            async with anyio.create_task_group() as tg:
                tg.start_soon(window_turn)
                await anyio.sleep(0.05)
                assert order == []  # it waits for the API request using its engine now
                pool.release(api)
            assert order == ["window"]
            # With one slot, an API request waits for the window's turn: one process for one model.
            mine = await pool.lease_window(tiny)
            with anyio.move_on_after(0.1):
                await pool.lease(tiny, "editor")
                raise AssertionError("an API request took the window's one slot")
            assert pool.loaded() == [] and pool.waiting() == 0
            pool.release(mine)
            other = await pool.lease(tiny, "editor")
            assert other.client is window
            pool.release(other)
