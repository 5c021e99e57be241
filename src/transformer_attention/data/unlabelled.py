"""Unlabelled text for pretraining: the train split's texts plus the extra texts the user names, never a text of an
evaluated split, served in windows of `max_length` as `ReviewDataModule`'s batches (labels 0: none is read)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, RandomSampler

from ..errors import DataError
from . import cache
from .batches import EncodedDataset, collate
from .datamodule import ReviewDataModule
from .sampler import BucketBatchSampler
from .sources import FORMATS, load_source, our_splits
from .tokenizer import CLS_ID, PAD_ID, cut_at, ready

log = logging.getLogger(__name__)

WHOLE_TEXT = 1_000_000  # a max_length no text reaches: pretraining reads every text whole
MAX_HOLDOUT = 1000  # held-out texts at most: enough to compare epochs on


class HubUnavailable(DataError):
    """An extra text named by its hub name that could not be loaded (offline, or no such dataset)."""


def normalized(text: str) -> str:
    """The form in which two texts count as the same: lowercased, whitespace collapsed."""
    return " ".join(text.lower().split())


def drop_evaluated(texts: Sequence[str], evaluated: Iterable[str], what: str) -> list[str]:
    """`texts` without any text that equals (normalized) one of `evaluated`; logs how many went."""
    banned = {normalized(t) for t in evaluated}
    kept = [t for t in texts if normalized(t) not in banned]
    n = len(texts)
    if dropped := n - len(kept):
        log.warning("pretraining: dropped %d of %d %s that are texts of an evaluated split", dropped, n, what)
    return kept


def load_texts(source: str, text_column: str = "text") -> list[str]:
    """The texts of one split of `source`, a local file or folder (as `data.path` takes) or a hub name: its
    train split, or the split named after a colon (`imdb:unsupervised`; in a folder, the `unsupervised.*`
    files). Never another split: an extra source's validation and test texts are not read."""
    where, given = Path(source), source
    split, match = "train", re.fullmatch(r"(.+):([A-Za-z_][\w-]*)", source)
    if not where.exists() and match:
        source, split = match.groups()
        where = Path(source)
    path, name = (str(where), "local") if where.exists() else (None, source)
    hub_like = re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", source)  # owner/name
    if path is None and ("/" in source.strip("./") or source.startswith(".")) and not hub_like:
        raise DataError(f"pretrain.extra_texts: {source!r} does not exist (relative paths start at {Path.cwd()})")
    if split != "train" and path is not None:
        return _local_split(where, split, text_column)
    try:
        described, dsets = load_source(name, path, None, label_column=None)  # no labels to check: texts only
    except DataError as err:
        if path is not None or not str(err).startswith(f"data.name={name!r}"):
            raise
        raise HubUnavailable(  # a hub name that did not load: say it of pretrain.extra_texts, not of data.name
            f"pretrain.extra_texts: {given!r} is not a local file or folder and could not be loaded from the "
            f"Hugging Face hub ({str(err).split(': ', 1)[-1].split(';')[0]}); give a local copy instead, e.g. "
            "'pretrain.extra_texts=[<a folder of train.* files>]'"
        ) from None
    if split == "train":
        return _texts(our_splits(described, dsets, None)["train"], source, text_column)
    if split not in dsets:
        raise DataError(f"pretrain.extra_texts: {source!r} has no split {split!r}; its splits: {list(dsets)}")
    return _texts(dsets[split], f"{source}:{split}", text_column)


def _local_split(folder: Path, split: str, text_column: str) -> list[str]:
    """The texts of the `<split>*` data files of a local folder (`unsupervised.parquet`)."""
    files = sorted(str(f) for f in folder.glob(f"{split}*") if f.suffix.lower() in FORMATS) if folder.is_dir() else []
    if not files:
        raise DataError(
            f"pretrain.extra_texts: {str(folder)!r} holds no {split}.* data file ({', '.join(sorted(FORMATS))}) for "
            f"'{folder}:{split}': name the file {split}.parquet (or .csv, .json, ...) in that folder"
        )
    described, dsets = load_source("local", None, {split: files}, label_column=None)
    return _texts(dsets[split], f"{folder}:{split}", text_column)


