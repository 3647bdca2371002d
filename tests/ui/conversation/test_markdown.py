"""Markdown rendering: the elements people use, raw HTML shown as text, nothing live in the output."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFontMetricsF, QTextDocument, QTextTable

from ui.conversation.text.markdown_render import MAX_MARKDOWN_CHARS, Rendered, document_stylesheet, render_markdown, render_plain
from ui.conversation.text.safe_document import SafeTextDocument


def as_document(rendered: Rendered, dark: bool = False) -> SafeTextDocument:
    doc = SafeTextDocument()
    doc.setDefaultStyleSheet(document_stylesheet(dark))
    doc.setHtml(rendered.html)
    doc.setTextWidth(600)
    doc.size()  # lay it out, as painting would
    return doc


def plain(text: str) -> str:
    return as_document(render_markdown(text)).toPlainText()


def tables(doc: QTextDocument) -> list[QTextTable]:
    found: list[QTextTable] = []
    stack = [doc.rootFrame()]
    while stack:
        frame = stack.pop()
        if isinstance(frame, QTextTable):
            found.append(frame)
        stack.extend(frame.childFrames())
    return found


def test_heading_becomes_a_heading_block(qapp: object) -> None:
    doc = as_document(render_markdown("# Title\n\nBody text"))
    block = doc.begin()
    assert block.text() == "Title"
    assert block.blockFormat().headingLevel() == 1
    assert "Body text" in doc.toPlainText()


def test_lists_become_text_lists(qapp: object) -> None:
    doc = as_document(render_markdown("- one\n- two\n\n1. first\n2. second\n"))
    listed = []
    block = doc.begin()
    while block.isValid():
        if block.textList() is not None:
            listed.append(block.text())
        block = block.next()
    assert listed == ["one", "two", "first", "second"]


def test_table_becomes_a_text_table_with_alignment(qapp: object) -> None:
    rendered = render_markdown("| a | b |\n|---|--:|\n| 1 | 2 |\n| 3 | 4 |\n")
    doc = as_document(rendered)
    found = tables(doc)
    assert len(found) == 1
    assert (found[0].rows(), found[0].columns()) == (3, 2)
    assert found[0].cellAt(1, 1).firstCursorPosition().block().text() == "2"
    assert 'align="right"' in rendered.html


def test_quote_and_inline_code(qapp: object) -> None:
    rendered = render_markdown("> quoted words\n\nuse `x = 1` here")
    text = as_document(rendered).toPlainText()
    assert "quoted words" in text
    assert "use x = 1 here" in text
    assert "<code" in rendered.html and "monospace" in rendered.html


def test_fenced_code_is_highlighted_and_copyable(qapp: object) -> None:
    source = 'def greet(name):\n    return "hi " + name  # say hi\n'
    rendered = render_markdown(f"```python\n{source}```\n")
    assert rendered.code_blocks == (source,)
    assert '<span style="color:' in rendered.html  # pygments inline styles
    assert 'href="cove-copy:0"' in rendered.html
    doc = as_document(rendered)
    assert "def greet(name):" in doc.toPlainText()
    assert 'return "hi " + name  # say hi' in doc.toPlainText()


def test_unknown_language_and_plain_fence_are_escaped_not_highlighted(qapp: object) -> None:
    rendered = render_markdown("```nosuchlang\n<b>x</b>\n```\n\n    indented <i>code</i>\n")
    assert rendered.code_blocks == ("<b>x</b>\n", "indented <i>code</i>\n")
    text = as_document(rendered).toPlainText()
    assert "<b>x</b>" in text and "indented <i>code</i>" in text


def test_dark_palette_uses_a_dark_code_style(qapp: object) -> None:
    light = render_markdown("```python\nx = 1\n```")
    dark = render_markdown("```python\nx = 1\n```", palette_dark=True)
    assert light.html != dark.html
    assert "#16181c" in dark.html


def test_raw_html_is_shown_as_text(qapp: object) -> None:
    assert "<b>x</b>" in plain("some <b>x</b> inline")


@pytest.mark.parametrize(
    "hostile",
    [
        "<div>\n\n",
        "<!--\n\n",
        "<script>\n\n",
        "<style>\n\n",
        '<img src="http://127.0.0.1:9/x">\n\n',
        "<table><tr><td>\n\n",
        "<textarea>\n\n",
        "<![CDATA[\n\n",
        '<a href="http://e.com">\n\n',
    ],
)
def test_text_after_raw_html_stays_visible(qapp: object, hostile: str) -> None:
    text = plain(hostile + "hidden? This sentence must stay visible.\n")
    assert "This sentence must stay visible." in text
    assert hostile.strip().split("\n")[0][:5] in text  # the tag itself is shown, literally


def test_images_become_inert_placeholders(qapp: object) -> None:
    rendered = render_markdown("look ![a cat](http://example.com/cat.png?q=secret) here")
    assert "<img" not in rendered.html
    assert rendered.images == ("http://example.com/cat.png?q=secret",)
    assert "[image: a cat — http://example.com/cat.png?q=secret]" in as_document(rendered).toPlainText()


def test_links_point_at_an_index_never_at_the_address(qapp: object) -> None:
    rendered = render_markdown("see [the docs](https://example.com/a?q=1) and <https://auto.example/>")
    assert rendered.links == ("https://example.com/a?q=1", "https://auto.example/")
    assert 'href="cove-link:0"' in rendered.html and 'href="cove-link:1"' in rendered.html
    assert "example.com/a" not in rendered.html
    assert "see the docs and https://auto.example/" in as_document(rendered).toPlainText()


def test_model_cannot_forge_our_own_anchors(qapp: object) -> None:
    rendered = render_markdown("[copy me](cove-copy:0) [me too](cove-link:5)")
    assert rendered.links == ("cove-copy:0", "cove-link:5")
    assert rendered.code_blocks == ()
    assert 'href="cove-copy' not in rendered.html


def test_file_and_script_links_stay_literal_text(qapp: object) -> None:
    rendered = render_markdown("[f](file:///etc/passwd) [j](javascript:alert(1)) ![i](file:///etc/hostname)")
    assert rendered.links == () and rendered.images == ()
    assert "[f](file:///etc/passwd)" in as_document(rendered).toPlainText()


def test_very_long_text_falls_back_to_plain_text(qapp: object) -> None:
    text = "# not a heading\n" + "x" * (MAX_MARKDOWN_CHARS + 10)
    rendered = render_markdown(text)
    assert rendered.plain
    shown = as_document(rendered).toPlainText()
    assert shown.startswith("# not a heading")
    assert "more characters are not shown here" in shown


def test_plain_rendering_escapes_and_keeps_lines(qapp: object) -> None:
    rendered = render_plain("a <b>\nsecond line")
    assert as_document(rendered).toPlainText() == "a <b>\nsecond line"


@pytest.mark.parametrize(
    "nested",
    [
        "".join("  " * i + "- level\n" for i in range(150)),
        "> " * 200 + "deep quote\n",
        "".join("  " * i + "1. level\n" for i in range(60)),
    ],
)
def test_deep_nesting_never_hides_the_text_after_it(qapp: object, nested: str) -> None:
    # markdown-it drops everything after its nesting limit; such text is shown plain instead.
    rendered = render_markdown(nested + "\nend sentence")
    text = as_document(rendered).toPlainText()
    assert "end sentence" in text
    assert text.count("level") == nested.count("level")


def test_moderate_nesting_is_still_markdown(qapp: object) -> None:
    rendered = render_markdown("".join("  " * i + "- level\n" for i in range(5)) + "\n> > quote\n")
    assert not rendered.plain
    assert rendered.html.count("<ul>") == 5


# --- the streaming document ------------------------------------------------------------------

STREAMED = """# Title

