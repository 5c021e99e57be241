"""The texts the attention maps are drawn for: a few validation examples that mix the classes and the lengths,
chosen once per fit, plus any texts of the user's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..data.batches import EncodedDataset
from ..data.labels import names_or_ids
from ..data.tokenizer import encode
from ..inference import RowOutput
from ..plotting.windows import window_note
from ..plotting.words import POOLED_ROW


@dataclass(frozen=True)
class Example:
    """One text the maps show: its tag (`example_<i>`, `text_<j>` given), token ids and true class (or None)."""

    name: str
    ids: Sequence[int] | np.ndarray
    label: int | None
    text: str

    def title(self, label_names: Sequence[str], keep: Sequence[int] | None, pooling: str) -> str:
        """The title of the example's images: tag, true label, text, pooled row and, for a map of the tokens `keep`
        (None: all of them), which it shows."""
        shown = self.text if len(self.text) <= 120 else self.text[:119] + "\u2026"
        known = f" \u00b7 true: {label_names[self.label]}" if self.label is not None else ""
        title = f"{self.name}{known} \u00b7 \u201c{shown}\u201d \u00b7 pooled: {POOLED_ROW[pooling]}"
        note = window_note(len(keep), len(self.ids), POOLED_ROW[pooling]) if keep is not None else ""
        return f"{title} ({note})" if note else title


@dataclass
class Logged:
    """An example as last logged: what the interactive page of it shows."""

    name: str
    tokens: list[str]
    attentions: list[torch.Tensor] = field(repr=False)  # one (H, T, T) per layer
    caption: str
    norms: list[torch.Tensor] | None = field(default=None, repr=False)  # the norm-weighted maps, when drawn
    ids: Sequence[int] | np.ndarray = ()  # the token ids, for the page's word attributions
    predicted: int = 0  # the class the page's words explain
    class_name: str = ""


def pick_examples(labels: Sequence[int], lengths: Sequence[int], k: int) -> list[int]:
    """`k` dataset indices that mix the classes (in turn) and the lengths (each class's length quantiles), always
    the same for the same data."""
    by_class: dict[int, list[int]] = {}
    for i in sorted(range(len(labels)), key=lambda i: (lengths[i], i)):
        by_class.setdefault(int(labels[i]), []).append(i)
    classes = sorted(by_class)
    counts = dict.fromkeys(classes, 0)
    for _ in range(min(k, len(labels))):  # deal the k picks out in turn, as far as a class has examples
        c = min((c for c in classes if counts[c] < len(by_class[c])), key=lambda c: (counts[c], c))
        counts[c] += 1
    picks = {  # the middles of `counts[c]` equal slices of the length-sorted class
        c: [by_class[c][int((j + 0.5) * len(by_class[c]) / counts[c])] for j in range(counts[c])] for c in classes
    }
    rounds = max(counts.values(), default=0)
    return [picks[c][j] for j in range(rounds) for c in classes if j < counts[c]]


def choose_examples(datamodule: Any, split: str, k: int, texts: Sequence[str], labelled: bool) -> list[Example]:
    """`k` examples of the datamodule's `split` (none when it lacks one), then `texts`; a split that keeps no texts
    (pretraining windows) has them decoded, and an unlabelled module's examples have no label."""
    data: EncodedDataset | None = getattr(datamodule, "splits", {}).get(split)
    tok = datamodule.tokenizer
    examples: list[Example] = []
    if data:
        picked = pick_examples(data.labels, [len(ids) for ids in data.ids], k)
        kept = getattr(data, "texts", None)
        examples = [
            Example(
                name=f"example_{j}",
                ids=data.ids[i],
                label=int(data.labels[i]) if labelled else None,
                text=kept[i] if kept else tok.decode([int(t) for t in data.ids[i]]),
            )
            for j, i in enumerate(picked)
        ]
    own = encode(tok, list(texts), datamodule.max_length) if texts else []
    return examples + [
        Example(f"text_{j}", ids, None, text) for j, (ids, text) in enumerate(zip(own, texts, strict=True))
    ]


def maps_of(output: RowOutput) -> list[torch.Tensor]:
    """The (H, T, T) map per layer that `infer(..., need_weights=True)` (or `need_norms`) gave `output`."""
    assert output.attentions is not None, "infer gives maps with need_weights=True or need_norms=True"
    return output.attentions


def label_names(trainer: Any, pl_module: Any, num_classes: int) -> list[str]:
    """The class names a run's pictures use: the datamodule's, else the module's (its checkpoint's), else ids."""
    names = getattr(trainer.datamodule, "label_names", None) or pl_module.hparams.get("label_names")
    return names_or_ids(names, num_classes)


def pooling_of(pl_module: Any) -> str:
    """The row the module's classifier reads (a masked language model's maps read as cls)."""
    return pl_module.hparams.get("pooling") or "cls"


def table_cell(text: str) -> str:
    """`text` as one markdown table cell: pipes escaped, whitespace runs (newlines too) made one space."""
    return " ".join(str(text).split()).replace("|", "\\|")
