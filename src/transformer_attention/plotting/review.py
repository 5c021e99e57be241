"""What a page says of its text: the review under the heading (with its `<br />` line breaks as line breaks), how
much of it the model read, a name for the files its buttons save, and text stripped of the characters that have no
place on a page (control characters, bidirectional overrides: an SVG holding a BEL is no XML)."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

BREAK = re.compile(r"<br\s*/?>", flags=re.IGNORECASE)  # IMDB's line breaks, as its reviews write them
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
UNSAFE = re.compile(r'[\\/:*?"<>|]+')  # what a file name on Windows, macOS or Linux cannot hold
MAX_STEM = 60  # characters of a saved file's name before " - head view.svg"


class Review(NamedTuple):
    """The text a page is of, the tokens the whole of it makes, and the text after the model's cut (or "")."""

    text: str
    text_tokens: int
    unread: str = ""


def plain(text: str) -> str:
    """`text` with `<br />` as a line break and without control characters or bidirectional overrides."""
    return HIDDEN.sub("", BREAK.sub("\n", text))


def file_stem(name: str) -> str:
    """A file name's stem from a page's short name: characters no file system takes made `_`, at most MAX_STEM
    characters (a whole review passes the 255-byte limit of a file name)."""
    stem = " ".join(UNSAFE.sub("_", plain(name)).split())[:MAX_STEM].strip(" ._")
    return stem or "attention"


def review_data(review: Review, read: int) -> dict[str, Any]:
    """What the page shows of `review`, the model having read `read` of its tokens: the text, and the cut."""
    unread = plain(review.unread) if review.text_tokens > read else ""
    return {"text": plain(review.text), "read": read, "total": max(review.text_tokens, read), "unread": unread}


def read_note(read: int, total: int) -> str:
    """`read 64 of 494 tokens: ` for a text the model read `read` of `total` tokens of; empty for one read whole."""
    return f"read {read} of {total} tokens: " if total > read else ""


def cut_review(text: str, read: int, tokenizer: Any) -> Review:
    """`text` as a page shows it, the model (`tokenizer`) having read its first `read` tokens."""
    tokenizer.no_truncation()
    whole = tokenizer.encode(text)
    rest = text[whole.offsets[read - 1][1] :] if len(whole.ids) > read else ""
    return Review(text, len(whole.ids), rest)
