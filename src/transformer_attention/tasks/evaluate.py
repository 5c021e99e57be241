"""`python evaluate.py`: test a checkpoint on the test split of any dataset with its own tokenizer and labels (the
metrics training reported, by the same `test_step`); with `analyses=`, also which heads and words matter to it."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from ..analysis.plan import HEADS_SPLIT, plan
from ..analysis.run import Analysis, run_analyses, target_classes
from ..analysis.write import summary
from ..callbacks.analysis import keep_analysis
from ..callbacks.interrupt import stop_on_signals
from ..data.tokenizer import ready
from ..data.toy import deciding_words_for
from ..errors import ConfigError
from ..files import shown
from ..inference import trained_length
from ..module import ClassifierModule
from ..training.builders import TrainerBuilder, build_data, build_loggers, instantiate_group, logged_metrics, plain
from ..training.checkpoint import load_module
from ..training.data_record import differences, settings_from
from ..training.hparams import RunRecord, log_run
from ..training.metrics import format_metrics, save_metrics
from ..training.targets import try_run_groups

log = logging.getLogger(__name__)

DEFAULT_DATA = "checkpoint"  # conf/data/checkpoint.yaml: the data the checkpoint records
TEST_SPLIT_FIX = "evaluate.py tests the test split: give the data one (a test.* file, data.data_files.test)"


def evaluate(cfg: DictConfig) -> tuple[dict[str, float], Analysis | None]:
    """Test `cfg.ckpt_path` on the test split of the data it was trained on (`trained_data`), then run the analyses
    `cfg.analyses` names; returns every logged metric as a float, and what the analyses found (None: none asked).
    SIGTERM or Ctrl-C stops each stage at once, saying what stopped and the command that starts it again."""
    module = load_module(cfg.get("ckpt_path"))
    if cfg.get("analyses"):  # the class explained is named among the checkpoint's classes before any data is read
        target_classes(cfg.analysis.target, [0], module.hparams["label_names"], module.net.head.out_features, 0)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    # every _target_ a user can change, tried before any data
    try_run_groups(plain(cfg.trainer), plain(cfg.get("callbacks")), plain(cfg.get("logger")), prefix="")
    data = trained_data(cfg, module)
    with stop_on_signals(lambda: f"reading the data to test {shown(cfg.ckpt_path)} on"):
        # the checkpoint's vocabulary and label order, not ones retrained on this dataset
        datamodule = build_data(
            data,
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
    # the data tested on, not the config's placeholder; no metrics: train runs define HPARAMS' columns
    log_run(trainer.loggers, RunRecord.of({**plain(cfg), "data": data}))
    with stop_on_signals(lambda: f"the test of {shown(cfg.ckpt_path)}"):  # Lightning alone says nothing of Ctrl-C
        trainer.test(module, datamodule=datamodule, verbose=False)  # one table: the run's own
    metrics = logged_metrics(trainer)
    save_metrics(cfg.paths.output_dir, metrics)  # what a sweep's summary table reads; kept if the analyses stop
    if not chosen.names:
        return metrics, None
    what = f"the analyses of {shown(cfg.ckpt_path)} (its test metrics are kept in metrics.json)"
    with stop_on_signals(lambda: what):
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
    return metrics, result


def trained_data(cfg: DictConfig, module: ClassifierModule) -> dict[str, Any]:
    """The data settings to test with: the checkpoint's own, with the command line's `data=` and `data.<key>=` on
    top (each key that changes what is measured said in one line); a checkpoint that records none: `cfg.data`."""
    given, record, ckpt = plain(cfg.data), module.data_settings, shown(cfg.ckpt_path)
    explicit, group = set(), False
    if HydraConfig.initialized():
        group = HydraConfig.get().runtime.choices.get("data") not in (None, DEFAULT_DATA)
        keys = (OverridesParser.create().parse_override(o).key_or_group for o in HydraConfig.get().overrides.task)
        explicit = {key.split(".")[1] for key in keys if key.startswith("data.")}
    settings = given if record is None else settings_from(record, given, explicit, group)
    longest, length = module.hparams["max_len"], settings.get("max_length")
    if isinstance(length, int) and length > longest:
        raise ConfigError(
            f"data.max_length={length} is longer than the longest input this model takes (max_len {longest}): "
            f"e.g. data.max_length={trained_length(module)} (its training length)"
        )
    if record is None:
        older = "records no data settings (written by an older version)"
        log.warning("%s %s: testing on data %s, as the command line says", ckpt, older, given["name"])
    elif changed := differences(record, settings):
        log.warning("testing on other data than %s was trained on: %s", ckpt, "; ".join(changed))
    return settings


def main(cfg: DictConfig) -> dict[str, float]:
    """Evaluate and print the test metrics (and the analyses' summary)."""
    try:
        metrics, analysis = evaluate(cfg)
    except SIGTERMException as stop:  # SIGTERM or Ctrl-C: what stopped and how to start it again are said
        raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
    print(f"test metrics of {shown(cfg.ckpt_path)} ({shown(cfg.paths.output_dir)}):\n{format_metrics(metrics)}")
    if analysis is not None:
        print("\n".join(summary(analysis)))
        print(f"analysis: {shown(Path(cfg.paths.output_dir) / 'analysis')} (PNG, JSON; TensorBoard: ~model_analysis/)")
    return metrics
