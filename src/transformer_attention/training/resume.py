"""Resuming a run from `ckpt_path`: the checkpoint, checked at once against the config's `model.*`, whether the
run goes on in the folder that wrote it (then it rewrites none of its files), and what it reuses: the tokenizer and
label names, and the step TensorBoard goes on from."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..errors import CheckpointError
from ..files import resumed_in_place, run_dir_of
from .checkpoint import load_checkpoint


@dataclass(frozen=True)
class Resume:
    """What a run resumed from `ckpt_path` carries over; `Resume()` is a run that starts afresh."""

    ckpt_path: str | None = None
    checkpoint: dict[str, Any] | None = field(default=None, repr=False)
    in_place: bool = False  # resumed inside the run folder that wrote the checkpoint

    @classmethod
    def of(
        cls, ckpt_path: Any, model: Mapping[str, Any], output_dir: str | Path, max_epochs: int | None = None
    ) -> Resume:
        """Load `ckpt_path` (None: a fresh run), checked against `model.*` and, where it trains, `max_epochs`."""
        if not ckpt_path:
            return cls()
        checkpoint = load_checkpoint(ckpt_path)
        check_matches(checkpoint, model, ckpt_path)
        check_epochs_left(checkpoint, max_epochs, ckpt_path, ", or pass train=false to test it")
        return cls(str(ckpt_path), checkpoint, in_place=resumed_in_place(ckpt_path, output_dir))

    def __bool__(self) -> bool:
        return self.checkpoint is not None

    @property
    def purge_step(self) -> int | None:
        """The global step TensorBoard starts again from (SummaryWriter's `purge_step`), None for a fresh run."""
        return self.checkpoint["global_step"] if self.checkpoint is not None else None

    def data_settings(self, output_dir: str) -> dict[str, Any]:
        """The checkpoint's tokenizer and label names, and where to save them (nowhere when resumed in place)."""
        if self.checkpoint is None:
            return {"output_dir": output_dir}
        return {
            "tokenizer": self.checkpoint["tokenizer"],
            "label_names": self.checkpoint["hyper_parameters"]["label_names"],
            "label_names_from": f"the checkpoint {self.ckpt_path}",
            "output_dir": None if self.in_place else output_dir,
        }


def check_epochs_left(
    checkpoint: dict[str, Any], max_epochs: int | None, path: Any, otherwise: str = "", key: str = "trainer.max_epochs"
) -> None:
    """A CheckpointError if `max_epochs` (the setting `key`) leaves no epoch to train after the checkpoint's own."""
    done = epochs_trained(checkpoint)
    if max_epochs is not None and 0 <= max_epochs <= done:
        raise CheckpointError(
            f"{key}={max_epochs} but the checkpoint {path} has trained {done} epoch(s): nothing is "
            f"left to train. Raise {key} above {done} to go on{otherwise}"
        )


def epochs_trained(checkpoint: dict[str, Any]) -> int:
    """How many epochs a checkpoint has trained to their end (its fit loop's processed epochs)."""
    progress = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {}).get("total", {})
    return int(progress.get("processed", checkpoint.get("epoch", 0)))


def check_matches(checkpoint: dict[str, Any], model: Mapping[str, Any], path: str | Path) -> None:
    """Resuming needs the model the checkpoint was trained with: name every `model.*` key that differs."""
    hparams = checkpoint["hyper_parameters"]
    diff = [
        f"model.{k}={model[k]!r} (checkpoint: {hparams[k]!r})"
        for k in model
        if k in hparams and not k.startswith("_") and model[k] != hparams[k]
    ]
    if diff:
        raise CheckpointError(
            f"cannot resume from {path}: the config differs from the run it continues: {', '.join(diff)}; "
            f"pass that run's overrides again ({run_overrides_hint(path)})"
        )


def run_overrides_hint(ckpt_path: str | Path) -> str:
    """The overrides the checkpoint's run was started with, as recorded in `<run>/.hydra/overrides.yaml`."""
    run = run_dir_of(ckpt_path)
    overrides = run / ".hydra" / "overrides.yaml" if run else None
    if not overrides or not overrides.is_file():
        return "no recorded overrides found next to the checkpoint"
    args = [o for o in OmegaConf.load(overrides) if not str(o).startswith("ckpt_path=")]
    return f"{overrides}: {' '.join(shlex.quote(str(a)) for a in args) or 'none'}"
