"""Unlabelled text for masked-language-model pretraining: the train split's texts plus any extra texts the
user names, never a text of a split that is evaluated (validation, test), cut into windows of `max_length`.

`PretrainingData` serves `{"input_ids", "attention_mask", "labels"}` batches like `ReviewDataModule` (labels
are 0: pretraining reads none), with a held-out share of the texts as its "validation" split.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, RandomSampler

from ..errors import DataError
from . import cache
from .batches import EncodedDataset, collate
from .datamodule import ReviewDataModule
from .sampler import BucketBatchSampler
from .sources import load_texts
from .tokenizer import CLS_ID, PAD_ID, cut_at

log = logging.getLogger(__name__)


def normalized(text: str) -> str:
    """The form in which two texts count as the same: lowercased, whitespace collapsed."""
    return " ".join(text.lower().split())


def drop_evaluated(texts: Sequence[str], evaluated: Iterable[str], what: str) -> list[str]:
    """`texts` without any text that equals (normalized) one of `evaluated`; logs how many went."""
    banned = {normalized(t) for t in evaluated}
    kept = [t for t in texts if normalized(t) not in banned]
    if len(kept) < len(texts):
        log.warning(
            "pretraining: dropped %d of %d %s that are texts of an evaluated split",
            len(texts) - len(kept),
            len(texts),
            what,
        )
    return kept


def windows(rows: Sequence[np.ndarray], max_length: int) -> list[np.ndarray]:
    """Each row of ids ([CLS] first) cut into windows of at most `max_length` ids, each starting with [CLS]:
    a long review is read whole, in pieces, not truncated."""
    out: list[np.ndarray] = []
    step = max_length - 1
    for row in rows:
        body = row[1:]
        for start in range(0, max(len(body), 1), step):
            out.append(np.concatenate([[CLS_ID], body[start : start + step]]).astype(np.int32))
    return out


class PretrainingData(L.LightningDataModule):
    """The pretraining corpus of a recipe: `data`'s train texts (after its validation is carved) plus the train
    texts of each `extra_texts` source, minus every text of `data`'s validation and test splits; the tokenizer
    is trained on that corpus (`[MASK]` among its special tokens). `holdout` of the texts (at most
    `max_holdout`), drawn with `split_seed`, are held out to measure the MLM on."""

    def __init__(
        self,
        data: ReviewDataModule,
        extra_texts: Sequence[str] = (),
        text_column: str = "text",
        max_length: int = 128,
        batch_size: int = 64,
        holdout: float = 0.02,
        max_holdout: int = 1000,
        bucket_by_length: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0 < holdout < 1:
            raise DataError(f"pretrain.holdout={holdout!r} must be in (0, 1): e.g. pretrain.holdout=0.02")
        self.data, self.extra_texts, self.text_column = data, list(extra_texts), text_column
        self.max_length, self.batch_size, self.bucket_by_length = max_length, batch_size, bucket_by_length
        self.holdout, self.max_holdout, self.seed = holdout, max_holdout, seed
        self.texts: dict[str, list[str]] = {}
        self.splits: dict[str, EncodedDataset] = {}
        self.tokenizer = None
        self.label_names = None  # pretraining reads no labels

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def corpus(self) -> dict[str, list[str]]:
        """{"train": texts the MLM trains on, "validation": held-out texts, "evaluated": what must never be
        read}; loaded once."""
        if self.texts:
            return self.texts
        raw = self.data.load()
        evaluated = [t for split in ("validation", "test") if split in raw for t in raw[split]["text"]]
        texts = list(raw["train"]["text"])
        for source in self.extra_texts:
            extra = drop_evaluated(load_texts(source, self.text_column), evaluated, f"texts of {source}")
            log.info("pretraining: %d texts from %s", len(extra), source)
            texts += extra
        g = torch.Generator().manual_seed(self.data.split_seed)
        perm = torch.randperm(len(texts), generator=g).tolist()
        n_out = max(1, min(self.max_holdout, int(len(texts) * self.holdout)))
        self.texts = {
            "train": [texts[i] for i in sorted(perm[n_out:])],
            "validation": [texts[i] for i in sorted(perm[:n_out])],
            "evaluated": evaluated,
        }
        return self.texts

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        texts = self.corpus()
        corpus = texts["train"] + texts["validation"]
        d = self.data
        if self.tokenizer is None:
            self.tokenizer = cache.trained_tokenizer(
                d.cache_dir, corpus, d.vocab_size_target, d.min_frequency, d.scrub_pii
            )
        for split in ("train", "validation"):
            rows = windows(self._encode(texts[split], split), self.max_length)
            self.splits[split] = EncodedDataset(rows, [0] * len(rows))
        cut_at(self.tokenizer, d.max_length)  # the classifier reads at most data.max_length tokens
        sizes = {s: (len(texts[s]), len(self.splits[s])) for s in ("train", "validation")}
        log.info("pretraining corpus (texts, windows of %d): %s, vocab %d", self.max_length, sizes, self.vocab_size)

    def _encode(self, texts: list[str], split: str) -> list[np.ndarray]:
        whole = 1_000_000  # no truncation: `windows` cuts long texts
        return cache.encoded(self.data.cache_dir, self.tokenizer, texts, whole, f"tokenizing pretraining {split}")[0]

    def train_dataloader(self) -> DataLoader:
        data = self.splits["train"]
        if self.bucket_by_length:
            sampler = BucketBatchSampler(RandomSampler(data), self.batch_size, lengths=data.lengths, seed=self.seed)
            return DataLoader(data, batch_sampler=sampler, collate_fn=collate)
        return DataLoader(data, batch_size=self.batch_size, shuffle=True, collate_fn=collate)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["validation"], batch_size=self.batch_size, collate_fn=collate)
