"""A vision model through `cove serve`: the tiny vision pair (tests/support/tiny_vision.py) imported
with its projector, asked about a base64 image by the official `openai` client (chat completions and
Responses) and the `anthropic` client, two image requests at once on two slots, and the record naming
each image by hash, type, bytes and pixels, never its data. The API's image files live only while
their reply runs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from PIL import Image

from tests.support.serve_fixture import Served, cove_serve
from tests.support.tiny_vision import N_IMAGE_TOKENS, write_tiny_vision

MODEL = "text_model"


def png(color: tuple[int, int, int], size: tuple[int, int] = (24, 18)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("serve-vision")
    text, mmproj = write_tiny_vision(home / "pair")
    with cove_serve(home, args=("--parallel", "2")) as running:
        done = running.cove("models", "import", str(text), "--mmproj", str(mmproj))
        assert done.returncode == 0, done.stderr
        yield running


def openai_client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=120)


def image_url(data: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{base64.b64encode(data).decode()}"}}


def test_the_openai_client_gets_an_answer_about_a_base64_image(served: Served) -> None:
    data = png((200, 40, 40))
    reply = openai_client(served).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, image_url(data)]}],  # type: ignore[list-item]
        max_tokens=3,
        temperature=0,
    )
    assert reply.choices[0].finish_reason in ("length", "stop") and reply.usage is not None
    assert reply.usage.prompt_tokens > N_IMAGE_TOKENS  # the image's 16 places and the text's tokens
    timings = (reply.model_extra or {})["timings"]  # Cove's own clocks, as llama-server gives them
    assert timings["images"] == 1 and timings["image_tokens"] == N_IMAGE_TOKENS and timings["image_encode_ms"] > 0
    sha = hashlib.sha256(data).hexdigest()
    entries = [e for e in served.record() if sha in json.dumps(e)]
    assert entries, "the record names the image by its hash"
    assert base64.b64encode(data).decode()[:40] not in json.dumps(entries)  # never its data
    sent = json.loads(entries[0]["messages"])
    assert sent[0]["content"][1] == {"type": "image", "sha256": sha, "mime": "image/png", "bytes": len(data), "width": 24, "height": 18}


def test_responses_input_image_and_an_anthropic_base64_image_are_answered(served: Served) -> None:
    data = png((10, 200, 10))
    uri = f"data:image/png;base64,{base64.b64encode(data).decode()}"
    response = openai_client(served).responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Describe it"}, {"type": "input_image", "image_url": uri}]}],  # type: ignore[list-item]
        max_output_tokens=3,
    )
    assert response.status in ("completed", "incomplete") and response.usage is not None
    assert response.usage.input_tokens > N_IMAGE_TOKENS
    message = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0, timeout=120).messages.create(
        model=MODEL,
        max_tokens=3,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()}},
                    {"type": "text", "text": "total?"},
                ],
            }
        ],
    )
    assert message.stop_reason in ("max_tokens", "end_turn") and message.usage.input_tokens > N_IMAGE_TOKENS


def test_two_image_requests_at_once_on_two_slots(served: Served) -> None:
    results: list[Any] = []

    def ask(color: tuple[int, int, int]) -> None:
        try:
            results.append(
                openai_client(served).chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": [image_url(png(color)), {"type": "text", "text": "which colour?"}]}],  # type: ignore[list-item]
                    max_tokens=8,
                )
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    threads = [threading.Thread(target=ask, args=(c,)) for c in ((1, 2, 250), (250, 250, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert len(results) == 2 and all(not isinstance(r, Exception) for r in results), results
    assert all(r.usage.prompt_tokens > N_IMAGE_TOKENS for r in results)


def test_a_photo_of_several_megabytes_fits_the_request_body(served: Served) -> None:
    import numpy as np

    noise = np.random.default_rng(5).integers(0, 256, (1400, 1500, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(noise).save(out, "PNG")
    data = out.getvalue()
    assert len(data) > 5_000_000  # 8 MB of base64: twice the other endpoints' 4 MiB body limit
    reply = openai_client(served).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": [image_url(data), {"type": "text", "text": "what is it?"}]}], max_tokens=2
    )  # type: ignore[list-item]
    assert reply.usage is not None and reply.usage.prompt_tokens > N_IMAGE_TOKENS
