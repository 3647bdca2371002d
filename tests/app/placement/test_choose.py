"""Placement among machines with the same model file (app/placement/choose.py): the conversation
stays where its KV state is unless that machine is away or full; otherwise the one that would
answer first; the reason is said as the reply's line says it."""

from __future__ import annotations

from app.placement.choose import CHOSEN, HOLDS, LOADED, LOADED_FREE, holder_of, place, twins
from app.placement.line import chosen_line, where_line
from app.remote.remote_model import RemoteModel

SHA = "a" * 64


def _model(connection: str, *, loaded: bool | None = None, free: int | None = None, sha: str | None = SHA) -> RemoteModel:
    return RemoteModel(
        connection=connection, model_id="qwen", host=f"{connection}.lan:8642", kind="cove", file_sha256=sha, loaded=loaded, free_slots=free
    )


def test_twins_are_the_same_file_on_other_connections_the_chosen_first() -> None:
    chosen = _model("laptop-box")
    others = [_model("desk"), _model("nas", sha="b" * 64), _model("desk"), _model("laptop-box")]
    assert [m.connection for m in twins(chosen, others)] == ["laptop-box", "desk"]
    assert twins(_model("x", sha=None), others) == [_model("x", sha=None)]  # no file known: nothing to choose


def test_the_conversation_stays_where_its_state_is_unless_full_or_away() -> None:
    desk, nas = _model("desk", loaded=True, free=0), _model("nas", loaded=True, free=2)
    placed = place(nas, [nas, _model("desk", loaded=True, free=1)], holder="desk")
    assert placed.model.connection == "desk" and placed.why == HOLDS and placed.moved_from == "nas"
    assert placed.line() == "on desk: holds this conversation"
    full = place(nas, [nas, desk], holder="desk")  # no slot free there: the one that answers first
    assert full.model.connection == "nas" and full.why == LOADED_FREE and full.moved_from is None
    away = place(nas, [nas, _model("desk", loaded=True, free=1)], holder="desk", away={"desk"})
    assert away.model.connection == "nas"


def test_a_new_conversation_goes_to_the_one_that_answers_first() -> None:
    chosen = _model("desk", loaded=False)
    assert place(chosen, [chosen, _model("nas", loaded=True, free=1)]).model.connection == "nas"
    busy = place(chosen, [chosen, _model("nas", loaded=True, free=0)])
    assert busy.model.connection == "nas" and busy.why == LOADED
    cold = place(chosen, [chosen, _model("nas", loaded=False)])
    assert cold.model.connection == "desk" and cold.why == CHOSEN
    gone = place(chosen, [chosen, _model("nas", loaded=False)], away={"desk"})
    assert gone.model.connection == "nas" and gone.why == "desk cannot be reached now"
    alone = place(chosen, [chosen])
    assert alone.model == chosen and alone.why is None and alone.line() is None


def test_the_holder_is_the_last_reply_with_that_file_without_a_fault() -> None:
    def remote(connection: str, sha: str = SHA, fault: str | None = None) -> dict:
        return {"remote": {"connection": connection, "sha256": sha, **({"fault": fault} if fault else {})}}

    assert holder_of([remote("nas"), remote("desk")], SHA) == "desk"
    assert holder_of([remote("desk"), {"ttft_ms": 3.0}], SHA) is None  # the last reply ran on this machine
    assert holder_of([remote("desk", sha="b" * 64)], SHA) is None
    assert holder_of([remote("desk", fault="cut")], SHA) is None
    assert holder_of([], SHA) is None and holder_of([remote("desk")], None) is None


def test_the_lines_say_where_and_why() -> None:
    metrics = {"remote": {"connection": "desk", "host": "desk.lan:8642", "placement": HOLDS}}
    assert where_line(metrics) == chosen_line(metrics) == "on desk: holds this conversation"
    plain = {"remote": {"connection": "desk", "host": "desk.lan:8642"}}
    assert where_line(plain) == "on desk.lan:8642" and chosen_line(plain) is None
    assert where_line({"ttft_ms": 1}) is None
