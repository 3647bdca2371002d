"""The history's side of documents: collections attached to a conversation and the passages a
reply was given, kept with it and gone with it."""

from __future__ import annotations

from pathlib import Path

from app.store.database import open_database
from app.store.history import History
from app.store.sources import Source, attach_collections, attached_collections, sources_for, sources_of, write_sources


def history(tmp_path: Path) -> History:
    return History(open_database(tmp_path / "cove.db").db)


def source(n: int, cited: bool = True) -> Source:
    return Source(
        n=n,
        collection="papers",
        path=f"/docs/report{n}.pdf",
        start=10 * n,
        end=10 * n + 9,
        hash=f"h{n}",
        excerpt=f"passage {n}",
        cited=cited,
        page=n,
        heading=None,
    )


def test_collections_are_attached_and_detached_per_conversation(tmp_path: Path) -> None:
    h = history(tmp_path)
    a, b = h.create_conversation(), h.create_conversation()
    attach_collections(h.db, a.id, ["papers", "notes", "papers"])
    assert attached_collections(h.db, a.id) == ["papers", "notes"]  # in the order given, each once
    assert attached_collections(h.db, b.id) == []
    attach_collections(h.db, a.id, ["notes"])
    assert attached_collections(h.db, a.id) == ["notes"]


def test_a_replys_sources_are_kept_in_order_and_leave_with_its_conversation(tmp_path: Path) -> None:
    h = history(tmp_path)
    conv = h.create_conversation()
    user = h.add_user_message(conv.id, "where is the lighthouse?")
    reply = h.start_assistant_message(conv.id, parent_id=user.id, model_name="m", model_sha256=None, model_quant=None, params={})
    write_sources(h.db, reply.id, [source(2, cited=False), source(1)])
    got = sources_of(h.db, reply.id)
    assert [s.n for s in got] == [1, 2] and got[0].cited and not got[1].cited
    assert got[0].where == "page 1" and got[0].provenance()["hash"] == "h1"
    assert sources_for(h.db, [reply.id, user.id]) == {reply.id: got}
    h.delete_conversation(conv.id)
    assert sources_of(h.db, reply.id) == []
    assert attached_collections(h.db, conv.id) == []


def test_an_export_lists_a_replys_sources(tmp_path: Path) -> None:
    from app.store.export import export_conversation

    h = history(tmp_path)
    conv = h.create_conversation()
    user = h.add_user_message(conv.id, "where is the lighthouse?")
    reply = h.start_assistant_message(conv.id, parent_id=user.id, model_name="m", model_sha256=None, model_quant=None, params={})
    h.finish_assistant(reply.id, "On the point [1].", status="complete", metrics={})
    write_sources(h.db, reply.id, [source(1), source(2, cited=False)])
    md = export_conversation(h, conv.id, "md")
    assert "Sources:\n\n- [1] /docs/report1.pdf, page 1\n" in md and "report2.pdf" not in md
    import json

    exported = json.loads(export_conversation(h, conv.id, "json"))
    assert [s["n"] for s in exported["messages"][1]["sources"]] == [1, 2] and "sources" not in exported["messages"][0]
