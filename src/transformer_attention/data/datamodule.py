"""ReviewDataModule: the toy set or a Hugging Face review dataset, tokenized, padded per batch.

Every batch, whatever the dataset, is
`{"input_ids": (B, T) long, "attention_mask": (B, T) bool (True = real token), "labels": (B,) long}`
with T the longest row of that batch (never padded to max_length).
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from .tokenizer import PAD_ID, encode, load_tokenizer, save_tokenizer, train_tokenizer
from .toy import LABEL_NAMES as TOY_LABEL_NAMES
from .toy import make_toy_splits

log = logging.getLogger(__name__)


class EncodedDataset(Dataset):
    """Token id lists and integer labels, one example per index."""

    def __init__(self, ids: list[list[int]], labels: list[int], texts: list[str] | None = None) -> None:
        self.ids, self.labels, self.texts = ids, labels, texts

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def collate(examples: list[dict], pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Pad a list of examples to the longest one; the mask is True on real tokens."""
    T = max(len(e["input_ids"]) for e in examples)
    ids = torch.full((len(examples), T), pad_id, dtype=torch.long)  # (B, T)
    for row, e in enumerate(examples):
        ids[row, : len(e["input_ids"])] = torch.as_tensor(e["input_ids"], dtype=torch.long)
    lengths = torch.tensor([len(e["input_ids"]) for e in examples])
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    labels = torch.tensor([e["labels"] for e in examples], dtype=torch.long)  # (B,)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class ReviewDataModule(L.LightningDataModule):
    """Loads `name` ("toy", or a dataset for `datasets.load_dataset`), trains a tokenizer on the
    train split only (unless `tokenizer` is given, e.g. from a checkpoint), and serves batches."""

    def __init__(
        self,
        name: str = "toy",
        path: str | None = None,
        data_files: dict | str | None = None,
        text_column: str = "text",
        label_column: str = "label",
        max_length: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        vocab_size: int = 8000,
        min_frequency: int = 2,
        val_fraction: float = 0.1,
        seed: int = 0,
        num_workers: int = 0,
        toy_size: int = 4000,
        tokenizer: str | None = None,
        label_names: list[str] | None = None,
        output_dir: str | None = None,
    ) -> None:
        super().__init__()
        if max_length < 2:
            raise ValueError(f"data.max_length={max_length}: needs at least 2 (the [CLS] token and one word)")
        self.name, self.path, self.data_files = name, path, data_files
        self.text_column, self.label_column = text_column, label_column
        self.max_length, self.batch_size = max_length, batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.vocab_size_target, self.min_frequency = vocab_size, min_frequency
        self.val_fraction, self.seed, self.num_workers = val_fraction, seed, num_workers
        self.toy_size = toy_size
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer else None
        self.label_names = list(label_names) if label_names else None
        self.output_dir = output_dir
        self.splits: dict[str, EncodedDataset] = {}

    # ---- loading -------------------------------------------------------------------------
    def _load_raw(self) -> dict[str, dict[str, list]]:
        """Raw splits as {"train"|"validation"|"test": {"text": [...], "label": [...]}}."""
        if self.name == "toy":
            self.label_names = self.label_names or list(TOY_LABEL_NAMES)
            return make_toy_splits(self.toy_size, seed=self.seed, val_fraction=0.1, test_fraction=0.1)
        import datasets

        ds = datasets.load_dataset(self.path or self.name, data_files=self.data_files)
        raw = {
            split: {"text": list(d[self.text_column]), "label": list(d[self.label_column])}
            for split, d in ds.items()
        }
        if "validation" not in raw:
            raw["validation"] = self._carve_validation(raw["train"])
        return raw

    def _carve_validation(self, train: dict[str, list]) -> dict[str, list]:
        """Move a seeded `val_fraction` of train into a validation split (in place)."""
        g = torch.Generator().manual_seed(self.seed)
        perm = torch.randperm(len(train["text"]), generator=g).tolist()
        n_val = max(1, int(len(perm) * self.val_fraction))
        val_idx, train_idx = sorted(perm[:n_val]), sorted(perm[n_val:])
        val = {k: [v[i] for i in val_idx] for k, v in train.items()}
        for k, v in list(train.items()):
            train[k] = [v[i] for i in train_idx]
        return val

    # ---- lifecycle -----------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        raw = self._load_raw()
        if self.tokenizer is None:
            self.tokenizer = train_tokenizer(raw["train"]["text"], self.vocab_size_target, self.min_frequency)
        if self.output_dir:
            save_tokenizer(self.tokenizer, Path(self.output_dir) / "tokenizer.json")
        if self.label_names is None:
            labels = sorted({y for split in raw.values() for y in split["label"]})
            self.label_names = [str(y) for y in range(max(labels) + 1)]
        for split, cols in raw.items():
            ids = encode(self.tokenizer, cols["text"], self.max_length)
            self.splits[split] = EncodedDataset(ids, [int(y) for y in cols["label"]], cols["text"])
        log.info("data %s: %s, vocab %d", self.name, {k: len(v) for k, v in self.splits.items()}, self.vocab_size)

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
    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.splits[split],
            batch_size=self.batch_size if shuffle else self.eval_batch_size,
            shuffle=shuffle,
            collate_fn=collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
