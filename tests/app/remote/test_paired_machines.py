"""Two Coves on this machine, paired over real TLS (tests/support/pairing_homes.py): the desk serves
on 127.0.0.2 with a tiny model written with Qwen 2.5's template, the laptop pairs with a code and
then uses the desk's model as a person would: `cove models list` shows it under the desk's name
with whether the desk answers; a reply streams from there and both records name each other (the
laptop's: which machine and model file served it; the desk's: which paired machine asked); a tool
call the desk's model writes is asked and run on the laptop; a desk that is stopped is said to be
unreachable, and answers again once restarted. Subprocesses, as a person runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from tests.app.mcp.conftest import FAULT_SERVER
from tests.support.pairing_homes import HOST, Home, Server, serving
from tests.support.tiny_model import EOS_ID, write_tiny_gguf
from tests.support.tool_turns import QUOTE_TOKEN, QWEN_TEMPLATE

MODEL = "qwentools"


def _desk_home(root: Path) -> Home:
    root.mkdir(parents=True, exist_ok=True)
    home = Home(root)
    tiny = write_tiny_gguf(root / f"{MODEL}.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096)
    assert home.cove("models", "import", str(tiny)).returncode == 0
    assert home.cove("serve", "keys", "add", "editor").returncode == 0
    return home


def _paired_desk(tmp_path: Path) -> tuple[Home, Home, Iterator[Server], Server]:
    """(desk home, laptop, its `serving` generator to close, the server): a desk of its own,
    serving, and a laptop paired with it as "desk"."""
    home, laptop = _desk_home(tmp_path / "desk"), Home(tmp_path / "laptop")
    servers = serving(home)
    desk = next(servers)
    paired = laptop.cove("remote", "pair", "desk", desk.url, desk.code())
    if paired.returncode != 0:
        servers.close()
        pytest.fail(f"pairing failed: {paired.stderr}")
    return home, laptop, servers, desk


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serving(_desk_home(tmp_path_factory.mktemp("desk")))


@pytest.fixture(scope="module")
def laptop(desk: Server, tmp_path_factory: pytest.TempPathFactory) -> Home:
    home = Home(tmp_path_factory.mktemp("laptop"))
    paired = home.cove("remote", "pair", "desk", desk.url, desk.code())
    assert paired.returncode == 0, paired.stderr
    # The suite's way to make the tiny model end a forced string argument at once (its '"' token).
    home.paths.settings_file.parent.mkdir(parents=True, exist_ok=True)
    home.paths.settings_file.write_text(json.dumps({"sampling": {"logit_bias": [[QUOTE_TOKEN, 10.0]]}}))
    return home


def _desk_sha(desk: Server) -> str:
    (model,) = json.loads(desk.home.cove("models", "list", "--json", "--here").stdout)
    return model["sha256"]


def _record(home: Home) -> list[dict]:
    done = home.cove("record", "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_models_list_shows_the_paired_machines_models_and_whether_it_answers(desk: Server, laptop: Home) -> None:
    listed = laptop.cove("models", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"On desk ({HOST}:{desk.port}, paired), answers now" in listed.stdout
    assert re.search(rf"^  {MODEL}@desk  ctx 4096 · .*sha256 {_desk_sha(desk)[:12]}$", listed.stdout, re.M), listed.stdout
    (entry,) = json.loads(laptop.cove("models", "list", "--json").stdout)
    assert entry["name"] == f"{MODEL}@desk" and entry["paired"] is True and entry["reachable"] is True
    assert entry["sha256"] == _desk_sha(desk)
    # --here asks nothing of the desk.
    assert json.loads(laptop.cove("models", "list", "--json", "--here").stdout) == []


def test_a_reply_streams_from_the_desk_and_each_record_names_the_other(desk: Server, laptop: Home) -> None:
    done = laptop.cove("chat", "--new", "--model", f"{MODEL}@desk", "--max-tokens", "8", "--temperature", "0", "Hello desk")
    assert done.returncode == 0, done.stderr
    assert f"{MODEL}@desk" in done.stderr + done.stdout
    here = [e for e in _record(laptop) if e["endpoint"] == "chat"][-1]
    ran_on = json.loads(here["ran_on"]) if isinstance(here["ran_on"], str) else here["ran_on"]
    assert ran_on["connection"] == "desk" and ran_on["sha256"] == _desk_sha(desk) and ran_on["machine"]
    there = _record(desk.home)[-1]
    keys = desk.home.cove("serve", "keys", "list").stdout
    (paired_key,) = re.findall(r"^paired-\S+$", keys, re.M)
    assert there["client"] == paired_key  # the desk's record: which paired machine asked
    assert laptop.cove("record", "verify").returncode == 0 and desk.home.cove("record", "verify").returncode == 0


def test_a_tool_call_written_on_the_desk_is_asked_and_run_on_the_laptop(desk: Server, laptop: Home) -> None:
    calls_file = laptop.root / "calls.txt"
    added = laptop.cove("tools", "add", "fault", "--", sys.executable, str(FAULT_SERVER), str(calls_file))
    assert added.returncode == 0, added.stderr
    chat = ("chat", "--new", "--model", f"{MODEL}@desk", "--temperature", "0", "--tool-choice", "required", "--max-tokens", "128")
    done = laptop.cove(*chat, "--tools", "fault", "--allow-tools", "Say hi through the tool")
    assert done.returncode == 0, done.stderr
    assert re.search(r"\[tool call: fault/\w+ \{.*\}\]", done.stderr), done.stderr
    assert calls_file.exists() and calls_file.read_text().split()  # the tool ran here, on the laptop
    entries = [e for e in _record(laptop) if e["conversation_id"] == _record(laptop)[-1]["conversation_id"]]
    assert [e["endpoint"].split("/")[0] for e in entries] == ["chat", "tool:fault", "chat"]
    # The desk wrote both replies, and never ran a tool.
    assert [e["endpoint"] for e in _record(desk.home)[-2:]] == ["/v1/chat/completions"] * 2


def test_auto_on_the_laptop_sends_a_question_to_the_desks_larger_model_and_says_so(desk: Server, tmp_path: Path) -> None:
    # A laptop of its own, with a small model of its own (the desk's, unnamed in size, counts as 7B).
    small = Home(tmp_path / "small-laptop")
    assert small.cove("remote", "pair", "desk", desk.url, desk.code()).returncode == 0
    tiny = write_tiny_gguf(
        tmp_path / "coder-0.5b.gguf", chat_template=QWEN_TEMPLATE.read_text(), n_ctx_train=4096, parameter_count=494_000_000
    )
    assert small.cove("models", "import", str(tiny)).returncode == 0
    # Code to write first, while both speeds are estimated from the sizes: the laptop's own faster model.
    # (Once the desk's tiny model has replied, its measured speed is far above any real 7B's.)
    code = small.cove(
        "chat", "--new", "--model", "auto", "--max-tokens", "300", "--temperature", "0", "Write a Python function that reverses a list."
    )
    assert code.returncode == 0, code.stderr
    assert "cove: auto → coder-0.5b: code; " in code.stderr
    # A question goes to the desk's larger model; the laptop's record says where it ran.
    asked = small.cove("chat", "--new", "--model", "auto", "--max-tokens", "4", "--temperature", "0", "What is the capital of Australia?")
    assert asked.returncode == 0, asked.stderr
    assert f"cove: auto → {MODEL}@desk: a short question; coder-0.5b is faster but weaker at a short question" in asked.stderr
    entry = [e for e in _record(small) if e["endpoint"] == "chat"][-1]
    ran_on = json.loads(entry["ran_on"]) if isinstance(entry["ran_on"], str) else entry["ran_on"]
    assert ran_on["connection"] == "desk" and json.loads(entry["params"])["auto"]["chosen"] == f"{MODEL}@desk"


def test_a_stopped_desk_is_unreachable_and_answers_again_after_a_restart(tmp_path: Path) -> None:
    home, laptop, servers, desk = _paired_desk(tmp_path)
    port = desk.port
    servers.close()  # stops it
    listed = laptop.cove("models", "list")
    assert listed.returncode == 0 and "On desk" in listed.stdout and "not reachable now:" in listed.stdout, listed.stdout
    assert "as listed when last asked" in listed.stdout
    refused = laptop.cove("chat", "--new", "--model", f"{MODEL}@desk", "--max-tokens", "4", "hi")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"{HOST}:{port} refused the connection" in refused.stderr
    again = serving(home, port=port)
    next(again)
    try:
        done = laptop.cove("chat", "--new", "--model", f"{MODEL}@desk", "--max-tokens", "4", "hi again")
        assert done.returncode == 0, done.stderr
    finally:
        again.close()


def _chat(laptop: Home, *args: str) -> str:
    done = laptop.cove("chat", "--max-tokens", "4", "--temperature", "0", *args)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_same_model_file_on_two_machines_the_conversation_stays_where_its_state_is(tmp_path: Path) -> None:
    """desk and nas hold the same file; the laptop chose nas, yet each reply goes where the
    conversation's KV state is, or to the machine that would answer first, and says so."""
    desk_home, nas_home = _desk_home(tmp_path / "desk"), _desk_home(tmp_path / "nas")
    laptop = Home(tmp_path / "laptop")
    desk_servers, nas_servers = serving(desk_home), serving(nas_home)
    desk, nas = next(desk_servers), next(nas_servers)
    try:
        assert _desk_sha(desk) == _desk_sha(nas)
        assert laptop.cove("remote", "pair", "desk", desk.url, desk.code()).returncode == 0
        assert laptop.cove("remote", "pair", "nas", nas.url, nas.code()).returncode == 0
        # Neither has the model loaded: the one chosen.
        assert "on nas: the one you chose" in _chat(laptop, "--new", "--model", f"{MODEL}@nas", "first")
        # The conversation's state is on nas now, whichever of the two is named.
        assert "on nas: holds this conversation" in _chat(laptop, "--model", f"{MODEL}@desk", "second")
        # A new conversation: nas has the model loaded with a slot free, desk has not loaded it.
        assert "on nas: loaded, with a slot free" in _chat(laptop, "--new", "--model", f"{MODEL}@desk", "third")
        nas_servers.close()
        # nas is away: the conversation goes on on desk, and the line says why.
        assert "on desk: nas cannot be reached now" in _chat(laptop, "--model", f"{MODEL}@nas", "fourth")
        entries = [e for e in _record(laptop) if e["endpoint"] == "chat"]
        assert [json.loads(e["ran_on"])["connection"] for e in entries] == ["nas", "nas", "nas", "desk"]
    finally:
        desk_servers.close()
        nas_servers.close()


