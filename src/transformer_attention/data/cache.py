"""A disk cache of trained tokenizers and tokenized splits, so a second run on the same data skips both. A key
hashes all the result depends on (the texts themselves, the settings, the tokenizer's JSON): a change is a new key,
never a stale hit. Files are written atomically; one that does not read back (truncated, emptied, overwritten) is
moved aside (`set_aside`) and rebuilt, never a traceback."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np
from tokenizers import Tokenizer

from ..files import atomic_write
from .tokenizer import SPECIAL_TOKENS, encode, train_tokenizer

log = logging.getLogger(__name__)

CACHE_VERSION = 2  # bump when tokenization code changes what the same inputs produce

T = TypeVar("T")


def fingerprint(*parts: object, texts: Sequence[str] = ()) -> str:
    """A hex digest of `parts` (by repr) and every text in `texts`, in order."""
    h = hashlib.sha256(repr((CACHE_VERSION, *parts)).encode())
    for text in texts:
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def set_aside(path: Path, reason: str, seen: os.stat_result | None = None) -> Path:
    """Move the unreadable cache file `path` to `<name>.corrupt-<time>` (kept for a look), said in one warning
    line, for the caller to rebuild; `seen`: the file as read (one replaced since by another run is left alone)."""
    aside = path.with_name(f"{path.name}.corrupt-{datetime.now().strftime('%Y-%m-%d_%H-%M-%S-%f')}")
    try:
        now = path.stat()
        if seen is not None and (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            log.info("cache: %s could not be read (%s), but another run has rebuilt it since", path, reason)
            return path
        path.rename(aside)
    except FileNotFoundError:  # another run moved it aside first
        return path
    except OSError as err:
        log.warning("cache: %s cannot be read (%s) nor moved aside (%s); rebuilding it", path, reason, err)
        return path
    log.warning("cache: %s cannot be read (%s); moved it aside to %s and rebuilding it", path, reason, aside.name)
    return aside


def failure(err: BaseException, size: int, path: Path) -> str:
    """Why the file `path` of `size` bytes failed to read, in one short line (the path, which the warning names,
    shortened to its name)."""
    text = " ".join(str(err).split()).replace(str(path), path.name)
    text = text[:240] + "..." if len(text) > 240 else text
    return f"{size} bytes, {type(err).__name__}: {text}" if text else f"{size} bytes, {type(err).__name__}"


def read_cached(path: Path, parse: Callable[[BinaryIO], T]) -> T | None:
    """`parse(file)` of the cache file `path`; None when there is none, or when `parse` fails: then it is set
    aside."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        seen = os.fstat(f.fileno())
        try:
            return parse(f)
        except Exception as err:  # whatever a damaged file makes the parser raise: rebuilt, never fatal
            reason = failure(err, seen.st_size, path)
    set_aside(path, reason, seen)
    return None


def pack(rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids as one flat int32 array and the (N + 1,) offsets of row starts."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    return flat, offsets


def _unpack(f: BinaryIO, rows: int) -> list[np.ndarray]:
    """The `rows` rows of ids of a packed file, as views; a ValueError when they are not that."""
    with np.load(f, allow_pickle=False) as z:
        flat, offsets = z["flat"], z["offsets"]
    integers = all(np.issubdtype(a.dtype, np.integer) for a in (flat, offsets))
    if flat.ndim != 1 or offsets.ndim != 1 or not len(offsets) or not integers:
        raise ValueError(f"arrays {flat.dtype}{flat.shape} and {offsets.dtype}{offsets.shape} are not packed rows")
    if offsets[0] != 0 or offsets[-1] != len(flat) or (np.diff(offsets) < 0).any():
        raise ValueError(f"offsets {offsets[0]}..{offsets[-1]} do not split {len(flat)} ids into rows")
    if len(offsets) - 1 != rows:
        raise ValueError(f"{len(offsets) - 1} rows for {rows} texts")
    return [flat[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]


def _tokenizer(f: BinaryIO) -> Tokenizer:
    tok = Tokenizer.from_str(f.read().decode("utf-8"))
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    if ids != list(range(len(SPECIAL_TOKENS))):
        raise ValueError(f"special tokens {SPECIAL_TOKENS} have ids {ids}, not 0..{len(SPECIAL_TOKENS) - 1}")
    return tok


def trained_tokenizer(cache_dir: str | Path | None, texts: Sequence[str], **settings: Any) -> Tokenizer:
    """`train_tokenizer(texts, **settings)`, from the cache when trained before (and `cache_dir` is set)."""
    path = Path(cache_dir or ".") / f"tokenizer-{fingerprint('tokenizer', *settings.values(), texts=texts)}.json"
    tok = read_cached(path, _tokenizer) if cache_dir else None
    if tok is None:
        tok = train_tokenizer(texts, **settings)
        if cache_dir:
            atomic_write(path, tok.to_str())
    return tok


def encoded(
    cache_dir: str | Path | None, tok: Tokenizer, texts: Sequence[str], max_length: int, desc: str
) -> tuple[list[np.ndarray], bool]:
    """`encode(tok, texts, max_length)`, from the cache when done before; and whether it came from there."""
    path = Path(cache_dir or ".") / f"ids-{fingerprint('ids', tok.to_str(), max_length, texts=texts)}.npz"
    ids = read_cached(path, lambda f: _unpack(f, len(texts))) if cache_dir else None
    if ids is not None:
        return ids, True
    ids = encode(tok, texts, max_length, desc=desc)
    if cache_dir:
        flat, offsets = pack(ids)
        atomic_write(path, lambda f: np.savez(f, flat=flat, offsets=offsets))
    return ids, False
