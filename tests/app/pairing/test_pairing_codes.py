"""The server's side of pairing, in this process: codes kept as hashes with their end
(app/serve/http/pairing_codes.py), a right secret making a key of its own once, wrong, used,
expired and spent codes told apart, and `POST /cove/pair` (app/serve/http/pairing.py) answering
only over HTTPS, slowing wrong tries to 5 a minute, its database read on a thread of its own."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from app.pairing.code import new_code
from app.serve.http.keys import ApiKeys
from app.serve.http.pairing import PATH, FailureLimit, PairingApi
from app.serve.http.pairing_codes import MAX_FAILURES, PairingCodes, key_name_for
from app.store.database import open_database

DER = b"the certificate's DER bytes"
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite_utils.Database]:
    opened = open_database(tmp_path / "cove.db").db
    yield opened
    opened.close()


def test_a_right_secret_makes_a_key_once_and_only_its_hash_is_kept(db: sqlite_utils.Database, tmp_path: Path) -> None:
    codes = PairingCodes(db)
    code, ends = codes.make(DER, now=NOW)
    assert ends == NOW + timedelta(minutes=10)
    paired = codes.redeem(code.secret, "laptop", now=NOW + timedelta(minutes=9))
    assert paired.status == "paired" and paired.key_name == "paired-laptop" and paired.key
    assert ApiKeys(db).name_of(paired.key) == "paired-laptop"
    assert codes.redeem(code.secret, "laptop", now=NOW + timedelta(minutes=9)).status == "used"
    with sqlite3.connect(tmp_path / "cove.db") as conn:
        rows = conn.execute("SELECT secret_sha256, used_at, key_name FROM pairing_codes").fetchall()
    assert len(rows) == 1 and rows[0][0] != code.secret and code.secret not in rows[0][0] and rows[0][2] == "paired-laptop"
    assert (tmp_path / "cove.db").read_bytes().find(code.secret.encode()) == -1


def test_wrong_expired_and_spent_codes_are_told_apart(db: sqlite_utils.Database) -> None:
    codes = PairingCodes(db)
    late, _ = codes.make(DER, now=NOW - timedelta(minutes=11))
    assert codes.redeem(late.secret, "laptop", now=NOW).status == "expired"
    assert codes.redeem(new_code(DER).secret, "laptop", now=NOW).status == "wrong"
    assert codes.redeem("not a secret", "laptop", now=NOW).status == "wrong"
    assert codes.redeem(None, "laptop", now=NOW).status == "wrong"
    open_code, _ = codes.make(DER, now=NOW)
    for _ in range(MAX_FAILURES):
        assert codes.redeem(new_code(DER).secret, "laptop", now=NOW).status == "wrong"
    assert codes.redeem(open_code.secret, "laptop", now=NOW).status == "spent"
    assert ApiKeys(db).names() == []
    # Wrong tries before a code is made do not count against it.
    fresh, _ = codes.make(DER, now=NOW)
    assert codes.redeem(fresh.secret, "laptop", now=NOW).status == "paired"


def test_key_names_are_cleaned_and_never_taken_twice(db: sqlite_utils.Database) -> None:
    assert key_name_for("Anna's MacBook Pro", []) == "paired-Anna-s-MacBook-Pro"
    assert key_name_for("", []) == "paired-machine"
    assert key_name_for("x" * 80, []) == "paired-" + "x" * 26
    assert key_name_for("laptop", ["paired-laptop", "paired-laptop-2"]) == "paired-laptop-3"
    codes = PairingCodes(db)
    first, second = codes.make(DER, now=NOW)[0], codes.make(DER, now=NOW)[0]
    assert codes.redeem(first.secret, "laptop", now=NOW).key_name == "paired-laptop"
    assert codes.redeem(second.secret, "laptop", now=NOW).key_name == "paired-laptop-2"


def test_the_failure_limit_allows_five_a_minute() -> None:
    clock = [100.0]
    limit = FailureLimit(clock=lambda: clock[0])
    places = [limit.take() for _ in range(5)]
    assert all(wait is None for wait, _ in places)
    wait, _ = limit.take()
    assert wait == pytest.approx(60.0)
    limit.give_back(places[0][1])  # a try that succeeded does not count
    assert limit.take()[0] is None
    clock[0] += 61
    assert limit.take()[0] is None


class _Store:
    """A database on one thread of its own, as the server's store thread has it."""

    def __init__(self, path: Path) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.db: sqlite_utils.Database = self.executor.submit(lambda: open_database(path).db).result()

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.wrap_future(self.executor.submit(fn, *args))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit(fn, *args).result()

    def close(self) -> None:
        self.executor.submit(self.db.close).result()
        self.executor.shutdown()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[_Store]:
    opened = _Store(tmp_path / "cove.db")
    yield opened
    opened.close()


def _client(store: _Store, scheme: str = "https", clock: Callable[[], float] | None = None) -> TestClient:
    limit = FailureLimit(clock=clock) if clock else None
    api = PairingApi(store.run, lambda: store.db, limit)
    return TestClient(Starlette(routes=[Route(PATH, api.pair, methods=["POST"])]), base_url=f"{scheme}://testserver")


def test_the_route_pairs_once_over_https(store: _Store) -> None:
    code, _ = store.call(lambda: PairingCodes(store.db).make(DER))
    with _client(store) as client:
        paired = client.post(PATH, json={"secret": code.secret, "name": "laptop"})
        assert paired.status_code == 200 and paired.json()["key_name"] == "paired-laptop"
        assert paired.headers["cache-control"] == "no-store"
        key = paired.json()["key"]
        assert store.call(lambda: ApiKeys(store.db).name_of(key)) == "paired-laptop"
        again = client.post(PATH, json={"secret": code.secret, "name": "laptop"})
        assert again.status_code == 410 and "was used already" in again.json()["error"]["message"]


def test_the_route_refuses_plain_http_and_bodies_that_are_not_objects(store: _Store) -> None:
    with _client(store, "http") as client:
        refused = client.post(PATH, json={"secret": "X", "name": "laptop"})
    assert refused.status_code == 403 and "only over HTTPS" in refused.json()["error"]["message"]
    with _client(store) as client:
        listed = client.post(PATH, json=["secret"])
        assert listed.status_code == 400 and "JSON object" in listed.json()["error"]["message"]


def test_the_route_slows_wrong_tries_to_five_a_minute(store: _Store) -> None:
    clock = [0.0]
    code, _ = store.call(lambda: PairingCodes(store.db).make(DER))
    with _client(store, clock=lambda: clock[0]) as client:
        for _ in range(5):
            wrong = client.post(PATH, json={"secret": new_code(DER).secret, "name": "laptop"})
            assert wrong.status_code == 401 and "not right" in wrong.json()["error"]["message"]
        slowed = client.post(PATH, json={"secret": code.secret, "name": "laptop"})
        assert slowed.status_code == 429 and slowed.headers["retry-after"] == "60"
        assert "too many wrong pairing codes" in slowed.json()["error"]["message"]
        clock[0] += 60
        assert client.post(PATH, json={"secret": code.secret, "name": "laptop"}).status_code == 200