Intro with a [link](https://a.example/x) and `code`.

```python
def f():

    return 1
```

- one
- two

| a | b |
|---|---|
| 1 | 2 |

Final words with [another](https://b.example/) ![img](http://x/y.png).
"""


def test_block_boundary_never_cuts_inside_a_fence() -> None:
    from ui.conversation.streaming.stream_document import BlockBoundary

    text = "para\n\n```\ncode\n\nmore code\n```\n\nafter\n"
    finder = BlockBoundary()
    seen = {finder.feed(text[:i]) for i in range(len(text) + 1)}
    assert seen == {0, text.index("```"), text.index("after")}


def test_streamed_document_matches_the_final_one(qapp: object) -> None:
    from ui.conversation.streaming.stream_document import StreamDocument

    clock = [0.0]
    renders: list[int] = []
    stream = StreamDocument(SafeTextDocument(), dark=False, clock=lambda: clock[0], on_render=lambda: renders.append(1))
    for end in range(1, len(STREAMED) + 1, 5):
        clock[0] += 1.0  # every update is due for a markdown render
        assert stream.update(STREAMED[:end])
    clock[0] += 1.0
    stream.update(STREAMED)
    final = render_markdown(STREAMED)
    assert stream.rendered.links == final.links == ("https://a.example/x", "https://b.example/")
    assert stream.rendered.code_blocks == final.code_blocks
    streamed_words = stream.doc.toPlainText().split()
    assert streamed_words == as_document(final).toPlainText().split()
    assert "cove-link:1" in stream.doc.toHtml()
    assert not stream.update("something else")  # not a continuation: the caller starts over


def test_streaming_between_renders_shows_plain_text(qapp: object) -> None:
    from ui.conversation.streaming.stream_document import MIN_INTERVAL_S, StreamDocument

    clock = [0.0]
    renders: list[int] = []
    stream = StreamDocument(SafeTextDocument(), dark=False, clock=lambda: clock[0], on_render=lambda: renders.append(1))
    stream.update("Hello **wor")
    stream.update("Hello **world** and")  # within the interval: shown as it is, after the document
    assert len(renders) == 1
    assert stream.doc.toPlainText() == "Hello **wor" and stream.pending == "ld** and"
    assert stream.shown_text() == "Hello **world** and"
    assert stream.due_in() == pytest.approx(MIN_INTERVAL_S)
    clock[0] += MIN_INTERVAL_S
    stream.update("Hello **world** and more")
    assert len(renders) == 2
    assert stream.doc.toPlainText() == "Hello world and more"
    assert stream.due_in() is None


def test_a_tail_too_long_to_rerender_schedules_no_render(qapp: object) -> None:
    # Regression: a paragraph over MAX_LIVE_TAIL_CHARS made due_in() answer 0 forever, and the
    # view's tail timer spun at ~1 kHz for the rest of the reply.
    from ui.conversation.streaming.stream_document import MAX_LIVE_TAIL_CHARS, MAX_PENDING_CHARS, StreamDocument

    clock = [0.0]
    stream = StreamDocument(SafeTextDocument(), dark=False, clock=lambda: clock[0])
    text = "word " * (MAX_LIVE_TAIL_CHARS // 5 + 10)
    stream.update(text[:10])
    clock[0] += 1.0
    stream.update(text)  # one long paragraph, no block boundary: stays plain text
    assert stream.shown_text().split() == text.split()
    assert len(stream.pending) <= MAX_PENDING_CHARS  # the rest went into the document, once
    assert stream.due_in() is None
    clock[0] += 1.0
    stream.update(text + "\n\nNext paragraph\n")  # a block ended: due again (rendered on this update)
    assert stream.due_in() is None and "Next paragraph" in stream.doc.toPlainText() and not stream.pending


def test_a_streamed_token_marks_only_the_last_lines_changed(qapp: object) -> None:
    from ui.conversation.streaming.stream_document import StreamDocument

    clock = [0.0]
    stream = StreamDocument(SafeTextDocument(), dark=False, clock=lambda: clock[0])
    stream.doc.setTextWidth(300)
    text = "".join(f"line {i} of a longer reply\n\n" for i in range(30))
    stream.update(text)
    line = QFontMetricsF(stream.doc.defaultFont()).lineSpacing()
    first = stream.take_changed_area()
    assert first is not None and first[0] == 0 and first[1] < line  # the first render changed everything
    assert stream.take_changed_area() is None
    stream.update(text + "more")  # within the render interval: pending, drawn after the document
    assert stream.doc.toPlainText().rstrip().endswith("reply") and stream.pending.strip() == "more"
    changed = stream.take_changed_area()
    assert changed is not None and changed[1] >= stream.doc.size().height() - 2.5 * line
    stream.tail()  # drawn
    stream.update(text + "more words")
    x, top, bottom = stream.take_changed_area()
    assert x > 0 and top >= stream.doc.size().height() - 2 * line  # only the end of the last line
    assert stream.height() >= stream.doc.size().height()


@pytest.mark.parametrize(
    ("rendered", "new", "plain"),
    [
        ("Hello wor", "ld and more words", True),  # plain words that continue the rendered line
        ("Para one.\n\nThe keeper", " climbed (slowly), up: 12 steps; then rested!", True),
        ("Hello", " world\nnext", False),  # a newline can start anything
        ("Hello", " **bold**", False),  # inline markdown
        ("Hello", " `code`", False),
        ("Hello", " [link](x)", False),
        ("Hello &amp", "; more", False),  # an entity completed by the new text
        ("Hello _x_", "y", False),  # the character after a delimiter decides what it does
        ("Title\n", "text", False),  # the line starts in the new text
        ("# Tit", "le goes on", False),  # a heading: drawn bigger than plain text
        ("    code", " more", False),  # indented code
        ("1", ". The first", False),  # the line becomes a list item
        ("1. The", " first item", True),  # a list item whose marker is rendered already
        ("-", "--", False),  # a rule, or the line above becomes a heading
        ("| a | b |\n|---|---|\n| c", " d", False),  # a table
        ("```\nco", "de", False),  # a code fence
        ("> quo", "ted", False),
    ],
)
def test_renders_as_plain_only_when_markdown_would_show_the_same(rendered: str, new: str, plain: bool) -> None:
    from ui.conversation.streaming.stream_document import renders_as_plain

    content = rendered + new
    stable = content.rfind("\n\n") + 2 if "\n\n" in rendered else 0
    assert renders_as_plain(content, stable, len(rendered)) is plain
    assert renders_as_plain(rendered, stable, len(rendered)) is False  # nothing new: nothing to show


def test_a_plain_paragraph_streams_without_markdown_renders(qapp: object) -> None:
    from ui.conversation.streaming.stream_document import StreamDocument

    clock = [0.0]
    renders: list[int] = []
    stream = StreamDocument(SafeTextDocument(), dark=False, clock=lambda: clock[0], on_render=lambda: renders.append(1))
    stream.doc.setTextWidth(300)
    text = "**Lighthouses**\n\nThe keeper climbed" + " the narrow stairs while the storm pressed on" * 6
    for end in range(len("**Lighthouses**\n\nThe keeper climbed"), len(text) + 1, 7):
        clock[0] += 1.0  # every update is due for a render
        stream.update(text[:end])
        stream.height()
    stream.update(text)
    assert len(renders) == 1  # the bold title and the paragraph's start; the words after it are plain
    assert stream.due_in() is None  # and nothing is scheduled for them
    assert stream.shown_text().split() == ["Lighthouses"] + text.split()[1:]
    assert stream.height() > 5 * QFontMetricsF(stream.doc.defaultFont()).lineSpacing()
    clock[0] += 1.0
    stream.update(text + " and *then*")  # markdown: rendered
    assert len(renders) == 2 and stream.doc.toPlainText().endswith("and then") and not stream.pending


def test_the_fast_path_takes_only_frames_that_need_no_render(qapp: object) -> None:
    from ui.conversation.streaming.reply import StreamingReply
    from ui.conversation.streaming.stream_document import MIN_INTERVAL_S

    clock = [0.0]
    reply = StreamingReply(SafeTextDocument(), dark=False, clock=lambda: clock[0])
    reply.set_width(300)
    stream = reply.stream
    reply.append("Hello *wor")  # rendered
    first = reply.append("Hello *world")  # the first pending text: the document's tail
    assert reply.quick_frames == 0 and stream.pending == "ld" and stream.tail() is not None
    assert first is not None and first.rects[0][0] > 0  # after the document's last line
    words = reply.append("Hello *world and more")  # plain words after the tail, no render due
    assert reply.quick_frames == 1 and stream.pending == "ld" and reply.text == "Hello *world and more"
    assert words is not None and words.rects and words.due == pytest.approx(MIN_INTERVAL_S)
    clock[0] += MIN_INTERVAL_S
    reply.append("Hello *world and more*")  # a render is due and markdown changed
    assert reply.quick_frames == 1 and stream.doc.toPlainText() == "Hello world and more"
    clock[0] += MIN_INTERVAL_S
    reply.append("Hello *world and more*\n\nThe keeper")  # rendered: a new paragraph
    reply.append("Hello *world and more*\n\nThe keeper climbed")
    clock[0] += MIN_INTERVAL_S
    due = reply.append("Hello *world and more*\n\nThe keeper climbed the stairs")  # due, but plain
    assert reply.quick_frames == 2 and due is not None and due.due is None
    assert stream.doc.toPlainText().endswith("The keeper") and stream.pending == " climbed"
    other = StreamingReply(SafeTextDocument(), dark=False, clock=lambda: clock[0])
    other.append("Para")
    other.append("Para\n\nNext")
    assert other.quick_frames == 0 and other.stream.pending == "\n\nNext"  # no render due yet
    clock[0] += MIN_INTERVAL_S
    other.append("Para\n\nNext words")  # due, and a new paragraph is not plain
    assert other.quick_frames == 0 and not other.stream.pending
    assert reply.append("something else") is None  # not a continuation: the caller starts over


def test_a_soft_line_break_that_turns_hard_repaints_the_word_it_moves(qapp: object) -> None:
    from ui.conversation.streaming.reply import StreamingReply

    reply = StreamingReply(SafeTextDocument(), dark=False, clock=lambda: 0.0)
    reply.set_width(400)
    reply.append("Intro words")  # rendered
    reply.append("Intro words and foo\n1.")  # pending; "1." is no list item yet: a soft break, one line
    moved_word_x = reply.stream.tail().last_word_box()[0]  # where "1." starts
    damage = reply.append("Intro words and foo\n1. x")  # now "1." starts a list item on its own line
    assert damage is not None and damage.rects[0][0] <= moved_word_x + 0.5  # the repaint starts where "1." was
