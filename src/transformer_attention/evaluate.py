"""Evaluate a checkpoint: the test split of any dataset, with the checkpoint's own tokenizer and labels.

The same `ClassifierModule.test_step` as training runs, so the metrics (`test/acc`, `test/f1`,
`test/loss`) are the ones training reported, and they go to TensorBoard in this run's own folder.
"""

from __future__ import annotations

import logging

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from .checkpoint import load_module
from .errors import CheckpointError
from .hparams import log_hyperparameters
from .train import format_metrics, instantiate_list

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Test `cfg.ckpt_path` on `cfg.data`'s test split; returns every logged metric as a float."""
    if not cfg.get("ckpt_path"):
        raise CheckpointError("no checkpoint given: pass ckpt_path=<run>/checkpoints/<name>.ckpt")
    module = load_module(cfg.ckpt_path)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    # the checkpoint's vocabulary and label order, not ones retrained on this dataset
    datamodule = instantiate(
        cfg.data,
        output_dir=cfg.paths.output_dir,
        tokenizer=module.tokenizer_json,
        label_names=module.hparams.label_names,
        label_names_from=f"the checkpoint {cfg.ckpt_path}",
    )
    fix = "evaluate.py tests the test split: give the data one (a test.* file, data.data_files.test)"
    datamodule.require_split("test", fix=fix)
    datamodule.setup("test")  # the data is read and checked against the checkpoint before the trainer starts
    callbacks, loggers = instantiate_list(cfg.get("callbacks")), instantiate_list(cfg.get("logger"))
    # precision=auto picks a training precision by timing training steps; a test needs none of that
    precision = {"precision": "32-true"} if cfg.trainer.get("precision") == "auto" else {}
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **precision)
    log_hyperparameters(trainer.loggers, OmegaConf.to_container(cfg, resolve=True))
    trainer.test(module, datamodule=datamodule)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


def main(cfg: DictConfig) -> dict[str, float]:
    """Hydra task function: evaluate and print the test metrics."""
    metrics = evaluate(cfg)
    print(f"test metrics of {cfg.ckpt_path} ({cfg.paths.output_dir}):\n{format_metrics(metrics)}")
    return metrics
