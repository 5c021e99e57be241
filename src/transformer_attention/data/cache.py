"""A disk cache for trained tokenizers and tokenized splits, so a second run on the same data skips both.

Keys hash what the result depends on: the texts themselves (after PII scrubbing), and the tokenizer
settings or the tokenizer's own JSON and `max_length`. A change to any of them is a new key, never a stale
hit. Files are written atomically (`files.atomic_write`), so runs sharing a cache never read half a file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ..files import atomic_write
from .tokenizer import encode, train_tokenizer

CACHE_VERSION = 2  # bump when tokenization code changes what the same inputs produce


def fingerprint(*parts: object, texts: Sequence[str] = ()) -> str:
    """A hex digest of `parts` (by repr) and every text in `texts`, in order."""
    h = hashlib.sha256(repr((CACHE_VERSION, *parts)).encode())
    for text in texts:
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def pack(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids as one flat int32 array and the (N + 1,) offsets of row starts."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    return flat, offsets


def unpack(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """The rows of a packed array, as views."""
    return [flat[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]


def load_ids(cache_dir: str | Path, key: str) -> list[np.ndarray] | None:
    path = Path(cache_dir) / f"ids-{key}.npz"
    if not path.exists():
        return None
    with np.load(path) as z:
        return unpack(z["flat"], z["offsets"])


def save_ids(cache_dir: str | Path, key: str, rows: Sequence[np.ndarray]) -> Path:
    path = Path(cache_dir) / f"ids-{key}.npz"
    flat, offsets = pack(rows)
    return atomic_write(path, lambda f: np.savez(f, flat=flat, offsets=offsets))


def load_tokenizer_cached(cache_dir: str | Path, key: str) -> Tokenizer | None:
    path = Path(cache_dir) / f"tokenizer-{key}.json"
    return Tokenizer.from_file(str(path)) if path.exists() else None


def save_tokenizer_cached(cache_dir: str | Path, key: str, tok: Tokenizer) -> Path:
    path = Path(cache_dir) / f"tokenizer-{key}.json"
    return atomic_write(path, tok.to_str())


def trained_tokenizer(
    cache_dir: str | Path | None, texts: Sequence[str], vocab_size: int, min_frequency: int, scrub_pii: bool
) -> Tokenizer:
    """The tokenizer `train_tokenizer` makes of `texts` with these settings: from the cache when it was
    trained before (`cache_dir` None: always trained), else trained and stored."""
    key = fingerprint("tokenizer", vocab_size, min_frequency, scrub_pii, texts=texts)
    tok = load_tokenizer_cached(cache_dir, key) if cache_dir else None
    if tok is None:
        tok = train_tokenizer(texts, vocab_size, min_frequency, scrub_pii=scrub_pii)
        if cache_dir:
            save_tokenizer_cached(cache_dir, key, tok)
    return tok


def encoded(
    cache_dir: str | Path | None, tok: Tokenizer, texts: Sequence[str], max_length: int, desc: str
) -> tuple[list[np.ndarray], bool]:
    """`encode(tok, texts, max_length)`, from the cache when done before; and whether it came from there."""
    key = fingerprint("ids", tok.to_str(), max_length, texts=texts)
    ids = load_ids(cache_dir, key) if cache_dir else None
    if ids is not None:
        return ids, True
    ids = encode(tok, texts, max_length, desc=desc)
    if cache_dir:
        save_ids(cache_dir, key, ids)
    return ids, False
