"""`python evaluate.py`: test a checkpoint on the test split of any dataset with its own tokenizer and labels (the
metrics training reported, by the same `test_step`); with `analyses=`, also which heads and words matter to it."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from omegaconf import DictConfig

from ..analysis.plan import HEADS_SPLIT, plan
from ..analysis.run import Analysis, run_analyses, target_classes
from ..analysis.write import summary
from ..callbacks.analysis import keep_analysis
from ..data.tokenizer import ready
from ..data.toy import deciding_words_for
from ..files import shown
from ..training.builders import TrainerBuilder, build_data, build_loggers, instantiate_group, logged_metrics, plain
from ..training.checkpoint import load_module
from ..training.hparams import RunRecord, log_run
from ..training.metrics import format_metrics, save_metrics
from ..training.targets import try_run_groups

TEST_SPLIT_FIX = "evaluate.py tests the test split: give the data one (a test.* file, data.data_files.test)"


def evaluate(cfg: DictConfig) -> tuple[dict[str, float], Analysis | None]:
    """Test `cfg.ckpt_path` on `cfg.data`'s test split, then run the analyses `cfg.analyses` names; returns every
    logged metric as a float, and what the analyses found (None when none was asked for)."""
    module = load_module(cfg.get("ckpt_path"))
    if cfg.get("analyses"):  # the class explained is named among the checkpoint's classes before any data is read
        target_classes(cfg.analysis.target, [0], module.hparams["label_names"], module.net.head.out_features, 0)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    # every _target_ a user can change, tried before any data
    try_run_groups(plain(cfg.trainer), plain(cfg.get("callbacks")), plain(cfg.get("logger")), prefix="")
    # the checkpoint's vocabulary and label order, not ones retrained on this dataset
    datamodule = build_data(
        cfg.data,
        output_dir=cfg.paths.output_dir,
        tokenizer=module.tokenizer_json,
        label_names=module.hparams["label_names"],
        label_names_from=f"the checkpoint {cfg.ckpt_path}",
    )
    datamodule.require_split("test", fix=TEST_SPLIT_FIX)
    datamodule.setup("test")  # the data is read and checked against the checkpoint before the trainer starts
    sizes = {split: len(cols["text"]) for split, cols in datamodule.raw.items()}
    chosen = plan(cfg.get("analyses"), cfg.get("analysis"), sizes, split="test")  # before any work
    if HEADS_SPLIT in chosen.splits:
        datamodule.setup("validate")  # tokenized too: the test split already is
    callbacks, loggers = instantiate_group(cfg.get("callbacks")), build_loggers(cfg.get("logger"))
    # precision=auto picks a training precision by timing training steps: a test runs in fp32
    trainer = TrainerBuilder(cfg.trainer, callbacks, loggers).trainer
    log_run(trainer.loggers, RunRecord.of(plain(cfg)))  # no metrics: train runs define HPARAMS' columns
    trainer.test(module, datamodule=datamodule, verbose=False)  # one table: the run's own
    if not chosen.names:
        return logged_metrics(trainer), None
    result = run_analyses(
        module.net,
        chosen,
        splits=datamodule.splits,
        tokenizer=ready(datamodule.tokenizer),
        label_names=module.hparams.get("label_names"),
        deciding_words=deciding_words_for(datamodule),
    )
    folder, label = Path(cfg.paths.output_dir) / "analysis", f"checkpoint {Path(cfg.ckpt_path).name}"
    keep_analysis(result, folder, trainer.loggers, trainer.global_step, label=label)
    return logged_metrics(trainer), result


def main(cfg: DictConfig) -> dict[str, float]:
    """Evaluate and print the test metrics (and the analyses' summary)."""
    metrics, analysis = evaluate(cfg)
    save_metrics(cfg.paths.output_dir, metrics)  # what a sweep's summary table reads
    print(f"test metrics of {shown(cfg.ckpt_path)} ({shown(cfg.paths.output_dir)}):\n{format_metrics(metrics)}")
    if analysis is not None:
        print("\n".join(summary(analysis)))
        print(f"analysis: {shown(Path(cfg.paths.output_dir) / 'analysis')} (PNG, JSON; TensorBoard: ~model_analysis/)")
    return metrics
