"""A model file replaced under a running `cove serve`: the reply comes from the new file, and the
record names the new file's sha256 (the recheck is stored, so later requests only stat the file)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import httpx

from tests.support.serve_fixture import cove_serve
from tests.support.tiny_model import write_tiny_gguf

BODY = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_the_record_names_the_file_that_ran_after_it_was_replaced(tmp_path: Path) -> None:
    with cove_serve(tmp_path) as served:
        (model,) = json.loads(served.cove("models", "list", "--json").stdout)
        path = Path(model["path"])
        assert httpx.post(f"{served.url}/v1/chat/completions", json=BODY, timeout=60).status_code == 200
        assert served.requests()[-1]["model_sha256"] == model["sha256"]

        replacement = write_tiny_gguf(tmp_path / "replacement.gguf", seed=7)
        os.replace(replacement, path)  # another file under the same name, as a re-download would leave it
        new_sha = hashlib.sha256(path.read_bytes()).hexdigest()
        assert new_sha != model["sha256"]
        for _ in range(2):
            assert httpx.post(f"{served.url}/v1/chat/completions", json=BODY, timeout=60).status_code == 200
            assert served.requests()[-1]["model_sha256"] == new_sha
        (listed,) = json.loads(served.cove("models", "list", "--json").stdout)
        assert listed["sha256"] == new_sha
        with sqlite3.connect(served.home / "cove" / "data" / "cove.db") as db:
            stamp = db.execute("SELECT size, ctime_ns, inode FROM models").fetchone()
        st = path.stat()
        assert stamp == (st.st_size, st.st_ctime_ns, st.st_ino)  # stored: the next request only stats the file
