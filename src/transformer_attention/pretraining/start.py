"""What a classifier starts from (`model.init_from`): a `Start`, a pretrained encoder (weights.py) or word vectors
(vectors.py), with the tokenizer the run must use."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..model.classifier import TransformerClassifier
from .vectors import WordVectors
from .weights import PretrainedEncoder


class Start(Protocol):
    """What a pretraining gives a classifier to start from."""

    @property
    def tokenizer(self) -> str: ...  # the JSON of the tokenizer the run must use

    @property
    def source(self) -> str: ...  # the file it came from

    def check_fits(self, model: Mapping[str, Any]) -> None: ...  # a ConfigError naming a `model.*` unfit

    def copy_into(self, net: TransformerClassifier) -> list[str]: ...  # into `net`; the tensors written


def read_start(path: str | Path) -> Start:
    """The start in a file pretrain.py wrote: word vectors (`.npz`) or a masked language model's checkpoint."""
    return WordVectors.load(path) if str(path).endswith(".npz") else PretrainedEncoder.load(path)
