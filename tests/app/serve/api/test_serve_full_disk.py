"""`cove serve` on a disk that fills up: the reply is delivered with a sentence saying it is not
saved yet, and once there is room again the request is written (history and record) and the
record verifies. The disk is a small tmpfs in a mount namespace of its own (`unshare --user
--map-root-user --mount`: no root needed where user namespaces are on), the server runs inside
it, and the test talks to it over loopback (the network is not unshared)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO_ROOT
from tests.support.serve_fixture import free_port
from tests.support.tiny_model import write_tiny_gguf

_SCENARIO = r"""
import json, os, subprocess, sys, time
import httpx

disk, port, model = sys.argv[1], sys.argv[2], sys.argv[3]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", disk], check=True)
env = {**os.environ, "COVE_HOME": os.path.join(disk, "home"), "HOME": os.path.join(disk, "home")}
cli = [sys.executable, "-m", "app.cli.main"]
subprocess.run([*cli, "models", "import", model], env=env, check=True, capture_output=True)
log = open(os.path.join(disk, "..", "serve.log"), "wb")
server = subprocess.Popen([*cli, "serve", "--port", port], env=env, stderr=log)
url = f"http://127.0.0.1:{port}"
out = {}
try:
    for _ in range(300):
        try:
            httpx.get(f"{url}/v1/models", timeout=2).raise_for_status()
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    body = {"model": "tiny", "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": "warm up"}]}
    out["warm"] = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).status_code
    filler = os.path.join(disk, "fill")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # the disk fills up
    for size in (1 << 20, 4096, 1):
        try:
            while os.write(fd, b"\0" * size):
                pass
        except OSError:
            pass
    os.close(fd)
    body["messages"] = [{"role": "user", "content": "on a full disk"}]
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    out["full"] = {"status": reply.status_code, "body": reply.json()}
    os.remove(filler)  # room again
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = subprocess.run([*cli, "record", "export", "--format", "jsonl"], env=env, capture_output=True, text=True)
        entries = [json.loads(line) for line in done.stdout.splitlines()]
        if any("on a full disk" in (e["messages"] or "") for e in entries) and len(entries) >= 4:
            break
        time.sleep(0.5)
    out["entries"] = entries
    verify = subprocess.run([*cli, "record", "verify"], env=env, capture_output=True, text=True)
    out["verify"] = [verify.returncode, verify.stdout + verify.stderr]
    shown = subprocess.run([*cli, "history", "list"], env=env, capture_output=True, text=True)
    out["history"] = shown.stdout
finally:
    server.terminate()
    server.wait(60)
print(json.dumps(out))
"""


def test_a_reply_on_a_full_disk_is_delivered_said_and_saved_when_there_is_room(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", _SCENARIO, str(disk), str(free_port()), str(model)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    out = json.loads(done.stdout.splitlines()[-1])
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert out["warm"] == 200
    assert out["full"]["status"] == 200, (out["full"], log[-3000:])
    reply = out["full"]["body"]
    assert reply["choices"][0]["message"]["content"]
    assert "not in Cove's history yet (the disk is full)" in reply["warning"]
    saved = [e for e in out["entries"] if "on a full disk" in (e["messages"] or "")]
    assert len(saved) == 1 and saved[0]["status"] == "open"
    (closing,) = [e for e in out["entries"] if json.loads(e["params"]).get("closes") == saved[0]["seq"]]
    assert closing["reply"] == reply["choices"][0]["message"]["content"]
    assert out["verify"][0] == 0, out["verify"][1]
    assert "on a full disk" in out["history"]
    assert "Traceback" not in log, log[-3000:]