def test_a_renewed_certificate_is_pinned_again_and_another_key_is_refused_before_sending(tmp_path: Path) -> None:
    home, laptop, servers, desk = _paired_desk(tmp_path)
    port, pinned = desk.port, laptop.paths.data_dir / "paired" / "desk.pem"
    servers.close()
    tls = home.paths.tls_dir
    (tls / "cert.pem").unlink()  # made again at the next start, with the same key (as a renewal is)
    servers = serving(home, port=port)
    next(servers)
    try:
        listed = laptop.cove("remote", "models", "desk")
        assert listed.returncode == 0, listed.stderr
        assert pinned.read_bytes() == (tls / "cert.pem").read_bytes()  # the renewed one, pinned now
    finally:
        servers.close()
    (tls / "cert.pem").unlink()
    (tls / "key.pem").unlink()  # another key: another machine, as far as the laptop can tell
    servers = serving(home, port=port)
    next(servers)
    try:
        before = len(_record(home))
        refused = laptop.cove("chat", "--new", "--model", f"{MODEL}@desk", "--max-tokens", "4", "secret words")
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        assert "showed a certificate other than the one this Cove paired with as desk, so nothing was sent" in refused.stderr
        assert len(_record(home)) == before  # the desk never saw the request
        assert pinned.read_bytes() != (tls / "cert.pem").read_bytes()  # the pin stays until the person pairs again
    finally:
        servers.close()


