"""The API's images while their replies run (PassingImages): held images stay, an image no reply
holds goes once it is older than KEEP_S, and the folders of server processes that died (killed
before they removed theirs) are removed when the next one starts."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from app.images import store as store_module
from app.images.store import PassingImages


def test_a_held_image_stays_and_an_old_one_no_reply_holds_goes(tmp_path: Path) -> None:
    passing = PassingImages(tmp_path / "p")
    a, b = b"first picture", b"second picture"
    sha_a, sha_b = hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest()
    passing.put(a, sha_a)
    passing.put(b, sha_b)
    passing.hold([sha_a])
    old = time.time() - PassingImages.KEEP_S - 5
    for sha in (sha_a, sha_b):
        os.utime(tmp_path / "p" / sha, (old, old))
    passing.release([])  # a release sweeps
    assert passing.files([sha_a, sha_b]) == {sha_a: str(tmp_path / "p" / sha_a)}
    passing.release([sha_a])
    assert passing.files([sha_a]) == {} and passing.held() == set()


def test_the_folder_of_a_dead_server_is_removed_and_a_live_ones_kept(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "passing-images"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    (root / dead).mkdir(parents=True)
    (root / dead / ("0" * 64)).write_bytes(b"a picture left by a killed server")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (root / str(alive.pid)).mkdir()
        monkeypatch.setattr(store_module, "_passing", None)
        passing = store_module.passing_images(root)
        assert passing.store.folder == root / str(os.getpid())
        assert not (root / dead).exists() and (root / str(alive.pid)).is_dir()
        assert (passing.store.folder.stat().st_mode & 0o777) == 0o700
    finally:
        alive.kill()
        alive.wait()
        monkeypatch.setattr(store_module, "_passing", None)
