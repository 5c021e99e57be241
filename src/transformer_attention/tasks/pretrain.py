"""`python pretrain.py`: the pretraining of `python train.py model.init_from=pretrain` (the same config, the same
cached result) run on its own: a masked language model, or skip-gram vectors; it prints the fine-tuning command."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from ..callbacks.console import pasteable
from ..errors import ConfigError
from ..pretraining import METHODS, PretrainConfig, PretrainRun, Start, pretrain
from ..training.builders import plain
from ..training.hparams import RunRecord

NOT_FOR_FINE_TUNING = ("ckpt_path=", "model.init_from=", "hydra.")  # this run's own, not the fine-tuning's


def main(cfg: DictConfig) -> str:
    """Pretrain, cache the result, print the command that fine-tunes it; returns the result's file."""
    if cfg.model.get("init_from") not in (None, "pretrain"):  # a recipe's "pretrain" is what this run does
        raise ConfigError(f"model.init_from={cfg.model.init_from!r} is for train.py: pretrain.py starts from scratch")
    settings = PretrainConfig.from_values(plain(cfg.pretrain), model=plain(cfg.model))
    run = PretrainRun(
        output_dir=Path(cfg.paths.output_dir),
        cache_dir=Path(cfg.paths.cache_dir),
        reuse=False,  # asked to pretrain: it does, and caches the result for train.py
        ckpt_path=str(cfg.ckpt_path) if cfg.get("ckpt_path") else None,
        record=RunRecord.of(plain(cfg)),
    )
    try:
        start: Start = pretrain(settings, instantiate(cfg.data), run)
    except SIGTERMException as stop:  # SIGTERM or Ctrl-C: last.ckpt is saved, the resume command logged
        raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
    given = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    kept = [o for o in given if not o.lstrip("+~").startswith(NOT_FOR_FINE_TUNING)]
    print(f"pretrained {METHODS[settings.method].what}: {start.source}")
    line = [shlex.quote(o) for o in kept] + [pasteable("model.init_from", start.source)]  # pasted back as printed
    print(f"fine-tune it: python train.py {' '.join(line)}")
    return start.source