def _texts(dataset: Any, source: str, text_column: str) -> list[str]:
    """The non-blank texts of `text_column` of a `datasets.Dataset` (from `source`, for the message)."""
    if text_column not in dataset.column_names:
        raise DataError(
            f"pretrain.text_column={text_column!r} is not a column of {source!r}; columns: {dataset.column_names}"
        )
    return [t for t in dataset[text_column] if isinstance(t, str) and t.strip()]


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
    """`data`'s train texts plus each `extra_texts` source's, minus every text of `data`'s validation and test
    splits; the tokenizer is trained on them. `holdout` of the texts (at most MAX_HOLDOUT), drawn with `data`'s
    `split_seed`, are held out to measure the pretraining on; the training batches are bucketed by length."""

    def __init__(
        self,
        data: ReviewDataModule,
        extra_texts: Sequence[str] = (),
        text_column: str = "text",
        max_length: int = 128,
        batch_size: int = 64,
        holdout: float = 0.02,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.data, self.extra_texts, self.text_column = data, list(extra_texts), text_column
        self.max_length, self.batch_size, self.holdout, self.seed = max_length, batch_size, holdout, seed
        self.texts: dict[str, list[str]] = {}
        self.splits: dict[str, EncodedDataset] = {}
        self.tokenizer: Tokenizer | None = None
        self.label_names: list[str] | None = None  # pretraining reads no labels

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def vocab_size(self) -> int:
        return ready(self.tokenizer).get_vocab_size()

    def corpus(self) -> dict[str, list[str]]:
        """{"train": texts the MLM trains on, "validation": held-out texts, "evaluated": what must never be
        read}; loaded once."""
        if self.texts:
            return self.texts
        raw = self.data.load()
        evaluated = [t for split in ("validation", "test") if split in raw for t in raw[split]["text"]]
        texts = drop_evaluated(raw["train"]["text"], evaluated, "train texts")  # a duplicate across splits
        for source in self.extra_texts:
            extra = drop_evaluated(load_texts(source, self.text_column), evaluated, f"texts of {source}")
            log.info("pretraining: %d texts from %s", len(extra), source)
            texts += extra
        g = torch.Generator().manual_seed(self.data.split_seed)
        perm = torch.randperm(len(texts), generator=g).tolist()
        n_out = max(1, min(MAX_HOLDOUT, int(len(texts) * self.holdout)))
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
        if self.tokenizer is None:
            self.tokenizer = self.data.tokenizer_of(corpus)
        for split in ("train", "validation"):
            rows = windows(self._encode(texts[split], split), self.max_length)
            self.splits[split] = EncodedDataset(rows, [0] * len(rows))
        cut_at(self.tokenizer, self.data.max_length)  # the classifier reads at most data.max_length tokens
        sizes = {s: (len(texts[s]), len(self.splits[s])) for s in ("train", "validation")}
        log.info("pretraining corpus (texts, windows of %d): %s, vocab %d", self.max_length, sizes, self.vocab_size)

    def _encode(self, texts: list[str], split: str) -> list[np.ndarray]:
        desc = f"tokenizing pretraining {split}"  # no truncation: `windows` cuts long texts
        tok = ready(self.tokenizer)
        return cache.encoded(self.data.cache_dir, tok, texts, max_length=WHOLE_TEXT, desc=desc)[0]

    def train_dataloader(self) -> DataLoader[dict[str, Any]]:
        data = self.splits["train"]
        sampler = BucketBatchSampler(RandomSampler(data), self.batch_size, lengths=data.lengths, seed=self.seed)
        return DataLoader(data, batch_sampler=sampler, collate_fn=collate)

    def val_dataloader(self) -> DataLoader[dict[str, Any]]:
        return DataLoader(self.splits["validation"], batch_size=self.batch_size, collate_fn=collate)
