"""The one batch format: `{"input_ids": (B, T) long, "attention_mask": (B, T) bool (True = real token), "labels":
(B,) long}`, T the longest row of that batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from .tokenizer import PAD_ID


class EncodedDataset(Dataset[dict[str, Any]]):
    """Token ids (one int array or list per example), integer labels, and the texts they came from."""

    def __init__(
        self, ids: Sequence[Sequence[int] | np.ndarray], labels: list[int], texts: list[str] | None = None
    ) -> None:
        self.ids, self.labels, self.texts = ids, labels, texts
        self.lengths = np.array([len(row) for row in ids], dtype=np.int64)  # for length bucketing

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def collate(examples: Sequence[Mapping[str, Any]], pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Pad a list of examples to the longest one; the mask is True on real tokens. Filled in NumPy, all rows at
    once (a tensor copy per row cost seven times as much)."""
    lengths = np.fromiter((len(e["input_ids"]) for e in examples), dtype=np.int64, count=len(examples))  # (B,)
    T = int(lengths.max())
    mask = np.arange(T)[None, :] < lengths[:, None]  # (B, T)
    ids = np.full((len(examples), T), pad_id, dtype=np.int64)  # (B, T)
    ids[mask] = np.concatenate([np.asarray(e["input_ids"], dtype=np.int64) for e in examples])  # row by row
    labels = torch.tensor([e["labels"] for e in examples], dtype=torch.long)  # (B,)
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask), "labels": labels}
