"""A lowercasing WordPiece tokenizer (`tokenizers`) trained on the train split: special tokens [PAD] = 0, [UNK] =
1, [CLS] = 2 (every encoding starts with it, for the pooling), [MASK] = 3 (for pretraining); with `scrub_pii` its
normalizer replaces PII by placeholder tokens, so a saved tokenizer scrubs texts at predict time too."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ..files import atomic_write
from .pii import PII_PATTERNS
from .progress import progress

PAD, UNK, CLS, MASK = "[PAD]", "[UNK]", "[CLS]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, CLS, MASK]  # ids 0, 1, 2, 3
PAD_ID, UNK_ID, CLS_ID, MASK_ID = 0, 1, 2, 3
FIRST_WORD_ID = len(SPECIAL_TOKENS)  # ids below are no words: never masked, drawn or given a word vector
PROGRESS_MIN_TEXTS = 10_000  # show a progress bar when encoding at least this many texts
ENCODE_CHUNK = 2_000


def train_tokenizer(
    texts: Sequence[str], vocab_size: int = 8000, min_frequency: int = 2, scrub_pii: bool = False
) -> Tokenizer:
    """A tokenizer trained on `texts` (the train split only)."""
    tok = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
    pii = [normalizers.Replace(Regex(pattern), token) for token, pattern in PII_PATTERNS.values()] if scrub_pii else []
    # PII placeholders are put in before lowercasing, so "[EMAIL]" normalizes to the added token's own form
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex(r"<br\s*/?>"), " "),  # IMDB's line breaks
            *pii,
            normalizers.NFD(),
            normalizers.Lowercase(),
            normalizers.StripAccents(),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special: list[str | AddedToken] = list(SPECIAL_TOKENS)
    if scrub_pii:  # normalized=True: matched after normalization, so never split into "[", "email", "]"
        special += [AddedToken(token, special=True, normalized=True) for token, _ in PII_PATTERNS.values()]
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special + _continuing_pieces(texts, tok.normalizer),
        show_progress=len(texts) >= PROGRESS_MIN_TEXTS,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    trained, tok = tok, Tokenizer(tok.model)  # with only `special` as special tokens: the "##c" pieces are words
    tok.normalizer, tok.pre_tokenizer, tok.decoder = trained.normalizer, trained.pre_tokenizer, trained.decoder
    tok.add_special_tokens(special)
    tok.post_processor = processors.TemplateProcessing(single=f"{CLS} $A", special_tokens=[(CLS, CLS_ID)])
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [PAD_ID, UNK_ID, CLS_ID, MASK_ID]
    return tok


def _continuing_pieces(texts: Sequence[str], normalizer: normalizers.Normalizer) -> list[str]:
    """Every "##c" piece the trainer could make, sorted. The trainer numbers these pieces in hash-map
    order and breaks merge-count ties by id, so the same texts gave different vocabularies from run
    to run (huggingface/tokenizers#1794); given up front (as special tokens) their ids are fixed."""
    chars: set[str] = set()
    for text in texts:
        chars.update(normalizer.normalize_str(text))
    return [f"##{c}" for c in sorted(chars) if not c.isspace()]


def save_tokenizer(tok: Tokenizer, path: str | Path) -> Path:
    """Write `tokenizer.json` atomically (other DDP ranks may be waiting to read it)."""
    return atomic_write(path, tok.to_str(pretty=True))


def cut_at(tok: Tokenizer, max_length: int) -> Tokenizer:
    """Make `tok` truncate to `max_length` ids and pad nothing: the tokenizer a run saves cuts texts as it did."""
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def ready(tok: Tokenizer | None) -> Tokenizer:
    """`tok`, the tokenizer a datamodule's `setup()` trains or loads; a RuntimeError saying so before it has."""
    if tok is None:
        raise RuntimeError("the data has no tokenizer yet: call its setup() first")
    return tok


def load_tokenizer(path_or_json: str | Path) -> Tokenizer:
    """Load from a `tokenizer.json` path or from the JSON string itself (as stored in checkpoints)."""
    s = str(path_or_json)
    if s.lstrip().startswith("{"):
        return Tokenizer.from_str(s)
    return Tokenizer.from_file(s)


# a repeated group that is one repeated atom, `(a+)+`, `(?:\w*)*`, `([ab]+){2,}`: on a long run of the atom that then
# fails to match, a backtracking engine (Oniguruma, which `tokenizers` uses) tries exponentially many splits
NESTED_REPEAT = re.compile(r"\((?:\?:)?(?:\\.|\[(?:\\.|[^\]\\])*\]|[^()\\|])[+*]\)(?:[+*]|\{\d+,\d*\})")


def risky_patterns(tokenizer_json: str) -> list[str]:
    """The regular expressions of a saved tokenizer (its normalizer's and pre-tokenizer's) with a repetition nested
    in a repetition, which can make the tokenizer give up (a panic) or take exponential time on some texts."""
    return [p for p in _patterns(json.loads(tokenizer_json)) if NESTED_REPEAT.search(p)]


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("Regex"), str):
            yield node["Regex"]
        for value in node.values():
            yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


def encode(tok: Tokenizer, texts: Sequence[str], max_length: int, desc: str = "tokenizing") -> list[np.ndarray]:
    """`texts` as int32 id arrays of at most `max_length` ids, [CLS] first; in chunks, for the progress bar."""
    cut_at(tok, max_length)
    ids: list[np.ndarray] = []
    with progress(len(texts), desc, "text", show=len(texts) >= PROGRESS_MIN_TEXTS) as bar:
        for start in range(0, len(texts), ENCODE_CHUNK):
            chunk = list(texts[start : start + ENCODE_CHUNK])
            ids.extend(np.asarray(e.ids, dtype=np.int32) for e in tok.encode_batch(chunk))
            bar.update(len(chunk))
    return ids
