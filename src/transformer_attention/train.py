"""The training run: instantiate callbacks, loggers, trainer, data and model; fit; test."""

from __future__ import annotations

import functools
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf, open_dict

from .checkpoint import AtomicCheckpointIO, check_resume, load_checkpoint, resumed_in_place
from .errors import ConfigError, printable
from .hparams import log_hyperparameters
from .metrics_file import continue_header
from .precision import pick_precision
from .pretrain import pretrained_encoder
from .pretraining import check_architecture, init_from_pretrained, read_pretrained
from .runs import in_sweep, print_config_tree

log = logging.getLogger(__name__)


def instantiate_list(cfg: DictConfig | None) -> list[Any]:
    """Instantiate every non-null `_target_` entry of a callbacks / logger group."""
    if not cfg:
        return []
    return [instantiate(c) for c in cfg.values() if c is not None and "_target_" in c]


def instantiate_loggers(cfg: DictConfig | None, resume_step: int | None = None) -> list[Logger]:
    """The logger group's loggers. A run resumed at `resume_step` hides, in TensorBoard, the steps its
    first run logged after that checkpoint (SummaryWriter's `purge_step`): after a `kill -9` they are
    trained and logged again, and TensorBoard would otherwise show both."""
    purge = {"purge_step": resume_step} if resume_step is not None else {}
    return [
        instantiate(c, **purge) if str(c.get("_target_")).endswith("TensorBoardLogger") else instantiate(c)
        for c in (cfg or {}).values()
        if c is not None and "_target_" in c
    ]


def build(
    cfg: DictConfig, resume_from: dict[str, Any] | None = None, pretrained: dict[str, Any] | None = None
) -> tuple[L.LightningDataModule, L.LightningModule, L.Trainer]:
    """The quick objects first, so a setting none of them takes fails before the data is tokenized;
    then the data (the model's vocab size, classes and tokenizer come from it), then the model.
    A resumed run reuses the checkpoint's tokenizer and label names, so its vocabulary cannot drift;
    a run from a `pretrained` encoder (model.init_from) takes its tokenizer and weights."""
    callbacks = instantiate_list(cfg.get("callbacks"))
    loggers = instantiate_loggers(cfg.get("logger"), resume_step=(resume_from or {}).get("global_step"))
    plugins = {} if cfg.trainer.get("plugins") else {"plugins": [AtomicCheckpointIO()]}  # no truncated .ckpt
    auto = cfg.trainer.get("precision") == "auto"  # measured once the model and a batch exist (precision.py)
    make_trainer = functools.partial(instantiate, cfg.trainer, callbacks=callbacks, logger=loggers or False, **plugins)
    trainer = None if auto else make_trainer()
    make_model = instantiate(cfg.model, _partial_=True)  # a bad model._target_ fails here, not after the data
    reuse: dict[str, Any] = {"output_dir": cfg.paths.output_dir}
    if pretrained is not None:
        check_architecture(pretrained["settings"], OmegaConf.to_container(cfg.model, resolve=True), cfg.model.init_from)
        reuse["tokenizer"] = pretrained["tokenizer"]
    if resume_from is not None:
        reuse["tokenizer"] = resume_from["tokenizer"]
        reuse["label_names"] = resume_from["hyper_parameters"]["label_names"]
        reuse["label_names_from"] = f"the checkpoint {cfg.get('ckpt_path')}"
        if resumed_in_place(cfg.get("ckpt_path"), cfg.paths.output_dir):
            reuse["output_dir"] = None  # the folder keeps the first run's tokenizer.json and label_names.json
    elif rank_zero_only.rank > 0:  # one tokenizer for all DDP ranks: rank 0's, trained once
        reuse["tokenizer"] = rank_zero_tokenizer(Path(cfg.paths.output_dir) / "tokenizer.json")
    datamodule = instantiate(cfg.data, **reuse)
    if cfg.get("test", True):  # checked as soon as the data is read, not after training
        fix = "run with test=false, or give the data a test split (test.* file, data.data_files.test)"
        datamodule.require_split("test", fix=fix)
    datamodule.setup("fit")
    model = make_model(
        vocab_size=datamodule.vocab_size,
        num_classes=datamodule.num_classes,
        pad_id=datamodule.pad_id,
        tokenizer=datamodule.tokenizer_json(),
        label_names=datamodule.label_names,
    )
    if pretrained is not None and resume_from is None:  # a resumed run has its own weights
        copied = init_from_pretrained(model.net, pretrained["weights"])
        log.info("model.init_from=%s: %d pretrained tensors copied into the encoder", cfg.model.init_from, len(copied))
    if auto:
        on_cpu = cfg.trainer.get("accelerator", "cpu") == "cpu"
        batch = next(iter(datamodule.train_dataloader()))
        trainer = make_trainer(precision=pick_precision(model, batch, what="trainer.") if on_cpu else "bf16-mixed")
    return datamodule, model, trainer


