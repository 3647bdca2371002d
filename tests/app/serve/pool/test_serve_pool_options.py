"""The API pool loads each model with the person's load settings (ModelPlacement through
LoadOptions): the KV cache types and flash attention reach the engine, and a draft model that is
gone is said once in the pool's events while the model loads without it."""

from __future__ import annotations

import anyio
import pytest

from app.load_options import load_options
from app.serve.pool.pool import ModelPool
from app.settings import ModelPlacement
from tests.support.tiny_model import write_tiny_gguf

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_pool_loads_a_model_with_its_settings_and_says_a_missing_draft(cove_core, tmp_path) -> None:
    model = cove_core.library.import_file(write_tiny_gguf(tmp_path / "heads32.gguf", n_head=2), name="heads32")
    placement = ModelPlacement(type_k="q8_0", type_v="q8_0", flash_attn=True, draft_model="not-installed")
    pool = ModelPool(options_of=lambda m: load_options(cove_core.library, m, placement))
    async with pool.running():
        lease = await pool.lease(model, "a")
        loaded = lease.engine.loaded
        assert loaded is not None and (loaded.type_k, loaded.type_v, loaded.flash_attn) == ("q8_0", "q8_0", "on")
        assert loaded.draft_model == ""
        assert (await anyio.to_thread.run_sync(pool.load, lease.engine)) == loaded  # the same settings: no new load
        pool.release(lease)
    said = [e for e in pool.events if "not-installed" in e]
    assert said == [
        "The draft model not-installed is no longer installed, so heads32 loads without it (drafting from the conversation still works)."
    ]
