"""The pretraining run: a masked language model on the recipe's unlabelled text (pretraining.py), its best
checkpoint kept in the cache so fine-tuning finds it again.

`python pretrain.py experiment=rotten_tomatoes ...` runs it in its own folder (outputs/pretrain/runs/<time>/);
`python train.py model.init_from=pretrain ...` (what the recipes say) reuses the cached encoder for the same
data, tokenizer and pretraining settings, or pretrains first, in a folder of its own under outputs/pretrain/.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import lightning as L
from filelock import FileLock
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from .checkpoint import AtomicCheckpointIO
from .data import cache
from .data.unlabelled import PretrainingData
from .errors import ConfigError
from .model.config import encoder_fields
from .precision import pick_precision
from .pretraining import ARCHITECTURE, MaskedLMModule

log = logging.getLogger(__name__)


def _settings(cfg: DictConfig) -> dict[str, Any]:
    """The encoder's settings for pretraining: the classifier's own, with the pretraining dropout."""
    model = OmegaConf.to_container(cfg.model, resolve=True)
    settings = {k: model[k] for k in encoder_fields() if k in model}
    settings["dropout"] = cfg.pretrain.dropout
    settings["max_len"] = max(settings.get("max_len", 0), cfg.pretrain.max_length)
    return settings


def _data(cfg: DictConfig) -> PretrainingData:
    p = cfg.pretrain
    data = instantiate(cfg.data)
    return PretrainingData(
        data,
        extra_texts=list(p.extra_texts or []),
        text_column=p.text_column,
        max_length=p.max_length,
        batch_size=p.batch_size,
        holdout=p.holdout,
        seed=p.seed,
    )


def cache_key(cfg: DictConfig, data: PretrainingData) -> str:
    """What a pretrained encoder depends on: its texts, the tokenizer settings, the encoder and the recipe."""
    texts = data.corpus()
    d = data.data
    recipe = OmegaConf.to_container(cfg.pretrain, resolve=True)
    recipe.pop("precision", None)  # how fast, not what is learnt
    parts = ("mlm", sorted(recipe.items(), key=str), sorted(_settings(cfg).items()))
    tokenizer = (d.vocab_size_target, d.min_frequency, d.scrub_pii, d.max_length)
    return cache.fingerprint(*parts, tokenizer, texts=texts["train"] + ["\0"] + texts["validation"])


def pretrain(cfg: DictConfig, out_dir: Path, data: PretrainingData | None = None) -> Path:
    """Pretrain as `cfg.pretrain` says, logging to `out_dir`; returns the checkpoint with the lowest held-out
    MLM loss. Attention maps of held-out windows go to TensorBoard if `cfg.callbacks.attention_maps` is set."""
    p = cfg.pretrain
    data = data or _data(cfg)
    data.setup("fit")
    L.seed_everything(p.seed, workers=True)
    module = MaskedLMModule(
        vocab_size=data.vocab_size,
        pad_id=data.pad_id,
        mask_prob=p.mask_prob,
        optimizer=instantiate(p.optimizer),
        scheduler=instantiate(p.scheduler),
        tokenizer=data.tokenizer.to_str(),
        seed=p.seed,
        **_settings(cfg),
    )
    precision = p.precision
    accelerator = cfg.trainer.get("accelerator", "cpu")
    if precision == "auto":
        precision = (
            pick_precision(module, next(iter(data.train_dataloader()))) if accelerator == "cpu" else "bf16-mixed"
        )
    callbacks = [
        ModelCheckpoint(
            dirpath=out_dir / "checkpoints",
            filename="mlm_{step:06d}",
            monitor="val/mlm_loss",
            mode="min",
            auto_insert_metric_name=False,  # no "=" in the name: it goes into `model.init_from=...` overrides
        ),
        LearningRateMonitor(logging_interval="step"),
    ]
    maps = (cfg.get("callbacks") or {}).get("attention_maps")
    if maps is not None:
        callbacks.append(instantiate(maps, texts=[], every_n_epochs=1))
    trainer = L.Trainer(
        default_root_dir=str(out_dir),
        accelerator=accelerator,
        devices=1,
        precision=precision,
        max_epochs=p.max_epochs,
        val_check_interval=p.val_check_interval,
        gradient_clip_val=1.0,
        log_every_n_steps=50,
        logger=[
            TensorBoardLogger(str(out_dir / "tensorboard"), name="", version=""),
            CSVLogger(str(out_dir), name="csv"),
        ],
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        enable_progress_bar=cfg.trainer.get("enable_progress_bar", True),
    )
    start = time.perf_counter()
    trainer.fit(module, datamodule=data)
    best = trainer.checkpoint_callback.best_model_path
    metrics = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    log.info("pretraining: %.1f min, best held-out %s, %s", (time.perf_counter() - start) / 60, metrics, best)
    return Path(best)


def pretrained_encoder(cfg: DictConfig) -> str:
    """`model.init_from=pretrain`: the cached encoder for this data, tokenizer and `cfg.pretrain`, pretrained
    now (in outputs/pretrain/runs/<time>/) if there is none yet. Returns its checkpoint path."""
    data = _data(cfg)
    key = cache_key(cfg, data)
    cached = Path(cfg.paths.cache_dir) / "pretrained" / f"mlm-{key}.ckpt"
    cached.parent.mkdir(parents=True, exist_ok=True)
    # parallel sweep jobs (hydra/launcher=joblib) wait for the one that pretrains, then read its encoder
    with FileLock(str(cached.with_suffix(".lock"))):
        if cached.exists():
            log.info(
                "model.init_from=pretrain: the encoder pretrained before on the same texts and settings, %s", cached
            )
            return str(cached)
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        out_dir = Path(cfg.paths.log_dir) / "pretrain" / "runs" / stamp
        log.info("model.init_from=pretrain: no encoder cached for these texts and settings; pretraining in %s", out_dir)
        best = pretrain(cfg, out_dir, data)
        store(best, cached)
    return str(cached)


def store(checkpoint: Path, cached: Path) -> None:
    """Copy `checkpoint` to `cached`, atomically (a sweep's next job may be reading the cache)."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    shutil.copyfile(checkpoint, tmp)
    os.replace(tmp, cached)


def main(cfg: DictConfig) -> str:
    """Hydra task function of pretrain.py: pretrain in this run's folder, keep the result in the cache too."""
    if cfg.model.get("init_from") not in (None, "pretrain"):  # a recipe's "pretrain" is what this run does
        raise ConfigError(f"model.init_from={cfg.model.init_from!r} is for train.py: pretrain.py starts from scratch")
    data = _data(cfg)
    best = pretrain(cfg, Path(cfg.paths.output_dir), data)
    cached = Path(cfg.paths.cache_dir) / "pretrained" / f"mlm-{cache_key(cfg, data)}.ckpt"
    store(best, cached)
    # the command to fine-tune it: this run's own overrides (data, model sizes), pretraining's own left out
    given = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    kept = [o for o in given if not o.lstrip("+~").startswith(("pretrain.", "tags", "hydra"))]
    named = {o.split("=", 1)[0] for o in kept}
    sizes = [f"model.{k}={str(cfg.model.get(k)).lower()}" for k in ARCHITECTURE if f"model.{k}" not in named]
    print(
        f"pretrained encoder: {best}\nfine-tune it: python train.py {' '.join([*kept, *sizes])} model.init_from={best}"
    )
    return str(best)
