"""Another Cove as the server (`cove serve` on the tiny model): the probe knows it, and its
reply brings the server's own usage and timings into the reply's figures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.request import ReplyRequest, Sampling
from app.remote.probe import probe
from app.remote.remote_model import RemoteModel
from app.statuses import MessageStatus
from models.network import NetworkGate
from tests.app.remote.conftest import connection_to
from tests.support.serve_fixture import Served, cove_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with cove_serve(Path(tmp_path_factory.mktemp("cove-serve"))) as running:
        yield running


def test_probe_says_cove_and_lists_its_models(served: Served, gate: NetworkGate) -> None:
    info = probe(connection_to(served.url, name="other-cove"), None, gate)
    assert info.kind == "cove" and info.version is None
    assert len(info.models) == 1 and info.models[0]["id"] and info.private is True


def test_a_reply_from_cove_carries_the_server_s_usage_and_timings(served: Served, gate: NetworkGate) -> None:
    from app.remote.engine import RemoteEngine

    connection = connection_to(served.url, name="other-cove")
    info = probe(connection, None, gate)
    model = RemoteModel(connection.name, info.models[0]["id"], connection.host, info.kind)
    engine = RemoteEngine(connection, None, gate)
    final = engine.generate(
        ReplyRequest.chat([{"role": "user", "content": "hello"}], sampling=Sampling(max_tokens=16, temperature=0.0)), model=model
    ).wait(60)
    engine.close()
    assert final.status in (MessageStatus.LENGTH, MessageStatus.COMPLETE) and final.text
    usage = final.metrics["remote"]["server_usage"]
    assert usage["completion_tokens"] == final.metrics["gen_tokens"] <= 16
    assert final.metrics["prompt_tokens"] == usage["prompt_tokens"] > 0
    assert final.metrics["remote"]["server_timings"] is not None and final.metrics["remote"]["kind"] == "cove"
    assert final.metrics["remote"]["model_id"] == info.models[0]["id"]
