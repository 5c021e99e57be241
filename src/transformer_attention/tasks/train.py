"""`python train.py`: fit a classifier and test its best checkpoint, as lightning-hydra-template's `train()` reads:
resume, seed, pretrained encoder, callbacks, loggers, trainer, data, model, hyperparameters, fit, test."""

from __future__ import annotations

import logging
import signal

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from ..errors import ConfigError
from ..training.builders import (
    TrainerBuilder,
    build_data,
    build_loggers,
    build_model,
    instantiate_group,
    logged_metrics,
    test_best,
)
from ..training.hparams import CLASSIFIER_METRICS, log_run
from ..training.metrics import format_metrics, save_metrics
from ..training.pretrained import starting_encoder
from ..training.resume import Resume

log = logging.getLogger(__name__)

TEST_SPLIT_FIX = (
    "run with test=false, give the data a test split (test.* file, data.data_files.test), "
    "or carve one from train (data.test_fraction=0.1)"
)


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit and test as the config says; returns every logged metric as a float."""
    epochs = cfg.trainer.get("max_epochs") if cfg.get("train", True) else None
    resume = Resume.from_config(cfg.get("ckpt_path"), cfg.model, cfg.paths.output_dir, epochs)  # fails here, at once
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    encoder = starting_encoder(cfg, resume)  # model.init_from: read, or pretrained now (`pretrain`)

    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = build_loggers(cfg.get("logger"), purge_step=resume.purge_step)
    trainers = TrainerBuilder(cfg.trainer, callbacks, loggers)  # a setting Lightning refuses fails here
    make_model = instantiate(cfg.model, _partial_=True)  # and a bad model._target_, before any data

    tokenizer = {"tokenizer": encoder.tokenizer} if encoder else {}
    datamodule = build_data(cfg.data, **tokenizer, **resume.data_settings(cfg.paths.output_dir))
    if cfg.get("test", True):
        datamodule.require_split("test", fix=TEST_SPLIT_FIX)  # checked as the data is read, not after training
    datamodule.setup("fit")
    model = build_model(make_model, datamodule, encoder)
    trainer = trainers.for_model(model, datamodule)  # precision=auto: timed on a real batch

    log_run(trainer.loggers, cfg, metrics=[cfg.get("optimized_metric"), *CLASSIFIER_METRICS])  # HPARAMS' columns

    if cfg.get("train", True):
        trainer.fit(model, datamodule=datamodule, ckpt_path=resume.ckpt_path)
    metrics = logged_metrics(trainer)
    if cfg.get("test", True):  # train=false ckpt_path=...: that checkpoint's weights, never the fresh ones
        given = None if cfg.get("train", True) else resume.ckpt_path
        metrics.update(test_best(trainer, model, datamodule, fallback=given))
    return metrics


def main(cfg: DictConfig) -> float | None:
    """Train, print the final metrics, return `optimized_metric` for sweepers."""
    try:
        metrics = train(cfg)
    except SIGTERMException as stop:  # SIGTERM or Ctrl-C: last.ckpt is saved, the resume command logged
        raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
    if rank_zero_only.rank == 0:
        save_metrics(cfg.paths.output_dir, metrics)  # what a sweep's summary table reads
    print(f"final metrics ({cfg.paths.output_dir}):\n{format_metrics(metrics)}")
    name = cfg.get("optimized_metric")
    if name and name not in metrics and not cfg.get("train", True):
        return None  # train=false: only tested, no validation metric to optimise
    if name and name not in metrics:
        raise ConfigError(f"optimized_metric={name!r} was not logged: use one of {sorted(metrics)}")
    return metrics[name] if name else None
