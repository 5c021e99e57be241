"""Taking words out of a text, for leave-one-out and the ERASER scores: replace them by [MASK] (the text keeps
its length and every other word its position) or delete them. Position 0, the [CLS] the classifier may pool,
always stays; a text's words are its other positions."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ..data.tokenizer import MASK

REMOVAL_PHRASES = {"mask": "replaced by [MASK]", "delete": "deleted"}  # how each kind is said in reports


def removal_kind(removal: str, vocab: Collection[str]) -> str:
    """`removal` (one of settings.REMOVAL_CHOICES, which AnalysisConfig checks) for a tokenizer with the tokens
    `vocab`: auto is "mask" when the tokenizer has [MASK], else "delete"; "mask" without [MASK] is a ValueError."""
    if removal == "auto":
        return "mask" if MASK in vocab else "delete"
    if removal == "mask" and MASK not in vocab:
        raise ValueError("removal=mask but the tokenizer has no [MASK] token: use removal=delete (or auto)")
    return removal


def replacement(removal: str, tokenizer: Any) -> tuple[str, int | None]:
    """How words of `tokenizer`'s texts are removed: `removal_kind`, and the id that replaces them ([MASK]'s), or
    None when they are deleted."""
    kind = removal_kind(removal, tokenizer.get_vocab())
    return kind, tokenizer.token_to_id(MASK) if kind == "mask" else None


def without(row: Sequence[int], positions: Collection[int], mask_id: int | None) -> list[int]:
    """`row` with the tokens at `positions` replaced by `mask_id`, or deleted when `mask_id` is None."""
    if mask_id is None:
        return [int(t) for i, t in enumerate(row) if i not in positions]
    return [mask_id if i in positions else int(t) for i, t in enumerate(row)]


def keeping(row: Sequence[int], positions: Collection[int], mask_id: int | None) -> list[int]:
    """`row` with only [CLS] (position 0) and the tokens at `positions`: every other word removed (`without`)."""
    return without(row, set(range(1, len(row))) - set(positions), mask_id)
