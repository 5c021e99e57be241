"""`python train.py`: fit a classifier and test its best checkpoint, read as lightning-hydra-template's `train()`:
resume, seed, targets tried, start (`model.init_from`), callbacks, loggers, trainer, data, model, fit, test."""

from __future__ import annotations

import copy
import logging
import signal
from datetime import datetime
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, open_dict

from ..analysis.run import target_classes
from ..callbacks.interrupt import Stopped, evaluate_command, resume_command, stop_on_signals
from ..data.unlabelled import HubUnavailable
from ..errors import ConfigError
from ..files import shown, start_run_log
from ..pretraining import PretrainConfig, PretrainRun, Start, pretrain, read_start
from ..training.builders import (
    TrainerBuilder,
    build_data,
    build_loggers,
    build_model,
    instantiate_group,
    logged_metrics,
    plain,
    random_embedding_trains,
    test_best,
)
from ..training.checkpoint import expect_checkpoints
from ..training.hparams import CLASSIFIER_METRICS, RunRecord, log_run
from ..training.metrics import format_metrics, save_metrics
from ..training.resume import Resume
from ..training.targets import try_optimization, try_run_groups

log = logging.getLogger(__name__)

TEST_SPLIT_FIX = (
    "run with test=false, give the data a test split (test.* file, data.data_files.test), "
    "or carve one from train (data.test_fraction=0.1)"
)


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit and test as the config says; returns every logged metric as a float."""
    epochs = cfg.trainer.get("max_epochs") if cfg.get("train", True) else None
    model_settings = plain(cfg.model)
    random_embedding_trains(cfg.model, model_settings)
    resume = Resume.of(cfg.get("ckpt_path"), model_settings, cfg.paths.output_dir, epochs)  # fails here, at once
    if resume.in_place:
        expect_checkpoints(cfg.paths.output_dir)  # its checkpoints/ holds the first run's: no warning about it
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    # every _target_ a user can change, tried before any data
    try_optimization(model_settings.get("optimizer"), model_settings.get("scheduler"), prefix="model.")
    try_run_groups(plain(cfg.trainer), plain(cfg.get("callbacks")), plain(cfg.get("logger")), prefix="")
    callbacks = instantiate_group(cfg.get("callbacks"))  # their own checks (a scale's name), before any pretraining
    start = starting_point(cfg, model_settings, resume)

    loggers = build_loggers(cfg.get("logger"), purge_step=resume.purge_step)
    trainers = TrainerBuilder(cfg.trainer, callbacks, loggers)  # a setting Lightning refuses fails here
    make_model = instantiate(cfg.model, _partial_=True)  # and a bad model._target_, before any data

    tokenizer = {"tokenizer": start.tokenizer} if start else {}
    with stop_on_signals(lambda: "reading the data, before training"):  # Lightning's own stop from the fit on
        datamodule = build_data(cfg.data, **tokenizer, **resume.data_settings(cfg.paths.output_dir))
        if cfg.get("test", True):
            datamodule.require_split("test", fix=TEST_SPLIT_FIX)  # checked as the data is read, not after training
        datamodule.setup("fit")
    if (cfg.get("callbacks") or {}).get("model_analysis"):  # its class named among the data's, before training
        target_classes(cfg.analysis.target, [0], datamodule.label_names, datamodule.num_classes, 0)
    model = build_model(make_model, datamodule, data=plain(cfg.data))
    if start is not None:
        start.copy_into(model.net)  # the head starts fresh
    trainer = trainers.for_model(model, datamodule)  # precision=auto: timed on a real batch

    start_run_log()  # every check passed: a run resumed in its folder writes its log from here (cli/run.py)
    columns = [cfg.get("optimized_metric"), *CLASSIFIER_METRICS]  # HPARAMS' metric columns
    log_run(trainer.loggers, RunRecord.of(plain(cfg)), metrics=columns)

    if cfg.get("train", True):
        try:  # a stop mid-fit saves last.ckpt and says how to resume (SaveOnInterrupt)
            trainer.fit(model, datamodule=datamodule, ckpt_path=resume.ckpt_path)
        except Stopped:  # in the end-of-fit analysis, which said the command that runs it (and the test)
            keep_measured(cfg.paths.output_dir, logged_metrics(trainer))
            raise
    metrics = logged_metrics(trainer)
    if cfg.get("test", True):  # train=false ckpt_path=...: that checkpoint's weights, never the fresh ones
        given = None if cfg.get("train", True) else resume.ckpt_path
        best = getattr(trainer.checkpoint_callback, "best_model_path", "") or given
        again = (lambda: evaluate_command(shown(best))) if best else resume_command  # noqa: E731
        what = "the test (the fit's metrics are kept in metrics.json)"
        try:  # SIGTERM or Ctrl-C, at once (beside Lightning's own SIGTERM handler): nothing is lost but the test
            with stop_on_signals(lambda: what, again=again):
                metrics.update(test_best(trainer, model, datamodule, fallback=given))
        except Stopped:
            keep_measured(cfg.paths.output_dir, metrics)
            raise
    return metrics


def keep_measured(output_dir: str, metrics: dict[str, float]) -> None:
    """What a stopped run measured, in its metrics.json (rank 0's): a stop loses only what it stopped."""
    if rank_zero_only.rank == 0:  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        save_metrics(output_dir, metrics)


def starting_point(cfg: DictConfig, model_settings: dict, resume: Resume) -> Start | None:
    """What `model.init_from` names, checked to fit `model.*` before any data is read (None: from scratch, or a
    resumed run): a file pretrain.py wrote, or `pretrain`, cached or made now in outputs/pretrain/runs/<time>/."""
    init_from = model_settings.get("init_from")
    if not init_from or resume:
        return None
    if init_from != "pretrain":
        start = read_start(str(init_from))
    else:
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        out_dir = Path(cfg.paths.log_dir) / "pretrain" / "runs" / stamp
        own = pretraining_view(cfg, out_dir)
        settings = PretrainConfig.from_values(plain(own.pretrain), model=model_settings)
        choice = settings.without_extra_texts
        if choice != "pretrain" and not settings.extra_texts:
            without_extra_texts(cfg, model_settings, "pretrain.extra_texts is empty", choice)
            return None
        run = PretrainRun(out_dir, Path(cfg.paths.cache_dir), record=RunRecord.of(plain(own), own_overrides=False))
        try:  # the texts are read once, by the pretraining: a hub name that does not load fails before any work
            start = pretrain(settings, instantiate(own.data), run)
        except HubUnavailable as err:
            if choice == "pretrain":
                raise
            without_extra_texts(cfg, model_settings, str(err).split(";")[0], choice)
            return None
        if cfg.get("seed") is not None:  # pretraining seeds with its own seed: the fine-tuning starts from `seed`
            L.seed_everything(cfg.seed, workers=True)
    start.check_fits(model_settings)
    return start


def without_extra_texts(cfg: DictConfig, model_settings: dict, reason: str, choice: str) -> None:
    """`pretrain.without_extra_texts=scratch`: the run starts from random embeddings, never held fixed, and its
    config says so; `error`: one line, before any work."""
    fix = "give them: pretrain.extra_texts=[imdb:unsupervised] online, or local folders (docs/results.md)"
    if choice == "error":
        raise ConfigError(f"model.init_from=pretrain needs extra texts, and {reason}: {fix}")
    start = "this recipe starts from random embeddings (model.init_from=null), what it measured best without them"
    log.warning("%s: %s; for its word vectors %s", reason, start, fix)
    for settings in (cfg.model, model_settings):
        settings["init_from"], settings["freeze_embedding_epochs"] = None, 0


def pretraining_view(cfg: DictConfig, out_dir: Path) -> DictConfig:
    """This run's config as the pretraining it starts sees it: its own folder, task name, nothing to resume."""
    own = copy.deepcopy(cfg)
    with open_dict(own):
        own.paths.output_dir = str(out_dir)
        own.task_name = "pretrain"
        own.ckpt_path = None  # train.py's ckpt_path resumes the fine-tuning, never this pretraining
    return own


def main(cfg: DictConfig) -> float | None:
    """Train, print the final metrics, return `optimized_metric` for sweepers."""
    try:
        metrics = train(cfg)
    except SIGTERMException as stop:  # SIGTERM or Ctrl-C: last.ckpt is saved, the resume command logged
        raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
    keep_measured(cfg.paths.output_dir, metrics)  # what a sweep's summary table reads
    header = f"final metrics ({shown(cfg.paths.output_dir)}):"
    if len(header) > 120:  # a 120-column terminal would cut the path: the path whole on a line of its own
        header = f"the run's folder:\n{shown(cfg.paths.output_dir)}\nfinal metrics:"
    print(f"{header}\n{format_metrics(metrics)}")
    name = cfg.get("optimized_metric")
    if name and name not in metrics and not cfg.get("train", True):
        return None  # train=false: only tested, no validation metric to optimise
    if name and name not in metrics:
        raise ConfigError(f"optimized_metric={name!r} was not logged: use one of {sorted(metrics)}")
    return metrics[name] if name else None