def rank_zero_tokenizer(path: Path, timeout_s: float = 3600.0) -> str:
    """The tokenizer JSON rank 0 saved in the run folder; waits for it where all ranks start at once
    (SLURM, torchrun). Lightning's own launcher starts the other ranks after rank 0 has saved it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            text = path.read_text()
            json.loads(text)  # complete, not half written
            return text
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                rank = rank_zero_only.rank
                raise RuntimeError(f"rank {rank}: rank 0 wrote no tokenizer to {path} in {timeout_s:.0f} s") from None
            time.sleep(1.0)


def log_tags(loggers: list[Logger], tags: list[str], notes: str | None) -> None:
    """Tags and notes as a TensorBoard text entry (they are also in the HPARAMS table and the config)."""
    text = ", ".join(map(str, tags)) + (f"\n\n{notes}" if notes else "")
    for lg in loggers:
        if text and isinstance(lg, TensorBoardLogger):
            lg.experiment.add_text("run/tags", text)


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit and test as the config says; returns every logged metric as a float."""
    if in_sweep() and spawn_ddp(cfg.trainer):
        log.info("DDP in a multirun: ranks are spawned (trainer.strategy=%s)", cfg.trainer.strategy)
    if rank_zero_only.rank == 0:
        # a run resumed in its own folder keeps the first run's files: its tree goes beside its .hydra/resume_*/
        tree_dir = Path(cfg.paths.output_dir)
        if resumed_in_place(cfg.get("ckpt_path"), tree_dir):
            tree_dir = tree_dir / HydraConfig.get().output_subdir
        print_config_tree(cfg, save_to=tree_dir / "config_tree.log")
    ckpt_path = cfg.get("ckpt_path")
    resume_from = load_checkpoint(ckpt_path) if ckpt_path else None  # a bad path fails here, in a second
    if resume_from is not None:
        check_resume(resume_from, cfg.model, ckpt_path)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    pretrained = None
    if cfg.model.get("init_from"):  # a bad path fails here; "pretrain" pretrains, or reuses the cached encoder
        init_from = str(cfg.model.init_from)
        path = pretrained_encoder(cfg) if init_from == "pretrain" and resume_from is None else init_from
        pretrained = read_pretrained(path) if path != "pretrain" else None
        if cfg.get("seed") is not None:  # pretraining seeds with its own seed: the fine-tuning starts from `seed`
            L.seed_everything(cfg.seed, workers=True)
    datamodule, model, trainer = build(cfg, resume_from, pretrained)
    config = OmegaConf.to_container(cfg, resolve=True)
    overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    log_hyperparameters(trainer.loggers, config, overrides=overrides)
    log_tags(trainer.loggers, list(cfg.get("tags") or []), cfg.get("notes"))
    if cfg.get("train", True):
        trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if cfg.get("test", True):
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
        if not best:
            log.warning("no best checkpoint: testing the weights as they are at the end of training")
        for lg in trainer.loggers if trainer.is_global_zero else []:  # other ranks hold no writer
            if isinstance(lg, CSVLogger):
                continue_header(lg)  # a spawned test stage appends to the file the fit stage wrote
        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    return metrics


def format_metrics(metrics: dict[str, float]) -> str:
    """One `  name  value` line per metric, sorted: what `final metrics` and `test metrics` print."""
    return "\n".join(f"  {printable(k):<16} {v:.4f}" for k, v in sorted(metrics.items()))  # names hold labels


def main(cfg: DictConfig) -> float | None:
    """Hydra task function: train, print the final metrics, return `optimized_metric` for sweepers."""
    try:
        metrics = train(cfg)
    except SIGTERMException as stop:  # SIGTERM or Ctrl-C: last.ckpt is saved, the resume command logged
        raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
    print(f"final metrics ({cfg.paths.output_dir}):\n{format_metrics(metrics)}")
    name = cfg.get("optimized_metric")
    if name and name not in metrics:
        raise ConfigError(f"optimized_metric={name!r} was not logged: use one of {sorted(metrics)}")
    return metrics[name] if name else None


def spawn_ddp(trainer: DictConfig) -> bool:
    """Switch a DDP trainer config from Lightning's default launch (the other ranks re-run the command
    line) to spawned ranks; in place, True if changed. In a multirun, re-running the command line would
    start the whole sweep again in every rank > 0 and hang."""
    strategy = trainer.get("strategy")
    with open_dict(trainer):
        if strategy == "ddp":
            trainer.strategy = "ddp_spawn"
            return True
        if (
            isinstance(strategy, DictConfig)
            and str(strategy.get("_target_", "")).endswith("DDPStrategy")
            and strategy.get("start_method", "popen") == "popen"
        ):
            strategy.start_method = "spawn"
            return True
    return False
