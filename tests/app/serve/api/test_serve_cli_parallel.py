"""`cove serve --parallel N` is N slots of one engine per model (as many as fit when not given),
and `--routing`, removed, is still accepted with a sentence saying it is no longer used."""

from __future__ import annotations

from app.cli import serve_cmd
from app.cli.main import build_parser


def test_parallel_is_the_slots_of_each_models_engine(cove_core, capsys) -> None:
    pool = serve_cmd.make_pool(cove_core, build_parser().parse_args(["serve", "--parallel", "3"]))
    assert pool.parallel == 3 and pool.slots_for(cove_core.library.list()[0]) == 3
    assert serve_cmd.make_pool(cove_core, build_parser().parse_args(["serve"])).parallel is None  # as many as fit
    assert capsys.readouterr().err == ""


def test_routing_is_accepted_with_a_sentence_and_changes_nothing(cove_core, capsys) -> None:
    pool = serve_cmd.make_pool(cove_core, build_parser().parse_args(["serve", "--routing", "round-robin"]))
    assert pool.parallel is None
    err = capsys.readouterr().err
    assert "--routing is no longer used" in err and "slot" in err
