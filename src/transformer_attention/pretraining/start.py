"""What a classifier starts from (`model.init_from`): a `Start`, which both pretraining methods make and the store
keeps: a masked language model's encoder (`PretrainedEncoder`, weights.py: a pretrain.py checkpoint) or skip-gram
word vectors for the embedding (`WordVectors`, vectors.py: a vectors.npz). Each has the tokenizer the run must
use, the file it came from (`source`, for messages), `check_fits` against the classifier's settings (before any
data is read) and `copy_into`, which writes it into a built classifier."""

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
    def tokenizer(self) -> str:
        """The tokenizer's JSON: the run's vocabulary is the start's own."""

    @property
    def source(self) -> str:
        """The file it came from."""

    def check_fits(self, model: Mapping[str, Any]) -> None:
        """A ConfigError naming the first `model.*` setting that does not fit it, and the fix."""

    def copy_into(self, net: TransformerClassifier) -> list[str]:
        """Copy it into `net` (a classifier built on its tokenizer); returns the names of the tensors written."""


def read_start(path: str | Path) -> Start:
    """The start in a file pretrain.py wrote: word vectors (`.npz`) or a masked language model's checkpoint."""
    return WordVectors.load(path) if str(path).endswith(".npz") else PretrainedEncoder.load(path)
