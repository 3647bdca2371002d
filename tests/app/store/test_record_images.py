"""Images in the written record (app/store/record_images.py): an entry names each image by its
SHA-256, type, bytes and size in pixels, never its pixels or base64, for a turn's entry and for an
API request opened and closed; the record still verifies, and after its conversation is erased."""

from __future__ import annotations

import base64
import json
from typing import Any

from app.engine.request import ImagePart
from app.store.message_images import request_content
from app.store.record_images import LEFT_OUT
from app.store.record_requests import close_request, open_request
from app.store.request_log import RequestLog
from tests.app.store.image_helpers import keep, picture


def _append(log: RequestLog, messages: list[dict[str, Any]], conversation_id: str | None = None) -> int:
    return log.append(
        client="this window",
        remote="",
        endpoint="chat",
        model_name="tiny-vision",
        model_sha256="cd" * 32,
        quant="F16",
        params={},
        messages=messages,
        reply="a chart of sales",
        status="complete",
        usage={},
        timings={},
        conversation_id=conversation_id,
    )


def _entry_messages(log: RequestLog, seq: int) -> tuple[str, list[dict[str, Any]]]:
    row = next(e for e in log.entries() if e["seq"] == seq)
    return row["messages"], json.loads(row["messages"])


def test_a_turns_entry_names_each_image_by_identity(cove_core) -> None:
    history, store = cove_core.history, cove_core.history.images
    data = picture((10, 120, 200), (32, 24))
    image = keep(store, data)
    conversation = history.create_conversation()
    user = history.add_user_message(conversation.id, "What does this chart show?", images=[image])
    sent = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": request_content(user)}]

    log = RequestLog(cove_core.db)
    seq = _append(log, sent, conversation.id)

    text, messages = _entry_messages(log, seq)
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "image", "sha256": image.sha256, "mime": "image/png", "width": 32, "height": 24, "bytes": len(data)},
                {"type": "text", "text": "What does this chart show?"},
            ],
        },
    ]
    assert base64.b64encode(data).decode()[:40] not in text
    assert log.verify().intact


def test_an_api_requests_open_and_close_entries_name_images_and_never_their_data(cove_core) -> None:
    data = picture((200, 10, 10), (20, 10))
    encoded = base64.b64encode(data).decode()
    from app.images.checks import check_image

    checked = check_image(data)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe these."},
                {**ImagePart(checked.sha256, checked.mime, 20, 10).to_dict(), "bytes": checked.size},  # as the API's reader gives it
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},  # as a client wrote it
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
            ],
        }
    ]
    log = RequestLog(cove_core.db)
    opened = open_request(
        log,
        client="scripts",
        remote="127.0.0.1",
        endpoint="/v1/chat/completions",
        model_name="tiny-vision",
        model_sha256="cd" * 32,
        quant="F16",
        params={},
        messages=messages,
    )
    closed = close_request(log, opened, reply="two red boxes", status="complete", usage={}, timings={})

    text, recorded = _entry_messages(log, opened.seq)
    assert encoded[:40] not in text and "base64," not in text
    assert recorded[0]["content"] == [
        {"type": "text", "text": "Describe these."},
        {"type": "image", "sha256": checked.sha256, "mime": "image/png", "width": 20, "height": 10, "bytes": checked.size},
        {"type": "image_url", "left_out": LEFT_OUT},
        {"type": "image", "left_out": LEFT_OUT},
    ]
    assert closed == opened.seq + 1
    assert log.verify().intact


def test_an_image_nothing_knows_the_size_of_is_named_with_bytes_unknown(cove_core) -> None:
    log = RequestLog(cove_core.db)
    part = ImagePart("e" * 64, "image/webp", 640, 480).to_dict()
    seq = _append(log, [{"role": "user", "content": [part, {"type": "text", "text": "hi"}]}])
    _, recorded = _entry_messages(log, seq)
    assert recorded[0]["content"][0] == {
        "type": "image",
        "sha256": "e" * 64,
        "mime": "image/webp",
        "width": 640,
        "height": 480,
        "bytes": None,
    }
    assert log.verify().intact


def test_text_only_messages_are_recorded_exactly_as_sent(cove_core) -> None:
    log = RequestLog(cove_core.db)
    sent = [{"role": "user", "content": "plain"}, {"role": "assistant", "content": [{"type": "text", "text": "parts"}]}]
    seq = _append(log, sent)
    assert _entry_messages(log, seq)[1] == sent


def test_deleting_a_conversation_with_images_leaves_a_record_that_verifies(cove_core) -> None:
    history = cove_core.history
    image = keep(history.images, picture((7, 7, 7)))
    conversation = history.create_conversation()
    user = history.add_user_message(conversation.id, "look", images=[image])
    log = RequestLog(cove_core.db)
    seq = _append(log, [{"role": "user", "content": request_content(user)}], conversation.id)
    history.delete_conversation(conversation.id)
    verdict = log.verify()
    assert verdict.intact and verdict.erased == (seq,)
    assert history.images.path(image.sha256) is None
