"""ReviewDataModule: the toy set or a Hugging Face review dataset, tokenized, padded per batch
(the batch format: batches.py).

Set-up order: load and check the raw splits (sources.py, labels.py), drop empty texts, carve a
validation split if there is none (and drop the train rows that share text with it), scrub PII,
train (or reuse) the tokenizer on train only, tokenize.
The tokenizer and the tokenized splits are cached under `cache_dir`, keyed by the texts and settings.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, RandomSampler, Subset

from ..errors import DataError
from . import cache
from .batches import EncodedDataset, collate
from .labels import labels_to_ids
from .overlap import MIN_CONTAINED_TOKENS, rows_sharing_text
from .pii import scrub_pii
from .sampler import BucketBatchSampler
from .settings import check_data_settings
from .sources import load_columns
from .tokenizer import PAD_ID, load_tokenizer, save_tokenizer
from .toy import LABEL_NAMES as TOY_LABEL_NAMES
from .toy import make_toy_splits

log = logging.getLogger(__name__)


class ReviewDataModule(L.LightningDataModule):
    """Loads `name` ("toy", a Hugging Face hub name) or local data (`path`, `data_files`), trains a tokenizer
    on the train split only (unless `tokenizer` is given, e.g. from a checkpoint), and serves batches.

    Empty or whitespace-only texts are dropped, counted and logged (a warning), not an error; a split that
    is left with nothing is a DataError. Label ids and names: see labels.py (`label_names_from` names where
    given `label_names` come from, for its messages). Validation and test batches come in one fixed order
    drawn with `split_seed`, the same every run and epoch, so a limited evaluation still sees every class.
    """

    def __init__(
        self,
        name: str = "toy",
        path: str | None = None,
        data_files: dict | str | list | None = None,
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
    ) -> None:
        super().__init__()
        settings = dict(
            max_length=max_length,
            batch_size=batch_size,
            eval_batch_size=eval_batch_size,
            vocab_size=vocab_size,
            val_fraction=val_fraction,
            num_workers=num_workers,
            toy_size=toy_size,
            encoding=encoding,
        )
        check_data_settings(settings, prefix="data.")  # the config pre-check's rules, same messages
        self.name, self.path, self.data_files = name, path, data_files
        self.text_column, self.label_column, self.split_names = text_column, label_column, split_names
        self.max_length, self.batch_size = max_length, batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.bucket_by_length = bucket_by_length
        self.vocab_size_target, self.min_frequency = vocab_size, min_frequency
        self.val_fraction, self.split_seed, self.seed = val_fraction, split_seed, seed
        self.num_workers, self.toy_size = num_workers, toy_size
        self.scrub_pii, self.num_classes_target = scrub_pii, num_classes
        self.cache_dir, self.output_dir = cache_dir, output_dir
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer else None
        self.label_names = list(label_names) if label_names else None
        self.encoding, self.label_names_from = encoding, label_names_from
        self.required: dict[str, str] = {}  # split -> the fix when it is missing (require_split)
        self.raw: dict[str, dict[str, list]] = {}  # checked, scrubbed texts and label ids per split
        self.splits: dict[str, EncodedDataset] = {}

    # ---- loading -------------------------------------------------------------------------
    def _load_raw(self) -> dict[str, dict[str, list]]:
        """Checked raw splits as {"train"|"validation"|"test": {"text": [...], "label": [ids]}}."""
        if self.name == "toy" and not (self.path or self.data_files):
            raw, class_names = make_toy_splits(self.toy_size, seed=self.seed, val_fraction=0.1), TOY_LABEL_NAMES
        else:
            raw, class_names = load_columns(
                self.name,
                path=self.path,
                data_files=self.data_files,
                text_column=self.text_column,
                label_column=self.label_column,
                split_names=self.split_names,
                encoding=self.encoding,
            )
        for split in list(raw):
            raw[split] = self._drop_empty(split, raw[split])
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
        if "validation" not in raw:
            raw["validation"] = self._carve_validation(raw["train"])
        raw = {split: raw[split] for split in ("train", "validation", "test") if split in raw}
        if self.scrub_pii:
            for split, cols in raw.items():
                cols["text"], counts = scrub_pii(cols["text"])
                log.info("scrub_pii %s: replaced %s", split, dict(counts))
        return raw

    def _drop_empty(self, split: str, cols: dict[str, list]) -> dict[str, list]:
        texts = cols["text"]
        bad = next((t for t in texts if t is not None and not isinstance(t, str)), None)
        if bad is not None:
            raise DataError(
                f"data.text_column={self.text_column!r} holds {type(bad).__name__} values ({bad!r}) in split "
                f"{split!r}, not strings; set data.text_column to the column with the review text"
            )
        keep = [i for i, t in enumerate(texts) if t is not None and t.strip()]
        if len(keep) < len(texts):
            dropped = len(texts) - len(keep)
            log.warning("split %r: dropped %d empty or whitespace-only texts of %d", split, dropped, len(texts))
            if not keep:
                raise DataError(f"split {split!r} has no non-empty text in data.text_column={self.text_column!r}")
            cols = {k: [v[i] for i in keep] for k, v in cols.items()}
        return cols

    def _carve_validation(self, train: dict[str, list]) -> dict[str, list]:
        """Move a `val_fraction` of train, drawn with `split_seed`, into a validation split (in place), then drop
        the train rows that contain, or are contained in, a validation text (phrase-level sets such as SST-2
        hold phrases of the same sentences), so validation measures text the model has not trained on.

        Texts are compared as lowercase word and punctuation tokens, on token boundaries ("a" is not in "bad").
        Equal texts count at any length, and so does a train row contained in a validation text; a train row
        containing a validation text counts only when that text has at least MIN_CONTAINED_TOKENS (3) tokens,
        since a 1-2 token row (".", "good", "not good") is a fragment of most sentences."""
        g = torch.Generator().manual_seed(self.split_seed)
        perm = torch.randperm(len(train["text"]), generator=g).tolist()
        n_val = max(1, int(len(perm) * self.val_fraction))
        if n_val >= len(perm):
            raise DataError(f"data.val_fraction={self.val_fraction} of {len(perm)} train rows leaves none to train on")
        val_idx, train_idx = sorted(perm[:n_val]), sorted(perm[n_val:])
        val = {k: [v[i] for i in val_idx] for k, v in train.items()}
        for k, v in list(train.items()):
            train[k] = [v[i] for i in train_idx]
        overlap = set(rows_sharing_text(train["text"], val["text"]))
        if overlap:
            n_train = len(train["text"])
            if len(overlap) == n_train:
                raise DataError(
                    f"data.val_fraction={self.val_fraction}: every one of the {n_train} train rows left after "
                    f"carving validation contains, or is contained in, a validation text, so none is left to train "
                    f"on; lower data.val_fraction or give the data its own validation split (a validation file, "
                    f"data.data_files.validation or data.split_names.validation)"
                )
            log.warning(
                "validation carved from train: removed %d of %d train rows that contain, or are contained in, "
                "a validation text (whole tokens; contained validation texts of %d+ tokens): they would leak "
                "validation text into training",
                len(overlap),
                n_train,
                MIN_CONTAINED_TOKENS,
            )
            for k, v in list(train.items()):
                train[k] = [x for i, x in enumerate(v) if i not in overlap]
        return val

    def _make_tokenizer(self) -> None:
        """Train the tokenizer on the train texts, or take it from the cache; truncation at max_length."""
        texts = self.raw["train"]["text"]
        settings = (self.vocab_size_target, self.min_frequency, self.scrub_pii)
        self.tokenizer = cache.trained_tokenizer(self.cache_dir, texts, *settings)

    def _encode(self, split: str) -> EncodedDataset:
        """Tokenize one split (or read it from the cache) into an EncodedDataset."""
        if split not in self.raw:
            hint = "run with test=false, or add a test file / data.split_names.test" if split == "test" else ""
            raise DataError(f"the data has no {split!r} split (splits: {list(self.raw)}); {hint}")
        texts, labels = self.raw[split]["text"], self.raw[split]["label"]
        ids, from_cache = cache.encoded(self.cache_dir, self.tokenizer, texts, self.max_length, f"tokenizing {split}")
        if from_cache:
            log.info("data %s: %s split tokenized before, read from the cache %s", self.name, split, self.cache_dir)
        return EncodedDataset(ids, labels, texts)

    def load(self) -> dict[str, dict[str, list]]:
        """The checked raw splits, `{split: {"text": [...], "label": [ids]}}` (validation carved if need be);
        read once. What pretraining (unlabelled.py) takes its texts from."""
        if not self.raw:
            self.raw = self._load_raw()
            self._check_required()
        return self.raw

    def require_split(self, split: str, fix: str) -> None:
        """Make `split` one the data must have: checked as soon as the data is loaded (before the tokenizer
        is trained), a DataError with `fix` (what the caller's user can change) when it is missing."""
        self.required[split] = fix
        if self.raw:
            self._check_required()

    def _check_required(self) -> None:
        for split, fix in self.required.items():
            if split not in self.raw:
                source = self.path or self.data_files or self.name
                raise DataError(f"the data ({source}) has no {split} split (splits: {list(self.raw)}): {fix}")

    # ---- lifecycle -----------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        """Load, check and tokenize: all splits for "fit" (or None), only the one a test/validate/predict needs."""
        if not self.raw:
            self.load()
            if self.tokenizer is None:
                self._make_tokenizer()
            # truncation is part of the tokenizer, so the saved one (and the checkpoint's) cuts like training did
            self.tokenizer.no_padding()
            self.tokenizer.enable_truncation(self.max_length)
            if self.output_dir:
                save_tokenizer(self.tokenizer, Path(self.output_dir) / "tokenizer.json")
                (Path(self.output_dir) / "label_names.json").write_text(json.dumps(self.label_names) + "\n")
            sizes = {k: len(v["text"]) for k, v in self.raw.items()}
            source = self.path or self.data_files or self.name
            log.info("data %s: %s, classes %s, vocab %d", source, sizes, self.label_names, self.vocab_size)
        wanted = {"test": ["test"], "predict": ["test"], "validate": ["validation"]}.get(stage or "fit", list(self.raw))
        for split in wanted:
            if split not in self.splits and split in self.raw:
                self.splits[split] = self._encode(split)

    # ---- what the model needs from the data ----------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def tokenizer_json(self) -> str:
        return self.tokenizer.to_str()

    # ---- loaders -------------------------------------------------------------------------
    def _dataset(self, split: str) -> EncodedDataset:
        if not self.raw:
            self.setup(None)
        if split not in self.splits:
            self.splits[split] = self._encode(split)
        return self.splits[split]

    def _loader(self, split: str, train: bool) -> DataLoader:
        dataset = self._dataset(split)
        if not train:  # a fixed shuffle (files are often sorted by label): limit_val_batches sees every class
            order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(self.split_seed))
            dataset = Subset(dataset, order.tolist())
        common = {"collate_fn": collate, "num_workers": self.num_workers, "persistent_workers": self.num_workers > 0}
        if train and self.bucket_by_length:
            sampler = BucketBatchSampler(
                RandomSampler(dataset), self.batch_size, drop_last=False, lengths=dataset.lengths, seed=self.seed
            )
            return DataLoader(dataset, batch_sampler=sampler, **common)
        batch_size = self.batch_size if train else self.eval_batch_size
        return DataLoader(dataset, batch_size=batch_size, shuffle=train, **common)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)
