"""How much content one PDF page makes its reader unpack and parse, measured with pypdf before
the page is read: the page's own content streams, and the forms (XObjects) it draws, each as
often as it is drawn (a form drawing forms multiplies). PDFium parses a page whole, without a
way to stop it part way; this is what lets a page be refused (or read otherwise) first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pypdf import PageObject
from pypdf.generic import DictionaryObject, StreamObject

# "/Name Do" outside strings and comments is how a page draws an XObject (a form or an image);
# matched on the raw content, a string holding those words counts too, which only makes the
# estimate larger.
_DRAW = re.compile(rb"/([^\s/\[\]()<>{}%]+)\s*Do(?![^\s/\[\]()<>{}%])")
TEXT_OPERATORS = (b"Tj", b"TJ", b"'", b'"', b"Do")  # the operators that can show text (Do: a form that may)
FORM_DEPTH = 12  # forms drawn inside forms deeper than this count as too much work


@dataclass(frozen=True)
class PageWork:
    """One page's content: `content` (its own streams, unpacked), the bytes of the forms it
    draws counted each time they are drawn (`forms`, past `ceiling` once it passed it), and
    whether any of it can show text."""

    data: bytes
    forms: int
    may_show_text: bool

    @property
    def content(self) -> int:
        return len(self.data)


def page_work(page: PageObject, ceiling: int) -> PageWork:
    """`page`'s work; the forms are counted until their total passes `ceiling`. pypdf's errors
    (a damaged page) are left to the caller."""
    contents = page.get_contents()
    data = contents.get_data() if contents is not None else b""
    forms = _forms_drawn(data, page.get("/Resources"), ceiling, FORM_DEPTH, set())
    return PageWork(data=data, forms=forms, may_show_text=any(op in data for op in TEXT_OPERATORS))


def _forms_drawn(data: bytes, resources: object, ceiling: int, depth: int, drawing: set[int]) -> int:
    """The bytes of the forms `data` draws, each time it draws them (with what they draw)."""
    names: dict[bytes, int] = {}
    for match in _DRAW.finditer(data):
        names[match.group(1)] = names.get(match.group(1), 0) + 1
    if not names:
        return 0
    xobjects = _dictionary(_dictionary(resources).get("/XObject"))
    total = 0
    for name, times in names.items():
        form = xobjects.get("/" + name.decode("latin-1"))
        stream = form.get_object() if form is not None else None
        if not isinstance(stream, StreamObject) or stream.get("/Subtype") != "/Form":
            continue  # an image, or a name with nothing behind it
        if depth <= 0 or id(stream) in drawing:
            return ceiling + 1  # drawn too deep, or drawing itself
        inner = stream.get_data()
        drawing.add(id(stream))
        each = len(inner) + _forms_drawn(inner, stream.get("/Resources", resources), ceiling, depth - 1, drawing)
        drawing.discard(id(stream))
        total += each * times
        if total > ceiling:
            return total
    return total


def _dictionary(value: object) -> DictionaryObject:
    value = value.get_object() if hasattr(value, "get_object") else value
    return value if isinstance(value, DictionaryObject) else DictionaryObject()
