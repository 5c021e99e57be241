"""Masked-language-model pretraining of the classifier's own encoder, `pretrain.method=mlm`: BERT's recipe, the
word predictor tied to the input embedding. Shapes: B batch, T tokens, D d_model, V vocabulary, N picked tokens."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torchmetrics import MeanMetric

from ..callbacks.console import seconds
from ..data.tokenizer import FIRST_WORD_ID, MASK_ID, ready
from ..data.unlabelled import PretrainingData
from ..errors import CheckpointError, ConfigError
from ..files import shown, start_run_log
from ..model.classifier import ClassifierOutput, TransformerClassifier
from ..module import EncoderModule
from ..training.builders import TrainerBuilder, build_loggers, instantiate_group, logged_metrics
from ..training.checkpoint import read_checkpoint
from ..training.hparams import log_run
from ..training.resume import check_epochs_left
from ..training.targets import try_optimization, try_run_groups
from .settings import PretrainConfig, PretrainRun
from .weights import ARCHITECTURE

log = logging.getLogger(__name__)

IGNORE = -100  # F.cross_entropy's ignore_index: positions that are not scored
# trainer settings that say where and how fast, not what is learnt: left out of the cache key
NOT_LEARNT = (
    "_target_", "default_root_dir", "precision", "accelerator", "devices", "num_nodes", "strategy",
    "enable_progress_bar", "enable_model_summary", "log_every_n_steps", "detect_anomaly", "profiler", "benchmark",
)  # fmt: skip


def make_encoder(settings: PretrainConfig, data: PretrainingData, run: PretrainRun) -> Path:
    """Pretrain the encoder in `run.output_dir` (resuming `run.ckpt_path`); returns the checkpoint of the lowest
    held-out loss."""
    callbacks = instantiate_group(settings.callbacks)
    trainers = TrainerBuilder(settings.trainer, callbacks, build_loggers(settings.logger))  # fails before any data
    if run.ckpt_path:
        check_resumable(run.ckpt_path, settings)
    data.setup("fit")
    L.seed_everything(settings.seed, workers=True)
    module = MaskedLMModule(
        vocab_size=data.vocab_size,
        pad_id=data.pad_id,
        mask_prob=settings.mask_prob,
        optimizer=instantiate(settings.optimizer),
        scheduler=instantiate(settings.scheduler),
        tokenizer=ready(data.tokenizer).to_str(),
        seed=settings.seed,
        **settings.encoder,
    )
    trainer = trainers.for_model(module, data)
    checkpoints = trainer.checkpoint_callback
    if not isinstance(checkpoints, ModelCheckpoint):
        raise ConfigError(
            "pretraining keeps its best held-out model in a checkpoint, and this trainer writes none "
            f"({type(checkpoints).__name__}): set pretrain.trainer.enable_checkpointing=true"
        )
    start_run_log()  # every check passed: pretrain.py resumed in its folder writes its log from here
    if run.record is not None:
        log_run(trainer.loggers, run.record)  # no metrics: train runs define HPARAMS' columns
    start = time.perf_counter()
    trainer.fit(module, datamodule=data, ckpt_path=run.ckpt_path)
    best = checkpoints.best_model_path
    held_out = {k: round(v, 4) for k, v in logged_metrics(trainer).items() if k.startswith("val/")}
    log.info("pretraining: %s, best held-out %s, %s", seconds(time.perf_counter() - start), held_out, shown(best))
    return Path(best)


def try_targets(settings: PretrainConfig) -> None:
    """The pretraining's `_target_`s, tried before any data is read, whether it runs or its result is cached."""
    try_optimization(settings.optimizer, settings.scheduler, prefix="pretrain.")
    try_run_groups(settings.trainer, settings.callbacks, settings.logger, prefix="pretrain.")


def depends_on(settings: PretrainConfig, data: PretrainingData) -> tuple[tuple, list[str]]:
    """What the encoder is a function of, for the cache key: the recipe, the trainer settings that change what is
    learnt, the encoder's sizes, the tokenizer settings; and the corpus (apart: texts are hashed one by one)."""
    recipe = {k: v for k, v in settings.recipe().items() if k not in ("skipgram", "encoder")}
    learnt = {k: v for k, v in settings.trainer.items() if k not in NOT_LEARNT}
    d = data.data
    tokenizer = (*d.tokenizer_settings.values(), d.max_length)
    texts = data.corpus()
    parts = (sorted(recipe.items(), key=str), sorted(learnt.items(), key=str), sorted(settings.encoder.items()))
    return (*parts, tokenizer), texts["train"] + ["\0"] + texts["validation"]


def check_resumable(ckpt_path: str, settings: PretrainConfig) -> None:
    """A CheckpointError or ConfigError, with the fix, unless `ckpt_path` is a pretrain.py checkpoint of the
    encoder's sizes with an epoch left to train."""
    checkpoint = read_checkpoint(ckpt_path)
    hp = checkpoint["hyper_parameters"]
    if "mask_prob" not in hp:
        raise CheckpointError(
            f"ckpt_path={ckpt_path} is a classifier checkpoint (train.py): pretrain.py resumes its own checkpoints "
            "(outputs/pretrain/runs/<time>/checkpoints/last.ckpt); go on with this one: python train.py ckpt_path=..."
        )
    for key, want in settings.encoder.items():
        if key in ARCHITECTURE and hp.get(key) != want:
            raise ConfigError(
                f"ckpt_path={ckpt_path} was pretrained with {key}={hp.get(key)!r} but the config says "
                f"model.{key}={want!r}: set model.{key}={hp.get(key)} to resume it"
            )
    check_epochs_left(checkpoint, settings.trainer.get("max_epochs"), ckpt_path, key="pretrain.trainer.max_epochs")


def mask_tokens(
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    vocab_size: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of the real words of `ids` (B, T): 15% picked, of those 80% become [MASK], 10% a random word,
    10% stay. (inputs (B, T), targets (B, T): the original id where picked, IGNORE elsewhere); padding and special
    tokens are never picked, every batch has at least one picked token."""

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
    """Masked-language-model training of a TransformerClassifier's encoder (`settings`: EncoderConfig's fields);
    the checkpoint carries them and the tokenizer, so `model.init_from` can rebuild the encoder from the file
    alone."""

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
        self.net = TransformerClassifier(vocab_size=vocab_size, num_classes=2, pad_id=pad_id, **settings)
        self.net.predicts_labels = False  # its head is untrained: decompx refuses to explain it
        D = self.net.config.d_model
        # BERT's prediction head: a transform, then the embedding matrix (tied) and a bias per word
        self.mlm_transform = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.LayerNorm(D))
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))
        hparams = {"vocab_size": vocab_size, "pad_id": pad_id, "mask_prob": mask_prob, "seed": seed}
        self.save_hyperparameters({**hparams, **asdict(self.net.config)})
        self.train_loss, self.val_loss = MeanMetric(), MeanMetric()
        self.train_acc, self.val_acc = MeanMetric(), MeanMetric()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        need_weights: bool = False,
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
        inputs, targets = mask_tokens(ids, mask, self.hparams["vocab_size"], self.hparams["mask_prob"], generator)
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
        generator = torch.Generator().manual_seed(self.hparams["seed"] * 100_003 + batch_idx)
        loss, correct = self.model_step(batch, generator)
        self.val_loss.update(loss, weight=correct.numel())
        self.val_acc(correct.float())
        self.log("val/mlm_loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/mlm_acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)
