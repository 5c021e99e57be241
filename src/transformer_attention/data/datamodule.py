"""ReviewDataModule: load and check the raw splits, drop empty texts, carve the missing validation and test splits,
scrub PII, train (or reuse) the tokenizer on train only, tokenize (both cached under `cache_dir`), batch."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

import lightning as L
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, RandomSampler, Subset

from ..errors import DataError
from ..files import atomic_write
from . import cache
from .batches import EncodedDataset, collate
from .labels import labels_to_ids
from .pii import scrub_pii
from .rationales import check_rationale_column
from .sampler import BucketBatchSampler
from .settings import check_data_settings
from .sources import Columns, load_columns
from .splits import carve_missing, drop_empty
from .tokenizer import PAD_ID, cut_at, load_tokenizer, ready, save_tokenizer
from .toy import LABEL_NAMES as TOY_LABEL_NAMES
from .toy import make_toy_splits

log = logging.getLogger(__name__)


class ReviewDataModule(L.LightningDataModule):
    """Loads `name` ("toy", a Hugging Face hub name) or local data (`path`, `data_files`), trains a tokenizer on
    the train split only (unless `tokenizer` is given, e.g. from a checkpoint), and serves batches.
    `label_names_from` says where given `label_names` come from, for messages."""

    def __init__(
        self,
        name: str = "toy",
        path: str | None = None,
        data_files: dict[str, Any] | list[str] | str | None = None,
        text_column: str = "text",
        label_column: str = "label",
        split_names: dict[str, str | None] | None = None,
        max_length: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        bucket_by_length: bool = False,
        vocab_size: int = 8000,
        min_frequency: int = 2,
        val_fraction: float = 0.1,
        test_fraction: float | None = 0.1,
        split_seed: int = 42,
        seed: int = 0,
        num_workers: int = 0,
        toy_size: int = 4000,
        scrub_pii: bool = False,
        num_classes: int | None = None,
        cache_dir: str | None = None,
        tokenizer: str | None = None,
        label_names: list[str] | None = None,
        output_dir: str | None = None,
        encoding: str = "utf-8",
        label_names_from: str = "data.label_names",
        rationale_column: str | None = None,
    ) -> None:
        super().__init__()
        check_data_settings(locals(), prefix="data.")  # the config pre-check's rules, on these arguments
        self.rationale_column = check_rationale_column(rationale_column, scrub_pii)
        self.name, self.path, self.data_files = name, path, data_files
        self.text_column, self.label_column, self.split_names = text_column, label_column, split_names
        self.max_length, self.batch_size = max_length, batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.bucket_by_length = bucket_by_length
        self.tokenizer_settings = dict(vocab_size=vocab_size, min_frequency=min_frequency, scrub_pii=scrub_pii)
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        self.split_seed, self.seed = split_seed, seed
        self.num_workers, self.toy_size = num_workers, toy_size
        self.scrub_pii, self.num_classes_target = scrub_pii, num_classes
        self.cache_dir, self.output_dir = cache_dir, output_dir
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer else None
        self.label_names = list(label_names) if label_names else None
        self.encoding, self.label_names_from = encoding, label_names_from
        self.required: dict[str, str] = {}  # split -> the fix when it is missing (require_split)
        self.raw: dict[str, Columns] = {}  # checked, scrubbed texts and label ids per split
        self.splits: dict[str, EncodedDataset] = {}

    # ---- loading -------------------------------------------------------------------------
    def _load_raw(self) -> dict[str, Columns]:
        """Checked raw splits as {"train"|"validation"|"test": {"text": [...], "label": [ids]}}."""
        if self.path or self.data_files or self.name != "toy":
            log.info("data %s: reading its texts", self.source)  # seconds for a large set: said before, not after
            raw, class_names = load_columns(
                self.name,
                path=self.path,
                data_files=self.data_files,
                text_column=self.text_column,
                label_column=self.label_column,
                split_names=self.split_names,
                encoding=self.encoding,
                rationale_column=self.rationale_column,
            )
        else:  # the built-in toy set
            raw, class_names = make_toy_splits(self.toy_size, seed=self.seed, val_fraction=0.1), TOY_LABEL_NAMES
        for split in list(raw):
            raw[split] = drop_empty(raw[split], split, self.text_column)
        labels = {split: cols["label"] for split, cols in raw.items()}
        ids, self.label_names = labels_to_ids(
            labels,
            label_names=self.label_names,
            num_classes=self.num_classes_target,
            class_names=class_names,
            names_from=self.label_names_from,
        )
        for split, cols in raw.items():
            cols["label"] = ids[split]
        carve_missing(raw, self.val_fraction, self.test_fraction, self.split_seed)
        raw = {split: raw[split] for split in ("train", "validation", "test") if split in raw}
        if self.scrub_pii:
            for split, cols in raw.items():
                cols["text"], counts = scrub_pii(cols["text"])
                log.info("scrub_pii %s: replaced %s", split, dict(counts))
        return raw

    def train_tokenizer(self) -> Tokenizer:
        """The tokenizer of the train texts, trained or from the cache (`setup`'s when none was given)."""
        return self.tokenizer_of(self.load()["train"]["text"])

    def tokenizer_of(self, texts: list[str]) -> Tokenizer:
        """The tokenizer this data's settings train on `texts`, from the cache when trained before."""
        return cache.trained_tokenizer(self.cache_dir, texts, **self.tokenizer_settings)

    def _encode(self, split: str) -> EncodedDataset:
        """Tokenize one split (or read it from the cache) into an EncodedDataset."""
        if split not in self.raw:
            hint = "run with test=false, or add a test file / data.split_names.test" if split == "test" else ""
            raise DataError(f"the data has no {split!r} split (splits: {list(self.raw)}); {hint}")
        texts, labels = self.raw[split]["text"], self.raw[split]["label"]
        tok, desc = ready(self.tokenizer), f"tokenizing {split}"
        ids, from_cache = cache.encoded(self.cache_dir, tok, texts, max_length=self.max_length, desc=desc)
        if from_cache:
            log.info("data %s: %s split tokenized before, read from the cache %s", self.source, split, self.cache_dir)
        return EncodedDataset(ids, labels, texts)

    def load(self) -> dict[str, Columns]:
        """The checked raw splits, `{split: {"text": [...], "label": [ids]}}`, read once."""
        if not self.raw:
            self.raw = self._load_raw()
            self._check_required()
        return self.raw

    def require_split(self, split: str, fix: str) -> None:
        """A DataError with `fix` when the data, once loaded (before the tokenizer is trained), has no `split`."""
        self.required[split] = fix
        if self.raw:
            self._check_required()

    def _check_required(self) -> None:
        for split, fix in self.required.items():
            if split not in self.raw:
                raise DataError(f"the data ({self.source}) has no {split} split (splits: {list(self.raw)}): {fix}")

    # ---- lifecycle -----------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        """Load, check and tokenize: all splits for "fit" (or None), only the one a test/validate/predict needs."""
        if not self.raw:
            self.load()
            if self.tokenizer is None:
                self.tokenizer = self.train_tokenizer()
            cut_at(self.tokenizer, self.max_length)  # the saved one (and the checkpoint's) cuts like training did
            if self.output_dir:
                save_tokenizer(self.tokenizer, Path(self.output_dir) / "tokenizer.json")
                atomic_write(Path(self.output_dir) / "label_names.json", json.dumps(self.label_names) + "\n")
            sizes = ", ".join(f"{len(v['text']):,} {k}" for k, v in self.raw.items())
            classes = ", ".join(map(str, self.label_names or []))
            log.info("data %s: %s texts; classes %s; vocab %d", self.source, sizes, classes, self.vocab_size)
        wanted = {"test": ["test"], "predict": ["test"], "validate": ["validation"]}.get(stage or "fit", list(self.raw))
        for split in wanted:
            if split not in self.splits and split in self.raw:
                self.splits[split] = self._encode(split)

    # ---- what the model needs from the data ----------------------------------------------
    @property
    def source(self) -> Any:
        """What the console calls this data: its path, its files or its name."""
        return self.path or self.data_files or self.name

    @property
    def vocab_size(self) -> int:
        return ready(self.tokenizer).get_vocab_size()

    @property
    def num_classes(self) -> int:
        assert self.label_names is not None, "the data has no label names yet: call its setup() first"
        return len(self.label_names)

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def tokenizer_json(self) -> str:
        return ready(self.tokenizer).to_str()

    # ---- loaders -------------------------------------------------------------------------
    def _loader(self, split: str, train: bool) -> DataLoader[dict[str, Any]]:
        if not self.raw:
            self.setup(None)
        if split not in self.splits:
            self.splits[split] = self._encode(split)
        dataset, workers = self.splits[split], self.num_workers
        loader = partial(DataLoader, collate_fn=collate, num_workers=workers, persistent_workers=workers > 0)
        if train and self.bucket_by_length:
            sampler = BucketBatchSampler(
                RandomSampler(dataset), self.batch_size, drop_last=False, lengths=dataset.lengths, seed=self.seed
            )
            return loader(dataset, batch_sampler=sampler)
        if train:
            return loader(dataset, batch_size=self.batch_size, shuffle=True)
        # a fixed shuffle (files are often sorted by label): limit_val_batches sees every class
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(self.split_seed))
        return loader(Subset(dataset, order.tolist()), batch_size=self.eval_batch_size, shuffle=False)

    def train_dataloader(self) -> DataLoader[dict[str, Any]]:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader[dict[str, Any]]:
        return self._loader("validation", train=False)

    def test_dataloader(self) -> DataLoader[dict[str, Any]]:
        return self._loader("test", train=False)
