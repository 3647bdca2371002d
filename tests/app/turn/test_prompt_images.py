"""The prompt of a window or `cove chat` turn carries each user message's images: a regenerated
reply resends them, read back from the history."""

from __future__ import annotations

import io

from PIL import Image

from app.images.checks import check_image
from app.turn.prompt import build_prompt_messages


def test_a_message_with_images_is_sent_with_them_and_a_regenerated_reply_resends_them(cove_core) -> None:
    out = io.BytesIO()
    Image.new("RGB", (6, 4), (9, 9, 9)).save(out, "PNG")
    picture = check_image(out.getvalue())
    history = cove_core.history
    conversation = history.create_conversation(model="m")
    history.images.put(out.getvalue(), picture.sha256)
    asked = history.add_user_message(conversation.id, "what is it?", images=[picture])
    history.add_user_message(conversation.id, "and now?")
    part = {"type": "image", "sha256": picture.sha256, "mime": "image/png", "width": 6, "height": 4}
    first = build_prompt_messages(history, conversation.id, "sys", upto=asked.id)  # as a regenerated reply's prompt
    assert first == [{"role": "system", "content": "sys"}, {"role": "user", "content": [part, {"type": "text", "text": "what is it?"}]}]
    whole = build_prompt_messages(history, conversation.id, None)
    assert whole[-1] == {"role": "user", "content": "and now?"} and whole[0]["content"][0] == part
