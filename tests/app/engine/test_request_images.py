"""Images in the typed request (app/engine/request.py): an ImagePart is an image's identity (its
SHA-256, type and size), read from and written to a message's content list beside its text, and
never its pixels; a message's text is its text parts alone."""

from __future__ import annotations

import json

from app.engine.request import ChatMessage, ImagePart, ReplyRequest, TextPart, cannot_see_images, generate_message, sees_images

IMAGE = {"type": "image", "sha256": "ab" * 32, "mime": "image/png", "width": 3, "height": 2}


def test_an_image_part_is_read_beside_the_text_and_left_out_of_it() -> None:
    m = ChatMessage.from_dict({"role": "user", "content": [{"type": "text", "text": "what is "}, IMAGE, {"type": "text", "text": "this?"}]})
    assert m.parts == (TextPart("what is "), ImagePart("ab" * 32, "image/png", 3, 2), TextPart("this?"))
    assert m.text == "what is this?" and m.images == (ImagePart("ab" * 32, "image/png", 3, 2),)


def test_a_message_with_an_image_writes_its_parts_and_reads_back_the_same() -> None:
    m = ChatMessage.from_dict({"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]})
    written = m.to_dict()
    assert written == {"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}
    assert ChatMessage.from_dict(written) == m
    assert set(json.loads(json.dumps(written))["content"][1]) == {"type", "sha256", "mime", "width", "height"}


def test_a_message_of_text_alone_still_writes_its_text_as_a_string() -> None:
    m = ChatMessage.from_dict({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    assert m.images == () and m.to_dict() == {"role": "user", "content": "ab"}
    assert ChatMessage.from_dict({"role": "user", "content": [{"type": "input_audio"}, {"type": "text", "text": "c"}]}).parts == (
        TextPart("c"),
    )


def test_a_request_lists_its_images_in_order_and_the_pipe_carries_only_their_identity() -> None:
    second = {**IMAGE, "sha256": "cd" * 32, "mime": "image/jpeg"}
    request = ReplyRequest.chat(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [IMAGE, {"type": "text", "text": "and"}, second]},
        ]
    )
    assert [i.sha256 for i in request.images()] == ["ab" * 32, "cd" * 32]
    assert ReplyRequest.chat([{"role": "user", "content": "hi"}]).images() == ()
    sent = generate_message(request, "g1").messages
    assert sent[1]["content"] == [IMAGE, {"type": "text", "text": "and"}, second]


def test_no_model_sees_images_yet_and_the_sentence_names_it() -> None:
    assert sees_images(object()) is False
    assert cannot_see_images("tiny") == "tiny cannot see images: it has no vision projector (mmproj); send text only, or use a vision model"
