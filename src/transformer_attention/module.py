"""ClassifierModule: the LightningModule that trains a TransformerClassifier.

Hooks in lifecycle order; one shared `model_step`; one torchmetrics object per split;
metrics logged as `split/metric`. Plain arguments only, so `save_hyperparameters` makes a
checkpoint that rebuilds the model (tokenizer and label names included) on its own.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.utilities.types import OptimizerLRSchedulerConfig
from torchmetrics import MaxMetric, MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from .model import ClassifierOutput, TransformerClassifier
from .model.config import LOSS_FIELDS, LossConfig
from .model.evidence import share_of_margin
from .model.regularizers import adversarial_loss, word_dropout


def _warmup_cosine(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_fraction: float = 0.1, min_lr_ratio: float = 0.0
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over `warmup_fraction` of the steps, then cosine decay to `min_lr_ratio` x lr."""
    warmup = max(1, int(total_steps * warmup_fraction))
    fn = functools.partial(_warmup_cosine, warmup_steps=warmup, total_steps=total_steps, min_lr_ratio=min_lr_ratio)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, fn)


def _metrics(num_classes: int, prefix: str) -> MetricCollection:
    # checked at every batch, the arguments would cost a torch.unique of the labels a batch: the predictions are an
    # argmax and the data's labels were checked when it was read (data/labels.py)
    return MetricCollection(
        {
            "acc": MulticlassAccuracy(num_classes, average="micro", validate_args=False),
            "f1": MulticlassF1Score(num_classes, average="macro", validate_args=False),
        },
        prefix=prefix,
    )


