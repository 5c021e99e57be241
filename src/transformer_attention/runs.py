"""Run folders and what the entry points need before Hydra composes a config: light imports only
(no torch), so that a bad config value fails in about a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf


def run_dir_of(ckpt_path: str | Path | None) -> Path | None:
    """The run folder `<run>` of a checkpoint at `<run>/checkpoints/*.ckpt`, if it is a Hydra run folder."""
    if not ckpt_path:
        return None
    p = Path(str(ckpt_path)).expanduser().resolve()
    run = p.parent.parent
    if p.is_file() and p.parent.name == "checkpoints" and (run / ".hydra").is_dir():
        return run
    return None


def _resume_dir(ckpt_path: Any, default: str) -> str:
    run = run_dir_of(ckpt_path)
    return str(run) if run else default


def _resume_subdir(ckpt_path: Any, resumed: str, default: str) -> str:
    return resumed if run_dir_of(ckpt_path) else default


def register_resolvers() -> None:
    """`${resume_dir:ckpt,default}` and `${resume_subdir:ckpt,resumed,default}` for `hydra.run` in train.yaml."""
    OmegaConf.register_new_resolver("resume_dir", _resume_dir, replace=True)
    OmegaConf.register_new_resolver("resume_subdir", _resume_subdir, replace=True)


def in_sweep() -> bool:
    """Whether this is a job of a multirun (grid, Optuna, any launcher), not a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


register_resolvers()  # on import: any code that composes conf/train.yaml (entry points, tests) has them