def test_a_desk_killed_mid_reply_keeps_the_text_so_far_and_answers_again_after_a_restart(tmp_path: Path) -> None:
    """The laptop's engine on the paired (pinned) connection, in this process: kill -9 of the
    desk's Cove while it streams ends the reply as interrupted with its text; a restart answers."""
    from app.engine.client import TokenEvent
    from app.engine.request import ReplyRequest, Sampling
    from app.remote.connections import Connections
    from app.remote.engine import RemoteEngine
    from app.remote.remote_model import remote_models
    from app.statuses import MessageStatus
    from models.network import NetworkGate

    home, laptop, servers, desk = _paired_desk(tmp_path)
    try:
        db = sqlite_utils.Database(laptop.paths.database)
        connection = Connections(db, keys=None).get("desk")  # type: ignore[arg-type]
        key = json.loads((laptop.root / "keyring.json").read_text())["cove/remote:desk"]
        (model,) = remote_models(connection)
        engine = RemoteEngine(connection, key, NetworkGate(environ={}))
        # </s> biased away: sampled at temperature 1, it ends a reply within its first pieces now and then
        sampling = Sampling(max_tokens=3000, temperature=1.0, seed=7, logit_bias=((EOS_ID, -100.0),))
        request = ReplyRequest.chat([{"role": "user", "content": "tell a long story"}], sampling=sampling)
        gen = engine.generate(request, model=model)
        pieces = 0
        for event in gen:
            if isinstance(event, TokenEvent):
                pieces += 1
                if pieces == 5:
                    os.kill(desk.pid, signal.SIGKILL)
            else:
                final = event
                break
        assert final.status == MessageStatus.INTERRUPTED, (final.status, final.error)
        assert final.text and final.error and final.error.endswith("the text so far is kept.")
    finally:
        servers.close()
    again = serving(home, port=desk.port)
    next(again)
    try:
        answer = engine.generate(ReplyRequest.chat([{"role": "user", "content": "hi"}], sampling=Sampling(max_tokens=4)), model=model).wait(
            60
        )
        assert answer.status in (MessageStatus.COMPLETE, MessageStatus.LENGTH) and answer.text
    finally:
        engine.close()
        again.close()


def test_unpaired_on_the_desk_the_laptop_is_told_to_pair_again(tmp_path: Path) -> None:
    home, laptop, servers, desk = _paired_desk(tmp_path)
    try:
        (paired_key,) = re.findall(r"^paired-\S+$", home.cove("serve", "keys", "list").stdout, re.M)
        assert home.cove("serve", "keys", "remove", paired_key).returncode == 0  # unpaired there
        refused = laptop.cove("chat", "--new", "--model", f"{MODEL}@desk", "--max-tokens", "4", "hi")
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        assert "no longer takes the key it gave this machine when you paired as desk" in refused.stderr
        assert "pair again" in refused.stderr
    finally:
        servers.close()