class EncoderModule(L.LightningModule):
    """What every module that trains a TransformerClassifier shares (ClassifierModule, pretraining's
    MaskedLMModule): the tokenizer travels in its checkpoints, and AdamW (or the config's `optimizer`)
    stepped by warmup/cosine (or the config's `scheduler`) optimises it."""

    def __init__(self, tokenizer: str | None = None, optimizer: Any = None, scheduler: Any = None) -> None:
        super().__init__()
        # optimizer / scheduler are partials from the config, not plain data a weights_only checkpoint
        # can hold; the tokenizer (a large JSON string) travels in the checkpoint itself
        # (on_save_checkpoint), not in hparams.yaml and TensorBoard's HPARAMS tab
        self.tokenizer_json = tokenizer
        # the data settings it was trained with (data set, path, columns, max_length): evaluate.py and predict.py
        # start from them; set by train.py, travels beside the tokenizer (None: a checkpoint that records none)
        self.data_settings: dict[str, Any] | None = None
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler

    # ---- checkpoints ---------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["tokenizer"] = self.tokenizer_json
        if self.data_settings is not None:
            checkpoint["data"] = self.data_settings

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.tokenizer_json = checkpoint.get("tokenizer", self.tokenizer_json)
        self.data_settings = checkpoint.get("data", self.data_settings)

    # ---- optimisation --------------------------------------------------------------------
    def configure_optimizers(self) -> OptimizerLRSchedulerConfig:
        optimizer = build_optimizer(self, unfused_where_clipped(self.optimizer_factory, self.trainer))
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = build_schedule(optimizer, self.scheduler_factory, total_steps=total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


# Lightning's mixed-precision plugin refuses to clip the gradients of an optimizer that unscales them itself (fused):
# by design under fp16's GradScaler (Lightning-AI/pytorch-lightning#15555), and under bf16 too, where no scaler is
# used (#21435, open). tests/test_bf16.py checks that this is exactly the case Lightning refuses.
def unfused_where_clipped(factory: Any, trainer: L.Trainer) -> Any:
    """The optimizer's partial `factory` with `fused` off where `trainer` clips gradients in mixed precision (the one
    case Lightning refuses); else `factory` itself."""
    kw = getattr(factory, "keywords", None) or {}
    if not (kw.get("fused") and trainer.gradient_clip_val and isinstance(trainer.precision_plugin, MixedPrecision)):
        return factory
    why = "Lightning clips no fused optimizer's gradients in %s precision (trainer.gradient_clip_val=0 keeps it fused)"
    logging.getLogger(__name__).info("model.optimizer.fused: off, as " + why, trainer.precision)
    return functools.partial(factory.func, *factory.args, **{**kw, "fused": None})


def build_optimizer(module: torch.nn.Module, factory: Any = None) -> torch.optim.Optimizer:
    """The optimiser of `module`'s parameters (`param_groups`) from the config's partial (None: AdamW, lr 1e-3): what
    `configure_optimizers` makes, and what a task tries on a dummy module before any data (training/targets.py)."""
    params = param_groups(module, factory)
    return torch.optim.AdamW(params, lr=1e-3) if factory is None else factory(params=params)


def build_schedule(
    optimizer: torch.optim.Optimizer, factory: Any = None, total_steps: int = 1
) -> torch.optim.lr_scheduler.LRScheduler:
    """The learning-rate schedule over `total_steps` from the config's partial (None: `warmup_cosine`)."""
    return (factory or warmup_cosine)(optimizer, total_steps=total_steps)


class ClassifierModule(EncoderModule):
    """Cross-entropy training of a TransformerClassifier, AdamW + warmup/cosine by default. `settings` are
    EncoderConfig's fields (d_model=..., num_heads=..., ...) and LossConfig's (label_smoothing=..., word_dropout=...,
    adversarial_eps=...); with the data's vocab_size, num_classes and pad_id they are the checkpoint's
    hyperparameters, all plain data."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        optimizer: Any = None,
        scheduler: Any = None,
        tokenizer: str | None = None,
        label_names: list[str] | None = None,
        init_from: str | None = None,
        freeze_embedding_epochs: int = 0,
        **settings: Any,
    ) -> None:
        super().__init__(tokenizer, optimizer, scheduler)
        loss = LossConfig(**{name: settings.pop(name) for name in LOSS_FIELDS if name in settings})
        # init_from (model.init_from) is train.py's to act on: it copies pretrained weights in after
        # construction; not a hyperparameter, so a checkpoint of this module never looks for that file
        self.net = TransformerClassifier(vocab_size=vocab_size, num_classes=num_classes, pad_id=pad_id, **settings)
        self.save_hyperparameters(
            {
                "vocab_size": vocab_size,
                "num_classes": num_classes,
                "pad_id": pad_id,
                **asdict(self.net.config),
                **asdict(loss),
                "label_names": label_names,
                "freeze_embedding_epochs": freeze_embedding_epochs,
            }
        )
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.train_acc = MulticlassAccuracy(num_classes, average="micro", validate_args=False)  # as _metrics' are
        self.val_metrics = _metrics(num_classes, "val/")
        self.test_metrics = _metrics(num_classes, "test/")
        self.val_acc_best = MaxMetric()
        # the share of each text's margin the naive-Bayes term carries (model.nb_ngram_max > 0): val/ and test/nb_share
        self.val_share, self.test_share = MeanMetric(), MeanMetric()

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> ClassifierOutput:
        return self.net(input_ids, attention_mask, need_weights=need_weights)

    def model_step(
        self, batch: dict[str, torch.Tensor], train: bool = False, share: MeanMetric | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, predictions, labels) of a batch; in training with the regularisers the settings ask for
        (model.word_dropout, model.adversarial_eps: model/regularizers.py). `share` takes each text's share of its
        margin that the naive-Bayes term carries (model.nb_ngram_max > 0)."""
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        smoothing = self.hparams["label_smoothing"]

        def loss_of(logits: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(logits.float(), labels, label_smoothing=smoothing)

        eps = self.hparams["adversarial_eps"] if train else 0.0
        if train:
            mask = word_dropout(mask, self.hparams["word_dropout"])
        if eps > 0:
            loss, logits, adversarial = adversarial_loss(self.net, ids, mask, loss_of, eps)
            self.log("train/adversarial_loss", adversarial, on_step=False, on_epoch=True)
            return loss + adversarial, logits.argmax(dim=-1), labels
        encoder, evidence, _ = self.net.logit_parts(ids, mask)  # (B, C) each; no evidence without that term
        if evidence is None:
            return loss_of(encoder), encoder.argmax(dim=-1), labels
        logits, parts = encoder + evidence, self.hparams["nb_part_loss"] if train else 0.0
        loss = loss_of(logits) + (parts * (loss_of(encoder) + loss_of(evidence)) if parts else 0.0)
        preds = logits.argmax(dim=-1)
        if share is not None:
            share.update(share_of_margin(encoder.detach(), evidence.detach(), preds))
        return loss, preds, labels

    # ---- fit -----------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """A new fit counts the naive-Bayes ratios (model.nb_ngram_max) on the training split, and on it alone;
        a checkpoint (a resumed fit, evaluate.py, predict.py) carries them."""
        evidence, data = self.net.evidence, getattr(self.trainer, "datamodule", None)
        if stage != "fit" or evidence is None or bool(evidence.fitted) or data is None:
            return
        train = data.splits["train"]
        counting = "naive-Bayes evidence: counting the 1- to %d-grams of %s training texts"
        logging.getLogger(__name__).info(counting, evidence.ngram_max, f"{len(train):,}")
        evidence.fit(train.ids, train.labels)

    def on_train_start(self) -> None:
        # a sanity check may have filled these: start the real run clean
        self.val_loss.reset()
        self.val_metrics.reset()
        self.val_acc_best.reset()

    # The metric objects are handed to Lightning once an epoch, at its start (a resumed epoch's too); the steps only
    # update them, and Lightning computes and resets each at the epoch's end: a log call a batch fewer each.
    def on_train_epoch_start(self) -> None:
        # the token embedding (word vectors) held fixed for the first epochs: no gradient, so AdamW leaves it as is
        frozen = self.current_epoch < self.hparams.get("freeze_embedding_epochs", 0)
        self.net.embedding.weight.requires_grad_(not frozen)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, preds, labels = self.model_step(batch, train=True)
        # the epoch's train/loss: the mean of its batches' losses, each counted once (batch_size=1)
        self.log("train/loss", loss.detach(), on_step=True, on_epoch=True, prog_bar=True, batch_size=1)
        self.train_acc.update(preds, labels)  # logged per epoch only: no per-batch value to compute
        return loss

    def on_validation_epoch_start(self) -> None:
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log_dict(self.val_metrics, on_step=False, on_epoch=True, prog_bar=True)
        if self.net.evidence is not None:
            self.log("val/nb_share", self.val_share, on_step=False, on_epoch=True)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        loss, preds, labels = self.model_step(batch, share=self.val_share)
        self.val_loss.update(loss)
        self.val_metrics.update(preds, labels)

    def on_validation_epoch_end(self) -> None:
        self.val_acc_best(self.val_metrics["acc"].compute())
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True, prog_bar=True)

    # ---- test ----------------------------------------------------------------------------
    def on_test_epoch_start(self) -> None:
        self.log("test/loss", self.test_loss, on_step=False, on_epoch=True)
        self.log_dict(self.test_metrics, on_step=False, on_epoch=True)
        if self.net.evidence is not None:
            self.log("test/nb_share", self.test_share, on_step=False, on_epoch=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        loss, preds, labels = self.model_step(batch, share=self.test_share)
        self.test_loss.update(loss)
        self.test_metrics.update(preds, labels)
        return {"preds": preds, "labels": labels}  # for callbacks: the confusion matrix


def param_groups(module: torch.nn.Module, factory: Any) -> list[dict]:
    """Weight decay on the weight matrices only: none on biases and LayerNorms (as BERT and nanoGPT)
    and, unlike them, none on the embeddings, whose rare-word rows it would shrink towards zero."""
    wd = getattr(factory, "keywords", {}).get("weight_decay", 0.01) if factory is not None else 0.01
    trained = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    decay = [p for name, p in trained if p.dim() >= 2 and "embedding" not in name]
    no_decay = [p for name, p in trained if p.dim() < 2 or "embedding" in name]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run `model` in eval mode (no dropout), then put every submodule back in the mode it was in, frozen
    (eval-mode) parts of a training model included, even when the body raises."""
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield model
    finally:
        for m, training in modes.items():
            m.train(training)
