"""`PretrainedEncoder`: a pretrain.py checkpoint's encoder as a classifier's start, copied bit for bit into a
classifier of the same sizes; its head starts fresh."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError, ConfigError
from ..model.classifier import TransformerClassifier
from ..model.config import EncoderConfig, encoder_fields
from ..training.checkpoint import ARCHITECTURE, read_checkpoint

log = logging.getLogger(__name__)

# what must be equal between a pretrained encoder and the classifier that starts from it
PREFIX = "net."  # the MaskedLMModule's TransformerClassifier, in its state dict


@dataclass(frozen=True)
class PretrainedEncoder:
    """A MaskedLMModule checkpoint's encoder settings, tokenizer and weights; `source`: the file, for messages."""

    config: EncoderConfig
    tokenizer: str
    weights: dict[str, torch.Tensor] = field(repr=False)
    source: str = "model.init_from"

    @classmethod
    def load(cls, path: str | Path) -> PretrainedEncoder:
        """The encoder of the pretrain.py checkpoint at `path` (read safely: training/checkpoint.py)."""
        try:
            return cls.from_checkpoint(read_checkpoint(path), str(path))
        except CheckpointError as err:
            raise CheckpointError(f"model.init_from={str(path)!r}: {err}") from None

    @classmethod
    def from_checkpoint(cls, checkpoint: dict[str, Any], source: str) -> PretrainedEncoder:
        """Read from a loaded checkpoint dict; a CheckpointError if it is not a pretrain.py checkpoint."""
        hp = checkpoint.get("hyper_parameters") or {}
        if "mask_prob" not in hp or not checkpoint.get("tokenizer"):
            raise CheckpointError(
                "not a pretrained encoder (no MLM settings or tokenizer in it): give a checkpoint of pretrain.py "
                "(outputs/pretrain/runs/<time>/checkpoints/*.ckpt)"
            )
        config = EncoderConfig(**{k: hp[k] for k in encoder_fields() if k in hp})
        weights = {k[len(PREFIX) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(PREFIX)}
        return cls(config=config, tokenizer=checkpoint["tokenizer"], weights=weights, source=source)

    def check_fits(self, model: Mapping[str, Any]) -> None:
        """A ConfigError naming the first size of `model.*` that differs from the encoder's."""
        mine = asdict(self.config)
        for key in ARCHITECTURE:
            want, have = mine[key], model.get(key)
            if want != have:
                raise ConfigError(
                    f"model.init_from={self.source!r} holds an encoder with {key}={want!r} but the config says "
                    f"model.{key}={have!r}: set model.{key}={want} (or pretrain again with these sizes)"
                )
        if model.get("max_len", 0) > self.config.max_len and model.get("positional") == "learned":
            raise ConfigError(
                f"model.init_from={self.source!r} learned {self.config.max_len} positions but model.max_len="
                f"{model['max_len']}: set model.max_len={self.config.max_len}"
            )

    def copy_into(self, net: TransformerClassifier) -> list[str]:
        """Copy the pretrained parameters into `net`, its head left as initialised; returns the names copied."""
        own = net.state_dict()
        learned = {name for name, _ in net.named_parameters()}
        copied = []
        for name, value in self.weights.items():
            if name.startswith("head.") or name not in learned:
                continue
            if own[name].shape != value.shape:
                raise ConfigError(
                    f"model.init_from: {name} has shape {tuple(value.shape)}, the model {tuple(own[name].shape)}"
                )
            own[name] = value
            copied.append(name)
        net.load_state_dict(own)
        log.info("model.init_from=%s: %d pretrained tensors copied into the encoder", self.source, len(copied))
        return copied
