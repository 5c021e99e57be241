"""Masked-language-model pretraining of the classifier's own encoder, and fine-tuning from it.

`MaskedLMModule` trains a `TransformerClassifier`'s embedding, positions and encoder (its classification
head is left untouched) to predict hidden words, BERT's recipe: 15% of the real tokens of each row are
picked; of those 80% become `[MASK]`, 10% a random word, 10% stay; only the picked ones are scored, padding
and `[CLS]` never. The word predictor is tied to the input embedding (one matrix reads and writes words).
`PretrainedEncoder` carries those weights from a checkpoint, bit for bit, into a classifier of the same sizes.

Shapes: B batch, T tokens, D d_model, V vocabulary, N picked tokens in the batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from .data.tokenizer import MASK_ID, SPECIAL_TOKENS
from .errors import CheckpointError, ConfigError
from .model import ClassifierOutput, EncoderConfig, TransformerClassifier
from .model.config import encoder_fields
from .module import EncoderModule

FIRST_WORD_ID = len(SPECIAL_TOKENS)  # ids below are [PAD] [UNK] [CLS] [MASK]: never picked, never drawn
# what must be equal between a pretrained encoder and the classifier that starts from it
ARCHITECTURE = ("d_model", "num_heads", "num_layers", "dim_feedforward", "norm_first", "activation", "positional")
IGNORE = -100  # F.cross_entropy's ignore_index: positions that are not scored


def mask_tokens(
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    vocab_size: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of the real words of `ids` (B, T): (inputs (B, T), targets (B, T) = the original id at
    picked positions, IGNORE elsewhere). Padding (mask False) and special tokens are never picked; every
    batch has at least one picked token. Random numbers come from `generator` (on the CPU) when given."""

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=generator).to(ids.device)

    words = attention_mask & (ids >= FIRST_WORD_ID)  # (B, T): what may be picked
    picked = words & (rand(*ids.shape) < mask_prob)  # (B, T)
    if not picked.any() and words.any():  # a short batch: score at least one word
        first = words.flatten().nonzero()[0]
        picked = picked.flatten().index_fill(0, first, True).view_as(picked)
    targets = torch.where(picked, ids, torch.full_like(ids, IGNORE))  # (B, T)
    draw = rand(*ids.shape)  # (B, T): < 0.8 mask, 0.8-0.9 random word, >= 0.9 keep
    random_words = (rand(*ids.shape) * (vocab_size - FIRST_WORD_ID)).long() + FIRST_WORD_ID  # (B, T)
    inputs = torch.where(picked & (draw < 0.8), torch.full_like(ids, MASK_ID), ids)
    inputs = torch.where(picked & (draw >= 0.8) & (draw < 0.9), random_words, inputs)
    return inputs, targets


