"""Images through Cove's engine, measured: image encode time and image tokens per image at two sizes,
the time to first token of a turn with one image against the same turn's text alone, and Cove's
encode time against llama.cpp's own `llama-mtmd-cli` (built from the same pinned llama.cpp, in the
one build of llama.cpp's tools: app/speed/llama_tools.py) on the same model, image and threads.
Each figure is the median of --runs, the two programs alternating; each run's pictures are new to
the engine (its time to first token includes reading, checking and decoding the file).

Cove's encode time is the reply's `image_encode_ms` (mtmd_encode_chunk, the projector's work);
llama-mtmd-cli's is the time between the "encoding mtmd batch" and "mtmd batch encoding done" lines
it logs around the same work (their timestamps, to the microsecond). The cache is cleared before
each of Cove's replies, so every run encodes the image.

Run:  .venv/bin/python bench/vision.py [--model GGUF --mmproj GGUF] [--runs 3] [--threads N] [--json]
Without --model, the tiny random-weight vision pair of the tests (tests/support/tiny_vision.py) is
written to a temporary folder: its projector resizes every image to 32 x 32, 16 image tokens.
Goal (issue 51): Cove's encode speed >= 0.95x llama-mtmd-cli's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = ((320, 240), (1280, 960))
QUESTION = "What does this picture show?"
# llama-mtmd-cli's log: "0.00.034.472 I encoding mtmd batch, ..." then "0.00.034.844 I mtmd batch
# encoding done in 0 ms": its own figure is whole milliseconds, so the encode time is read from the two
# lines' timestamps (minutes.seconds.milliseconds.microseconds).
_STAMP = r"(\d+)\.(\d+)\.(\d+)\.(\d+) I "
_BEGIN = re.compile(_STAMP + r"encoding mtmd batch")
_DONE = re.compile(_STAMP + r"mtmd batch encoding done in (\d+) ms")


def ttft(metrics: dict[str, Any]) -> float:
    """The reply's time to first token as the client saw it (the engine's prefill when it is missing)."""
    return float(metrics.get("ttft_ms") or metrics["prefill_ms"])


def picture(width: int, height: int, mark: int = 0) -> bytes:
    """A PNG with a gradient and a few shapes (not one colour: compression and resizing do real
    work); `mark` changes a corner, so each run's picture is new to the engine."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height))
    image.putdata([(x * 255 // width, y * 255 // height, (x + y) % 256) for y in range(height) for x in range(width)])
    draw = ImageDraw.Draw(image)
    draw.rectangle((width // 8, height // 8, width // 3, height // 3), fill=(250, 250, 250))
    draw.ellipse((width // 2, height // 2, width - 10, height - 10), outline=(0, 0, 0), width=5)
    draw.rectangle((0, 0, 7, 7), fill=(mark % 256, mark // 256 % 256, 77))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def cove_turn(engine: Any, store: Any, data: bytes | None, threads: int) -> dict[str, Any]:
    """One reply of one token to QUESTION with the image `data` (None: the text alone), cache cleared."""
    from app.engine.request import ReplyRequest, Sampling
    from app.images.checks import check_image

    content: Any = QUESTION
    files: dict[str, str] = {}
    if data is not None:
        image = check_image(data)
        files[image.sha256] = str(store.put(data, image.sha256))
        part = {"type": "image", "sha256": image.sha256, "mime": image.mime, "width": image.width, "height": image.height}
        content = [part, {"type": "text", "text": QUESTION}]
    request = ReplyRequest.chat(
        [{"role": "user", "content": content}],
        sampling=Sampling(max_tokens=1, temperature=0.0),
        ignore_eos=True,
        no_cache=True,
        speculative="off",
        image_files=files,
    )
    done = engine.generate(request).wait(600)
    if done.failure is not None or done.status == "error":
        raise SystemExit(f"Cove's reply failed: {done.error}")
    return dict(done.metrics)


def mtmd_cli_encode_ms(binary: Path, model: Path, mmproj: Path, image: Path, threads: int, tries: int = 3) -> float:
    """llama-mtmd-cli's encode time for `image`. Its log is written by a thread of its own and
    the last lines can be lost when the program ends at once, so it writes a few tokens, and a
    run whose log lacks the lines is run again."""
    for _ in range(tries - 1):
        try:
            return _mtmd_cli_run(binary, model, mmproj, image, threads)
        except LookupError:
            continue
    try:
        return _mtmd_cli_run(binary, model, mmproj, image, threads)
    except LookupError as exc:
        raise SystemExit(str(exc)) from None


def _mtmd_cli_run(binary: Path, model: Path, mmproj: Path, image: Path, threads: int) -> float:
    done = subprocess.run(
        [str(binary), "-m", str(model), "--mmproj", str(mmproj), "--image", str(image), "-p", QUESTION, "-n", "8", "-t", str(threads)]
        + ["--temp", "0", "-c", "4096"],
        capture_output=True,
        text=True,
        errors="replace",  # a random-weight model writes bytes that are not UTF-8
        timeout=600,
        env={**os.environ, "LLAMA_ARG_N_GPU_LAYERS": "0"},
    )
    log = done.stdout + done.stderr
    begins, dones = _BEGIN.findall(log), _DONE.findall(log)
    if done.returncode != 0:
        raise SystemExit(f"llama-mtmd-cli failed ({done.returncode}): {' | '.join(log.strip().splitlines()[-3:])}")
    if not begins or len(begins) != len(dones):
        raise LookupError(f"llama-mtmd-cli's log has no encode time: {' | '.join(log.strip().splitlines()[-3:])}")
    return sum(_us(end[:4]) - _us(begin) for begin, end in zip(begins, dones, strict=True)) / 1000.0


def _us(stamp: tuple[str, ...]) -> int:
    minutes, seconds, ms, us = (int(x) for x in stamp)
    return ((minutes * 60 + seconds) * 1000 + ms) * 1000 + us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="the text GGUF of a vision model (with --mmproj)")
    parser.add_argument("--mmproj", type=Path, help="its projector GGUF")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if (args.model is None) != (args.mmproj is None):
        parser.error("--model and --mmproj go together")

    from app.engine.client import EngineClient
    from app.images.store import ImageStore
    from app.paths import resolve_paths
    from app.speed.llama_tools import ensure_tool

    with tempfile.TemporaryDirectory(prefix="cove-vision-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if args.model is None:
            from tests.support.tiny_vision import write_tiny_vision

            model, mmproj = write_tiny_vision(tmp / "tiny")
            label = "tiny random-weight vision pair (tests/support/tiny_vision.py)"
        else:
            model, mmproj, label = args.model, args.mmproj, args.model.name
        cli = ensure_tool(
            resolve_paths({k: v for k, v in os.environ.items() if k != "COVE_HOME"}).tools_dir,
            "llama-mtmd-cli",
            log=lambda s: print(s, file=sys.stderr),
        )
        store = ImageStore(tmp / "images")
        rows: dict[str, dict[str, list[float]]] = {f"{w}x{h}": {"cove_ms": [], "cli_ms": [], "tokens": [], "ttft_ms": []} for w, h in SIZES}
        text_ttft: list[float] = []
        with EngineClient() as engine:
            engine.load(model, n_threads=args.threads, n_ctx=4096, mmproj_path=mmproj)
            cove_turn(engine, store, picture(*SIZES[0], mark=0), args.threads)  # warm-up: the projector's first graph
            for run in range(1, args.runs + 1):
                text_ttft.append(ttft(cove_turn(engine, store, None, args.threads)))
                for w, h in SIZES:
                    data = picture(w, h, mark=run)  # a picture the engine has not seen: read, decoded and encoded afresh
                    file = tmp / f"{w}x{h}-{run}.png"
                    file.write_bytes(data)
                    m = cove_turn(engine, store, data, args.threads)
                    row = rows[f"{w}x{h}"]
                    row["cove_ms"].append(m["image_encode_ms"])
                    row["tokens"].append(m["image_tokens"])
                    row["ttft_ms"].append(ttft(m))
                    row["cli_ms"].append(mtmd_cli_encode_ms(cli, model, mmproj, file, args.threads))

    med = statistics.median
    report: dict[str, Any] = {
        "model": label,
        "threads": args.threads,
        "runs": args.runs,
        "text_ttft_ms": round(med(text_ttft), 3),
        "sizes": {},
    }
    for size, r in rows.items():
        cove, cli = med(r["cove_ms"]), med(r["cli_ms"])
        report["sizes"][size] = {
            "image_tokens": int(med(r["tokens"])),
            "cove_encode_ms": round(cove, 3),
            "mtmd_cli_encode_ms": round(cli, 3),
            "speed_vs_mtmd_cli": round(cli / cove, 3) if cove > 0 else None,  # >1: Cove encodes faster
            "ttft_ms": round(med(r["ttft_ms"]), 3),
            "ttft_vs_text": round(med(r["ttft_ms"]) / med(text_ttft), 2) if med(text_ttft) > 0 else None,
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{label}, {args.threads} threads, medians of {args.runs}")
    print(f"  text alone: time to first token {report['text_ttft_ms']:.1f} ms")
    for size, r in report["sizes"].items():
        print(
            f"  {size}: {r['image_tokens']} image tokens; encode Cove {r['cove_encode_ms']:.2f} ms, llama-mtmd-cli "
            f"{r['mtmd_cli_encode_ms']:.2f} ms (Cove's speed {r['speed_vs_mtmd_cli']}x); time to first token "
            f"{r['ttft_ms']:.1f} ms ({r['ttft_vs_text']}x the text alone)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
