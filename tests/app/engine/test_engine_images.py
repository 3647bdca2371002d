"""Images through the real engine: the tiny vision model (tests/support/tiny_vision.py) loaded with its
projector, a reply to a message with an image, the image tokens libmtmd gives, the prefix cache
reused with the same image at the same place and not with another, and the refusals: a model
loaded without a projector, an image file changed under Cove, an image not sent with the request."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image as PILImage

from app.engine.client import EngineClient
from app.engine.request import ReplyRequest, Sampling
from app.images.checks import check_image
from app.images.store import ImageStore
from tests.support.tiny_vision import N_IMAGE_TOKENS, write_tiny_vision

pytestmark = pytest.mark.timeout(120)

T = 1


def png(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def vision_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_vision(tmp_path_factory.mktemp("vision"))


@pytest.fixture(scope="module")
def engine(vision_pair: tuple[Path, Path]) -> Iterator[EngineClient]:
    text, mmproj = vision_pair
    with EngineClient() as client:
        loaded = client.load(text, n_ctx=512, n_threads=T, mmproj_path=mmproj)
        assert loaded.vision and loaded.projector == mmproj.name
        yield client


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "images")


def ask(store: ImageStore, data: bytes, text: str = "What is this?", *, conversation: str | None = None, **fields: object) -> ReplyRequest:
    image = check_image(data)
    path = store.put(data, image.sha256)
    part = {"type": "image", "sha256": image.sha256, "mime": image.mime, "width": image.width, "height": image.height}
    messages = [{"role": "user", "content": [part, {"type": "text", "text": text}]}]
    return ReplyRequest.chat(
        messages,
        sampling=Sampling(max_tokens=4, temperature=0.0),
        ignore_eos=True,
        conversation_id=conversation,
        image_files={image.sha256: str(path)},
        **fields,
    )


def test_a_reply_reads_the_image_and_counts_its_tokens(engine: EngineClient, store: ImageStore) -> None:
    fin = engine.generate(ask(store, png((200, 30, 30)), no_cache=True)).wait()
    assert fin.status == "length" and fin.failure is None, fin.error
    m = fin.metrics
    assert m["images"] == 1 and m["image_tokens"] == N_IMAGE_TOKENS  # what libmtmd's tokenizer gives the mlp projector
    assert m["image_encode_ms"] > 0
    assert m["prompt_tokens"] > N_IMAGE_TOKENS and m["gen_tokens"] == 4


def test_the_same_image_reuses_the_cache_and_another_does_not(engine: EngineClient, store: ImageStore) -> None:
    red, blue = png((220, 10, 10)), png((10, 10, 220))
    first = engine.generate(ask(store, red, conversation="c-img")).wait()
    assert first.failure is None, first.error
    again = engine.generate(ask(store, red, conversation="c-img")).wait()
    # The whole image and the text up to the reply were kept: nothing of the image read again.
    assert again.metrics["cached_tokens"] >= again.metrics["prompt_tokens"] - 1
    assert "image_tokens" in again.metrics and again.metrics["image_tokens"] == 0
    other = engine.generate(ask(store, blue, conversation="c-img")).wait()
    assert other.failure is None, other.error
    assert other.metrics["image_tokens"] == N_IMAGE_TOKENS  # read afresh
    assert other.metrics["cached_tokens"] < other.metrics["prompt_tokens"] - N_IMAGE_TOKENS


def test_a_text_reply_after_an_image_turn_still_works(engine: EngineClient) -> None:
    fin = engine.generate(
        ReplyRequest.chat([{"role": "user", "content": "hello"}], sampling=Sampling(max_tokens=3), ignore_eos=True)
    ).wait()
    assert fin.status == "length" and "images" not in fin.metrics


def test_an_image_changed_on_disk_is_refused_with_a_sentence(engine: EngineClient, store: ImageStore) -> None:
    request = ask(store, png((1, 2, 3)), no_cache=True)
    ((_sha, path),) = request.image_files
    Path(path).write_bytes(png((3, 2, 1)))
    fin = engine.generate(request).wait()
    assert fin.status == "error" and fin.error_kind == "image"
    assert "changed on disk" in (fin.error or "")


def test_an_image_the_request_did_not_carry_is_refused(engine: EngineClient, store: ImageStore) -> None:
    request = ask(store, png((9, 9, 9)), no_cache=True).but(image_files={})
    fin = engine.generate(request).wait()
    assert fin.status == "error" and fin.error_kind == "image" and "was not sent with it" in (fin.error or "")


def test_a_model_without_its_projector_says_it_cannot_see(vision_pair: tuple[Path, Path], store: ImageStore) -> None:
    text, _ = vision_pair
    with EngineClient() as client:
        assert not client.load(text, n_ctx=256, n_threads=T).vision
        fin = client.generate(ask(store, png((5, 5, 5)))).wait()
    assert fin.status == "error" and fin.error_kind == "image" and "cannot see images" in (fin.error or "")


def test_more_images_than_the_engine_keeps_are_all_read_in_order(engine: EngineClient, store: ImageStore) -> None:
    from app.engine.host.image_prompt import KEEP_IMAGES

    parts: list[dict] = []
    files: dict[str, str] = {}
    for i in range(KEEP_IMAGES + 3):
        data = png((i * 20, 255 - i * 20, 7), (20 + i, 20))
        image = check_image(data)
        files[image.sha256] = str(store.put(data, image.sha256))
        parts += [
            {"type": "text", "text": f"picture {i}: "},
            {"type": "image", "sha256": image.sha256, "mime": image.mime, "width": image.width, "height": image.height},
        ]
    messages = [{"role": "user", "content": parts}]
    request = ReplyRequest.chat(
        messages, sampling=Sampling(max_tokens=2, temperature=0.0), ignore_eos=True, conversation_id="many", image_files=files
    )
    first = engine.generate(request).wait()
    assert first.failure is None, first.error
    assert first.metrics["images"] == KEEP_IMAGES + 3 and first.metrics["image_tokens"] == N_IMAGE_TOKENS * (KEEP_IMAGES + 3)
    # Again, after the engine let the first images go: the cache still holds every one of them.
    again = engine.generate(request).wait()
    assert again.failure is None and again.metrics["image_tokens"] == 0
    assert again.metrics["cached_tokens"] >= again.metrics["prompt_tokens"] - 1


def test_image_places_and_the_cut_that_never_splits_an_image() -> None:
    from app.engine.host.image_prompt import ImagePlace, image_tokens, snap

    a, b = "a" * 64, "b" * 64
    assert image_tokens(a, 4) != image_tokens(b, 4) and all(t < 0 for t in image_tokens(a, 4))
    assert len(set(image_tokens(a, 16))) == 16
    places = [ImagePlace(5, 16, a), ImagePlace(30, 16, b)]
    assert [snap(places, n) for n in (0, 5, 6, 20, 21, 22, 31, 46, 50)] == [0, 5, 5, 5, 21, 22, 30, 46, 50]


def test_a_conversation_with_an_image_continues_from_its_saved_state_after_a_restart(
    vision_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    text, mmproj = vision_pair
    store = ImageStore(tmp_path / "images")
    states = tmp_path / "states"
    first_ask = ask(store, png((30, 160, 90)), "What is in this picture? " + "describe every part of it " * 6, conversation="kept")
    with EngineClient(state_dir=states, state_disk_mb=64) as client:
        client.load(text, n_ctx=512, n_threads=T, mmproj_path=mmproj)
        first = client.generate(first_ask.but(sampling=Sampling(max_tokens=8, temperature=0.0), speculative="off")).wait()
        assert first.failure is None, first.error
    assert list(states.rglob("*")), "the conversation's state was saved"
    messages = [*first_ask.message_dicts(), {"role": "assistant", "content": first.text}, {"role": "user", "content": "and the colours?"}]
    with EngineClient(state_dir=states, state_disk_mb=64) as client:  # a new host: nothing in memory
        client.load(text, n_ctx=512, n_threads=T, mmproj_path=mmproj)
        later = client.generate(first_ask.but(messages=messages, speculative="off")).wait()
    assert later.failure is None, later.error
    m = later.metrics
    assert m["state_cache"]["disk_hit"] is True, m["state_cache"]
    assert m["image_tokens"] == 0 and m["cached_tokens"] > N_IMAGE_TOKENS  # the image came back with the saved cells


def test_the_engines_image_tokens_are_what_libmtmd_gives_for_the_same_image(
    engine: EngineClient, store: ImageStore, vision_pair: tuple[Path, Path]
) -> None:
    from llama_cpp import Llama

    from app.engine.host.vision import Image as Pixels
    from app.engine.host.vision import ImagePiece, Projector

    data = png((90, 60, 30), (300, 200))
    checked = check_image(data)
    text, mmproj = vision_pair
    llm = Llama(str(text), n_ctx=256, verbose=False)
    try:
        pixels = Pixels(checked.width, checked.height, checked.rgb, checked.sha256)
        with (
            Projector.open(llm.model, str(mmproj), n_threads=1, use_gpu=False) as projector,
            projector.tokenize([pixels], add_special=False) as prompt,
        ):
            own = sum(p.n_tokens for p in prompt.pieces if isinstance(p, ImagePiece))
    finally:
        llm.close()
    fin = engine.generate(ask(store, data, no_cache=True)).wait()
    assert fin.failure is None and fin.metrics["image_tokens"] == own > 0
