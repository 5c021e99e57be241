"""`WordVectors`: skip-gram vectors as a classifier's start, one row per id of their tokenizer's vocabulary, kept
with that tokenizer in a `.npz` of plain arrays (read with `allow_pickle=False`: no pickled code runs)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.tokenizer import load_tokenizer
from ..errors import CheckpointError, ConfigError
from ..files import atomic_write
from ..model.classifier import TransformerClassifier

log = logging.getLogger(__name__)

FILE = "vectors.npz"  # in the run folder of `pretrain.py pretrain.method=skipgram`


@dataclass(frozen=True)
class WordVectors:
    """`vectors` (V, dim) float32, `known` (V,) bool (the ids that got one); `settings`: how they were trained;
    `source` names the file in messages."""

    vectors: np.ndarray = field(repr=False)
    known: np.ndarray = field(repr=False)
    tokenizer: str = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)
    source: str = "model.init_from"

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def save(self, path: str | Path) -> Path:
        """Write the vectors to `path` (.npz), atomically."""
        vectors, known = self.vectors.astype(np.float32), self.known.astype(bool)
        tokenizer, settings = np.array(self.tokenizer), np.array(json.dumps(self.settings))
        return atomic_write(
            path, lambda f: np.savez(f, vectors=vectors, known=known, tokenizer=tokenizer, settings=settings)
        )

    @classmethod
    def load(cls, path: str | Path) -> WordVectors:
        """The vectors `save` wrote, checked: a CheckpointError naming the file and the fix otherwise."""
        p = Path(path).expanduser()
        fix = "give a vectors.npz that pretrain.py pretrain.method=skipgram wrote, or model.init_from=pretrain"
        try:
            with np.load(p, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in ("vectors", "known", "tokenizer", "settings")}
            tokenizer, settings = str(arrays["tokenizer"]), json.loads(str(arrays["settings"]))
            vocab = load_tokenizer(tokenizer).get_vocab_size()
        except Exception as err:  # OSError, BadZipFile, KeyError, ValueError: whatever a damaged file makes numpy raise
            size = f"{p.stat().st_size} bytes, " if p.is_file() else ""
            raise CheckpointError(
                f"model.init_from={str(p)!r} ({size}{type(err).__name__}) is not a word-vectors file: {fix}"
            ) from None
        vectors, known = arrays["vectors"], arrays["known"]
        if vectors.ndim != 2 or known.shape != (vectors.shape[0],) or vectors.shape[0] != vocab:
            raise CheckpointError(
                f"model.init_from={str(p)!r}: {tuple(vectors.shape)} vectors for a vocabulary of {vocab} ids "
                f"(its tokenizer): the file is damaged or not this project's; {fix}"
            )
        return cls(vectors.astype(np.float32), known.astype(bool), tokenizer, settings, source=str(p))

    def check_fits(self, model: Mapping[str, Any]) -> None:
        """A ConfigError when `model.*` has another embedding size, naming a valid fix."""
        have = model.get("d_model")
        if have == self.dim:
            return
        fits = self.dim % int(model.get("num_heads") or 1) == 0
        fix = f"set model.d_model={self.dim}, or " if fits else ""
        raise ConfigError(
            f"model.init_from={self.source!r} holds word vectors of dimension {self.dim} but the config says "
            f"model.d_model={have!r}: {fix}start from vectors of dimension {have} (model.init_from=pretrain "
            "trains them)"
        )

    def rows(self) -> torch.Tensor:
        """The known rows (K, dim), centred and scaled to the embedding's init (element std dim ** -0.5)."""
        known = torch.from_numpy(self.vectors[self.known]).double()  # (K, dim)
        centred = known - known.mean(dim=0)
        return (centred * (self.dim**-0.5 / centred.std().clamp_min(1e-12))).float()

    def copy_into(self, net: TransformerClassifier) -> list[str]:
        """Write `rows()` into `net`'s embedding at the known ids ([PAD] kept zero, the rest as initialised);
        returns the names written."""
        weight = net.embedding.weight
        if tuple(weight.shape) != tuple(self.vectors.shape):
            raise ConfigError(
                f"model.init_from={self.source!r}: vectors {tuple(self.vectors.shape)} for an embedding "
                f"{tuple(weight.shape)}: the run must use the vectors' tokenizer (model.init_from gives it)"
            )
        known = torch.from_numpy(self.known)
        with torch.no_grad():
            weight[known] = self.rows().to(weight.dtype)
            weight[net.pad_id].zero_()
        n = int(known.sum())
        log.info("model.init_from=%s: %d of %d word vectors copied into the embedding", self.source, n, len(known))
        return ["embedding.weight"]
