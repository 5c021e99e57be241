"""What a run is built from, one config group's node at a time (as lightning-hydra-template's instantiators):
callbacks, loggers, the trainer, the data and the model, each special case of building behind a name."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L
from hydra.utils import get_object, instantiate
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import OmegaConf

from ..compat import continue_csv_header
from .checkpoint import AtomicCheckpointIO
from .data_record import recorded
from .precision import auto_precision

if TYPE_CHECKING:
    from ..data.datamodule import ReviewDataModule
    from ..module import ClassifierModule

log = logging.getLogger(__name__)


def plain(node: Any) -> Any:
    """A config node's resolved values as plain dicts and lists (anything else as it is): what settings take."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def instantiate_group(group: Mapping[str, Any] | None, kinds: Mapping[type, dict[str, Any]] | None = None) -> list[Any]:
    """Every non-null `_target_` entry of a group, made; `kinds`: a class -> extra arguments for its subclasses."""
    kinds = kinds or {}
    objects = []
    for entry in (group or {}).values():
        if entry is None or "_target_" not in entry:
            continue
        target = get_object(str(entry["_target_"]))
        extra = next((kw for kind, kw in kinds.items() if isinstance(target, type) and issubclass(target, kind)), {})
        made = instantiate(entry, **extra)
        if made is not None:  # a factory may decide there is nothing to add (callbacks.progress_bar)
            objects.append(made)
    return objects


def build_loggers(group: Mapping[str, Any] | None, purge_step: int | None = None) -> list[Logger]:
    """The logger group's loggers; TensorBoard's hide the steps a run resumed at `purge_step` trains again."""
    purge = {"purge_step": purge_step} if purge_step is not None else {}
    return instantiate_group(group, kinds={TensorBoardLogger: purge})


class TrainerBuilder:
    """The run's Trainer, made at once (a setting Lightning refuses fails before any data is read), with atomic
    checkpoints; with `precision=auto`, made again by `for_model` if bf16 is clearly faster for that model."""

    def __init__(self, settings: Mapping[str, Any], callbacks: list[Any], loggers: list[Logger]) -> None:
        self.settings, self.callbacks, self.loggers = settings, callbacks, loggers
        self.auto = settings.get("precision") == "auto"
        self.trainer = self._make("32-true" if self.auto else None)

    def _make(self, precision: str | None) -> L.Trainer:
        plugins = {} if self.settings.get("plugins") else {"plugins": [AtomicCheckpointIO()]}  # no truncated .ckpt
        chosen = {"precision": precision} if precision else {}
        callbacks = list(self.callbacks)  # Lightning adds its progress bar to the list it is given
        return instantiate(self.settings, callbacks=callbacks, logger=self.loggers or False, **plugins, **chosen)

    def for_model(self, module: L.LightningModule, datamodule: L.LightningDataModule) -> L.Trainer:
        """The Trainer to fit `module` with: in the precision `auto` times, logging at least once an epoch."""
        trainer = self.trainer
        if self.auto:
            precision = auto_precision(module, datamodule, self.settings.get("accelerator", "cpu"))
            trainer = trainer if precision == "32-true" else self._make(precision)
        batches, limit = len(datamodule.train_dataloader()), trainer.limit_train_batches
        batches = min(batches, limit) if isinstance(limit, int) else int(batches * (1.0 if limit is None else limit))
        if 0 < batches < trainer.log_every_n_steps:  # type: ignore[attr-defined]  # Lightning sets it, undeclared
            every = "every step" if batches == 1 else f"every {batches} steps"
            log.info("%d training batch%s an epoch: logging %s", batches, "" if batches == 1 else "es", every)
            # what Lightning warns about otherwise, naming site-packages
            trainer.log_every_n_steps = batches  # type: ignore[attr-defined]  # Lightning sets it, undeclared
        return trainer


def build_data(data: Mapping[str, Any], **settings: Any) -> ReviewDataModule:
    """The data group's datamodule with `settings` on top (a tokenizer to reuse, where to save it); DDP ranks > 0
    take the tokenizer rank 0 saved: one vocabulary for all."""
    rank = rank_zero_only.rank  # type: ignore[attr-defined]  # Lightning sets it, undeclared
    if "tokenizer" not in settings and rank > 0:
        settings["tokenizer"] = rank_zero_tokenizer(Path(settings["output_dir"]) / "tokenizer.json")
    return instantiate(data, **settings)


def rank_zero_tokenizer(path: Path, timeout_s: float = 3600.0) -> str:
    """The tokenizer JSON rank 0 saved in the run folder, waited for where all ranks start at once (torchrun)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            text = path.read_text()
            json.loads(text)  # complete, not half written
            return text
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                rank = rank_zero_only.rank  # type: ignore[attr-defined]  # Lightning sets it, undeclared
                raise RuntimeError(f"rank {rank}: rank 0 wrote no tokenizer to {path} in {timeout_s:.0f} s") from None
            time.sleep(1.0)


def random_embedding_trains(model: MutableMapping[str, Any], *copies: MutableMapping[str, Any]) -> None:
    """No `init_from`: `freeze_embedding_epochs` set to 0 in `model` and its `copies`, with a warning (a random
    embedding held fixed leaves the first epochs guessing one class)."""
    epochs = model.get("freeze_embedding_epochs") or 0
    if model.get("init_from") or not epochs:
        return
    random = "this run starts from random embeddings (model.init_from=null), so they train from the first epoch"
    log.warning("model.freeze_embedding_epochs=%s holds loaded word vectors fixed; %s", epochs, random)
    for settings in (model, *copies):
        settings["freeze_embedding_epochs"] = 0


def build_model(make_model: Any, datamodule: Any, data: Mapping[str, Any] | None = None) -> ClassifierModule:
    """The model group's module (`make_model`: its partial) sized by the data, its tokenizer and labels inside, and
    the data settings `data` recorded for its checkpoints (what evaluate.py and predict.py start from)."""
    module = make_model(
        vocab_size=datamodule.vocab_size,
        num_classes=datamodule.num_classes,
        pad_id=datamodule.pad_id,
        tokenizer=datamodule.tokenizer_json(),
        label_names=datamodule.label_names,
    )
    module.data_settings = recorded(data) if data is not None else None
    return module


def test_best(
    trainer: L.Trainer, model: L.LightningModule, datamodule: L.LightningDataModule, fallback: str | None = None
) -> dict[str, float]:
    """Test the fit's best checkpoint, else `fallback`, else the weights as they are; every logged metric."""
    best = getattr(trainer.checkpoint_callback, "best_model_path", "") or fallback or ""
    if not best:
        log.warning("no best checkpoint: testing the weights as they are at the end of training")
    for lg in trainer.loggers if trainer.is_global_zero else []:  # other ranks hold no writer
        if isinstance(lg, CSVLogger):
            continue_csv_header(lg)  # a spawned test stage appends to the file the fit stage wrote
    trainer.test(model, datamodule=datamodule, ckpt_path=best or None, verbose=False)  # one table: the run's own
    return logged_metrics(trainer)


def logged_metrics(trainer: L.Trainer) -> dict[str, float]:
    """Every metric the trainer holds (`callback_metrics`) as a float."""
    return {k: float(v) for k, v in trainer.callback_metrics.items()}
