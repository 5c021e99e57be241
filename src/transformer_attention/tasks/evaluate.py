"""`python evaluate.py`: test a checkpoint on the test split of any dataset, with the checkpoint's own tokenizer
and labels.

The same `ClassifierModule.test_step` as training runs, so the metrics (`test/acc`, `test/f1`, `test/loss`)
are the ones training reported, and they go to TensorBoard in this run's own folder.
"""

from __future__ import annotations

import lightning as L
from omegaconf import DictConfig

from ..errors import CheckpointError
from ..training.builders import TrainerBuilder, build_data, build_loggers, instantiate_group, logged_metrics
from ..training.checkpoint import load_module
from ..training.hparams import log_run
from ..training.metrics import format_metrics, save_metrics

TEST_SPLIT_FIX = "evaluate.py tests the test split: give the data one (a test.* file, data.data_files.test)"


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Test `cfg.ckpt_path` on `cfg.data`'s test split; returns every logged metric as a float."""
    if not cfg.get("ckpt_path"):
        raise CheckpointError("no checkpoint given: pass ckpt_path=<run>/checkpoints/<name>.ckpt")
    module = load_module(cfg.ckpt_path)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    # the checkpoint's vocabulary and label order, not ones retrained on this dataset
    datamodule = build_data(
        cfg.data,
        output_dir=cfg.paths.output_dir,
        tokenizer=module.tokenizer_json,
        label_names=module.hparams.label_names,
        label_names_from=f"the checkpoint {cfg.ckpt_path}",
    )
    datamodule.require_split("test", fix=TEST_SPLIT_FIX)
    datamodule.setup("test")  # the data is read and checked against the checkpoint before the trainer starts
    callbacks, loggers = instantiate_group(cfg.get("callbacks")), build_loggers(cfg.get("logger"))
    # precision=auto picks a training precision by timing training steps: a test runs in fp32
    trainer = TrainerBuilder(cfg.trainer, callbacks, loggers).trainer
    log_run(trainer.loggers, cfg)  # no metrics: train runs define HPARAMS' columns
    trainer.test(module, datamodule=datamodule, verbose=False)  # one table: the run's own
    return logged_metrics(trainer)


def main(cfg: DictConfig) -> dict[str, float]:
    """Evaluate and print the test metrics."""
    metrics = evaluate(cfg)
    save_metrics(cfg.paths.output_dir, metrics)  # what a sweep's summary table reads
    print(f"test metrics of {cfg.ckpt_path} ({cfg.paths.output_dir}):\n{format_metrics(metrics)}")
    return metrics
