"""The one batch format, whatever the dataset:
`{"input_ids": (B, T) long, "attention_mask": (B, T) bool (True = real token), "labels": (B,) long}`,
with T the longest row of that batch (never padded to max_length).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from .tokenizer import PAD_ID


class EncodedDataset(Dataset):
    """Token ids (one int array or list per example), integer labels, and the texts they came from."""

    def __init__(self, ids: Sequence[Sequence[int]], labels: list[int], texts: list[str] | None = None) -> None:
        self.ids, self.labels, self.texts = ids, labels, texts
        self.lengths = np.array([len(row) for row in ids], dtype=np.int64)  # for length bucketing

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
