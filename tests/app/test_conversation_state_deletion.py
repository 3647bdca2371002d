"""A conversation's saved KV state lives and dies with it: Core's engine saves into the cache folder
(app/paths.py kv_states_dir) up to the saved-state setting, deleting a conversation deletes its
states (also one a finishing reply writes after the delete), and opening the core prunes the
folders of conversations that are gone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.core import Core, open_core
from app.engine.host.state_files import SUFFIX
from app.engine.request import ReplyRequest, Sampling
from app.engine.state_folders import conversation_folder
from app.paths import resolve_paths
from app.settings import save_settings

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def core(tmp_path: Path) -> Iterator[Core]:
    opened = open_core(resolve_paths({"COVE_HOME": str(tmp_path / "home")}))
    yield opened
    opened.close()


def reply(core: Core, model: Path, conversation_id: str) -> None:
    with core.engine_client() as engine:
        engine.load(model, n_threads=1)
        fin = engine.generate(
            ReplyRequest.chat(
                [{"role": "user", "content": "tell me about ferns " * 10}],
                sampling=Sampling(max_tokens=8, temperature=0.0),
                conversation_id=conversation_id,
                ignore_eos=True,
            )
        ).wait()
        assert fin.status == "length", fin.error
    # Closing the engine waited for the host, which finishes its queued state writes before it exits.


def test_the_cores_engine_saves_into_the_cache_folder_and_a_deleted_conversation_takes_its_state(
    core: Core, tiny_gguf_with_template: Path
) -> None:
    assert core.paths.kv_states_dir == core.paths.cache_dir / "kv-states"
    kept = core.history.create_conversation(title="kept")
    gone = core.history.create_conversation(title="gone")
    for conversation in (kept, gone):
        reply(core, tiny_gguf_with_template, conversation.id)
    folders = {c.id: conversation_folder(core.paths.kv_states_dir, c.id) for c in (kept, gone)}
    assert all(len(list(f.glob(f"*{SUFFIX}"))) == 1 for f in folders.values())
    core.history.delete_conversation(gone.id[:8])  # by its prefix, as `cove history delete` allows
    assert not folders[gone.id].exists() and folders[kept.id].exists()
    # A reply of the deleted conversation that was still finishing saves nothing.
    reply(core, tiny_gguf_with_template, gone.id)
    assert not folders[gone.id].exists()


def test_a_limit_of_zero_saves_nothing(core: Core, tiny_gguf_with_template: Path) -> None:
    save_settings(core.paths.settings_file, replace(core.settings, saved_state_mb=0))
    conversation = core.history.create_conversation()
    reply(core, tiny_gguf_with_template, conversation.id)
    assert not list(core.paths.kv_states_dir.rglob(f"*{SUFFIX}"))


def test_opening_the_core_prunes_the_states_of_conversations_that_are_gone(tmp_path: Path) -> None:
    paths = resolve_paths({"COVE_HOME": str(tmp_path / "home")})
    first = open_core(paths)
    try:
        alive = first.history.create_conversation()
    finally:
        first.close()
    root = paths.kv_states_dir
    for cid in (alive.id, "0" * 32, "written after its conversation was deleted"):
        folder = conversation_folder(root, cid)
        folder.mkdir(parents=True)
        (folder / f"{'k' * 32}{SUFFIX}").write_bytes(b"state")
    second = open_core(paths)
    try:
        assert sorted(p.name for p in root.iterdir()) == [alive.id]
        assert second.history.conversation_ids() == [alive.id]
    finally:
        second.close()