class MaskedLMModule(EncoderModule):
    """Masked-language-model training of a TransformerClassifier's encoder. `settings` are EncoderConfig's
    fields, as for ClassifierModule; the checkpoint carries them and the tokenizer, so `model.init_from`
    can rebuild and check the encoder from the file alone."""

    predicts_labels = False  # AttentionMapLogger: no class to show in captions

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        mask_prob: float = 0.15,
        optimizer: Any = None,
        scheduler: Any = None,
        tokenizer: str | None = None,
        seed: int = 0,
        **settings: Any,
    ) -> None:
        super().__init__(tokenizer, optimizer, scheduler)
        if not 0 < mask_prob < 1:
            raise ConfigError(f"pretrain.mask_prob={mask_prob!r} must be in (0, 1): e.g. pretrain.mask_prob=0.15")
        self.net = TransformerClassifier(vocab_size=vocab_size, num_classes=2, pad_id=pad_id, **settings)
        D = self.net.config.d_model
        # BERT's prediction head: a transform, then the embedding matrix (tied) and a bias per word
        self.mlm_transform = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.LayerNorm(D))
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))
        hparams = {"vocab_size": vocab_size, "pad_id": pad_id, "mask_prob": mask_prob, "seed": seed}
        self.save_hyperparameters({**hparams, **asdict(self.net.config)})
        self.train_loss, self.val_loss = MeanMetric(), MeanMetric()
        self.train_acc, self.val_acc = MeanMetric(), MeanMetric()

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> ClassifierOutput:
        """The encoder's output as the classifier gives it (for the attention maps); the MLM uses `word_logits`."""
        return self.net(input_ids, attention_mask, need_weights=need_weights)

    def word_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (N, D) -> scores over the vocabulary (N, V), through the tied embedding."""
        h = self.mlm_transform(hidden)  # (N, D)
        return F.linear(h, self.net.embedding.weight) + self.mlm_bias  # (N, V)

    def model_step(
        self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, correct (N,) bool) of one masked batch; only picked positions go through the word head."""
        ids, mask = batch["input_ids"], batch["attention_mask"]
        inputs, targets = mask_tokens(ids, mask, self.hparams.vocab_size, self.hparams.mask_prob, generator)
        hidden, _ = self.net.encode(inputs, mask)  # (B, T, D)
        scored = targets != IGNORE  # (B, T)
        logits = self.word_logits(hidden[scored])  # (N, V)
        wanted = targets[scored]  # (N,)
        loss = F.cross_entropy(logits.float(), wanted)
        return loss, logits.argmax(dim=-1) == wanted

    def on_train_start(self) -> None:
        for metric in (self.train_loss, self.train_acc, self.val_loss, self.val_acc):
            metric.reset()  # a sanity check or a validate() before fit may have filled them

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, correct = self.model_step(batch)
        self.train_loss(loss)
        self.train_acc(correct.float())
        self.log("train/mlm_loss", self.train_loss, on_step=True, on_epoch=True, prog_bar=True)
        self.log("train/mlm_acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        # the same words hidden at every validation: epochs compare on equal terms
        generator = torch.Generator().manual_seed(self.hparams.seed * 100_003 + batch_idx)
        loss, correct = self.model_step(batch, generator)
        self.val_loss.update(loss, weight=correct.numel())
        self.val_acc(correct.float())
        self.log("val/mlm_loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/mlm_acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)


# ---- fine-tuning from a pretrained encoder ----------------------------------------------------
@dataclass(frozen=True)
class PretrainedEncoder:
    """A MaskedLMModule checkpoint's encoder: its settings (the EncoderConfig it was built with), tokenizer
    and weights (the `TransformerClassifier`'s, by name). `source` names the file in messages."""

    config: EncoderConfig
    tokenizer: str
    weights: dict[str, torch.Tensor] = field(repr=False)
    source: str = "model.init_from"

    @classmethod
    def from_checkpoint(cls, checkpoint: dict[str, Any], source: str) -> PretrainedEncoder:
        """Read from a loaded checkpoint dict (training/checkpoint.py reads the file); a CheckpointError if
        it is not a pretrain.py checkpoint."""
        hp = checkpoint.get("hyper_parameters") or {}
        if "mask_prob" not in hp or not checkpoint.get("tokenizer"):
            raise CheckpointError(
                "not a pretrained encoder (no MLM settings or tokenizer in it): give a checkpoint of pretrain.py "
                "(outputs/pretrain/runs/<time>/checkpoints/*.ckpt)"
            )
        config = EncoderConfig(**{k: hp[k] for k in encoder_fields() if k in hp})
        prefix = "net."
        weights = {k[len(prefix) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)}
        return cls(config=config, tokenizer=checkpoint["tokenizer"], weights=weights, source=source)

    def check_fits(self, settings: dict[str, Any]) -> None:
        """A ConfigError naming the first size of the classifier's `settings` (model.*) that differs from the
        encoder's."""
        mine = asdict(self.config)
        for key in ARCHITECTURE:
            want, have = mine[key], settings.get(key)
            if want != have:
                raise ConfigError(
                    f"model.init_from={self.source!r} holds an encoder with {key}={want!r} but the config says "
                    f"model.{key}={have!r}: set model.{key}={want} (or pretrain again with these sizes)"
                )
        if settings.get("max_len", 0) > self.config.max_len and settings.get("positional") == "learned":
            raise ConfigError(
                f"model.init_from={self.source!r} learned {self.config.max_len} positions but model.max_len="
                f"{settings['max_len']}: set model.max_len={self.config.max_len}"
            )

    def copy_into(self, net: TransformerClassifier) -> list[str]:
        """Copy the pretrained parameters of the embedding, positions and encoder into `net` (its head stays as
        initialised; sinusoidal position tables are computed, not learned); returns the names copied. Sizes
        must match (`check_fits`); the copy is exact."""
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
        return copied
