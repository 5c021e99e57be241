"""Train, save and load a WordPiece tokenizer (Hugging Face `tokenizers`) on the train split.

Special tokens: [PAD] = 0, [UNK] = 1, [CLS] = 2; every encoding starts with [CLS], so the
classifier can pool it. Text is lowercased, accents are stripped and IMDB's `<br />` is a space.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

PAD, UNK, CLS = "[PAD]", "[UNK]", "[CLS]"
SPECIAL_TOKENS = [PAD, UNK, CLS]  # ids 0, 1, 2
PAD_ID, UNK_ID, CLS_ID = 0, 1, 2


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2, extra_special_tokens: list[str] | None = None
) -> Tokenizer:
    """A lowercasing WordPiece tokenizer trained on `texts` (the train split only)."""
    tok = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex(r"<br\s*/?>"), " "),  # IMDB's line breaks
            normalizers.NFD(),
            normalizers.Lowercase(),
            normalizers.StripAccents(),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special = SPECIAL_TOKENS + list(extra_special_tokens or [])
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=special, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single=f"{CLS} $A", special_tokens=[(CLS, CLS_ID)])
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [PAD_ID, UNK_ID, CLS_ID]
    return tok


def save_tokenizer(tok: Tokenizer, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def load_tokenizer(path_or_json: str | Path) -> Tokenizer:
    """Load from a `tokenizer.json` path or from the JSON string itself (as stored in checkpoints)."""
    s = str(path_or_json)
    if s.lstrip().startswith("{"):
        return Tokenizer.from_str(s)
    return Tokenizer.from_file(s)


def encode(tok: Tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """Batch-encode `texts` to id lists of at most `max_length` ids, [CLS] first, no padding."""
    tok.no_padding()
    tok.enable_truncation(max_length)
    return [e.ids for e in tok.encode_batch(texts)]
